"""Tool calls out of an assistant message, and the ``<think>`` helpers.

A model asks for an action in one of these shapes, all normalised to :class:`ToolCall`:

* OpenAI ``message.tool_calls[i].function.arguments`` as a JSON *string* (OpenAI, LM
  Studio, llama.cpp, vLLM) or as an *object* (Ollama); ``None`` or ``""`` mean ``{}``.
* No native ``tool_calls`` but the content carries Qwen's own format,
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (LM Studio without a tool
  parser, raw llama.cpp templates), or a fenced ```` ```json ```` block / a bare JSON
  object with ``name`` and ``arguments`` (or ``parameters``). That is the *fallback*:
  it only runs when there are no native calls. The other syntaxes the supported servers'
  chat templates make a model write are read too (see :func:`split_content_tool_calls`):
  Qwen3-Coder / Qwen3.5 / Qwen3.6 XML (``<tool_call><function=NAME><parameter=KEY>
  VALUE</parameter></function></tool_call>``, LM Studio bug-tracker #2115), GLM-4.5
  (``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``), Llama
  3.1's ``<function=NAME>{json}</function>`` and ``<|python_tag|>{json}``, Mistral's
  ``[TOOL_CALLS][{...}]`` / ``[TOOL_CALLS]NAME[ARGS]{...}``, and pythonic calls (Llama
  3.2 / Llama 4 ``[name(key=value)]``, Gemma 3 ```` ```tool_code ```` fences).

Arguments that do not decode never raise: the call carries ``error`` =
``"invalid_json"`` (not JSON) or ``"invalid_args"`` (JSON, but not an object) and a
message, the seeds' error payload types, so the loop answers the model with a tool error
instead of crashing.

Qwen3 thinking models wrap reasoning in ``<think>...</think>``; some templates open the
block in the prompt so the reply starts inside it and only a lone ``</think>`` appears.
:func:`strip_think` removes both forms, :func:`extract_think` returns the reasoning.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from deskpilot.rundir import ToolCallRecord

__all__ = [
    "CALL_MARKERS",
    "ToolCall",
    "extract_think",
    "parse_arguments",
    "parse_content_tool_calls",
    "parse_message_tool_calls",
    "reasoning_tool_calls",
    "split_content_tool_calls",
    "strip_think",
]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
# A reply that starts inside a think block (the template opened it) or was cut off
# inside one: everything up to the lone closing tag, or an unterminated opening tag to
# the end, is reasoning.
_LEADING_UNTIL_CLOSE = re.compile(r"\A.*?</think>", re.DOTALL)
_UNTERMINATED_OPEN = re.compile(r"<think>.*\Z", re.DOTALL)

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
# Qwen3-Coder XML (the Qwen3.5/3.6 templates): one <function=NAME> with <parameter=KEY>
# children; the closing tags are optional at the end of a cut-off reply.
_XML_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)
# GLM-4.5: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call>
_GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
# Mistral: [TOOL_CALLS][{...}, ...] (v3) or [TOOL_CALLS]NAME[ARGS]{...} (v11+ templates).
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*(.*?)(?=\[TOOL_CALLS\]|\Z)", re.DOTALL)
_MISTRAL_ARGS = re.compile(r"\A([\w.\-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*(.*)\Z", re.DOTALL)
# Pythonic calls: Llama 3.2 / Llama 4 ("[click(label='OK', box=[1, 2])]", vLLM's
# pythonic tool parser and llama.cpp's Llama 3.x/4 handlers) and Gemma 3's recommended
# ```tool_code fences.
_PYTHONIC = re.compile(r"\A\s*\[\s*[A-Za-z_][\w.]*\(.*\)\s*\]\s*\Z", re.DOTALL)
_PY_FENCE = re.compile(r"```(?:tool_code|python)[ \t]*\n(.*?)```", re.DOTALL)
# Llama 3.x: <|python_tag|>{...} (the JSON itself follows).
_PYTHON_TAG = "<|python_tag|>"
#: Markers of a tool call written as text in any of the syntaxes above.
CALL_MARKERS = ("<tool_call>", "<function=", "[TOOL_CALLS]", _PYTHON_TAG)
_FENCED_BLOCK = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.DOTALL)


def strip_think(text: str | None) -> str:
    """``text`` without its reasoning: ``<think>...</think>`` blocks, a leading part that
    ends in a lone ``</think>``, and an unterminated trailing ``<think>...``; stripped of
    surrounding whitespace. ``None`` gives ``""``."""
    if not text:
        return ""
    if "think>" not in text:  # fast path: most replies of instruct models
        return text.strip()
    out = _THINK_BLOCK.sub("", text)
    if "</think>" in out:
        out = _LEADING_UNTIL_CLOSE.sub("", out, count=1)
        out = out.replace("</think>", "")
    out = _UNTERMINATED_OPEN.sub("", out)
    return out.strip()


def extract_think(text: str | None) -> str:
    """The reasoning inside ``text`` (all think blocks joined by a blank line), or ``""``."""
    if not text or "think>" not in text:
        return ""
    parts: list[str] = []
    rest = text
    if "</think>" in rest and ("<think>" not in rest or rest.index("</think>") < rest.index("<think>")):
        head, _, rest = rest.partition("</think>")
        parts.append(head)
    while "<think>" in rest:
        _, _, after = rest.partition("<think>")
        inner, closed, rest = after.partition("</think>")
        parts.append(inner)
        if not closed:
            break
    return "\n\n".join(p.strip() for p in parts if p.strip())


@dataclass(slots=True)
class ToolCall:
    """One requested tool call, already decoded.

    ``arguments`` is the decoded object (``{}`` for none) or ``None`` when it could not be
    decoded; then ``error`` is ``"invalid_json"`` or ``"invalid_args"`` and
    ``error_message`` says why. ``raw_arguments`` is always the JSON string form (what goes
    back into the history). ``source`` is ``"native"``, ``"content"`` (fallback parser) or
    ``"reasoning"`` (found in the reasoning field, see :func:`reasoning_tool_calls`).
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    error: str | None = None
    error_message: str | None = None
    index: int = 0
    source: str = "native"

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls[i]`` form, as it belongs in the assistant message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.raw_arguments},
        }

    def as_dict(self) -> ToolCallRecord:
        """A JSON-ready record (for run logs)."""
        out: ToolCallRecord = {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "raw_arguments": self.raw_arguments,
        }
        if self.error is not None:
            out["error"] = {"type": self.error, "message": self.error_message}
        if self.source != "native":
            out["source"] = self.source
        return out


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str, str | None, str | None]:
    """Decode tool-call arguments given as a JSON string, an object or ``None``.

    Returns ``(arguments, raw_json_string, error_type, error_message)``; on success the
    error fields are ``None``.
    """
    if raw is None:
        return {}, "{}", None, None
    if isinstance(raw, Mapping):
        obj = dict(raw)
        try:
            return obj, orjson.dumps(obj).decode(), None, None
        except TypeError as exc:  # not JSON-serializable values (never from a server)
            return None, repr(obj), "invalid_args", f"arguments are not JSON: {exc}"
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", "replace")
    if not isinstance(raw, str):
        text = orjson.dumps(raw, default=repr).decode()
        return None, text, "invalid_args", f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        # A call streamed without any arguments fragment: echo it back as "{}" (older
        # vLLM and Ollama reject "" as the arguments of a past call).
        return {}, "{}", None, None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, raw, "invalid_json", f"arguments are not valid JSON ({exc}): {_excerpt(raw)}"
    if value is None:
        return {}, raw, None, None
    if not isinstance(value, dict):
        return None, raw, "invalid_args", (
            f"arguments must be a JSON object, got {type(value).__name__}: {_excerpt(raw)}"
        )
    return value, raw, None, None


