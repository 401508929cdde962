"""The ``qwen`` tool set: Qwen3-VL's own ``computer_use`` function.

Qwen3-VL is trained on one function, ``computer_use``, with an ``action`` key (the
QwenLM/Qwen3-VL cookbooks ``computer_use.ipynb`` and qwen-agent's function-call template;
the tool definition below is the cookbook's word for word: ``cookbooks/utils/
agent_function_call.py``, ``ComputerUse``, at the 1000x1000 resolution the cookbook gives
Qwen3-VL; what deskpilot does differently is said in its system prompt). The model
calls it natively (``tool_calls``) or writes ``<tool_call>{"name": "computer_use",
"arguments": {...}}</tool_call>`` into its content; both arrive here as one
:class:`~deskpilot.agent.client._toolcalls.ToolCall` (the client parses either form).

Actions: key, type, mouse_move, left_click, left_click_drag, right_click, middle_click,
double_click, triple_click, scroll, hscroll, wait, terminate, answer.

Coordinates: Qwen3-VL points in relative coordinates 0..1000 over the image it was shown
(the cookbook tells it "The screen's resolution is 1000x1000"). Its training data were
quantized with ``round(x / w * 1000)`` (QwenLM/Qwen3-VL
``qwen-vl-finetune/tools/process_bbox.ipynb``, ``convert_to_qwen2vl_format``), so a value
``g`` names the pixel at ``g / 1000`` of the image, the inverse the cookbook and
trycua/cua (``cua_agent/loops/generic_vlm.py``, ``_unnormalize_coordinate``) use:
``px = left + min(width - 1, round(g * width / 1000))`` on the working area of the image
(the same area and crop the 0..1000 contract of the other tool sets uses). So 0 is the
first pixel, 1000 the last (clamped onto it), 500 the middle; values outside 0..1000 are
clamped, non-finite ones refused. The payload reports the point back in the same grid
(``round(dx / width * 1000)``, the training data's formula), so the model reads its own
value back.

This differs from :meth:`deskpilot.geometry.Mapping.norm_to_physical`
(``floor(nx * width / 1000)``, whose inverse is the pixel centre's
``round((px + 0.5) * 1000 / width)``) by at most one pixel: that contract is deskpilot's
own, self-consistent for the tool sets whose prompt deskpilot writes, while Qwen3-VL's
grid is fixed by how its data were made.

``terminate`` (status success/failure) and ``answer`` (text) end the run with the
model's own status (:attr:`ToolOutcome.final`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeGuard

from deskpilot._errors import ArgumentError
from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSet,
    _combo,
    make_toolset,
    ok_payload,
    typing,
)
from deskpilot.geometry import Mapping

__all__ = ["ACTIONS", "QWEN_GRID", "grid_to_physical", "physical_to_grid", "qwen_system_prompt", "qwen_toolset"]

#: The far end of Qwen3-VL's relative coordinates on each axis (0..1000).
QWEN_GRID = 1000

ACTIONS = (
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
    "answer",
)

# The official definition, word for word: QwenLM/Qwen3-VL cookbooks/utils/agent_function_call.py
# (class ComputerUse, the qwen_agent tool the cookbook registers as "computer_use"), with the
# resolution the cookbook uses for Qwen3-VL (1000x1000). The model was trained on this text:
# deskpilot's differences (triple_click really triple-clicks) are said in the system prompt
# (prompts/qwen_system.txt), not by editing the trained schema.
_DESCRIPTION = """\
Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to wait and take successive screenshots to see the results of your actions. E.g. if you click on Firefox and a window doesn't open, try wait and taking another screenshot.
* The screen's resolution is 1000x1000.
* Whenever you intend to move the cursor to click on an element like an icon, you should consult a screenshot to determine the coordinates of the element before moving the cursor.
* If you tried clicking on a program or link but it failed to load, even after waiting, try adjusting your cursor position so that the tip of the cursor visually falls on the element that you want to click.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges."""

_ACTION_DESCRIPTION = """\
The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate on the screen.
* `right_click`: Click the right mouse button at a specified (x, y) pixel coordinate on the screen.
* `middle_click`: Click the middle mouse button at a specified (x, y) pixel coordinate on the screen.
* `double_click`: Double-click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `triple_click`: Triple-click the left mouse button at a specified (x, y) pixel coordinate on the screen (simulated as double-click since it's the closest action).
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `hscroll`: Performs a horizontal scroll (mapped to regular scroll).
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status.
* `answer`: Answer a question."""

PARAMETERS: dict[str, Any] = {
    "properties": {
        "action": {"description": _ACTION_DESCRIPTION, "enum": list(ACTIONS), "type": "string"},
        "keys": {"description": "Required only by `action=key`.", "type": "array"},
        "text": {
            "description": "Required only by `action=type` and `action=answer`.",
            "type": "string",
        },
        "coordinate": {
            "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) "
            "coordinates to move the mouse to.",
            "type": "array",
        },
        "pixels": {
            "description": "The amount of scrolling to perform. Positive values scroll up, negative values "
            "scroll down. Required only by `action=scroll` and `action=hscroll`.",
            "type": "number",
        },
        "time": {
            "description": "The seconds to wait. Required only by `action=wait`.",
            "type": "number",
        },
        "status": {
            "description": "The status of the task. Required only by `action=terminate`.",
            "type": "string",
            "enum": ["success", "failure"],
        },
    },
    "required": ["action"],
    "type": "object",
}

# Scroll amounts: Qwen's agents hand `pixels` to pyautogui.scroll, whose unit is one wheel
# notch ("click"); larger values (a model thinking in screen pixels) count 100 per notch.
_MAX_NOTCHES = 50


def qwen_system_prompt() -> str:
    from deskpilot.agent._prompts import SECURITY_NOTE, load_prompt

    return load_prompt("qwen_system").format(security=SECURITY_NOTE)


def grid_to_physical(mapping: Mapping, gx: float, gy: float) -> tuple[int, int]:
    """A Qwen3-VL point (0..1000 each, clamped) -> the physical pixel at ``g / 1000`` of the area."""
    a = mapping.area
    fx = min(float(QWEN_GRID), max(0.0, gx)) / QWEN_GRID
    fy = min(float(QWEN_GRID), max(0.0, gy)) / QWEN_GRID
    return (
        a.left + min(a.width - 1, round(fx * a.width)),
        a.top + min(a.height - 1, round(fy * a.height)),
    )


def physical_to_grid(mapping: Mapping, px: int, py: int) -> list[int]:
    """A physical pixel -> Qwen3-VL's 0..1000 point for it (``round(x / w * 1000)``, the
    quantization of its training data), what the payload reports back."""
    a = mapping.area
    return [
        max(0, min(QWEN_GRID, round((px - a.left) / a.width * QWEN_GRID))),
        max(0, min(QWEN_GRID, round((py - a.top) / a.height * QWEN_GRID))),
    ]


def _finite(value: Any) -> TypeGuard[int | float]:
    """A real number that a double holds finitely (``math.isfinite`` raises OverflowError
    for an integer too large for one: a 400-digit number is refused like ``inf``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


def _point(
    args: dict[str, Any], key: str = "coordinate", *, required: bool = True
) -> tuple[float, float] | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ArgumentError(
                "missing_box", f"{key} [x, y] (0..1000) is required for action={args.get('action')}"
            )
        return None
    if isinstance(value, str):
        # "(500, 412)" or "500,412": some servers' parsers pass the text through.
        parts = value.strip().strip("()[]").replace(" ", "").split(",")
        try:
            value = [float(p) for p in parts]
        except ValueError:
            raise ArgumentError("invalid_box", f"{key} must be [x, y], got {value!r}") from None
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(_finite(v) for v in value):
        # nan, inf and numbers too large for a double are refused, never clamped onto an
        # edge and clicked (trycua/cua performs nothing for them either).
        raise ArgumentError("invalid_box", f"{key} must be [x, y] with numbers 0..1000, got {_shown(value)}")
    return float(value[0]), float(value[1])


def _norm(mapping: Mapping, x: int, y: int) -> list[int]:
    return physical_to_grid(mapping, x, y)


def _notches(args: dict[str, Any]) -> int:
    value = args.get("pixels")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if not _finite(value) or value == 0:
        raise ArgumentError(
            "invalid_args", f"pixels must be a non-zero number (positive scrolls up), got {_shown(value)}"
        )
    size = abs(value)
    notches = size if size <= _MAX_NOTCHES else size / 100
    return int(math.copysign(max(1, min(_MAX_NOTCHES, round(notches))), value))


def _keys(args: dict[str, Any]) -> str:
    value = args.get("keys", args.get("key"))
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(k, str) and k.strip() for k in value)
    ):
        raise ArgumentError(
            "missing_key", f'keys must be a list of key names, e.g. ["ctrl", "c"], got {value!r}'
        )
    combo = "+".join(k.strip() for k in value)
    _combo(combo)  # unknown names -> invalid_key with suggestions
    return combo


