"""Checks a chat-completions request the way strict servers would, and lists what is wrong.

The rules are the union of what OpenAI, llama.cpp's Jinja templates (Qwen3-VL's in
particular) and LM Studio reject:

* ``model`` a non-empty string (and the served one, when the server names one);
* ``messages`` a non-empty list; roles system/user/assistant/tool; ``system`` only first;
* user content a string or a list of ``text`` / ``image_url`` parts; image URLs are
  ``data:image/...;base64,`` URLs whose payload decodes and is a PNG/JPEG with a readable
  size;
* every assistant ``tool_calls`` entry has an id, ``type: function``, a name and
  ``arguments`` as a *string* holding a JSON object; the tool messages right after it
  answer each id exactly once, before any other message;
* a tool message answers a pending call; tool results are strings;
* ``tools``: ``[{"type": "function", "function": {"name", "description"?, "parameters":
  {"type": "object", ...}}}]`` with unique, valid names; ``tool_choice`` valid;
* ``temperature``, ``max_tokens``, ``stream`` of the right types.

Problems are returned as readable strings (``"messages[4]: ..."``), never raised.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
import threading
import zlib
from collections import OrderedDict
from typing import Any

import orjson

__all__ = [
    "ImageInfo",
    "describe_image",
    "extract_data_urls",
    "summarize_image_urls",
    "validate_chat_request",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageInfo:
    """An image found in a request: where, what size, its digest, and its bytes.

    ``sha256`` and ``b64_length`` describe the base64 text, exactly like the agent's
    exchange log and run log summaries (``data:image/png;base64,<sha256:HEX len:N>``), so
    a test can match them. ``data`` (the decoded image) is decoded on first use from the
    kept base64 text; :meth:`release` drops both (the server keeps them only for its
    newest requests).
    """

    __slots__ = ("_data", "_payload", "b64_length", "height", "message_index", "mime", "nbytes",
                 "sha256", "width")

    def __init__(self, message_index: int, mime: str, width: int, height: int, nbytes: int,
                 sha256: str, b64_length: int, payload: bytes | memoryview | None = None) -> None:
        self.message_index = message_index
        self.mime = mime
        self.width = width
        self.height = height
        self.nbytes = nbytes
        self.sha256 = sha256
        self.b64_length = b64_length
        self._payload = payload
        self._data: bytes | None = None

    @property
    def data(self) -> bytes | None:
        """The decoded image bytes, or ``None`` once released."""
        if self._data is None and self._payload is not None:
            self._data = _b64decode(self._payload)
        return self._data

    def release(self) -> None:
        self._payload = None
        self._data = None

    @property
    def summary(self) -> str:
        return f"data:{self.mime};base64,<sha256:{self.sha256} len:{self.b64_length}>"

    def __repr__(self) -> str:
        return (f"ImageInfo(message_index={self.message_index}, mime={self.mime!r}, "
                f"size={self.width}x{self.height}, nbytes={self.nbytes}, sha256={self.sha256[:12]}...)")


_pybase64: Any
try:
    import pybase64 as _pybase64
except ImportError:  # pragma: no cover - depends on the environment
    _pybase64 = None


def _b64decode(payload: bytes | memoryview) -> bytes:
    # pybase64 (SIMD) validates ~50x faster than the stdlib; binascii's strict mode (3.11+)
    # is next; base64.b64decode(validate=True) runs a regex (~30 ms per MB).
    if _pybase64 is not None:
        return bytes(_pybase64.b64decode(payload, validate=True))
    try:
        return binascii.a2b_base64(payload, strict_mode=True)  # type: ignore[call-arg,unused-ignore]
    except TypeError:  # Python 3.10: no strict_mode
        return base64.b64decode(bytes(payload), validate=True)


def _image_size(mime: str, data: bytes) -> tuple[int, int] | str:
    if data.startswith(_PNG_SIGNATURE):
        if len(data) < 33 or data[12:16] != b"IHDR":
            return "PNG without an IHDR chunk"
        width, height = struct.unpack(">II", data[16:24])
        if width == 0 or height == 0:
            return f"PNG of size {width}x{height}"
        crc = binascii.crc32(data[12:29]) & 0xFFFFFFFF
        if struct.unpack(">I", data[29:33])[0] != crc:
            return "PNG IHDR chunk has a bad CRC"
        if data[-12:] != b"\x00\x00\x00\x00IEND\xaeB`\x82":
            return "PNG is truncated (no IEND chunk at the end)"
        return width, height
    if data.startswith(b"\xff\xd8"):
        # JPEG: walk the segments to a start-of-frame marker.
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                return "JPEG segment structure is broken"
            marker = data[i + 1]
            seg_len = struct.unpack(">H", data[i + 2:i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[i + 5:i + 9])
                return width, height
            i += 2 + seg_len
        return "JPEG without a frame header"
    return f"image data is neither PNG nor JPEG (declared {mime})"


# (mime, base64 length, crc32 of the base64 text) -> (width, height, nbytes, sha256) or a problem.
# An agent resends the same screenshots turn after turn: each is decoded and hashed once.
# zlib.crc32 (~0.25 ms per MB; binascii's is 4x slower) covers every byte, so a corrupted
# resend is checked again.
_DESCRIBED: OrderedDict[tuple[str, int, int], tuple[int, int, int, str] | str] = OrderedDict()
_DESCRIBED_MAX = 64
_DESCRIBED_LOCK = threading.Lock()


def describe_image(mime: str, payload: bytes | memoryview,
                   memo: dict[int, tuple[int, int, int, str] | str] | None = None
                   ) -> tuple[int, int, int, str] | str:
    """``(width, height, decoded bytes, sha256 of the base64 text)`` of a base64 image, or
    a problem string (not base64, not PNG/JPEG, truncated...). ``memo`` (keyed by the
    payload object's id) saves the checksum when one request looks at a payload twice."""
    if memo is not None and id(payload) in memo:
        return memo[id(payload)]
    result = _describe(mime, payload)
    if memo is not None:
        memo[id(payload)] = result
    return result


def _describe(mime: str, payload: bytes | memoryview) -> tuple[int, int, int, str] | str:
    key = (mime, len(payload), zlib.crc32(payload))
    with _DESCRIBED_LOCK:
        hit = _DESCRIBED.get(key)
        if hit is not None:
            _DESCRIBED.move_to_end(key)
            return hit
    result: tuple[int, int, int, str] | str
    try:
        data = _b64decode(payload)
    except (binascii.Error, ValueError) as exc:
        result = f"image base64 does not decode ({exc})"
    else:
        size = _image_size(mime, data)
        result = size if isinstance(size, str) else (size[0], size[1], len(data), hashlib.sha256(payload).hexdigest())
    with _DESCRIBED_LOCK:
        _DESCRIBED[key] = result
        if len(_DESCRIBED) > _DESCRIBED_MAX:
            _DESCRIBED.popitem(last=False)
    return result


_MARK_PREFIX = "<deskpilot-image:"


def extract_data_urls(raw: bytes | bytearray) -> tuple[bytes | bytearray, list[memoryview]]:
    """Cut base64 payloads of data URLs out of a raw JSON body before it is parsed.

    Each payload is replaced by ``<deskpilot-image:N>``; returns the (much smaller) body and
    the payloads, so a 3 MB request parses like a 3 KB one and no large Python ``str`` is
    built. Payloads with JSON escapes are left in place (parsed the ordinary way).
    """
    if b";base64," not in raw:
        return raw, []
    view = memoryview(raw)
    out: list[bytes | memoryview] = []
    payloads: list[memoryview] = []
    copied = 0  # raw[:copied] is already in out
    search = 0
    while True:
        start = raw.find(b'"data:', search)
        if start < 0:
            break
        mark = raw.find(b";base64,", start, start + 200)
        quote = raw.find(b'"', start + 1)
        if mark < 0 or quote < 0 or quote < mark:
            search = start + 6
            continue
        payload_start = mark + 8
        search = quote + 1
        if raw.find(b"\\", payload_start, quote) >= 0:
            continue
        out.append(view[copied:payload_start])
        out.append(f"{_MARK_PREFIX}{len(payloads)}>".encode())
        payloads.append(view[payload_start:quote])
        copied = quote
    out.append(view[copied:])
    return b"".join(out), payloads


def _payload_of(url: str, extracted: list[memoryview] | None) -> bytes | memoryview | str:
    """The base64 payload of a data URL (from the extraction or the string), or a problem."""
    payload = url.partition(",")[2]
    if extracted is not None and payload.startswith(_MARK_PREFIX) and payload.endswith(">"):
        try:
            return extracted[int(payload[len(_MARK_PREFIX):-1])]
        except (ValueError, IndexError):
            pass
    try:
        return payload.encode("ascii")
    except UnicodeEncodeError:
        return "image base64 has non-ASCII characters"


def _check_image_url(url: Any, where: str, index: int, problems: list[str],
                     images: list[ImageInfo], keep_data: bool,
                     extracted: list[memoryview] | None = None,
                     memo: dict[int, tuple[int, int, int, str] | str] | None = None) -> None:
    if not isinstance(url, str) or not url:
        problems.append(f"{where}: image_url.url must be a non-empty string")
        return
    if not url.startswith("data:"):
        problems.append(f"{where}: image_url.url must be a data: URL (local servers cannot fetch {url[:60]!r})")
        return
    head, mark, _ = url.partition(",")
    if not mark or not head.endswith(";base64"):
        problems.append(f"{where}: image data URL is not base64 ({head[:60]!r})")
        return
    mime = head[5:-7]
    if not mime.startswith("image/"):
        problems.append(f"{where}: data URL MIME type {mime!r} is not an image")
        return
    payload = _payload_of(url, extracted)
    if isinstance(payload, str):
        problems.append(f"{where}: {payload}")
        return
    described = describe_image(mime, payload, memo)
    if isinstance(described, str):
        problems.append(f"{where}: {described}")
        return
    width, height, nbytes, digest = described
    # A memoryview into the request body: no copy; the body lives until release().
    images.append(ImageInfo(index, mime, width, height, nbytes, digest, len(payload),
                            payload if keep_data else None))


def summarize_image_urls(body: Any, extracted: list[memoryview] | None = None,
                         memo: dict[int, tuple[int, int, int, str] | str] | None = None) -> None:
    """Replace every image data URL in a decoded body, in place, by its digest summary
    (``data:<mime>;base64,<sha256:HEX len:N>``), resolving extracted payloads."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            image_url: Any = part.get("image_url") if isinstance(part, dict) else None
            url = image_url.get("url") if isinstance(image_url, dict) else None
            if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url[:200]:
                continue
            head = url.partition(",")[0]
            payload = _payload_of(url, extracted)
            if isinstance(payload, str):
                continue
            described = describe_image(head[5:-7], payload, memo)
            digest = described[3] if not isinstance(described, str) else hashlib.sha256(payload).hexdigest()
            image_url["url"] = f"{head},<sha256:{digest} len:{len(payload)}>"


def _check_content_parts(content: list[Any], where: str, index: int, problems: list[str],
                         images: list[ImageInfo], keep_data: bool,
                         extracted: list[memoryview] | None,
                         memo: dict[int, tuple[int, int, int, str] | str] | None) -> None:
    if not content:
        problems.append(f"{where}: content list is empty")
    for j, part in enumerate(content):
        pw = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            problems.append(f"{pw}: content part must be an object")
            continue
        kind = part.get("type")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                problems.append(f"{pw}: text part needs a string 'text'")
        elif kind == "image_url":
            image_url = part.get("image_url")
            if not isinstance(image_url, dict):
                problems.append(f"{pw}: image_url part needs an object 'image_url'")
                continue
            _check_image_url(image_url.get("url"), pw, index, problems, images, keep_data, extracted, memo)
        else:
            problems.append(f"{pw}: unknown content part type {kind!r}")


def _check_tools(tools: Any, problems: list[str]) -> set[str]:
    names: set[str] = set()
    if not isinstance(tools, list) or not tools:
        problems.append("tools: must be a non-empty list")
        return names
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            problems.append(f"{where}: must be an object with type 'function'")
            continue
        fn = tool.get("function")
        if not isinstance(fn, dict):
            problems.append(f"{where}: needs a 'function' object")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"{where}: function name {name!r} is not a valid tool name")
            continue
        if name in names:
            problems.append(f"{where}: duplicate tool name {name!r}")
        names.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            problems.append(f"{where} ({name}): description must be a string")
        params = fn.get("parameters")
        if params is None:
            continue
        if not isinstance(params, dict) or params.get("type") != "object":
            problems.append(f"{where} ({name}): parameters must be a JSON schema of type 'object'")
            continue
        props = params.get("properties", {})
        if not isinstance(props, dict):
            problems.append(f"{where} ({name}): parameters.properties must be an object")
            continue
        for prop, schema in props.items():
            if not isinstance(schema, dict):
                problems.append(f"{where} ({name}): property {prop!r} schema must be an object")
        required = params.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required if isinstance(r, str)):
            problems.append(f"{where} ({name}): 'required' must list declared properties")
    return names


def validate_chat_request(
    body: Any, *, model: str | None = None, keep_image_data: bool = True,
    extracted: list[memoryview] | None = None,
    memo: dict[int, tuple[int, int, int, str] | str] | None = None,
) -> tuple[list[str], list[ImageInfo]]:
    """All problems of a decoded request body, and the images it carries.

    ``extracted``: the payloads :func:`extract_data_urls` cut out of the raw body (their
    URLs in ``body`` hold ``<deskpilot-image:N>`` markers).
    """
    problems: list[str] = []
    images: list[ImageInfo] = []
    if not isinstance(body, dict):
        return ["request body must be a JSON object"], images
    req_model = body.get("model")
    if not isinstance(req_model, str) or not req_model:
        problems.append("model: must be a non-empty string")
    elif model is not None and req_model != model:
        problems.append(f"model: {req_model!r} is not loaded (this server serves {model!r})")
    tool_names: set[str] = set()
    if "tools" in body:
        tool_names = _check_tools(body["tools"], problems)
    if "tool_choice" in body:
        choice = body["tool_choice"]
        if "tools" not in body:
            problems.append("tool_choice: given without tools")
        if isinstance(choice, str):
            if choice not in ("auto", "none", "required"):
                problems.append(f"tool_choice: {choice!r} is not auto/none/required")
        elif isinstance(choice, dict):
            fn = choice.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            if choice.get("type") != "function" or name not in tool_names:
                problems.append(f"tool_choice: must name a declared function, got {choice!r}")
        else:
            problems.append("tool_choice: must be a string or an object")
    temp = body.get("temperature")
    if temp is not None and (not isinstance(temp, (int, float)) or isinstance(temp, bool) or not 0 <= temp <= 2):
        problems.append(f"temperature: {temp!r} is not a number in 0..2")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or max_tokens < 1):
        problems.append(f"max_tokens: {max_tokens!r} is not a positive integer")
    if "stream" in body and not isinstance(body["stream"], bool):
        problems.append("stream: must be true or false")

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: must be a non-empty list")
        return problems, images
    pending: dict[str, str] = {}  # tool_call_id -> where it was asked
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            problems.append(f"{where}: must be an object")
            continue
        role = msg.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"{where}: unknown role {role!r}")
            continue
        if pending and role != "tool":
            problems.append(
                f"{where}: {role} message before every tool call was answered "
                f"(unanswered: {', '.join(sorted(pending))})"
            )
            pending.clear()
        content = msg.get("content")
        if role == "system":
            if i != 0:
                problems.append(f"{where}: system message must be the first message")
            if not isinstance(content, str):
                problems.append(f"{where}: system content must be a string")
        elif role == "user":
            if isinstance(content, list):
                _check_content_parts(content, where, i, problems, images, keep_image_data, extracted, memo)
            elif not isinstance(content, str):
                problems.append(f"{where}: user content must be a string or a list of parts")
        elif role == "assistant":
            calls = msg.get("tool_calls")
            if content is not None and not isinstance(content, str):
                problems.append(f"{where}: assistant content must be a string or null")
            if calls is None:
                if content is None:
                    problems.append(f"{where}: assistant message with neither content nor tool_calls")
                continue
            if not isinstance(calls, list):
                problems.append(f"{where}: tool_calls must be a list")
                continue
            for j, call in enumerate(calls):
                cw = f"{where}.tool_calls[{j}]"
                if not isinstance(call, dict):
                    problems.append(f"{cw}: must be an object")
                    continue
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id:
                    problems.append(f"{cw}: id must be a non-empty string")
                elif call_id in pending:
                    problems.append(f"{cw}: duplicate id {call_id!r}")
                else:
                    pending[call_id] = cw
                if call.get("type") != "function":
                    problems.append(f"{cw}: type must be 'function'")
                fn = call.get("function")
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    problems.append(f"{cw}: function.name must be a string")
                    continue
                args = fn.get("arguments")
                if not isinstance(args, str):
                    problems.append(f"{cw}: function.arguments must be a JSON string, got {type(args).__name__}")
                    continue
                try:
                    decoded = orjson.loads(args)
                except orjson.JSONDecodeError:
                    problems.append(f"{cw}: function.arguments is not valid JSON: {args[:80]!r}")
                    continue
                if not isinstance(decoded, dict):
                    problems.append(f"{cw}: function.arguments must encode an object")
        else:  # tool
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                problems.append(f"{where}: tool message needs a tool_call_id")
            elif call_id not in pending:
                problems.append(f"{where}: tool_call_id {call_id!r} answers no pending tool call")
            else:
                del pending[call_id]
            if not isinstance(content, str):
                problems.append(f"{where}: tool content must be a string (the JSON payload)")
    if pending:
        problems.append(f"messages: tool calls never answered: {', '.join(sorted(pending))}")
    return problems, images
