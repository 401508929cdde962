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

from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolError,
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

_POINT = re.compile(r"<point>\s*(-?\d+(?:\.\d+)?)\s+(-?\d+(?:\.\d+)?)\s*</point>")
_BOX_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>")
_TYPE_CONTENT = re.compile(r"type\(content='(.*?)'\)", re.DOTALL)
_FINISHED_CONTENT = re.compile(r"finished\(content='(.*?)'\)", re.DOTALL)


def _convert_points(text: str) -> str:
    """``<point>x y</point>`` -> ``(x,y)`` (ui_tars ``convert_point_to_coordinates``)."""
    text = text.replace("[EOS]", "")
    return _POINT.sub(lambda m: f"({m.group(1)},{m.group(2)})", text).strip()


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


def _numbers(box: str) -> list[float]:
    cleaned = (
        _BOX_TOKENS.sub("", box).replace("(", "").replace(")", "").replace("[", "").replace("]", "")
    )
    parts = [p for p in re.split(r"[,\s]+", cleaned.strip()) if p]
    return [float(p) for p in parts]


def parse_uitars(text: str) -> list[UitarsAction]:
    """The actions of one UI-TARS reply (``[]`` when it has no ``Action:``).

    Raises ValueError for an ``Action:`` that cannot be read (the caller tells the model).
    """
    text = text.strip()
    if "<point>" in text:
        text = _convert_points(text)
    text = _BOX_TOKENS.sub("", text)
    text = text.replace("start_point=", "start_box=").replace("end_point=", "end_box=")
    text = re.sub(r"(?<![\w_])point=", "start_box=", text)
    if "Action:" not in text:
        return []
    if text.startswith("Reflection:"):
        m = re.search(r"Reflection: (.+?)Action_Summary: (.+?)(?=\s*Action: |$)", text, re.DOTALL)
        reflection, thought = (m.group(1).strip(), m.group(2).strip()) if m else (None, None)
    else:
        pattern = (
            r"Action_Summary: (.+?)(?=\s*Action: |$)"
            if text.startswith("Action_Summary:")
            else r"Thought: (.+?)(?=\s*Action: |$)"
        )
        m = re.search(pattern, text, re.DOTALL)
        reflection, thought = None, (m.group(1).strip() if m else None)
    action_text = text.split("Action:")[-1].strip()
    actions: list[UitarsAction] = []
    for raw in action_text.split(")\n\n"):
        raw = raw.strip()
        if not raw:
            continue
        if "type(content" in raw or "finished(content" in raw:
            # The content may hold quotes and newlines the model did not escape.
            if not raw.endswith(")"):
                raw += ")"
            head = "type" if "type(content" in raw else "finished"
            content_re = _TYPE_CONTENT if head == "type" else _FINISHED_CONTENT
            m = content_re.search(raw)
            if m is None:
                raise ValueError(f"cannot read the content of {raw!r}")
            content = _escape_single_quotes(m.group(1))
            raw = f"{head}(content='{content}')"
        if not raw.endswith(")"):
            raw += ")"
        parsed = _parse_call(raw.replace("\n", "\\n").lstrip())
        if parsed is None:
            raise ValueError(f"cannot read the action {raw!r}: expected name(key='value', ...)")
        name, args = parsed
        inputs: dict[str, Any] = {}
        for key, value in args.items():
            if value == "":
                continue
            value = value.lstrip()
            if "start_box" in key or "end_box" in key:
                try:
                    numbers = _numbers(value)
                except ValueError:
                    raise ValueError(f"{key} of {name} is not a point: {value!r}") from None
                if len(numbers) not in (2, 4):
                    raise ValueError(
                        f"{key} of {name} must be (x,y) or (x1,y1,x2,y2), got {value!r}"
                    )
                inputs[key.strip()] = numbers
            else:
                inputs[key.strip()] = value
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
        raise ToolError("missing_box", f"{key}='(x,y)' is required")
    return [float(v) for v in value]


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
            raise ToolError(
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
        raise ToolError("missing_key", "hotkey(key='ctrl c') needs the keys, split by spaces")
    combo = "+".join(key.split())
    _combo(combo)
    return ToolOutcome(ok_payload(key=combo), action=KeyPress(combo))


async def _type(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    content = args.get("content")
    if not isinstance(content, str) or content == "":
        raise ToolError("empty_text", "type(content='...') needs the text")
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
        raise ToolError("text_too_long", f"content has {len(text)} characters; at most {ctx.max_type_chars} per action")
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
