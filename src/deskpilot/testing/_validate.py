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
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ImageInfo", "validate_chat_request"]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(slots=True)
class ImageInfo:
    """An image found in a request: where, what size, and its bytes (until released)."""

    message_index: int
    mime: str
    width: int
    height: int
    nbytes: int
    sha256: str
    data: bytes | None = None


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
        if not data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82"):
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


def _check_image_url(url: Any, where: str, index: int, problems: list[str],
                     images: list[ImageInfo], keep_data: bool) -> None:
    if not isinstance(url, str) or not url:
        problems.append(f"{where}: image_url.url must be a non-empty string")
        return
    if not url.startswith("data:"):
        problems.append(f"{where}: image_url.url must be a data: URL (local servers cannot fetch {url[:60]!r})")
        return
    head, mark, payload = url.partition(",")
    if not mark or not head.endswith(";base64"):
        problems.append(f"{where}: image data URL is not base64 ({head[:60]!r})")
        return
    mime = head[5:-7]
    if not mime.startswith("image/"):
        problems.append(f"{where}: data URL MIME type {mime!r} is not an image")
        return
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        problems.append(f"{where}: image base64 does not decode ({exc})")
        return
    size = _image_size(mime, data)
    if isinstance(size, str):
        problems.append(f"{where}: {size}")
        return
    images.append(ImageInfo(
        message_index=index, mime=mime, width=size[0], height=size[1], nbytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(), data=data if keep_data else None,
    ))


def _check_content_parts(content: list[Any], where: str, index: int, problems: list[str],
                         images: list[ImageInfo], keep_data: bool) -> None:
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
            _check_image_url(image_url.get("url"), pw, index, problems, images, keep_data)
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
    body: Any, *, model: str | None = None, keep_image_data: bool = True
) -> tuple[list[str], list[ImageInfo]]:
    """All problems of a decoded request body, and the images it carries."""
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
                _check_content_parts(content, where, i, problems, images, keep_image_data)
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
