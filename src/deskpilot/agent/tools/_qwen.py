"""The ``qwen`` tool set: Qwen3-VL's own ``computer_use`` function.

Qwen3-VL is trained on one function, ``computer_use``, with an ``action`` key (the
QwenLM/Qwen3-VL cookbooks ``computer_use.ipynb`` and qwen-agent's function-call template;
the tool definition below is the cookbook's, with deskpilot's coordinate note). The model
calls it natively (``tool_calls``) or writes ``<tool_call>{"name": "computer_use",
"arguments": {...}}</tool_call>`` into its content; both arrive here as one
:class:`~deskpilot.agent.client._toolcalls.ToolCall` (the client parses either form).

Actions: key, type, mouse_move, left_click, left_click_drag, right_click, middle_click,
double_click, triple_click, scroll, hscroll, wait, terminate, answer.

Coordinates: Qwen3-VL points on a 1000 x 1000 grid over the image it was shown, cells
0..999 on each axis (the cookbook tells it "The screen's resolution is 1000x1000").
Cell ``g`` covers ``[g, g + 1)`` thousandths of the image, so it is mapped to the physical
pixel under the cell's centre: ``px = left + floor((g + 0.5) * width / 1000)`` on the
working area of the image (the same area and crop the 0..1000 contract of the other tool
sets uses; ``g + 0.5`` *is* that contract's coordinate, before its integer rounding).
So 0 is the first pixel, 999 the last, 500 the middle; values outside 0..999 are clamped.

``terminate`` (status success/failure) and ``answer`` (text) end the run with the
model's own status (:attr:`ToolOutcome.final`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any, Literal

from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSet,
    _combo,
    make_toolset,
    ok_payload,
    typing,
)
from deskpilot.geometry import Mapping

__all__ = ["ACTIONS", "QWEN_GRID", "grid_to_physical", "qwen_system_prompt", "qwen_toolset"]

#: Cells per axis of Qwen3-VL's coordinate grid (0..999).
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

# The cookbook's function description, with the resolution line it uses for Qwen3-VL.
_DESCRIPTION = """\
Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to wait and take successive screenshots to see the results of your actions. E.g. if you click on Firefox and a window doesn't open, try wait and taking another screenshot.
* The screen's resolution is 1000x1000.
* Whenever you intend to move the cursor to click on an element like an icon, you should consult a screenshot to determine the coordinates of the element before moving the cursor.
* If you tried clicking on a program or link but it failed to load, even after waiting, try adjusting your cursor position so that the tip of the cursor visually falls on the element that you want to click.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges unless asked."""

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
* `triple_click`: Triple-click the left mouse button at a specified (x, y) pixel coordinate on the screen.
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

_SYSTEM = """\
You are a helpful assistant that operates a computer to complete the user's task.
You see one screenshot at a time and act through the computer_use function: one call per reply.
After each action you receive the result and a new screenshot. When the task is done, call
computer_use with action=terminate and status=success (or action=answer with the answer when the
task asks a question); when it cannot be done, action=terminate with status=failure.

{security}"""

# Scroll amounts: Qwen's agents hand `pixels` to pyautogui.scroll, whose unit is one wheel
# notch ("click"); larger values (a model thinking in screen pixels) count 100 per notch.
_MAX_NOTCHES = 50


def qwen_system_prompt() -> str:
    from deskpilot.agent._prompts import SECURITY_NOTE

    return _SYSTEM.format(security=SECURITY_NOTE)


def grid_to_physical(mapping: Mapping, gx: float, gy: float) -> tuple[int, int]:
    """A Qwen grid point (0..999 each) -> the physical pixel under the cell's centre."""
    a = mapping.area
    cx = min(QWEN_GRID - 1.0, max(0.0, gx)) + 0.5
    cy = min(QWEN_GRID - 1.0, max(0.0, gy)) + 0.5
    return (
        a.left + min(a.width - 1, math.floor(cx * a.width / QWEN_GRID)),
        a.top + min(a.height - 1, math.floor(cy * a.height / QWEN_GRID)),
    )


def _point(
    args: dict[str, Any], key: str = "coordinate", *, required: bool = True
) -> tuple[float, float] | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ToolError(
                "missing_box", f"{key} [x, y] (0..999) is required for action={args.get('action')}"
            )
        return None
    if isinstance(value, str):
        # "(500, 412)" or "500,412": some servers' parsers pass the text through.
        parts = value.strip().strip("()[]").replace(" ", "").split(",")
        try:
            value = [float(p) for p in parts]
        except ValueError:
            raise ToolError("invalid_box", f"{key} must be [x, y], got {value!r}") from None
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    ):
        raise ToolError("invalid_box", f"{key} must be [x, y] with numbers 0..999, got {value!r}")
    return float(value[0]), float(value[1])