def _excerpt(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _make_call(
    *, call_id: str, name: Any, raw_args: Any, index: int, source: str
) -> ToolCall:
    arguments, raw_text, error, message = parse_arguments(raw_args)
    if not isinstance(name, str) or not name.strip():
        # Keep the call (so its id gets an answer) but mark it: the loop reports unknown_tool.
        error = error or "invalid_args"
        message = message or f"tool call has no function name (got {name!r})"
        name = "" if not isinstance(name, str) else name
    return ToolCall(
        id=call_id,
        name=name.strip(),
        arguments=arguments,
        raw_arguments=raw_text,
        error=error,
        error_message=message,
        index=index,
        source=source,
    )


def parse_message_tool_calls(
    raw_calls: Iterable[Any] | None, *, new_id: Callable[[], str]
) -> list[ToolCall]:
    """Decode an OpenAI ``message.tool_calls`` list (from JSON or an assembled stream).

    Entries that are not objects become calls with ``error="invalid_args"`` so every
    entry still gets an answer. Missing ids get ``new_id()``.
    """
    calls: list[ToolCall] = []
    if not raw_calls:
        return calls
    for index, entry in enumerate(raw_calls):
        if not isinstance(entry, Mapping):
            calls.append(ToolCall(
                id=new_id(), name="", arguments=None, raw_arguments=_safe_json(entry),
                error="invalid_args", error_message=f"tool call entry is not an object: {entry!r}"[:300],
                index=index,
            ))
            continue
        function = entry.get("function")
        if not isinstance(function, Mapping):
            # Some servers flatten {"name", "arguments"} into the entry itself.
            function = entry
        call_id = entry.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = new_id()
        raw_args = function.get("arguments", function.get("parameters"))
        calls.append(_make_call(
            call_id=call_id, name=function.get("name"), raw_args=raw_args, index=index,
            source="native",
        ))
    return calls


def _safe_json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=repr).decode()
    except TypeError:
        return repr(value)


