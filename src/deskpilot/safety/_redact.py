"""Redaction of run records: secrets, inline images and (optionally) typed text.

Records are JSON-like trees (dicts, lists, strings, numbers) on their way to
``turns.jsonl``, the exchange log or the panel. :func:`redact` returns a new tree and
never mutates its input, so the loop can keep the original for the model.

- Secrets found by the detectors of :mod:`._secrets` become ``[REDACTED:<detector>]``.
- ``data:image/...;base64,...`` URLs become ``<image/png sha256=... bytes=...>`` (the
  client's exchange log already does this; other records, such as the panel state,
  get it here).
- With ``mask_typed_text``, the text of typing actions (tool calls ``type_text``/``type``
  and stateless ``{"type": "type", "text": ...}`` actions, including tool-call
  ``arguments`` held as a JSON string) becomes ``[MASKED:<n> chars]``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from deskpilot.safety._secrets import DEFAULT_DETECTORS, SecretDetector, find_secrets

__all__ = [
    "TYPING_ACTIONS",
    "RedactOptions",
    "image_placeholder",
    "mask_text",
    "redact",
    "redact_lines",
    "redact_text",
]

#: Action/tool names whose ``text`` argument is typed on the keyboard.
TYPING_ACTIONS: frozenset[str] = frozenset({"type_text", "type", "typetext", "write", "input_text"})
#: Keys under which records name an action or a tool.
_NAME_KEYS = ("name", "tool", "action", "type", "kind")
#: Keys that hold typed text inside a typing action.
_TEXT_KEYS = ("text", "value", "content")


def redact_text(text: str, detectors: Sequence[SecretDetector] = DEFAULT_DETECTORS) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<detector>]``."""
    matches = find_secrets(text, detectors)
    if not matches:
        return text
    parts: list[str] = []
    pos = 0
    for m in matches:
        parts.append(text[pos : m.start])
        parts.append(f"[REDACTED:{m.detector}]")
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts)


def mask_text(text: str) -> str:
    """The placeholder that replaces typed text: its length only."""
    return f"[MASKED:{len(text)} chars]"


def image_placeholder(data_url: str) -> str:
    """``data:image/png;base64,...`` -> ``<image/png sha256=... bytes=N>`` (the digest of
    the decoded bytes, so it matches the screenshot file on disk)."""
    head, _, payload = data_url.partition(",")
    mime = head[5:].split(";", 1)[0] or "image"
    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        raw = payload.encode("utf-8", "surrogatepass")
    return f"<{mime} sha256={hashlib.sha256(raw).hexdigest()} bytes={len(raw)}>"


@dataclass(frozen=True, slots=True)
class RedactOptions:
    """What :func:`redact` replaces."""

    detectors: Sequence[SecretDetector] = DEFAULT_DETECTORS
    secrets: bool = True
    images: bool = True
    mask_typed_text: bool = False
    typing_actions: frozenset[str] = TYPING_ACTIONS
    #: Keys whose values are kept verbatim: hashes and ids (to save scanning time) and the
    #: policy's rule names ("text.secret:openai_api_key" reads like a "secret: value" pair).
    skip_keys: frozenset[str] = field(default_factory=lambda: frozenset({"sha256", "id", "tool_call_id", "rule"}))


_DEFAULT_OPTIONS = RedactOptions()


def _is_typing(node: Mapping[str, Any], names: frozenset[str]) -> bool:
    for key in _NAME_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip().lower() in names:
            return True
    function = node.get("function")  # OpenAI tool call: {"type": "function", "function": {...}}
    if isinstance(function, Mapping):
        name = function.get("name")
        return isinstance(name, str) and name.strip().lower() in names
    return False


def _mask_arguments(value: Any, options: RedactOptions) -> Any:
    """Mask the text inside tool-call arguments given as a dict or a JSON string."""
    if isinstance(value, Mapping):
        return {
            k: (mask_text(v) if k in _TEXT_KEYS and isinstance(v, str) else _walk(v, options))
            for k, v in value.items()
        }
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return mask_text(value)  # unparsable arguments of a typing call: hide them whole
        if isinstance(parsed, dict):
            return json.dumps(_mask_arguments(parsed, options), ensure_ascii=False)
        return mask_text(value)
    return _walk(value, options)


