"""The conversation: messages, screenshot/think pruning, and request bytes from a cache.

Message kinds (seed 000's layout):

* ``system`` and the task (``role=user``, text);
* ``assistant`` messages as :attr:`Completion.message` gives them;
* ``tool`` results: ``{"role": "tool", "tool_call_id", "name", "content": "<JSON payload>"}``;
* observations: ``{"role": "user", "content": [{"type": "text", ...},
  {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}]}``, kept apart
  from the tool message so the tool result stays small JSON and the image is a user turn.

Pruning: only the last ``keep_last_screenshots`` observation images stay; older ones become
a text part ``"[screenshot omitted: turn N]"``. Only the last ``keep_last_thinks`` assistant
messages keep their ``<think>`` blocks. With ``prune_chunk=K`` pruning waits until K
messages are due and then prunes them together, so the request stays a byte-for-byte
extension of the previous one for K-1 turns in a row. Servers with a prompt cache
(llama.cpp, LM Studio, vLLM's prefix cache) reuse the longest common prefix of two
requests; every edit early in the prompt forces them to re-process everything after it,
images included (the vision encoder runs again for each). Image and think pruning are
decided together, once per request, so they change the prompt in the same turn.

Prefill accounting: each :meth:`History.build_request` compares its messages with the
previous request's and records in :attr:`History.last_prefill` (a :class:`Prefill`) what a
prefix-caching server must process anew: the messages after the common prefix, the images
among them and their tokens (:func:`image_token_rule`: Qwen3-VL one token per 32x32 px;
other models the image count), the text at :data:`TEXT_BYTES_PER_TOKEN`. With keep 2,
chunk K prefills (K + 1) / K images per turn at steady state and holds at most K + 1
images: chunk 1 (the seeds' keep-last-N) 2.0, chunk 3 1.33 with 4 images at most.
``benchmarks/bench_request.py --only-policies`` measures a scripted 30-turn run of the
agent per policy. The class default is 1 (the seeds' behaviour); the agent's
``history.prune_chunk`` defaults to 3.

``max_images`` caps the images of any one request, whatever the chunk: the seeds'
AGENT_KEEP_LAST_SCREENSHOTS=N meant "at most N images per request" (a vLLM served with
``--limit-mm-per-prompt image=1`` rejects a second one), so an explicit
``history.keep_last_screenshots`` is passed as the cap too, and the chunked pruning then
prunes whenever a request would hold more than N. Left unset, the chunked default runs.

Speed: every message is serialized once (orjson) and its bytes kept;
:meth:`History.build_request` only joins cached parts, so a turn serializes just its new
messages. An image is base64-encoded once and spliced into its message bytes without
being copied through a JSON encoder. The output is byte-identical to
``orjson.dumps(history.request_dict(...))`` (the tests check it).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from deskpilot.agent.client._toolcalls import strip_think

__all__ = [
    "B64_BACKEND",
    "TEXT_BYTES_PER_TOKEN",
    "History",
    "HistoryStats",
    "Prefill",
    "b64encode",
    "image_token_rule",
    "png_data_url",
]

#: Bytes of serialized message JSON per token, for the text part of a prefill estimate
#: (BPE tokenizers average 3-4.5 bytes per token on English and JSON).
TEXT_BYTES_PER_TOKEN = 4

try:  # SIMD base64: ~0.06 ms per 1.1 MB screenshot where the stdlib takes ~2-3 ms
    import pybase64 as _pybase64

    b64encode: Callable[[bytes], bytes] = _pybase64.b64encode
    B64_BACKEND = "pybase64"
except ImportError:  # pragma: no cover - depends on the environment
    b64encode = base64.b64encode
    B64_BACKEND = "base64"

_URL_PLACEHOLDER = "\u2063deskpilot-image-url\u2063"
_URL_PLACEHOLDER_BYTES = orjson.dumps(_URL_PLACEHOLDER)
_ROLES = frozenset({"system", "user", "assistant", "tool"})


def png_data_url(png: bytes) -> bytes:
    """``data:image/png;base64,...`` as ASCII bytes (base64 done once; pybase64 if installed)."""
    return b"data:image/png;base64," + b64encode(png)


def image_token_rule(model: str) -> Callable[[int, int], int] | None:
    """Tokens one image of ``w x h`` pixels costs the model, when its rule is known.

    Qwen3-VL (and Qwen2.5-VL): 16-px patches merged 2x2, so one token per 32x32 pixels of
    the image resized to multiples of 32 (1536x864: 48x27 = 1296 tokens). Other models:
    None (prefill accounting then counts images, not their tokens)."""
    name = model.lower().replace("_", "-")
    if "qwen3-vl" in name or "qwen3vl" in name or "qwen2.5-vl" in name or "qwen2-5-vl" in name:
        return lambda w, h: max(1, round(w / 32)) * max(1, round(h / 32))
    return None


@dataclass(frozen=True, slots=True)
class Prefill:
    """What a server with a prefix cache (llama.cpp, LM Studio, vLLM) must process anew
    for one request: everything after the longest run of messages it shares with the
    previous request (a change of the tools schema, rendered into the system prompt by
    chat templates, shares nothing).

    ``images``: images in that part (each runs the vision encoder and is prefilled);
    ``image_tokens``: their tokens by :func:`image_token_rule` (None when the model's
    rule or an image's size is unknown); ``text_tokens``: the rest, estimated at
    :data:`TEXT_BYTES_PER_TOKEN`; ``images_in_context``: images the request carries."""

    messages: int
    reused_messages: int
    images: int
    image_tokens: int | None
    text_tokens: int
    images_in_context: int

    @property
    def tokens(self) -> int | None:
        """All tokens to prefill (None when the image tokens are unknown)."""
        return None if self.image_tokens is None else self.image_tokens + self.text_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "reused_messages": self.reused_messages,
            "images": self.images,
            "image_tokens": self.image_tokens,
            "text_tokens": self.text_tokens,
            "tokens": self.tokens,
            "images_in_context": self.images_in_context,
        }


@dataclass(slots=True)
class HistoryStats:
    """Counters a run log reports."""

    messages: int
    images_live: int
    images_pruned: int
    thinks_live: int
    thinks_pruned: int
    cached_bytes: int


class _Entry:
    __slots__ = ("has_think", "image_digest", "image_label", "image_size", "image_url", "kind", "message", "parts")

    def __init__(self, message: dict[str, Any], data: bytes | tuple[bytes, ...], kind: str) -> None:
        self.message = message
        # The message's JSON as parts joined into the body: an observation keeps its data URL
        # as its own part, so the 1.5 MB of base64 is copied once per request (into the
        # body), not once more into a cached copy of the message.
        self.parts: tuple[bytes, ...] = (data,) if isinstance(data, bytes) else data
        self.kind = kind
        self.has_think = False
        self.image_url: bytes | None = None  # live image (None once pruned)
        self.image_label = ""
        self.image_digest: str | None = None
        self.image_size: tuple[int, int] | None = None

    @property
    def data(self) -> bytes:
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    @data.setter
    def data(self, value: bytes) -> None:
        self.parts = (value,)

    @property
    def size(self) -> int:
        return sum(len(part) for part in self.parts)


class History:
    """An OpenAI chat history whose request body is spliced from cached bytes.

    ``keep_last_screenshots`` (AGENT_KEEP_LAST_SCREENSHOTS; ``None`` keeps all),
    ``keep_last_thinks`` (AGENT_KEEP_LAST_THINKS; ``None`` keeps all, 0 strips every think
    block) and ``prune_chunk`` (>= 1; see the module docstring). ``tools`` is the default
    tools schema of :meth:`build_request` (treat it as immutable once given: its bytes
    are cached).

    Not thread-safe: one history belongs to one loop.
    """

    def __init__(
        self,
        system: str | None = None,
        *,
        keep_last_screenshots: int | None = 2,
        keep_last_thinks: int | None = 2,
        prune_chunk: int = 1,
        tools: Sequence[Mapping[str, Any]] | None = None,
        placeholder: str = "[screenshot omitted: {label}]",
        max_images: int | None = None,
    ) -> None:
        if keep_last_screenshots is not None and keep_last_screenshots < 1:
            raise ValueError(f"keep_last_screenshots must be >= 1 or None, got {keep_last_screenshots}")
        if keep_last_thinks is not None and keep_last_thinks < 0:
            raise ValueError(f"keep_last_thinks must be >= 0 or None, got {keep_last_thinks}")
        if prune_chunk < 1:
            raise ValueError(f"prune_chunk must be >= 1, got {prune_chunk}")
        if max_images is not None and max_images < 1:
            raise ValueError(f"max_images must be >= 1 or None, got {max_images}")
        self.keep_last_screenshots = keep_last_screenshots
        #: The most images any request holds (module doc); None: only the chunked pruning.
        self.max_images = max_images
        self.keep_last_thinks = keep_last_thinks
        self.prune_chunk = prune_chunk
        self.placeholder = placeholder
        self._entries: list[_Entry] = []
        self._observations = 0
        self._images_pruned = 0
        self._thinks_pruned = 0
        self._tools: Sequence[Mapping[str, Any]] | None = None
        self._tools_bytes = b""
        self._extra_cache: dict[str, bytes] = {}
        #: The messages' bytes and the tools' bytes of the last request built (for
        #: :attr:`last_prefill`); bytes objects are shared, not copied.
        self._sent: tuple[list[tuple[bytes, ...]], bytes] | None = None
        #: Prefill accounting of the last :meth:`build_request` (None before the first).
        self.last_prefill: Prefill | None = None
        #: Tokens per image (``image_token_rule``), or None to count images only.
        self.image_tokens: Callable[[int, int], int] | None = None
        if tools is not None:
            self.set_tools(tools)
        if system is not None:
            self.add_system(system)

    # -- adding messages -----------------------------------------------------------------
    def add_system(self, text: str) -> dict[str, Any]:
        return self._append({"role": "system", "content": text}, "system")

    def add_user(self, content: str | list[dict[str, Any]]) -> dict[str, Any]:
        """A user turn (the task, a hint); for a screenshot use :meth:`add_observation`."""
        return self._append({"role": "user", "content": content}, "user")

    add_task = add_user

    def add_assistant(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Append an assistant message (``Completion.message``) and prune old thinks."""
        msg = dict(message)
        msg.setdefault("role", "assistant")
        if msg["role"] != "assistant":
            raise ValueError(f"add_assistant got a message with role {msg['role']!r}")
        if msg.get("content") is None:
            msg["content"] = ""
        if msg.get("tool_calls"):
            msg["tool_calls"] = [_bounded_call(c) for c in msg["tool_calls"]]
        entry = self._append_entry(msg, "assistant")
        content = msg.get("content")
        entry.has_think = isinstance(content, str) and "think>" in content
        return msg

    def add_tool_result(
        self, tool_call_id: str, payload: Mapping[str, Any] | str, *, name: str | None = None
    ) -> dict[str, Any]:
        """``role=tool`` message; ``payload`` is a dict (serialized here) or a JSON string."""
        content = payload if isinstance(payload, str) else orjson.dumps(dict(payload)).decode()
        msg: dict[str, Any] = {"role": "tool", "tool_call_id": tool_call_id}
        if name is not None:
            msg["name"] = name
        msg["content"] = content
        return self._append(msg, "tool")

    def add_observation(
        self,
        image: bytes | str,
        *,
        text: str = "Current screenshot.",
        label: str | None = None,
        mime: str = "image/png",
        size: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """A ``role=user`` message with ``text`` and one image, then prune old images.

        ``image``: encoded image bytes (PNG by default; base64-encoded here, once) or a
        ready ``data:`` URL (str or ASCII bytes starting with ``data:``). ``label`` names
        the image in its placeholder once pruned (default ``"turn N"``, N counting
        observations from 1). ``size``: the image's (width, height), for the prefill
        accounting's image tokens (default: read from a PNG's header).
        """
        self._observations += 1
        url, trusted = _to_url_bytes(image, mime)
        message: dict[str, Any] = {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": _URL_PLACEHOLDER}},
            ],
        }
        template = orjson.dumps(message)
        cut = template.rfind(_URL_PLACEHOLDER_BYTES)
        if trusted or _json_safe_ascii(url):
            data: bytes | tuple[bytes, ...] = (template[:cut] + b'"', url, b'"' + template[cut + len(_URL_PLACEHOLDER_BYTES):])
            url_text = url.decode("ascii")
        else:
            url_text = url.decode("utf-8", "replace")
            message["content"][1]["image_url"]["url"] = url_text
            data = orjson.dumps(message)
        message["content"][1]["image_url"]["url"] = url_text
        entry = _Entry(message, data, "observation")
        entry.image_url = url
        entry.image_label = label if label is not None else f"turn {self._observations}"
        entry.image_size = size if size is not None else _png_size(url)
        self._entries.append(entry)
        return message

    def add_message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Append any OpenAI message (role checked); assistant messages go through
        :meth:`add_assistant` so think pruning applies."""
        role = message.get("role")
        if role not in _ROLES:
            raise ValueError(f"message role must be one of {sorted(_ROLES)}, got {role!r}")
        if role == "assistant":
            return self.add_assistant(message)
        return self._append(dict(message), str(role))

    def _append(self, message: dict[str, Any], kind: str) -> dict[str, Any]:
        self._append_entry(message, kind)
        return message

    def _append_entry(self, message: dict[str, Any], kind: str) -> _Entry:
        entry = _Entry(message, orjson.dumps(message), kind)
        self._entries.append(entry)
        return entry

    # -- pruning -------------------------------------------------------------------------
    def _prune(self) -> None:
        """Prune when screenshots *or* thinks are ``prune_chunk`` past their limit, and then
        both at once: the prompt changes at one turn instead of at two, so consecutive
        requests share the longest possible prefix (see the module docstring).

        Runs lazily, whenever the messages are looked at or serialized: the decision is
        taken once per request, when a turn's new messages are all in, which keeps image and
        think pruning in step (eager pruning at each add let them drift a turn apart).
        """
        live_images = [e for e in self._entries if e.image_url is not None]
        live_thinks = [e for e in self._entries if e.has_think]
        keep_images, keep_thinks = self.keep_last_screenshots, self.keep_last_thinks
        slack = self.prune_chunk - 1
        image_limit = None if keep_images is None else keep_images + slack
        if self.max_images is not None:
            image_limit = self.max_images if image_limit is None else min(image_limit, self.max_images)
        due = (image_limit is not None and len(live_images) > image_limit) or (
            keep_thinks is not None and len(live_thinks) > keep_thinks + slack
        )
        if not due:
            return
        keep_now = keep_images
        if self.max_images is not None:
            keep_now = self.max_images if keep_now is None else min(keep_now, self.max_images)
        if keep_now is not None:
            for entry in live_images[: max(0, len(live_images) - keep_now)]:
                self._drop_image(entry)
        if keep_thinks is not None:
            for entry in live_thinks[: max(0, len(live_thinks) - keep_thinks)]:
                self._drop_think(entry)

    def _drop_image(self, entry: _Entry) -> None:
        parts = []
        for part in entry.message["content"]:
            if isinstance(part, dict) and part.get("type") == "image_url":
                parts.append({"type": "text", "text": self.placeholder.format(label=entry.image_label)})
            else:
                parts.append(part)
        entry.message = {**entry.message, "content": parts}
        entry.data = orjson.dumps(entry.message)
        entry.image_url = None
        self._images_pruned += 1

    def _drop_think(self, entry: _Entry) -> None:
        entry.message = {**entry.message, "content": strip_think(entry.message.get("content"))}
        entry.data = orjson.dumps(entry.message)
        entry.has_think = False
        self._thinks_pruned += 1

    # -- tools ---------------------------------------------------------------------------
    def set_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> None:
        """The default tools schema (serialized once, here)."""
        self._tools = tools
        self._tools_bytes = orjson.dumps(list(tools)) if tools else b""

    @property
    def tools(self) -> Sequence[Mapping[str, Any]] | None:
        return self._tools

    # -- requests ------------------------------------------------------------------------
    def request_dict(
        self,
        *,
        model: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = "auto",
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The request as a dict; ``orjson.dumps`` of it equals :meth:`build_request`."""
        self._prune()
        body: dict[str, Any] = {"model": model, "messages": self.messages}
        use_tools = self._tools if tools is None else tools
        if use_tools:
            body["tools"] = list(use_tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if extra:
            body.update(extra)
        return body

    def build_request(
        self,
        *,
        model: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = "auto",
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The request body, spliced from cached bytes (see :meth:`request_dict`).

        ``tools=None`` uses the history's tools (:meth:`set_tools`); pass ``[]`` for none.
        ``stream=True`` adds ``"stream": true`` and ``stream_options.include_usage``.
        ``extra`` adds or overrides top-level fields (e.g. ``{"top_p": 0.9}``).
        """
        self._prune()
        if tools is None or tools is self._tools:
            tools_bytes = self._tools_bytes
        else:
            tools_bytes = orjson.dumps(list(tools)) if tools else b""
        fields: list[tuple[str, bytes]] = [("model", orjson.dumps(model))]
        fields.append(("messages", b""))  # filled in the join below
        if tools_bytes:
            fields.append(("tools", tools_bytes))
            if tool_choice is not None:
                fields.append(("tool_choice", self._cached_value("tool_choice", tool_choice)))
        if temperature is not None:
            fields.append(("temperature", orjson.dumps(temperature)))
        if max_tokens is not None:
            fields.append(("max_tokens", orjson.dumps(max_tokens)))
        if stream:
            fields.append(("stream", b"true"))
            fields.append(("stream_options", b'{"include_usage":true}'))
        if extra:
            positions = {key: i for i, (key, _) in enumerate(fields)}
            for key, value in extra.items():
                encoded = orjson.dumps(value)
                if key in positions:
                    fields[positions[key]] = (key, encoded)
                else:
                    positions[key] = len(fields)
                    fields.append((key, encoded))
        self.last_prefill = self._account(tools_bytes)
        parts: list[bytes] = [b"{"]
        for i, (key, encoded) in enumerate(fields):
            if i:
                parts.append(b",")
            parts.append(orjson.dumps(key))
            parts.append(b":")
            if key == "messages" and not encoded:
                parts.append(b"[")
                for j, entry in enumerate(self._entries):
                    if j:
                        parts.append(b",")
                    parts.extend(entry.parts)
                parts.append(b"]")
            else:
                parts.append(encoded)
        parts.append(b"}")
        return b"".join(parts)

    def _account(self, tools_bytes: bytes) -> Prefill:
        """Prefill of the request being built against the last one (see :class:`Prefill`)."""
        datas = [e.parts for e in self._entries]
        reused = 0
        if self._sent is not None:
            previous, previous_tools = self._sent
            if previous_tools is tools_bytes or previous_tools == tools_bytes:
                for old, new in zip(previous, datas, strict=False):
                    # Unchanged entries keep their parts tuple: identity first, then content.
                    if old is not new and old != new:
                        break
                    reused += 1
        self._sent = (datas, tools_bytes)
        images = 0
        text_bytes = 0
        image_tokens: int | None = 0
        rule = self.image_tokens
        for entry in self._entries[reused:]:
            text_bytes += entry.size
            if entry.image_url is not None:
                images += 1
                text_bytes -= len(entry.image_url)
                if rule is None or entry.image_size is None or image_tokens is None:
                    image_tokens = None
                else:
                    image_tokens += rule(*entry.image_size)
        if reused == 0:
            text_bytes += len(tools_bytes)
        return Prefill(
            messages=len(datas),
            reused_messages=reused,
            images=images,
            image_tokens=image_tokens,
            text_tokens=-(-text_bytes // TEXT_BYTES_PER_TOKEN),
            images_in_context=sum(1 for e in self._entries if e.image_url is not None),
        )

    def _cached_value(self, key: str, value: Any) -> bytes:
        if isinstance(value, str):
            cached = self._extra_cache.get(value)
            if cached is None:
                cached = self._extra_cache[value] = orjson.dumps(value)
            return cached
        return orjson.dumps(value)

    # -- views ---------------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages as the next request sends them (pruning applied); do not mutate."""
        self._prune()
        return [e.message for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def last_assistant(self) -> dict[str, Any] | None:
        for entry in reversed(self._entries):
            if entry.kind == "assistant":
                return entry.message
        return None

    def stats(self) -> HistoryStats:
        self._prune()
        return HistoryStats(
            messages=len(self._entries),
            images_live=sum(1 for e in self._entries if e.image_url is not None),
            images_pruned=self._images_pruned,
            thinks_live=sum(1 for e in self._entries if e.has_think),
            thinks_pruned=self._thinks_pruned,
            cached_bytes=sum(e.size for e in self._entries),
        )

    def snapshot(self) -> list[dict[str, Any]]:
        """The messages for a run log: images as ``data:...;base64,<sha256:HEX len:N>``."""
        self._prune()
        out: list[dict[str, Any]] = []
        for entry in self._entries:
            if entry.image_url is None:
                out.append(entry.message)
                continue
            if entry.image_digest is None:
                head, _, payload = entry.image_url.partition(b";base64,")
                entry.image_digest = (
                    f"{head.decode('ascii', 'replace')};base64,"
                    f"<sha256:{hashlib.sha256(payload).hexdigest()} len:{len(payload)}>"
                )
            parts = []
            for part in entry.message["content"]:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    parts.append({"type": "image_url", "image_url": {"url": entry.image_digest}})
                else:
                    parts.append(part)
            out.append({**entry.message, "content": parts})
        return out

    def clear(self, *, keep_system: bool = True) -> None:
        """Forget the conversation (team mode rebuilds context); the system prompt stays."""
        self._entries = [e for e in self._entries if keep_system and e.kind == "system"]


def _to_url_bytes(image: bytes | str, mime: str) -> tuple[bytes, bool]:
    """(url bytes, whether they are known JSON-safe without a check)."""
    if isinstance(image, str):
        if not image:
            raise ValueError("empty image URL")
        return image.encode("utf-8"), False
    if isinstance(image, (bytes, bytearray, memoryview)):
        raw = bytes(image)
        if not raw:
            raise ValueError("empty image bytes")
        if raw.startswith(b"data:"):
            return raw, False
        # The base64 alphabet and a MIME type never need JSON escaping.
        return b"data:" + mime.encode("ascii") + b";base64," + b64encode(raw), True
    raise TypeError(f"image must be encoded bytes or a data URL string, not {type(image).__name__}")


def _png_size(url: bytes) -> tuple[int, int] | None:
    """(width, height) from the IHDR chunk of a base64 PNG data URL, or None."""
    _, sep, payload = url.partition(b";base64,")
    if not sep:
        return None
    try:
        head = base64.b64decode(payload[:32])  # 24 bytes: signature, IHDR length/type, w, h
    except ValueError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _json_safe_ascii(url: bytes) -> bool:
    """Whether ``url`` can be spliced into JSON as is (exactly what orjson would write):
    ASCII, no quote, no backslash, no control character."""
    if not url.isascii() or b'"' in url or b"\\" in url:
        return False
    # numpy's min is a vectorized pass (~0.02 ms per 1.5 MB; bytes.translate takes ~1 ms).
    return int(np.frombuffer(url, dtype=np.uint8).min()) >= 0x20


#: Past tool-call arguments longer than this are not echoed back to the model verbatim:
#: a model that wrote megabytes of arguments once would otherwise resend them (and pay
#: for them) in every later request.
MAX_ECHOED_ARGUMENTS_CHARS = 4000


def _bounded_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    arguments = function.get("arguments")
    if not isinstance(arguments, str) or len(arguments) <= MAX_ECHOED_ARGUMENTS_CHARS:
        return call
    # Still a JSON object: llama.cpp and some chat templates parse past arguments.
    shortened = orjson.dumps(
        {"omitted_arguments": arguments[:200], "characters": len(arguments)}
    ).decode()
    return {**call, "function": {**function, "arguments": shortened}}
