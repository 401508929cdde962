"""The ``uitars`` tool sets: UI-TARS's own text protocol, parsed by a port of its parser.

UI-TARS (bytedance/UI-TARS) does not call functions: it answers ::

    Thought: The search box is at the top.
    Action: click(start_box='(960,296)')

and is trained on that action space (the README's COMPUTER_USE prompt, sent here as the
system prompt). :func:`parse_uitars` ports ``ui_tars/action_parser.py``
(``parse_action_to_structure_output`` and ``parse_action``): ``Thought:`` /
``Reflection:`` / ``Action_Summary:`` heads, several actions split by ``)\\n\\n``,
``type(content='...')`` with quotes inside, ``<point>x y</point>`` and ``point=`` /
``start_point=`` / ``end_point=`` rewritten to boxes, ``<|box_start|>``/``<|box_end|>``
tokens dropped. The call text is read with :func:`ast.parse` (literals only, nothing is
evaluated), as the original does.

It also reads what ByteDance's current parsers (bytedance/UI-TARS-desktop:
``@ui-tars/action-parser``, the GUI agent's DefaultActionParser, agent-tars's browser
parser) accept from a model that slips: ``<bbox>x1 y1 x2 y2</bbox>``, a full-width
``Action：``, a reply with no ``Action:`` line (its first call of a known action),
``type(text=...)``, an O1 reply's trailing ``</Output>``, ``<point>x y<point>`` or a
``<point>`` never closed, a missing closing quote or parenthesis and a missing comma
between arguments (read by a small scanner when :func:`ast.parse` refuses the text).

Coordinates differ by version, so there are two tool sets:

``uitars`` (UI-TARS-1.5 and later, the default)
    absolute pixels on the *smart-resized* image: the model sees the screenshot resized
    by Qwen2.5-VL's ``smart_resize`` (sides rounded to multiples of 28, pixel count kept
    within 100*28*28..16384*28*28). A point ``(x, y)`` is ``x / W' , y / H'`` of the
    image (``W' x H'`` the smart-resized size of the image deskpilot sent), and maps to
    the physical pixel ``left + floor(x * width / W')`` of the working area.
``uitars-1.0``
    relative coordinates 0..1000 (``<|box_start|>(x,y)<|box_end|>``): exactly
    deskpilot's 0..1000 contract.

A box ``(x1,y1,x2,y2)`` acts at its centre. ``finished(content=...)`` ends the run
``answered``; ``call_user()`` ends it ``failed`` (the model asks for a human).
"""

from __future__ import annotations

import ast
import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from deskpilot._errors import ArgumentError
from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolKind,
    ToolOutcome,
    ToolSet,
    _combo,
    make_toolset,
    ok_payload,
    typing,
)
from deskpilot.agent.tools._protocol import TextCalls
from deskpilot.geometry import Mapping

__all__ = [
    "IMAGE_FACTOR",
    "MAX_PIXELS",
    "MIN_PIXELS",
    "UITARS_REMINDER",
    "UitarsAction",
    "parse_uitars",
    "smart_resize",
    "to_physical",
    "uitars_calls",
    "uitars_system_prompt",
    "uitars_toolset",
]

# ui_tars/action_parser.py constants.
IMAGE_FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_RATIO = 200

_SCROLL_NOTCHES = 5  # the original's pyautogui code scrolls 5 clicks per scroll action
_WAIT_S = 5.0  # "wait() #Sleep for 5s and take a screenshot to check for any changes."


@dataclass(slots=True)
class UitarsAction:
    """One parsed action: its type, its inputs (boxes as 2 or 4 numbers in the model's own
    coordinates, other values as text) and the reply's thought."""

    action_type: str
    inputs: dict[str, Any] = field(default_factory=dict)
    thought: str | None = None
    reflection: str | None = None


# -- smart_resize (qwen_vl_utils, as ui_tars/action_parser.py has it) ----------------------------


def _round_by_factor(number: float, factor: int) -> int:
    return round(number / factor) * factor


def _ceil_by_factor(number: float, factor: int) -> int:
    return math.ceil(number / factor) * factor