# Long strings of pure base64 are blobs (screenshots, files), not text: a secret cannot
# be told apart inside them, and scanning 1.5 MB with ten patterns costs ~100 ms where
# this check costs ~5 ms.
_BLOB = re.compile(r"[A-Za-z0-9+/=\r\n]+")
_BLOB_MIN_CHARS = 1024
# base64 of the PNG and JPEG signatures: raw base64 screenshots (the panel's raw_b64).
_IMAGE_B64 = {"iVBORw0KGgo": "image/png", "/9j/": "image/jpeg"}


_SCALARS = (int, float, bool, type(None))


def _walk(node: Any, options: RedactOptions) -> Any:
    kind = type(node)
    if kind in _SCALARS:
        return node
    if kind is str or isinstance(node, str):
        if options.images and node.startswith("data:image/"):
            return image_placeholder(node)
        if len(node) >= _BLOB_MIN_CHARS and _BLOB.fullmatch(node):
            if options.images:
                for magic, mime in _IMAGE_B64.items():
                    if node.startswith(magic):
                        return image_placeholder(f"data:{mime};base64,{node}")
            return node
        return redact_text(node, options.detectors) if options.secrets and len(node) >= 4 else node
    if kind is dict or isinstance(node, Mapping):
        typing_node = options.mask_typed_text and _is_typing(node, options.typing_actions)
        out: dict[Any, Any] = {}
        for key, value in node.items():
            if key in options.skip_keys and isinstance(value, (str, int)):
                out[key] = value
            elif typing_node and key in _TEXT_KEYS and isinstance(value, str):
                out[key] = mask_text(value)
            elif typing_node and key in ("arguments", "args", "input", "raw_arguments"):
                out[key] = _mask_arguments(value, options)
            elif typing_node and key == "function" and isinstance(value, Mapping):
                out[key] = {
                    k: (_mask_arguments(v, options) if k == "arguments" else _walk(v, options))
                    for k, v in value.items()
                }
            else:
                out[key] = _walk(value, options)
        return out
    if kind is list or isinstance(node, (list, tuple)):
        return [_walk(item, options) for item in node]
    return node


def redact(record: Any, options: RedactOptions | None = None, **overrides: Any) -> Any:
    """A redacted copy of a JSON-like ``record`` (see the module doc).

    ``overrides`` change single options: ``redact(rec, mask_typed_text=True)``.
    """
    opts = options or _DEFAULT_OPTIONS
    if overrides:
        opts = dataclasses.replace(opts, **overrides)
    if opts.secrets and not _may_hold_secrets(record, opts):
        opts = _without_secret_scan(opts)
    return _walk(record, opts)


# Records up to this size are scanned once as one JSON text before walking them: most
# hold no secret, and one scan of ~2 KB costs what scanning its 40 short strings one by
# one costs ten times over. Bigger records (inline images) are walked string by string,
# which skips the blobs.
_PREFILTER_MAX = 64 * 1024


def _may_hold_secrets(record: Any, options: RedactOptions) -> bool:
    if isinstance(record, str):
        return True
    try:
        text = orjson.dumps(record, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        return True
    if len(text) > _PREFILTER_MAX:
        return True
    # JSON escaping never hides a match: key alphabets need no escapes, and the
    # "password" value stops at a quote either way.
    return bool(find_secrets(text, options.detectors))


def _without_secret_scan(options: RedactOptions) -> RedactOptions:
    return dataclasses.replace(options, secrets=False)


def redact_lines(lines: Iterable[str], options: RedactOptions | None = None) -> list[str]:
    """Redact JSONL lines (each a JSON document); lines that are not JSON get
    :func:`redact_text` only, so a damaged log is still cleaned."""
    opts = options or _DEFAULT_OPTIONS
    out: list[str] = []
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            out.append(redact_text(line, opts.detectors))
            continue
        out.append(json.dumps(_walk(doc, opts), ensure_ascii=False))
    return out