def _iter_content_candidates(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, body, syntax) spans in ``text`` that may hold a tool call; ``syntax``
    is ``"tool_call"`` (a ``<tool_call>`` block), ``"function"`` (a bare Llama 3.1 /
    Qwen XML ``<function=...>``), ``"mistral"`` or ``"json"``."""
    found = False
    for m in _TOOL_CALL_BLOCK.finditer(text):
        found = True
        yield m.start(), m.end(), m.group(1), "tool_call"
    if found:
        return
    for m in _XML_FUNCTION.finditer(text):
        found = True
        yield m.start(), m.end(), m.group(0), "function"
    if found:
        return
    for m in _MISTRAL.finditer(text):
        found = True
        yield m.start(), m.end(), m.group(1).strip(), "mistral"
    if found:
        return
    if _PYTHON_TAG in text:
        start = text.index(_PYTHON_TAG)
        yield start, len(text), text[start + len(_PYTHON_TAG):].strip(), "json"
        return
    for m in _PY_FENCE.finditer(text):
        found = True
        yield m.start(), m.end(), m.group(1).strip(), "pythonic"
    if found:
        return
    if _PYTHONIC.match(text):
        yield 0, len(text), text.strip(), "pythonic"
        return
    for m in _FENCED_BLOCK.finditer(text):
        found = True
        yield m.start(), m.end(), m.group(1).strip(), "json"
    if found:
        return
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        start = text.index("{")
        yield start, text.rindex("}") + 1, stripped, "json"


def _decode_call_object(candidate: str) -> list[dict[str, Any]]:
    try:
        value = orjson.loads(candidate)
    except orjson.JSONDecodeError:
        return []
    items = value if isinstance(value, list) else [value]
    return [
        item for item in items
        if isinstance(item, dict) and isinstance(item.get("name"), str)
        and ("arguments" in item or "parameters" in item or len(item) == 1)
    ]


def _xml_value(raw: str) -> Any:
    """A parameter value of the XML forms: the template puts it between newlines; JSON
    containers and numbers are decoded (boxes arrive as ``[x, y]``), anything else is
    text, as Qwen3-Coder's own parser does without a schema."""
    value = raw[1:] if raw.startswith("\n") else raw
    value = value[:-1] if value.endswith("\n") else value
    probe = value.strip()
    if probe[:1] in ("[", "{") or re.fullmatch(r"-?\d+(?:\.\d+)?", probe or "x"):
        try:
            return orjson.loads(probe)
        except orjson.JSONDecodeError:
            pass
    if probe in ("true", "false", "null"):
        return orjson.loads(probe)
    return value


def _decode_xml_function(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in _XML_FUNCTION.finditer(text):
        name, body = m.group(1).strip(), m.group(2)
        params = {k.strip(): _xml_value(v) for k, v in _XML_PARAMETER.findall(body)}
        if not params and body.strip().startswith("{"):
            # Llama 3.1's <function=NAME>{json}</function>.
            try:
                decoded = orjson.loads(body.strip())
            except orjson.JSONDecodeError:
                decoded = None
            if not isinstance(decoded, dict):
                out.append({"name": name, "arguments": body.strip()})
                continue
            params = decoded
        out.append({"name": name, "arguments": params})
    return out


def _decode_pythonic(body: str) -> list[dict[str, Any]]:
    """``[name(key=literal, ...), ...]`` or ``name(...)`` -> call objects (literals only:
    :func:`ast.literal_eval` per argument, nothing is evaluated)."""
    try:
        node = ast.parse(body, mode="eval").body
    except SyntaxError:
        return []
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, ast.Call) or item.args:
            return []
        func, parts = item.func, []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return []
        parts.append(func.id)
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in item.keywords if kw.arg is not None}
        except (ValueError, SyntaxError, TypeError):
            return []
        # Dotted names (default_api.click in Gemma's examples): the tool is the last part.
        out.append({"name": parts[0], "arguments": arguments})
    return out