def _norm(mapping: Mapping, x: int, y: int) -> list[int]:
    return list(mapping.physical_to_norm(x, y))


def _notches(args: dict[str, Any]) -> int:
    value = args.get("pixels")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value == 0
    ):
        raise ToolError(
            "invalid_args", f"pixels must be a non-zero number (positive scrolls up), got {value!r}"
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
        raise ToolError(
            "missing_key", f'keys must be a list of key names, e.g. ["ctrl", "c"], got {value!r}'
        )
    combo = "+".join(k.strip() for k in value)
    _combo(combo)  # unknown names -> invalid_key with suggestions
    return combo


async def _computer_use(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    action = args.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise ToolError(
            "invalid_args", f"action must be one of {', '.join(ACTIONS)}; got {action!r}"
        )
    mapping = ctx.mapping

    if action == "terminate":
        status = args.get("status", "success")
        if status not in ("success", "failure"):
            raise ToolError("invalid_args", f"status must be success or failure, got {status!r}")
        return ToolOutcome(ok_payload(action="terminate", status=status), final=(str(status), ""))
    if action == "answer":
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ToolError("empty_text", "action=answer needs the answer in text")
        return ToolOutcome(ok_payload(action="answer"), final=("success", text.strip()))
    if action == "wait":
        seconds = args.get("time", 1.0)
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not 0 <= seconds <= 30
        ):
            raise ToolError("invalid_args", f"time must be 0..30 seconds, got {seconds!r}")
        await asyncio.sleep(float(seconds))
        return ToolOutcome(ok_payload(action="wait", seconds=float(seconds)), observe=True)
    if action == "type":
        text = args.get("text")
        if not isinstance(text, str) or text == "":
            raise ToolError("empty_text", "action=type needs a non-empty text")
        return typing(text, action="type")
    if action == "key":
        combo = _keys(args)
        return ToolOutcome(ok_payload(action="key", keys=combo), action=KeyPress(combo))

    if action in ("scroll", "hscroll"):
        notches = _notches(args)
        point = _point(args, required=False)
        where = grid_to_physical(mapping, *point) if point is not None else None
        # Positive pixels scroll up (vertical) or right (horizontal); our dy > 0 is down.
        dy, dx = (-notches, 0) if action == "scroll" else (0, notches)
        payload = ok_payload(action=action, pixels=args.get("pixels"), notches=abs(notches))
        if where is not None:
            payload["point"] = _norm(mapping, *where)
        return ToolOutcome(payload, action=Scroll(where, dy=dy, dx=dx, style="qwen"))

    if action == "left_click_drag":
        end_grid = _point(args)
        assert end_grid is not None
        start_grid = _point(args, "start_coordinate", required=False)
        end = grid_to_physical(mapping, *end_grid)
        # Without a start_coordinate the drag starts where the pointer is (the one path
        # reads it, and the record keeps that point).
        start_at = grid_to_physical(mapping, *start_grid) if start_grid is not None else None
        return ToolOutcome(ok_payload(action=action, end=_norm(mapping, *end)), action=Drag(start_at, end, style="qwen"))

    # Pointer actions: mouse_move and the clicks.
    grid = _point(args, required=action == "mouse_move")
    at = grid_to_physical(mapping, *grid) if grid is not None else None
    if action == "mouse_move":
        assert at is not None
        return ToolOutcome(ok_payload(action=action, point=_norm(mapping, *at)), action=MoveMouse(at, style="qwen"))
    button, count = _CLICKS[action]
    payload = ok_payload(action=action)
    if at is not None:
        payload["point"] = _norm(mapping, *at)
    return ToolOutcome(payload, action=Click(at, button, count, style="qwen"))


_CLICKS: dict[str, tuple[Literal["left", "right", "middle"], int]] = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}


def computer_use_tool() -> Tool:
    return Tool("computer_use", _DESCRIPTION, PARAMETERS, _computer_use)


def qwen_toolset() -> ToolSet:
    """``computer_use`` alone, with the cookbook-style system prompt."""
    return make_toolset("qwen", [computer_use_tool()], prompt=qwen_system_prompt())