def _floor_by_factor(number: float, factor: int) -> int:
    return math.floor(number / factor) * factor


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """``(height, width)`` the model's processor resizes an image to (multiples of 28)."""
    if min(height, width) <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_RATIO}, got {width}x{height}"
        )
    h_bar = max(factor, _round_by_factor(height, factor))
    w_bar = max(factor, _round_by_factor(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = _floor_by_factor(height / beta, factor)
        w_bar = _floor_by_factor(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by_factor(height * beta, factor)
        w_bar = _ceil_by_factor(width * beta, factor)
    return h_bar, w_bar


# -- the parser -----------------------------------------------------------------------------------

# ``<point>x y</point>``; also ``<point>x y<point>`` (the slash forgotten) and ``<point>x y``
# (the closing tag lost with the quote): bytedance/UI-TARS-desktop's parser strips the tags
# whatever follows (multimodal/gui-agent/action-parser/src/ActionParserHelper.ts,
# ``parseCoordinates``; multimodal/agent-tars/core/src/environments/local/browser/
# browser-gui-agent.ts, ``pointPatterns``).
_POINT = re.compile(r"<point>\s*(-?\d+(?:\.\d+)?)[\s,]+(-?\d+(?:\.\d+)?)\s*(?:</?point>)?")
# ``<bbox>x1 y1 x2 y2</bbox>`` (ActionParserHelper.ts, ``parseRoughFromCallString``).
_BBOX = re.compile(r"<bbox>([^<]*)</bbox>")
_BOX_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>")
# ``Action:`` or the full-width ``Action：`` (packages/ui-tars/action-parser/src/actionParser.ts
# splits on /Action[:：]/).
_ACTION_HEAD = re.compile(r"Action[:：]")
# type/finished with their text: ``content=`` or ``text=`` (the desktop parser maps ``text``
# onto ``content``: multimodal/gui-agent/shared/src/utils/actions.ts, ``unifyActionInputName``).
_CONTENT_CALL = re.compile(r"^(type|finished)\(\s*(?:content|text)\s*=\s*'(.*?)'\)", re.DOTALL)
_CONTENT_UNCLOSED = re.compile(r"^(type|finished)\(\s*(?:content|text)\s*=\s*'(.*?)\)?$", re.DOTALL)
_CONTENT_HEAD = re.compile(r"^(type|finished)\(\s*(?:content|text)\s*=")
#: Argument names the desktop parser reads as another (``unifyActionInputName``).
_INPUT_NAMES = {"text": "content"}
#: Actions a reply without ``Action:`` may name (the tool sets' own names).
_ACTION_NAMES = (
    "click",
    "left_single",
    "left_double",
    "right_single",
    "drag",
    "select",
    "mouse_move",
    "hover",
    "hotkey",
    "press",
    "type",
    "scroll",
    "wait",
    "finished",
    "call_user",
)
# The desktop parser's FallbackFormatParser finds the first call in a reply without
# ``Action:`` (\w+\((?:[^()"']|"[^"]*"|'[^']*'|\([^()]*\))*\)); here only a call of a known
# action counts, so prose such as "print(x)" stays a reply without an action.
_BARE_CALL = re.compile(
    r"(?<![\w.])(?:" + "|".join(_ACTION_NAMES) + r")\((?:[^()\"']|\"[^\"]*\"|'[^']*'|\([^()]*\))*\)"
)
_LOOSE_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")
_LOOSE_KEY = re.compile(r"[\s,]*([A-Za-z_]\w*)\s*=\s*")


def _convert_points(text: str) -> str:
    """``<point>x y</point>`` -> ``(x,y)`` (ui_tars ``convert_point_to_coordinates``)."""
    text = text.replace("[EOS]", "")
    return _POINT.sub(lambda m: f"({m.group(1)},{m.group(2)})", text).strip()


def _convert_bboxes(text: str) -> str:
    """``<bbox>x1 y1 x2 y2</bbox>`` -> ``(x1,y1,x2,y2)``."""
    return _BBOX.sub(lambda m: "(" + ",".join(m.group(1).replace(",", " ").split()) + ")", text)


def _escape_single_quotes(text: str) -> str:
    return re.sub(r"(?<!\\)'", r"\\'", text)


def _parse_call(action: str) -> tuple[str, dict[str, str]] | None:
    """``name(key='value', ...)`` -> ``(name, {key: value})`` (ui_tars ``parse_action``)."""
    try:
        node = ast.parse(action, mode="eval")
    except SyntaxError:
        return None
    call = node.body
    if not isinstance(call, ast.Call):
        return None
    if isinstance(call.func, ast.Name):
        name = call.func.id
    elif isinstance(call.func, ast.Attribute):
        name = call.func.attr
    else:
        return None
    args: dict[str, str] = {}
    for kw in call.keywords:
        if kw.arg is None or not isinstance(kw.value, ast.Constant):
            return None
        args[kw.arg] = str(kw.value.value)
    return name, args


def _loose_value(body: str, pos: int) -> tuple[str, int]:
    """The value starting at ``pos`` and where it ends: a quoted string (its closing quote
    may be missing: then it runs to the end, less the call's closing parenthesis), or bare
    text up to the next argument (parentheses balanced)."""
    if pos < len(body) and body[pos] in "'\"":
        quote, i, out = body[pos], pos + 1, []
        while i < len(body):
            char = body[i]
            if char == "\\" and i + 1 < len(body):
                # \' and \" are the quote itself; other escapes stay text (\n: the tools read it).
                out.append(body[i + 1] if body[i + 1] in "'\"" else body[i : i + 2])
                i += 2
                continue
            if char == quote:
                return "".join(out), i + 1
            out.append(char)
            i += 1
        value = "".join(out).rstrip()
        return (value[:-1] if value.endswith(")") else value), len(body)
    depth, i = 0, pos
    while i < len(body):
        char = body[i]
        if char in "([":
            depth += 1
        elif char in ")]":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (char == "," or (char.isspace() and _LOOSE_KEY.match(body, i))):
            break
        i += 1
    return body[pos:i].strip(), i


def _parse_call_loosely(action: str) -> tuple[str, dict[str, str]] | None:
    """``name(key='value' ...)`` as a model that slipped writes it: a closing quote or
    parenthesis missing, no comma between arguments. What bytedance/UI-TARS-desktop's
    agent-tars reads (multimodal/agent-tars/core/src/environments/local/browser/
    browser-gui-agent.ts ``parseAction``; its tests/browser/parse-action.test.ts: "missing
    quote", ``drag(start_point='...' end_point='...')``). None when it is not a call."""
    head = _LOOSE_HEAD.match(action)
    if head is None:
        return None
    body = action[head.end() :].rstrip()
    args: dict[str, str] = {}
    pos = 0
    while (key := _LOOSE_KEY.match(body, pos)) is not None:
        quoted = body[key.end() : key.end() + 1] in ("'", '"')
        value, pos = _loose_value(body, key.end())
        if not value and not quoted:
            return None  # ``start_box=)``: a name with no value at all
        args[key.group(1)] = value
    if body[pos:].strip(" ,\t") not in ("", ")"):
        return None
    return head.group(1), args


def _shown(text: str) -> str:
    """``repr(text)``, cut short: the error goes back to the model, bounded."""
    shown = repr(text)
    return shown if len(shown) <= 60 else f"{shown[:40]}...({len(text)} characters)"


def _numbers(box: str) -> list[float]:
    cleaned = _BOX_TOKENS.sub("", box)
    cleaned = re.sub(r"</?(?:point|bbox)>", " ", cleaned)
    cleaned = cleaned.replace("(", "").replace(")", "").replace("[", "").replace("]", "")
    parts = [p for p in re.split(r"[,\s]+", cleaned.strip()) if p]
    numbers = [float(p) for p in parts]
    if not all(math.isfinite(n) for n in numbers):
        # nan, inf, 1e1000 and a 400-digit number (float() reads it as inf) are refused:
        # clamped, they would click the screen's edge. trycua/cua's parse_box_coordinates
        # returns None for them and performs nothing
        # (libs/python/agent/tests/test_uitars_coordinate_security.py).
        raise ValueError(f"{_shown(box)} has a coordinate that is not a finite number")
    return numbers


def _thought(text: str) -> tuple[str | None, str | None]:
    """``(reflection, thought)`` of a reply (ui_tars ``parse_action_to_structure_output``;
    ``<Thought>...</Thought>`` as the desktop parser's O1FormatParser reads it)."""
    until = r"(?=\s*Action[:：]|$)"
    if text.startswith("Reflection:"):
        m = re.search(r"Reflection: (.+?)Action_Summary: (.+?)" + until, text, re.DOTALL)
        return (m.group(1).strip(), m.group(2).strip()) if m else (None, None)
    if "<Thought>" in text:
        m = re.search(r"<Thought>\s*(.*?)\s*</Thought>", text, re.DOTALL)
        return None, (m.group(1).strip() if m else None)
    pattern = r"Action_Summary: (.+?)" if text.startswith("Action_Summary:") else r"Thought: (.+?)"
    m = re.search(pattern + until, text, re.DOTALL)
    return None, (m.group(1).strip() if m else None)


def _action_text(text: str) -> str | None:
    """The reply's action part: after the last ``Action:`` (or ``Action：``), up to an O1
    reply's ``</Output>``; a reply without ``Action:`` is read for its first call of a known
    action (None when it has none)."""
    if _ACTION_HEAD.search(text) is None:
        bare = _BARE_CALL.search(text)
        return bare.group(0) if bare is not None else None
    action_text = _ACTION_HEAD.split(text)[-1]
    # O1 replies end with </Output> (multimodal/gui-agent/action-parser/src/FomatParsers.ts,
    # O1FormatParser: /Action:\s*([\s\S]*?)\s*<\/Output>/).
    return action_text.split("</Output>")[0].strip()


def _read_call(raw: str) -> tuple[str, dict[str, str]]:
    """One action's name and arguments, as ui_tars reads them, then as a slipping model
    writes them; ValueError when it is neither."""
    head = _CONTENT_HEAD.match(raw)
    if head is not None:
        # The content may hold quotes and newlines the model did not escape.
        if not raw.endswith(")"):
            raw += ")"
        m = _CONTENT_CALL.search(raw) or _CONTENT_UNCLOSED.search(raw)
        if m is None:
            raise ValueError(f"cannot read the content of {raw!r}")
        raw = f"{m.group(1)}(content='{_escape_single_quotes(m.group(2))}')"
    if not raw.endswith(")"):
        raw += ")"
    source = raw.replace("\n", "\\n").lstrip()
    parsed = _parse_call(source) or _parse_call_loosely(source)
    if parsed is None:
        raise ValueError(f"cannot read the action {raw!r}: expected name(key='value', ...)")
    return parsed


def parse_uitars(text: str) -> list[UitarsAction]:
    """The actions of one UI-TARS reply (``[]`` when it names none).

    Raises ValueError for an action that cannot be read (the caller tells the model).
    """
    text = text.strip()
    if "<point>" in text:
        text = _convert_points(text)
    if "<bbox>" in text:
        text = _convert_bboxes(text)
    text = _BOX_TOKENS.sub("", text)
    text = text.replace("start_point=", "start_box=").replace("end_point=", "end_box=")
    text = re.sub(r"(?<![\w_])point=", "start_box=", text)
    action_text = _action_text(text)
    if action_text is None:
        return []
    reflection, thought = _thought(text)
    actions: list[UitarsAction] = []
    for raw in action_text.split(")\n\n"):
        raw = raw.strip()
        if not raw:
            continue
        name, args = _read_call(raw)
        inputs: dict[str, Any] = {}
        for key, value in args.items():
            if value == "":
                continue
            key = _INPUT_NAMES.get(key.strip(), key.strip())
            value = value.lstrip()
            if "start_box" in key or "end_box" in key:
                try:
                    numbers = _numbers(value)
                except ValueError as exc:
                    raise ValueError(f"{key} of {name} is not a point: {exc}") from None
                if len(numbers) not in (2, 4):
                    raise ValueError(
                        f"{key} of {name} must be (x,y) or (x1,y1,x2,y2), got {value!r}"
                    )
                inputs[key] = numbers
            else:
                inputs[key] = value
        actions.append(UitarsAction(name, inputs, thought, reflection))
    return actions


def uitars_calls(text: str, new_id: Callable[[], str]) -> list[ToolCall]:
    """The reply's actions as tool calls (``source="uitars"``); an unreadable ``Action:``
    becomes one call with ``error="invalid_args"`` so the model is told what was wrong."""
    try:
        actions = parse_uitars(text)
    except ValueError as exc:
        return [
            ToolCall(
                id=new_id(),
                name="",
                arguments=None,
                raw_arguments=text[-300:],
                error="invalid_args",
                error_message=f"{exc}. Write one action as in the action space, e.g. "
                "Action: click(start_box='(x,y)')",
                source="uitars",
            )
        ]
    calls = []
    for index, action in enumerate(actions):
        calls.append(
            ToolCall(
                id=new_id(),
                name=action.action_type,
                arguments=dict(action.inputs),
                raw_arguments=orjson.dumps(action.inputs).decode(),
                index=index,
                source="uitars",
            )
        )
    return calls


# -- coordinates ------------------------------------------------------------------------------------


def to_physical(mapping: Mapping, numbers: list[float], version: str) -> tuple[int, int]:
    """A UI-TARS point or box (its centre) -> the physical pixel, per version (module doc)."""
    if not all(math.isfinite(n) for n in numbers):
        raise ValueError(f"UI-TARS coordinates must be finite numbers, got {numbers!r}")
    if len(numbers) == 4:
        x, y = (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    else:
        x, y = numbers[0], numbers[1]
    a = mapping.area
    if version == "1.0":
        fx, fy = x / 1000.0, y / 1000.0
    else:
        height, width = smart_resize(mapping.image_height, mapping.image_width)
        fx, fy = x / width, y / height
    fx, fy = min(1.0, max(0.0, fx)), min(1.0, max(0.0, fy))
    return (
        a.left + min(a.width - 1, math.floor(fx * a.width)),
        a.top + min(a.height - 1, math.floor(fy * a.height)),
    )


#: What the model is told after a reply with no action that could be run.
UITARS_REMINDER = (
    "Your last reply had no action that could be run. Answer in the output format: a line "
    "'Thought: ...' and a line 'Action: ...' with one action of the action space; when the "
    "task is complete, Action: finished(content='...')."
)


# -- the tools ----------------------------------------------------------------------------------------


def _box_arg(args: dict[str, Any], key: str) -> list[float]:
    value = args.get(key)
    if not isinstance(value, list) or len(value) not in (2, 4):
        raise ArgumentError("missing_box", f"{key}='(x,y)' is required")
    numbers = [float(v) for v in value]
    if not all(math.isfinite(n) for n in numbers):
        raise ArgumentError("invalid_box", f"{key} must hold finite numbers, got {numbers!r}")
    return numbers


def _clicker(
    button: Literal["left", "right", "middle"], count: int, version: str
) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        x, y = to_physical(ctx.mapping, _box_arg(args, "start_box"), version)
        return ToolOutcome(
            ok_payload(point=list(ctx.mapping.physical_to_norm(x, y))), action=Click((x, y), button, count)
        )

    return run


def _mover(version: str) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        x, y = to_physical(ctx.mapping, _box_arg(args, "start_box"), version)
        return ToolOutcome(ok_payload(point=list(ctx.mapping.physical_to_norm(x, y))), action=MoveMouse((x, y)))

    return run


def _dragger(version: str) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        start = to_physical(ctx.mapping, _box_arg(args, "start_box"), version)
        end = to_physical(ctx.mapping, _box_arg(args, "end_box"), version)
        return ToolOutcome(ok_payload(), action=Drag(start, end, style="uitars"))

    return run


def _scroller(version: str) -> Callable[[ToolContext, dict[str, Any]], Any]:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        direction = str(args.get("direction", "down")).strip().lower()
        steps = {
            "down": (_SCROLL_NOTCHES, 0),
            "up": (-_SCROLL_NOTCHES, 0),
            "right": (0, _SCROLL_NOTCHES),
            "left": (0, -_SCROLL_NOTCHES),
        }
        if direction not in steps:
            raise ArgumentError(
                "invalid_args", f"direction must be up, down, left or right, got {direction!r}"
            )
        dy, dx = steps[direction]
        where = (
            to_physical(ctx.mapping, _box_arg(args, "start_box"), version)
            if args.get("start_box") is not None
            else None
        )
        return ToolOutcome(ok_payload(direction=direction), action=Scroll(where, dy=dy, dx=dx, style="uitars"))

    return run


async def _hotkey(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    key = args.get("key", args.get("hotkey"))
    if not isinstance(key, str) or not key.strip():
        raise ArgumentError("missing_key", "hotkey(key='ctrl c') needs the keys, split by spaces")
    combo = "+".join(key.split())
    _combo(combo)
    return ToolOutcome(ok_payload(key=combo), action=KeyPress(combo))


async def _type(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    content = args.get("content")
    if not isinstance(content, str) or content == "":
        raise ArgumentError("empty_text", "type(content='...') needs the text")
    # The parser kept the model's escapes as text: \n means Enter, \' a quote.
    text = content.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')
    # UI-TARS's own executor types the text, then presses Enter for a trailing "\n": one
    # text whose last character is that Enter (every input backend types "\n" as the Enter
    # key, and the policy reads a newline in a text as Enter), so the one action the policy
    # checks is the whole of what is sent, and the record says it.
    submit = text.endswith("\n")
    if submit:
        text = text.rstrip("\n") + "\n"
    if len(text) > ctx.max_type_chars:
        raise ArgumentError("text_too_long", f"content has {len(text)} characters; at most {ctx.max_type_chars} per action")
    outcome = typing(text, action="type_text")
    if submit:
        outcome.payload["submitted"] = True
    return outcome


async def _wait(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    await asyncio.sleep(_WAIT_S)
    return ToolOutcome(ok_payload(seconds=_WAIT_S), observe=True)


async def _finished(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    content = str(args.get("content", "")).replace("\\n", "\n").replace("\\'", "'")
    return ToolOutcome(ok_payload(), final=("success", content))


async def _call_user(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        ok_payload(), final=("failure", "The model asked for the user's help (call_user).")
    )


_PROMPT = """\
You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='') #If you want to submit your input, use "\\n" at the end of `content`.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can parse the content in normal python string format.


## Note
- Use English in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.
- {security}

## User Instruction
The task is the first user message."""


def uitars_system_prompt() -> str:
    from deskpilot.agent._prompts import SECURITY_NOTE

    return _PROMPT.format(security=SECURITY_NOTE)


def _tool(
    name: str, run: Callable[[ToolContext, dict[str, Any]], Any], kind: ToolKind = "action"
) -> Tool:
    # Never sent to the server (a text protocol): the schema documents the inputs only.
    return Tool(
        name, f"UI-TARS action {name}", {"type": "object", "properties": {}}, run, kind=kind
    )


def uitars_toolset(version: str = "1.5") -> ToolSet:
    """The UI-TARS action space for ``version`` ``"1.5"`` (absolute pixels on the
    smart-resized image) or ``"1.0"`` (relative 0..1000)."""
    if version not in ("1.0", "1.5"):
        raise ValueError(f"UI-TARS version must be 1.0 or 1.5, got {version!r}")
    tools = [
        _tool("click", _clicker("left", 1, version)),
        _tool("left_single", _clicker("left", 1, version)),
        _tool("left_double", _clicker("left", 2, version)),
        _tool("right_single", _clicker("right", 1, version)),
        _tool("drag", _dragger(version)),
        _tool("select", _dragger(version)),
        _tool("mouse_move", _mover(version)),
        _tool("hover", _mover(version)),
        _tool("hotkey", _hotkey),
        _tool("press", _hotkey),
        _tool("type", _type),
        _tool("scroll", _scroller(version)),
        _tool("wait", _wait, "control"),
        _tool("finished", _finished, "control"),
        _tool("call_user", _call_user, "control"),
    ]
    name = "uitars" if version == "1.5" else "uitars-1.0"
    return make_toolset(
        name, tools, prompt=uitars_system_prompt(), protocol=TextCalls(uitars_calls, UITARS_REMINDER)
    )