def _decode_block(body: str, syntax: str) -> list[dict[str, Any]]:
    """The call objects (``name`` + ``arguments``) in one candidate span."""
    if syntax == "pythonic":
        return _decode_pythonic(body)
    if syntax == "mistral":
        m = _MISTRAL_ARGS.match(body)
        if m:
            # The arguments string is decoded by _make_call (a bad one becomes invalid_json).
            return [{"name": m.group(1), "arguments": m.group(2).strip()}]
        return _decode_call_object(body)
    if syntax in ("tool_call", "function") and "<function=" in body:
        return _decode_xml_function(body)
    if syntax == "tool_call" and "<arg_key>" in body:
        name = body.split("<arg_key>", 1)[0].strip()
        args = {k.strip(): _xml_value(v.strip()) for k, v in _GLM_ARG.findall(body)}
        return [{"name": name, "arguments": args}] if name else []
    if syntax == "tool_call" and not body.lstrip().startswith(("{", "[")):
        # GLM-4.5 with no arguments: the name alone.
        name = body.strip()
        if re.fullmatch(r"[\w.\-]+", name):
            return [{"name": name, "arguments": {}}]
    return _decode_call_object(body)


def split_content_tool_calls(
    content: str | None, *, new_id: Callable[[], str], source: str = "content",
) -> tuple[str, list[ToolCall]]:
    """Find tool calls written into the content (fallback for models without a tool parser).

    Returns ``(content_without_the_call_blocks, calls)``; with no calls found the content
    comes back unchanged. Think blocks are ignored (a call "considered" inside reasoning
    is not a call) -- except when nothing but the think block was written and it holds
    a call: that is a call the server left in the reasoning (see
    :func:`reasoning_tool_calls`). ``source`` marks the calls (``"content"`` or
    ``"reasoning"``).
    """
    if not content:
        return content or "", []
    visible = strip_think(content) if "think>" in content else content
    if not visible and "think>" in content:
        think = extract_think(content)
        _, in_think = split_content_tool_calls(think, new_id=new_id, source="reasoning")
        if in_think:
            return "", in_think
        return content, []
    if ("{" not in visible and not any(marker in visible for marker in CALL_MARKERS)
            and not _PYTHONIC.match(visible) and "```" not in visible):
        return content, []
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    for start, end, candidate, syntax in _iter_content_candidates(visible):
        objects = _decode_block(candidate, syntax)
        if not objects and syntax in ("tool_call", "function", "mistral"):
            # A call block whose body does not decode: still a call, but broken.
            calls.append(ToolCall(
                id=new_id(), name=_guess_name(candidate), arguments=None,
                raw_arguments=candidate, error="invalid_json",
                error_message=f"tool call is not valid JSON: {_excerpt(candidate)}",
                index=len(calls), source=source,
            ))
            spans.append((start, end))
            continue
        for obj in objects:
            raw_args = obj.get("arguments", obj.get("parameters"))
            calls.append(_make_call(
                call_id=new_id(), name=obj["name"], raw_args=raw_args, index=len(calls),
                source=source,
            ))
        if objects:
            spans.append((start, end))
    if not calls:
        return content, []
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(visible[last:start])
        last = end
    pieces.append(visible[last:])
    remaining = "".join(pieces).strip()
    if visible is not content:
        think = extract_think(content)
        remaining = f"<think>{think}</think>\n{remaining}".rstrip() if think else remaining
    return remaining, calls


def reasoning_tool_calls(
    content: str | None, reasoning: str | None, *, new_id: Callable[[], str]
) -> list[ToolCall]:
    """Calls written in the reasoning field when the content holds nothing visible.

    LM Studio with Qwen3.6 (lmstudio-bug-tracker #2045) and llama.cpp with some
    templates leave the model's call inside ``reasoning_content``: the reply carries an
    empty content and no native call. Only then is the reasoning read -- a model that
    answers in its content was only thinking about a call.
    """
    if not reasoning or strip_think(content):
        return []
    if not any(marker in reasoning for marker in CALL_MARKERS):
        return []  # prose reasoning: bare JSON in it is an example, not a call
    return split_content_tool_calls(reasoning, new_id=new_id, source="reasoning")[1]


def _guess_name(candidate: str) -> str:
    m = re.search(r'"name"\s*:\s*"([^"]+)"', candidate) or re.search(r"<function=([^>\n]+)>", candidate)
    return m.group(1) if m else ""


def parse_content_tool_calls(content: str | None, *, new_id: Callable[[], str]) -> list[ToolCall]:
    """Only the calls of :func:`split_content_tool_calls`."""
    return split_content_tool_calls(content, new_id=new_id)[1]

