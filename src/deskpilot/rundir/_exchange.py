"""The sanitized HTTP exchange log (seed 000's ``agent_run_YYYYMMDD_HHMMSS.log``, as JSONL).

One JSON object per line, appended and flushed per write so a crash loses at most the
line being written. Each exchange (one HTTP attempt) is one record::

    {"ts": 1718000000.123, "kind": "exchange", "seq": 3, "attempt": 1,
     "endpoint": "...", "status": 200, "stream": false,
     "request": {...sanitized...}, "response": {...full...},
     "timings": {"ttfb_s": ..., "total_s": ...}, "error": null, "context": {...}}

Sanitizing, as seed 000 does it:

* every ``data:<mime>;base64,<payload>`` URL becomes
  ``data:<mime>;base64,<sha256:HEX len:N>`` (N = length of the base64 text);
* the ``tools`` schema becomes a list of the tool names (its size in bytes is kept);
* message text longer than ``max_text`` characters is cut, with the full length noted;
* ``Authorization`` / ``api-key`` headers are replaced by ``"<redacted>"``.

Responses are logged in full (they are small); an SSE response is logged as the assembled
message plus its chunk count.

Speed: a request carries the same screenshots turn after turn, so hashing every image
of every request would cost ~0.8 ms per 1.5 MB image and turn. Digests are cached by a
fingerprint of the base64 text (length plus three 48-byte samples; the tail sample
holds the PNG's IDAT CRC and zlib Adler-32, which differ between different images),
and the data URLs are cut out of the raw bytes with ``bytes.find`` before the much
smaller remainder is parsed.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from deskpilot._untrusted import scrub_surrogates
from deskpilot.rundir._writer import LineFile, RunLogError

__all__ = [
    "ExchangeLog",
    "redact_headers",
    "sanitize_request_body",
    "sanitize_value",
    "summarize_data_image_url",
]

_BASE64_MARK = b";base64,"
_SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"})


def summarize_data_image_url(url: str) -> str:
    """``data:image/png;base64,<payload>`` -> ``data:image/png;base64,<sha256:HEX len:N>``.

    Anything that is not a base64 data URL comes back unchanged.
    """
    head, mark, payload = url.partition(";base64,")
    if not mark or not head.startswith("data:"):
        return url
    digest = hashlib.sha256(payload.encode("ascii", "replace")).hexdigest()
    return f"{head};base64,<sha256:{digest} len:{len(payload)}>"


def redact_headers(headers: dict[str, str] | Any) -> dict[str, str]:
    """A copy of ``headers`` with credentials replaced by ``"<redacted>"``."""
    out: dict[str, str] = {}
    for key, value in dict(headers).items():
        out[str(key)] = "<redacted>" if str(key).lower() in _SENSITIVE_HEADERS else str(value)
    return out


class _DigestCache:
    """sha256 of base64 payloads, keyed by a cheap fingerprint (see module docstring)."""

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = capacity
        self._items: OrderedDict[tuple[int, bytes, bytes, bytes], str] = OrderedDict()
        self._lock = threading.Lock()

    def digest(self, payload: bytes | memoryview) -> str:
        n = len(payload)
        mid = n // 2
        key = (n, bytes(payload[:48]), bytes(payload[mid:mid + 48]), bytes(payload[-48:]))
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
        value = hashlib.sha256(payload).hexdigest()
        with self._lock:
            self._items[key] = value
            if len(self._items) > self._capacity:
                self._items.popitem(last=False)
        return value


_DEFAULT_CACHE = _DigestCache()


def _replace_data_urls(body: bytes, cache: _DigestCache) -> tuple[bytes, int]:
    """Cut base64 payloads of data URLs (JSON strings starting with ``data:``) out of a JSON
    body; returns (body, images). Payloads with JSON escapes are left to the parser."""
    if _BASE64_MARK not in body:
        return body, 0
    view = memoryview(body)
    out: list[bytes | memoryview] = []
    copied = 0  # body[:copied] is already in out
    search = 0
    images = 0
    while True:
        start = body.find(b'"data:', search)
        if start < 0:
            break
        mark = body.find(_BASE64_MARK, start, start + 200)
        end = body.find(b'"', start + 1)
        if mark < 0 or end < 0 or end < mark:
            search = start + 6
            continue
        search = end + 1
        payload_start = mark + len(_BASE64_MARK)
        if body.find(b"\\", payload_start, end) >= 0:
            continue
        digest = cache.digest(view[payload_start:end])
        out.append(view[copied:payload_start])
        out.append(f"<sha256:{digest} len:{end - payload_start}>".encode())
        copied = end
        images += 1
    out.append(view[copied:])
    return b"".join(out), images


def sanitize_value(value: Any, *, max_text: int = 2000) -> Any:
    """Recursively summarize data URLs and cut long strings in a decoded JSON value."""
    if isinstance(value, str):
        if value.startswith("data:") and ";base64," in value[:200]:
            return value if ";base64,<sha256:" in value[:200] else summarize_data_image_url(value)
        if len(value) > max_text:
            return value[:max_text] + f"... <truncated, {len(value)} chars>"
        return value
    if isinstance(value, dict):
        return {k: sanitize_value(v, max_text=max_text) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize_value(v, max_text=max_text) for v in value]
    return value


def sanitize_request_body(
    body: bytes, *, max_text: int = 2000, cache: _DigestCache | None = None
) -> dict[str, Any]:
    """The log form of a chat-completions request body (see module docstring).

    A body that is not JSON is logged as an excerpt with its length, never raised.
    """
    small, images = _replace_data_urls(body, cache or _DEFAULT_CACHE)
    try:
        request = orjson.loads(small)
    except orjson.JSONDecodeError:
        excerpt = small[:max_text].decode("utf-8", "replace")
        return {"unparsed_body": excerpt, "bytes": len(body)}
    if not isinstance(request, dict):
        return {"unparsed_body": sanitize_value(request, max_text=max_text), "bytes": len(body)}
    out: dict[str, Any] = {}
    for key, value in request.items():
        if key == "tools" and isinstance(value, list):
            names = []
            for tool in value:
                fn = tool.get("function") if isinstance(tool, dict) else None
                names.append(fn.get("name") if isinstance(fn, dict) else "?")
            out["tools"] = {"names": names, "bytes": len(orjson.dumps(value))}
        else:
            out[key] = sanitize_value(value, max_text=max_text)
    out["_bytes"] = len(body)
    out["_images"] = images
    return out


class ExchangeLog:
    """Append-only JSONL log of HTTP exchanges with the model server.

    ``ExchangeLog(path)`` opens (creates) the file for appending; :meth:`record` writes
    one sanitized line and flushes it. Thread-safe; usable as a context manager. Pass
    ``fsync=True`` to also fsync every line (slower; survives a power cut, not just a
    crash of the process).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_text: int = 2000, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_text = max_text
        self._lock = threading.Lock()
        # The run files' one line writer: a failed write is rolled back, never half a line.
        self._file: LineFile | None = LineFile(self.path, fsync=fsync)
        #: Told (once) when a line cannot be written (disk full, run directory gone);
        #: the line is then dropped instead of raised into the HTTP client.
        self.on_failure: Callable[[RunLogError], None] | None = None
        self._seq = 0
        self._cache = _DigestCache()

    @classmethod
    def in_directory(cls, directory: str | os.PathLike[str], **kwargs: Any) -> ExchangeLog:
        """A log named like seed 000's: ``agent_run_YYYYMMDD_HHMMSS.jsonl`` in ``directory``."""
        name = time.strftime("agent_run_%Y%m%d_%H%M%S.jsonl")
        return cls(Path(directory) / name, **kwargs)

    def sanitize_request(self, body: bytes) -> dict[str, Any]:
        return sanitize_request_body(body, max_text=self.max_text, cache=self._cache)

    def record(
        self,
        *,
        endpoint: str,
        request_body: bytes | None,
        attempt: int,
        status: int | None,
        response: Any = None,
        error: str | None = None,
        timings: dict[str, float] | None = None,
        stream: bool = False,
        headers: dict[str, str] | None = None,
        context: dict[str, Any] | None = None,
        request_summary: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write one exchange; returns the record as written.

        ``request_summary`` (an already sanitized request) skips re-sanitizing the body
        for the later attempts of one request.
        """
        self._seq += 1
        record: dict[str, Any] = {
            "ts": round(time.time(), 6),
            "kind": "exchange",
            "seq": self._seq,
            "attempt": attempt,
            "endpoint": endpoint,
            "status": status,
            "stream": stream,
        }
        if headers:
            record["headers"] = redact_headers(headers)
        if request_summary is not None:
            record["request"] = request_summary
        elif request_body is not None:
            record["request"] = self.sanitize_request(request_body)
        record["response"] = sanitize_value(response, max_text=max(self.max_text, 100_000))
        record["error"] = error
        if timings:
            record["timings"] = {k: round(v, 6) for k, v in timings.items()}
        if context:
            record["context"] = context
        self.write(record)
        return record

    def write(self, record: dict[str, Any]) -> None:
        """Append any JSON-ready record as one line (flushed)."""
        try:
            line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE, default=str)
        except TypeError:  # a lone surrogate from the server: kept as U+FFFD
            line = orjson.dumps(scrub_surrogates(record), option=orjson.OPT_APPEND_NEWLINE, default=str)
        with self._lock:
            if self._file is None:
                raise ValueError(f"exchange log {self.path} is closed")
            file = self._file
        try:
            file.append(line)
        except RunLogError as exc:
            callback = self.on_failure
            if callback is None:
                raise
            callback(exc)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @property
    def closed(self) -> bool:
        return self._file is None

    def __enter__(self) -> ExchangeLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """All records of a log file (a torn last line, from a crash, is skipped)."""
        out: list[dict[str, Any]] = []
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
        return out
