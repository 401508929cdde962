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
  ``arguments`` held as a JSON string) becomes ``[MASKED:<n> chars]``. A tool call is a
  typing call when its name is in ``typing_actions`` or when its arguments carry a
  ``text`` string: in every tool set (single, team 002/003) only the typing tools take
  ``text`` (:func:`typing_tool_names` derives the names from the tool definitions,
  e.g. team 003's ``type_text_input``). Strings that echo a typed text (a result's
  ``"Typed: hello"``, a history line) get it masked too: every string of a typing
  node, and elsewhere texts of :data:`ECHO_MIN_CHARS` characters or more (shorter
  ones would mask every "1" of a record). :class:`TypedTexts` remembers a run's typed
  texts, for records and log lines written after the typing.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

from deskpilot.safety._secrets import DEFAULT_DETECTORS, SecretDetector, find_secrets

__all__ = [
    "ECHO_MIN_CHARS",
    "TYPING_ACTIONS",
    "RedactOptions",
    "TypedTexts",
    "image_placeholder",
    "mask_text",
    "redact",
    "redact_lines",
    "redact_text",
    "typed_texts_in",
    "typing_tool_names",
]

#: Action kinds and tool names whose ``text`` argument is typed on the keyboard (the
#: tools' action vocabulary; tool names are also derived from the tool definitions,
#: see :func:`typing_tool_names`, and recognized by their ``text`` argument).
TYPING_ACTIONS: frozenset[str] = frozenset({"type_text", "type", "typetext", "write", "input_text"})
#: Keys under which records name an action or a tool.
_NAME_KEYS = ("name", "tool", "action", "type", "kind")
#: Keys that hold typed text inside a typing action.
_TEXT_KEYS = ("text", "value", "content")
#: Keys holding a tool call's arguments.
_ARG_KEYS = ("arguments", "args", "input", "raw_arguments")
#: Typed texts this long are masked wherever a record or a log line echoes them;
#: shorter ones only inside typing records (as whole words).
ECHO_MIN_CHARS = 3
#: Run file names (screenshots, records) are never rewritten by echo masking.
_FILE_NAME = re.compile(r"[\w.-]+\.(?:png|jpe?g|json|jsonl|txt|log)")


@runtime_checkable
class ToolDefinition(Protocol):
    """A tool as an object (the agent's ``Tool``): its name and its JSON-schema parameters."""

    name: str
    parameters: Mapping[str, Any]


def typing_tool_names(definitions: Iterable[Any]) -> frozenset[str]:
    """Lowercased names of the typing tools among ``definitions``: OpenAI function tools
    (``{"type": "function", "function": {...}}``), bare ``{"name", "parameters"}`` dicts
    or objects with ``name`` and ``parameters``, whose parameters declare a ``text``
    string (seed 000/001 ``type_text``, seed 002 ``type_text``, seed 003
    ``type_text_input``: no other tool takes ``text``)."""
    names: set[str] = set()
    for item in definitions:
        spec: Any = item
        if isinstance(item, Mapping):
            function = item.get("function")
            spec = function if isinstance(function, Mapping) else item
            name, params = spec.get("name"), spec.get("parameters")
        elif isinstance(item, ToolDefinition):
            name, params = item.name, item.parameters
        else:
            name, params = None, None
        props = params.get("properties") if isinstance(params, Mapping) else None
        text = props.get("text") if isinstance(props, Mapping) else None
        if isinstance(name, str) and isinstance(text, Mapping) and text.get("type") == "string":
            names.add(name.strip().lower())
    return frozenset(names)


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
    #: Texts typed earlier in the run, masked where strings echo them (with
    #: ``mask_typed_text``; :func:`redact` adds the ones the record itself types).
    typed_texts: tuple[str, ...] = ()


_DEFAULT_OPTIONS = RedactOptions()


def _is_typing(node: Mapping[str, Any], names: frozenset[str]) -> bool:
    for key in _NAME_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip().lower() in names:
            return True
    function = node.get("function")  # OpenAI tool call: {"type": "function", "function": {...}}
    if isinstance(function, Mapping):
        name = function.get("name")
        if isinstance(name, str) and name.strip().lower() in names:
            return True
        return _types_text(function.get("arguments"))
    return ("name" in node or "tool" in node) and any(_types_text(node.get(k)) for k in _ARG_KEYS if k in node)


def _types_text(arguments: Any) -> bool:
    """Whether tool-call arguments carry a ``text`` string (only typing tools take one)."""
    if isinstance(arguments, Mapping):
        return isinstance(arguments.get("text"), str)
    if isinstance(arguments, str) and '"text"' in arguments:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return False
        return isinstance(parsed, dict) and isinstance(parsed.get("text"), str)
    return False


def typed_texts_in(record: Any, options: RedactOptions | None = None) -> set[str]:
    """The texts the typing actions of ``record`` type (what ``mask_typed_text`` masks)."""
    opts = options or _DEFAULT_OPTIONS
    found: set[str] = set()
    _collect(record, opts.typing_actions, found)
    return found


def _collect(node: Any, names: frozenset[str], found: set[str]) -> None:
    if isinstance(node, Mapping):
        if _is_typing(node, names) and "role" not in node:  # a chat message's content is not typed
            for key in _TEXT_KEYS:
                value = node.get(key)
                if isinstance(value, str) and value.strip():
                    found.add(value)
            for key in _ARG_KEYS:
                _collect_arguments(node.get(key), found)
            function = node.get("function")
            if isinstance(function, Mapping):
                _collect_arguments(function.get("arguments"), found)
        for value in node.values():
            if isinstance(value, (Mapping, list, tuple)):
                _collect(value, names, found)
    elif isinstance(node, (list, tuple)):
        for item in node:
            if isinstance(item, (Mapping, list, tuple)):
                _collect(item, names, found)