# One translator per action: the arguments -> one Action (or none) and the payload.


async def _terminate(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    status = args.get("status", "success")
    if status not in ("success", "failure"):
        raise ArgumentError("invalid_args", f"status must be success or failure, got {status!r}")
    return ToolOutcome(ok_payload(action="terminate", status=status), final=(str(status), ""))


async def _answer(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ArgumentError("empty_text", "action=answer needs the answer in text")
    return ToolOutcome(ok_payload(action="answer"), final=("success", text.strip()))


async def _wait(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    seconds = args.get("time", 1.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= 30:
        raise ArgumentError("invalid_args", f"time must be 0..30 seconds, got {seconds!r}")
    await asyncio.sleep(float(seconds))
    return ToolOutcome(ok_payload(action="wait", seconds=float(seconds)), observe=True)


async def _type(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    text = args.get("text")
    if not isinstance(text, str) or text == "":
        raise ArgumentError("empty_text", "action=type needs a non-empty text")
    return typing(text, action="type")


async def _key(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    combo = _keys(args)
    return ToolOutcome(ok_payload(action="key", keys=combo), action=KeyPress(combo))


async def _scroll(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    notches = _notches(args)
    point = _point(args, required=False)
    where = grid_to_physical(ctx.mapping, *point) if point is not None else None
    # Positive pixels scroll up (vertical) or right (horizontal); our dy > 0 is down.
    dy, dx = (-notches, 0) if action == "scroll" else (0, notches)
    payload = ok_payload(action=action, pixels=args.get("pixels"), notches=abs(notches))
    if where is not None:
        payload["point"] = _norm(ctx.mapping, *where)
    return ToolOutcome(payload, action=Scroll(where, dy=dy, dx=dx, style="qwen"))


async def _drag(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    mapping = ctx.mapping
    end_grid = _point(args)
    assert end_grid is not None
    start_grid = _point(args, "start_coordinate", required=False)
    end = grid_to_physical(mapping, *end_grid)
    # Without a start_coordinate the drag starts where the pointer is (the one path
    # reads it, and the record keeps that point).
    start_at = grid_to_physical(mapping, *start_grid) if start_grid is not None else None
    return ToolOutcome(ok_payload(action=action, end=_norm(mapping, *end)), action=Drag(start_at, end, style="qwen"))


async def _move(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    grid = _point(args)
    assert grid is not None
    at = grid_to_physical(ctx.mapping, *grid)
    return ToolOutcome(ok_payload(action=action, point=_norm(ctx.mapping, *at)), action=MoveMouse(at, style="qwen"))


async def _click(ctx: ToolContext, action: str, args: dict[str, Any]) -> ToolOutcome:
    grid = _point(args, required=False)
    at = grid_to_physical(ctx.mapping, *grid) if grid is not None else None  # None: at the pointer
    button, count = _CLICKS[action]
    payload = ok_payload(action=action)
    if at is not None:
        payload["point"] = _norm(ctx.mapping, *at)
    return ToolOutcome(payload, action=Click(at, button, count, style="qwen"))


_Translator = Callable[[ToolContext, str, dict[str, Any]], Awaitable[ToolOutcome]]


async def _computer_use(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    action = args.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise ArgumentError(
            "invalid_args", f"action must be one of {', '.join(ACTIONS)}; got {action!r}"
        )
    return await _TRANSLATORS[action](ctx, action, args)


_CLICKS: dict[str, tuple[Literal["left", "right", "middle"], int]] = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}

_TRANSLATORS: dict[str, _Translator] = {
    "key": _key,
    "type": _type,
    "mouse_move": _move,
    **dict.fromkeys(_CLICKS, _click),
    "left_click_drag": _drag,
    "scroll": _scroll,
    "hscroll": _scroll,
    "wait": _wait,
    "terminate": _terminate,
    "answer": _answer,
}


def computer_use_tool() -> Tool:
    return Tool("computer_use", _DESCRIPTION, PARAMETERS, _computer_use)


def qwen_toolset() -> ToolSet:
    """``computer_use`` alone, with the cookbook-style system prompt."""
    return make_toolset("qwen", [computer_use_tool()], prompt=qwen_system_prompt())