def _collect_arguments(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return
    if isinstance(value, Mapping):
        for key in _TEXT_KEYS:
            text = value.get(key)
            if isinstance(text, str) and text.strip():
                found.add(text)


@functools.lru_cache(maxsize=64)
def _echo_pattern(texts: tuple[str, ...], inside: bool) -> re.Pattern[str] | None:
    """One alternation, longest text first. Inside typing records short texts count as
    whole words; elsewhere only texts of ECHO_MIN_CHARS or more count."""
    parts: list[str] = []
    for text in sorted(set(texts), key=len, reverse=True):
        if not text.strip():
            continue
        if len(text) >= ECHO_MIN_CHARS:
            parts.append(re.escape(text))
        elif inside:
            head = r"(?<!\w)" if re.match(r"\w", text[0]) else ""
            tail = r"(?!\w)" if re.match(r"\w", text[-1]) else ""
            parts.append(f"{head}{re.escape(text)}{tail}")
    return re.compile("|".join(parts)) if parts else None


def _mask_echoes(text: str, texts: tuple[str, ...], inside: bool) -> str:
    pattern = _echo_pattern(texts, inside)
    if pattern is None or _FILE_NAME.fullmatch(text):
        return text
    return pattern.sub(lambda m: mask_text(m.group(0)), text)


class TypedTexts:
    """The texts typed during one run, so that records and log lines written later mask
    where they echo them (a history line "Typed: hello", a log line). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set: set[str] = set()
        self._texts: tuple[str, ...] = ()

    @property
    def texts(self) -> tuple[str, ...]:
        return self._texts

    def add(self, *texts: str) -> None:
        new = {t for t in texts if isinstance(t, str) and t.strip()} - self._set
        if not new:
            return
        with self._lock:
            self._set |= new
            self._texts = tuple(sorted(self._set, key=len, reverse=True))

    def add_from(self, record: Any, options: RedactOptions | None = None) -> None:
        """Remember what the typing actions of ``record`` type."""
        found = typed_texts_in(record, options)
        if found:
            self.add(*found)

    def mask(self, text: str) -> str:
        """``text`` with every remembered text of ECHO_MIN_CHARS or more masked (log lines)."""
        texts = self._texts
        return _mask_echoes(text, texts, False) if texts else text


def _mask_arguments(value: Any, options: RedactOptions) -> Any:
    """Mask the text inside tool-call arguments given as a dict or a JSON string."""
    if isinstance(value, Mapping):
        return {
            k: (mask_text(v) if k in _TEXT_KEYS and isinstance(v, str) else _walk(v, options, True))
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


def _walk(node: Any, options: RedactOptions, inside: bool = False) -> Any:
    """``inside``: within a typing record (short typed texts are masked there too)."""
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
        if options.typed_texts:
            node = _mask_echoes(node, options.typed_texts, inside)
        return redact_text(node, options.detectors) if options.secrets and len(node) >= 4 else node
    if kind is dict or isinstance(node, Mapping):
        typing_node = options.mask_typed_text and _is_typing(node, options.typing_actions)
        inner = inside or typing_node
        out: dict[Any, Any] = {}
        for key, value in node.items():
            if key in options.skip_keys and isinstance(value, (str, int)):
                out[key] = value
            elif typing_node and key in _TEXT_KEYS and isinstance(value, str):
                out[key] = mask_text(value)
            elif typing_node and key in _ARG_KEYS:
                out[key] = _mask_arguments(value, options)
            elif typing_node and key == "function" and isinstance(value, Mapping):
                out[key] = {
                    k: (_mask_arguments(v, options) if k == "arguments" else _walk(v, options, True))
                    for k, v in value.items()
                }
            elif options.typed_texts and key in _NAME_KEYS and isinstance(value, str):
                # Names of tools and actions are never echoes ("type_text" stays).
                out[key] = _walk(value, _without_typed(options))
            else:
                out[key] = _walk(value, options, inner)
        return out
    if kind is list or isinstance(node, (list, tuple)):
        return [_walk(item, options, inside) for item in node]
    return node


def _without_typed(options: RedactOptions) -> RedactOptions:
    return dataclasses.replace(options, typed_texts=())


def redact(record: Any, options: RedactOptions | None = None, *, typed: TypedTexts | None = None,
           **overrides: Any) -> Any:
    """A redacted copy of a JSON-like ``record`` (see the module doc).

    ``overrides`` change single options: ``redact(rec, mask_typed_text=True)``.
    ``typed``: the run's :class:`TypedTexts` (with ``mask_typed_text``): echoes of texts
    typed earlier are masked too, and the texts this record types are remembered.
    """
    opts = options or _DEFAULT_OPTIONS
    if overrides:
        opts = dataclasses.replace(opts, **overrides)
    opts = _with_typed_texts(record, opts, typed)
    if opts.secrets and not _may_hold_secrets(record, opts):
        opts = _without_secret_scan(opts)
    return _walk(record, opts)


def _with_typed_texts(record: Any, options: RedactOptions, typed: TypedTexts | None) -> RedactOptions:
    if not options.mask_typed_text:
        return options
    found = typed_texts_in(record, options)
    if typed is not None:
        typed.add(*found)
        found.update(typed.texts)
    found.update(options.typed_texts)
    if not found:
        return options
    return dataclasses.replace(options, typed_texts=tuple(sorted(found, key=len, reverse=True)))


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
        out.append(json.dumps(_walk(doc, _with_typed_texts(doc, opts, None)), ensure_ascii=False))
    return out
