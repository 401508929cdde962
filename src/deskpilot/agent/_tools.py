"""The tools a model calls: schemas, argument checks, actions and the seeds' payloads.

The tool sets share one executor:

``seed000`` (default)
    observe_screen, click_element(label, box), type_text(text), press_key(key),
    scroll_at_position(box, label?, amount?) -- seed 000's names and arguments.
``seed001``
    take_screenshot, move_mouse(x, y), click_mouse, type_text(text), scroll_down.
``extended``
    seed000 plus double_click, right_click, drag, scroll (up/down/left/right),
    hold_key, wait and zoom; the click tools take an optional ``hold`` (keys held
    during the click, e.g. ``"ctrl"``).
``qwen``
    Qwen3-VL's own ``computer_use`` function and prompt (:mod:`._tools_qwen`).
``uitars`` / ``uitars-1.0``
    UI-TARS's text protocol, ``Action: click(start_box='(x,y)')`` (:mod:`._uitars`).

Results are the seeds' JSON payloads, ``{"ok": true, ...}`` or ``{"ok": false,
"error": {"type": ..., "message": ...}}`` with the types in :data:`ERROR_TYPES`. The
loop adds ``changed`` / ``changed_region`` (and a warning after repeated actions
without visible effect) once the screen has settled.

Coordinates are 0..1000 over the image the model saw last (``ToolContext.mapping``);
a ``zoom`` makes the next image a native-resolution crop and the following action maps
through that crop exactly (:meth:`deskpilot.geometry.Mapping.sub_mapping`).

A mode builds its own tool set from the same pieces: :class:`Tool` objects are plain
data (name, description, JSON schema, an async ``run``), and :func:`make_toolset`
accepts any list of them. Team mode reuses ``click_tool()`` etc. under its own names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from deskpilot._errors import (
    ActionDeniedError,
    DeskpilotError,
    InvalidBoxError,
    ToolError,
    UnknownKeyError,
)
from deskpilot.geometry import Box, Mapping, clamp_norm, parse_box
from deskpilot.input import parse_combo

if TYPE_CHECKING:
    from deskpilot.agent._toolcalls import ToolCall

__all__ = [
    "ERROR_TYPES",
    "TOOLSETS",
    "TOOLSET_NAMES",
    "Hands",
    "NoEffectTracker",
    "TextProtocol",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolSet",
    "err_payload",
    "execute_tool_call",
    "make_toolset",
    "ok_payload",
    "toolset",
    "toolset_id",
    "toolset_label",
]

#: Every ``error.type`` a payload can carry (the seeds' vocabulary plus ``policy_denied``
#: from the safety layer and ``action_failed`` when the OS refused an input event).
ERROR_TYPES = (
    "missing_label",
    "missing_box",
    "invalid_box",
    "invalid_args",
    "invalid_json",
    "empty_text",
    "text_too_long",
    "missing_key",
    "invalid_key",
    "unknown_tool",
    "too_many_tool_calls",
    "policy_denied",
    "action_failed",
)

R = TypeVar("R")


def ok_payload(**extra: Any) -> dict[str, Any]:
    return {"ok": True, **extra}


#: An error message quotes what the model sent; it goes back in the next request, bounded.
MAX_ERROR_MESSAGE_CHARS = 500


def err_payload(error_type: str, message: str) -> dict[str, Any]:
    if len(message) > MAX_ERROR_MESSAGE_CHARS:
        message = message[: MAX_ERROR_MESSAGE_CHARS - 30] + f"... ({len(message)} characters)"
    return {"ok": False, "error": {"type": error_type, "message": message}}


class Hands(Protocol):
    """What the tools need from :class:`deskpilot.input.InputController` (physical pixels)."""

    def move(self, x: float, y: float) -> Any: ...
    def position(self) -> tuple[int, int]: ...
    def click(self, x: float | None = None, y: float | None = None, button: Any = "left", count: int = 1) -> None: ...
    def mouse_down(self, button: Any = "left") -> None: ...
    def mouse_up(self, button: Any = "left") -> None: ...
    def drag(self, start: Sequence[float], end: Sequence[float] | None = None, *, duration: float = 0.3, steps: int = 20) -> None: ...
    def scroll(self, x: float | None = None, y: float | None = None, *, dy: int = 0, dx: int = 0) -> None: ...
    def type_text(self, text: str) -> None: ...
    def key(self, combo: str) -> None: ...
    def hold(self, *keys: str) -> AbstractContextManager[Any]: ...
    def release_all(self) -> None: ...
    def sync(self) -> None: ...


ToolKind = Literal["observe", "action", "control"]


@dataclass(slots=True)
class ToolOutcome:
    """What running one call produced."""

    payload: dict[str, Any]
    #: Physical action(s) performed, for the record (None when nothing was sent).
    action: dict[str, Any] | None = None
    #: Input was sent: the loop settles and compares frames.
    acted: bool = False
    #: The model asked to see the screen (observe_screen / take_screenshot / wait / zoom).
    observe: bool = False
    #: Region (over the current image) that the next image must show at native resolution.
    zoom: Box | None = None
    #: The model ended the task with this tool: ``(status, text)``, status ``"success"``
    #: or ``"failure"`` (qwen's terminate/answer, UI-TARS finished/call_user).
    final: tuple[str, str] | None = None

    @property
    def ok(self) -> bool:
        return bool(self.payload.get("ok"))


@dataclass(slots=True)
class ToolContext:
    """Everything a tool may use. One per run; ``mapping`` follows the latest image."""

    hands: Hands
    mapping: Mapping
    monitor: int = 1
    #: Set by the loop on Ctrl+C/SIGTERM: long actions (typing) stop between chunks.
    stop: threading.Event = field(default_factory=threading.Event)
    #: Seed behaviour: 60-120 ms sleeps around every action (``settle = "fixed"``).
    seed_delays: bool = False
    #: Policy hook (the safety layer's ``SafetyGuard.check_action``, installed by the
    #: loop): raises ActionDeniedError to refuse an action before any input is sent.
    #: It may ask the user and block (confirm mode): async code uses :meth:`acheck_policy`.
    policy: Callable[[dict[str, Any]], None] | None = None
    #: The same check for the event loop (``SafetyGuard.check_action_async``): a
    #: confirm question waits off the loop, so a stop (Ctrl+C, SIGTERM, kill switch,
    #: time limit) cancels it at once and the action is denied.
    policy_async: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    #: Characters typed per input call; the stop flag is checked between chunks.
    type_chunk: int = 16
    #: The longest text one type_text call may type (``agent.max_type_chars``); a longer
    #: one is refused with ``text_too_long`` before any key is sent.
    max_type_chars: int = 2000
    _executor: concurrent.futures.ThreadPoolExecutor | None = None

    def check_policy(self, action: dict[str, Any]) -> None:
        """The policy check, blocking while a confirm question waits (sync callers)."""
        if self.policy is not None:
            self.policy(action)

    async def acheck_policy(self, action: dict[str, Any]) -> None:
        """The policy check for coroutines: never blocks the event loop."""
        if self.policy_async is not None:
            await self.policy_async(action)
        elif self.policy is not None:
            self.policy(action)

    async def run_blocking(self, fn: Callable[[], R]) -> R:
        """Run an input call on the one input thread (keeps event order), off the loop.

        On cancellation the stop flag is set and the call gets up to one second to
        finish its current chunk, so the caller can release held keys safely after.
        """
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="deskpilot-input")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, fn)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.stop.set()
            await asyncio.wait([future], timeout=1.0)
            raise

    def pause(self, seconds: float) -> None:
        """A seed delay (only with ``seed_delays``); runs inside the input thread."""
        if self.seed_delays and seconds > 0 and not self.stop.is_set():
            time.sleep(seconds)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    kind: ToolKind = "action"

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool definition."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def renamed(self, name: str, description: str | None = None) -> Tool:
        return Tool(name, description or self.description, self.parameters, self.run, self.kind)


#: A text protocol: the calls written in a reply's content (``new_id`` names them).
TextProtocol = Callable[[str, Callable[[], str]], "list[ToolCall]"]


@dataclass(frozen=True, slots=True)
class ToolSet:
    name: str
    tools: dict[str, Tool]
    #: The system prompt the model was trained with (None: built from the tools).
    prompt: str | None = None
    #: Set for a model that answers in text instead of tool calls (UI-TARS): no tools are
    #: sent, and this reads the calls from the content.
    text_protocol: TextProtocol | None = None

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


def make_toolset(
    name: str, tools: Iterable[Tool], *, prompt: str | None = None, text_protocol: TextProtocol | None = None
) -> ToolSet:
    table: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in table:
            raise ValueError(f"tool set {name!r} has two tools named {tool.name!r}")
        table[tool.name] = tool
    return ToolSet(name, table, prompt, text_protocol)


# ---------------------------------------------------------------------- argument helpers

_BOX_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": (
        "Where, in 0..1000 coordinates of the last screenshot (x right, y down): a point "
        "[x, y] (best for small targets), a box [x1, y1, x2, y2], or [[x1, y1], [x2, y2]]."
    ),
    "items": {"anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}]},
}
_LABEL_SCHEMA: dict[str, Any] = {"type": "string", "description": "Short name of the element, e.g. 'OK button'."}
_HOLD_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "Optional keys held during the click, e.g. 'ctrl' or 'shift' or 'ctrl+shift'.",
}


def _label(args: dict[str, Any], *, required: bool = True) -> str:
    value = args.get("label")
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ToolError("missing_label", "label is required: name the element you act on, e.g. 'Search box'")
        return ""
    if not isinstance(value, str):
        raise ToolError("invalid_args", f"label must be a string, got {type(value).__name__}")
    return value.strip()


def _box(args: dict[str, Any], key: str = "box") -> Box:
    try:
        return parse_box(args.get(key))
    except InvalidBoxError as exc:
        message = str(exc) if key == "box" else f"{key}: {exc}"
        raise ToolError(exc.kind, message) from None


def _int_arg(args: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ToolError("invalid_args", f"{key} must be a whole number {low}..{high}, got {value!r}")
    number = int(value)
    if not low <= number <= high:
        raise ToolError("invalid_args", f"{key} must be {low}..{high}, got {value!r}")
    return number


def _float_arg(args: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ToolError("invalid_args", f"{key} must be a number {low}..{high}, got {value!r}")
    number = float(value)
    if not low <= number <= high:
        raise ToolError("invalid_args", f"{key} must be {low}..{high}, got {value!r}")
    return number


def _coordinate(args: dict[str, Any], key: str) -> int:
    value = args.get(key)
    if value is None:
        raise ToolError("invalid_args", f"{key} is required (0..1000)")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ToolError("invalid_args", f"{key} must be a number 0..1000, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError("invalid_args", f"{key} must be a number 0..1000, got {value!r}")
    try:
        return clamp_norm(float(value))
    except InvalidBoxError as exc:
        raise ToolError("invalid_args", f"{key}: {exc}") from None


def _hold_keys(args: dict[str, Any]) -> str | None:
    value = args.get("hold")
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "+".join(value)
    if not isinstance(value, str):
        raise ToolError("invalid_args", f"hold must be a key name like 'ctrl', got {value!r}")
    _combo(value)
    return value


def _combo(key: str) -> list[str]:
    try:
        return [spec.name for spec in parse_combo(key)]
    except UnknownKeyError as exc:
        raise ToolError("invalid_key", str(exc)) from None


def _physical(ctx: ToolContext, box: Box) -> tuple[int, int]:
    cx, cy = box.center
    return ctx.mapping.norm_to_physical(cx, cy)


def _with_hold(ctx: ToolContext, hold: str | None, fn: Callable[[], None]) -> Callable[[], None]:
    if hold is None:
        return fn

    def held() -> None:
        with ExitStack() as stack:
            stack.enter_context(ctx.hands.hold(hold))
            fn()

    return held


# ---------------------------------------------------------------------- tools


async def _observe(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(ok_payload(), observe=True)


def observe_tool(name: str = "observe_screen") -> Tool:
    return Tool(
        name,
        "Capture the current screen. The screenshot arrives as the next user message; "
        "coordinates you give afterwards are 0..1000 over that image.",
        {"type": "object", "properties": {}, "required": []},
        _observe,
        kind="observe",
    )


def _clicker(button: str, count: int, verb: str) -> ToolRun:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        label = _label(args)
        box = _box(args)
        hold = _hold_keys(args)
        x, y = _physical(ctx, box)
        action = {"kind": "click", "x": x, "y": y, "button": button, "count": count, "label": label}
        if hold:
            action["hold"] = hold
        await ctx.acheck_policy(action)

        def act() -> None:
            ctx.hands.move(x, y)
            ctx.pause(0.06)
            ctx.hands.click(x, y, button, count)
            ctx.hands.sync()
            ctx.pause(0.12)

        await ctx.run_blocking(_with_hold(ctx, hold, act))
        return ToolOutcome(
            ok_payload(action=verb, label=label, box=box.as_list(), point=list(box.center)),
            action=action,
            acted=True,
        )

    return run


def click_tool(name: str = "click_element", *, button: str = "left", count: int = 1, hold: bool = False) -> Tool:
    verb = {("left", 1): "click", ("left", 2): "double_click", ("right", 1): "right_click"}.get(
        (button, count), f"{button}_click_x{count}"
    )
    what = {"click": "Click", "double_click": "Double-click", "right_click": "Right-click"}.get(verb, "Click")
    props: dict[str, Any] = {"label": _LABEL_SCHEMA, "box": _BOX_SCHEMA}
    if hold:
        props["hold"] = _HOLD_SCHEMA
    return Tool(
        name,
        f"{what} a UI element at the centre of the given point/box (0..1000 over the last screenshot).",
        {"type": "object", "properties": props, "required": ["label", "box"]},
        _clicker(button, count, verb),
    )


async def _type_text(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    text = args.get("text")
    if text is None or text == "":
        raise ToolError("empty_text", "text is required and must not be empty")
    if not isinstance(text, str):
        raise ToolError("invalid_args", f"text must be a string, got {type(text).__name__}")
    if len(text) > ctx.max_type_chars:
        raise ToolError(
            "text_too_long",
            f"text has {len(text)} characters; type_text types at most {ctx.max_type_chars} per call "
            "(agent.max_type_chars): type it in parts",
        )
    action: dict[str, Any] = {"kind": "type", "text": text}
    await ctx.acheck_policy(action)
    size = max(1, ctx.type_chunk)
    typed = [0]

    def act() -> None:
        # Chunked so Ctrl+C stops a long text within one chunk, not at the end.
        for start in range(0, len(text), size):
            if ctx.stop.is_set():
                return
            chunk = text[start : start + size]
            ctx.hands.type_text(chunk)
            typed[0] += len(chunk)
        ctx.hands.sync()
        ctx.pause(0.1)

    await ctx.run_blocking(act)
    payload = ok_payload(action="type_text", typed=typed[0])
    if typed[0] < len(text):
        payload["interrupted"] = True
    return ToolOutcome(payload, action=action, acted=True)


def type_tool(name: str = "type_text") -> Tool:
    return Tool(
        name,
        "Type text into the focused field, exactly as given (any Unicode). Click the field first.",
        {"type": "object", "properties": {"text": {"type": "string", "description": "The text to type."}}, "required": ["text"]},
        _type_text,
    )


async def _press_key(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    key = args.get("key", args.get("keys"))
    if key is None or (isinstance(key, str) and not key.strip()):
        raise ToolError("missing_key", "key is required, e.g. 'enter', 'tab', 'ctrl+c', 'alt+f4'")
    if isinstance(key, list) and key and all(isinstance(k, str) for k in key):
        key = "+".join(key)
    if not isinstance(key, str):
        raise ToolError("invalid_args", f"key must be a string like 'ctrl+c', got {key!r}")
    names = _combo(key)
    action = {"kind": "key", "key": "+".join(names)}
    await ctx.acheck_policy(action)

    def act() -> None:
        ctx.hands.key(key)
        ctx.hands.sync()
        ctx.pause(0.1)

    await ctx.run_blocking(act)
    return ToolOutcome(ok_payload(action="press_key", key="+".join(names)), action=action, acted=True)


def key_tool(name: str = "press_key") -> Tool:
    return Tool(
        name,
        "Press a key or a combination: enter, tab, escape, backspace, delete, arrows (up, down, "
        "left, right), home, end, pageup, pagedown, f1..f12, or combos like ctrl+c, ctrl+shift+t, alt+f4.",
        {"type": "object", "properties": {"key": {"type": "string", "description": "Key or combo, e.g. 'enter' or 'ctrl+a'."}}, "required": ["key"]},
        _press_key,
    )


_DIRECTIONS = {"down": (1, 0), "up": (-1, 0), "right": (0, 1), "left": (0, -1)}


def _scroller(fixed_direction: str | None, default_amount: int) -> ToolRun:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        label = _label(args, required=False)
        box = _box(args)
        direction = fixed_direction
        if direction is None:
            raw = args.get("direction", "down")
            if not isinstance(raw, str) or raw.strip().lower() not in _DIRECTIONS:
                raise ToolError("invalid_args", f"direction must be up, down, left or right, got {raw!r}")
            direction = raw.strip().lower()
        amount = _int_arg(args, "amount", default_amount, 1, 50)
        x, y = _physical(ctx, box)
        sy, sx = _DIRECTIONS[direction]
        action = {"kind": "scroll", "x": x, "y": y, "dy": sy * amount, "dx": sx * amount}
        await ctx.acheck_policy(action)

        def act() -> None:
            ctx.hands.move(x, y)
            ctx.pause(0.06)
            ctx.hands.scroll(x, y, dy=sy * amount, dx=sx * amount)
            ctx.hands.sync()
            ctx.pause(0.12)

        await ctx.run_blocking(act)
        payload = ok_payload(action="scroll", direction=direction, amount=amount, point=list(box.center))
        if label:
            payload["label"] = label
        return ToolOutcome(payload, action=action, acted=True)

    return run


def scroll_at_position_tool(name: str = "scroll_at_position") -> Tool:
    return Tool(
        name,
        "Scroll down with the mouse wheel over the given point/box (0..1000). amount = wheel notches (default 1).",
        {
            "type": "object",
            "properties": {
                "box": _BOX_SCHEMA,
                "label": _LABEL_SCHEMA,
                "amount": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Wheel notches."},
            },
            "required": ["box"],
        },
        _scroller("down", 1),
    )


def scroll_tool(name: str = "scroll") -> Tool:
    return Tool(
        name,
        "Scroll up, down, left or right with the mouse wheel over the given point/box (0..1000).",
        {
            "type": "object",
            "properties": {
                "box": _BOX_SCHEMA,
                "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                "amount": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Wheel notches (default 3)."},
                "label": _LABEL_SCHEMA,
            },
            "required": ["box", "direction"],
        },
        _scroller(None, 3),
    )


async def _drag(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    label = _label(args, required=False)
    start_box = _box(args, "start")
    end_box = _box(args, "end")
    start, end = _physical(ctx, start_box), _physical(ctx, end_box)
    action = {"kind": "drag", "start": list(start), "end": list(end), "label": label}
    await ctx.acheck_policy(action)

    def act() -> None:
        ctx.hands.drag(start, end)
        ctx.hands.sync()
        ctx.pause(0.12)

    await ctx.run_blocking(act)
    return ToolOutcome(
        ok_payload(action="drag", start=list(start_box.center), end=list(end_box.center)),
        action=action,
        acted=True,
    )


def drag_tool(name: str = "drag") -> Tool:
    return Tool(
        name,
        "Press the left button at start, move to end, release (drag and drop, sliders, selections).",
        {
            "type": "object",
            "properties": {"start": _BOX_SCHEMA, "end": _BOX_SCHEMA, "label": _LABEL_SCHEMA},
            "required": ["start", "end"],
        },
        _drag,
    )


async def _hold_key(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    key = args.get("key")
    if key is None or (isinstance(key, str) and not key.strip()):
        raise ToolError("missing_key", "key is required, e.g. 'shift' or 'right'")
    if not isinstance(key, str):
        raise ToolError("invalid_args", f"key must be a string, got {key!r}")
    names = _combo(key)
    seconds = _float_arg(args, "seconds", 0.5, 0.0, 5.0)
    action = {"kind": "hold", "key": "+".join(names), "seconds": seconds}
    await ctx.acheck_policy(action)

    def act() -> None:
        with ctx.hands.hold(key):
            ctx.hands.sync()
            deadline = time.monotonic() + seconds
            while not ctx.stop.is_set() and time.monotonic() < deadline:
                time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))

    await ctx.run_blocking(act)
    return ToolOutcome(ok_payload(action="hold_key", key="+".join(names), seconds=seconds), action=action, acted=True)


def hold_key_tool(name: str = "hold_key") -> Tool:
    return Tool(
        name,
        "Hold a key (or combo) down for some seconds, then release it.",
        {
            "type": "object",
            "properties": {
                "key": {"type": "string"},
                "seconds": {"type": "number", "minimum": 0, "maximum": 5, "description": "Default 0.5."},
            },
            "required": ["key"],
        },
        _hold_key,
    )


async def _wait(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    seconds = _float_arg(args, "seconds", 1.0, 0.0, 30.0)
    await asyncio.sleep(seconds)
    return ToolOutcome(ok_payload(action="wait", seconds=seconds), observe=True)


def wait_tool(name: str = "wait") -> Tool:
    return Tool(
        name,
        "Wait for the screen to update (loading, animations), then get a new screenshot.",
        {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}}, "required": []},
        _wait,
        kind="control",
    )


async def _zoom(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    box = _box(args)
    if box.x2 - box.x1 < 1 or box.y2 - box.y1 < 1:
        raise ToolError("invalid_box", "zoom needs an area [x1, y1, x2, y2], not a point")
    region = ctx.mapping.norm_box_to_physical(box)
    return ToolOutcome(
        ok_payload(
            action="zoom",
            box=box.as_list(),
            region_px=[region.width, region.height],
            note="The next screenshot shows only this region at full resolution; coordinates of your "
            "next action are 0..1000 over that zoomed image. After it, the view returns to the full screen.",
        ),
        observe=True,
        zoom=box,
    )


def zoom_tool(name: str = "zoom") -> Tool:
    return Tool(
        name,
        "Look closer: the next screenshot shows only this box of the current image at native resolution.",
        {"type": "object", "properties": {"box": _BOX_SCHEMA}, "required": ["box"]},
        _zoom,
        kind="control",
    )


# seed 001 ------------------------------------------------------------------


async def _move_mouse(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    nx, ny = _coordinate(args, "x"), _coordinate(args, "y")
    x, y = ctx.mapping.norm_to_physical(nx, ny)
    action = {"kind": "move", "x": x, "y": y}
    await ctx.acheck_policy(action)

    def act() -> None:
        ctx.hands.move(x, y)
        ctx.hands.sync()
        ctx.pause(0.06)

    await ctx.run_blocking(act)
    area = ctx.mapping.area
    return ToolOutcome(
        ok_payload(action="move_mouse", x=nx, y=ny, screen_w=area.width, screen_h=area.height),
        action=action,
        acted=True,
    )


def move_mouse_tool(name: str = "move_mouse") -> Tool:
    return Tool(
        name,
        "Move the mouse pointer to x, y (0..1000 over the last screenshot).",
        {
            "type": "object",
            "properties": {"x": {"type": "number", "minimum": 0, "maximum": 1000}, "y": {"type": "number", "minimum": 0, "maximum": 1000}},
            "required": ["x", "y"],
        },
        _move_mouse,
    )


async def _click_mouse(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    await ctx.acheck_policy({"kind": "click", "button": "left", "count": 1, "at": "pointer"})
    where: list[tuple[int, int]] = []

    def act() -> None:
        where.append(ctx.hands.position())
        ctx.hands.click(None, None, "left", 1)
        ctx.hands.sync()
        ctx.pause(0.12)

    await ctx.run_blocking(act)
    x, y = where[0]
    return ToolOutcome(
        ok_payload(action="click_mouse"),
        action={"kind": "click", "x": x, "y": y, "button": "left", "count": 1},
        acted=True,
    )


def click_mouse_tool(name: str = "click_mouse") -> Tool:
    return Tool(
        name,
        "Left-click at the current mouse position (use move_mouse first).",
        {"type": "object", "properties": {}, "required": []},
        _click_mouse,
    )


async def _scroll_down(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    await ctx.acheck_policy({"kind": "scroll", "dy": 1, "dx": 0, "at": "pointer"})
    where: list[tuple[int, int]] = []

    def act() -> None:
        where.append(ctx.hands.position())
        ctx.hands.scroll(None, None, dy=1)
        ctx.hands.sync()
        ctx.pause(0.12)

    await ctx.run_blocking(act)
    x, y = where[0]
    return ToolOutcome(
        ok_payload(action="scroll_down"),
        action={"kind": "scroll", "x": x, "y": y, "dy": 1, "dx": 0},
        acted=True,
    )


def scroll_down_tool(name: str = "scroll_down") -> Tool:
    return Tool(
        name,
        "Scroll down one wheel notch at the current mouse position.",
        {"type": "object", "properties": {}, "required": []},
        _scroll_down,
    )


# ---------------------------------------------------------------------- tool sets


def _seed000() -> ToolSet:
    return make_toolset(
        "seed000",
        [observe_tool("observe_screen"), click_tool("click_element"), type_tool(), key_tool(), scroll_at_position_tool()],
    )


def _seed001() -> ToolSet:
    return make_toolset(
        "seed001",
        [observe_tool("take_screenshot"), move_mouse_tool(), click_mouse_tool(), type_tool(), scroll_down_tool()],
    )


def _extended() -> ToolSet:
    return make_toolset(
        "extended",
        [
            observe_tool("observe_screen"),
            click_tool("click_element", hold=True),
            click_tool("double_click", count=2, hold=True),
            click_tool("right_click", button="right", hold=True),
            drag_tool(),
            type_tool(),
            key_tool(),
            hold_key_tool(),
            scroll_at_position_tool(),
            scroll_tool(),
            wait_tool(),
            zoom_tool(),
        ],
    )


def _qwen() -> ToolSet:
    from deskpilot.agent._tools_qwen import qwen_toolset

    return qwen_toolset()


def _uitars() -> ToolSet:
    from deskpilot.agent._uitars import uitars_toolset

    return uitars_toolset("1.5")


def _uitars_10() -> ToolSet:
    from deskpilot.agent._uitars import uitars_toolset

    return uitars_toolset("1.0")


TOOLSETS: dict[str, Callable[[], ToolSet]] = {
    "seed000": _seed000,
    "seed001": _seed001,
    "extended": _extended,
    "qwen": _qwen,
    "uitars": _uitars,
    "uitars-1.0": _uitars_10,
}
#: User-facing name of each tool set (what it is), by the id run records keep. The
#: names are accepted wherever an id is (``--toolset element`` is ``--toolset seed000``).
TOOLSET_NAMES: dict[str, str] = {ident: ident for ident in TOOLSETS} | {"seed000": "element", "seed001": "pointer"}


def toolset_id(name: str) -> str:
    """The id (``seed000``...) of a tool set given by id or user-facing name."""
    for ident, user_name in TOOLSET_NAMES.items():
        if name == user_name:
            return ident
    return name


def toolset_label(name: str) -> str:
    """``element (seed000)``: the user-facing name with the seed id it keeps as an alias."""
    ident = toolset_id(name)
    user_name = TOOLSET_NAMES.get(ident, ident)
    return user_name if user_name == ident else f"{user_name} ({ident})"


def toolset(name: str) -> ToolSet:
    """A built-in tool set by id or name (``seed000``/``element``, ``seed001``/``pointer``,
    ``extended``, ``qwen``, ``uitars``, ``uitars-1.0``)."""
    try:
        return TOOLSETS[toolset_id(name)]()
    except KeyError:
        known = ", ".join(toolset_label(n) for n in TOOLSETS)
        raise ValueError(f"unknown tool set {name!r}; known: {known}") from None


# ---------------------------------------------------------------------- execution


async def execute_tool_call(
    tools: ToolSet, name: str, arguments: dict[str, Any] | None, ctx: ToolContext, *, parse_error: tuple[str, str] | None = None
) -> ToolOutcome:
    """Run one call and turn every refusal into a payload (never raises for bad input).

    ``parse_error`` is ``(type, message)`` when the client could not decode the
    arguments (``invalid_json`` / ``invalid_args``). OS-level input failures become
    ``action_failed``; cancellation propagates.
    """
    tool = tools.get(name)
    if tool is None:
        shown = name if name else "<empty>"
        return ToolOutcome(err_payload("unknown_tool", f"unknown tool {shown!r}; available: {', '.join(tools.names)}"))
    if parse_error is not None:
        return ToolOutcome(err_payload(*parse_error))
    if arguments is None:
        return ToolOutcome(err_payload("invalid_args", "arguments must be a JSON object"))
    try:
        return await tool.run(ctx, arguments)
    except ToolError as exc:
        return ToolOutcome(err_payload(exc.kind, exc.message))
    except ActionDeniedError as exc:
        # The safety layer's PolicyDenied carries the payload the model should read (why,
        # which rule, do not retry as is); any other refusal gets the same error type.
        payload = getattr(exc, "payload", None)
        if isinstance(payload, dict):
            return ToolOutcome(payload)
        return ToolOutcome(err_payload("policy_denied", str(exc)))
    except UnknownKeyError as exc:
        return ToolOutcome(err_payload("invalid_key", str(exc)))
    except DeskpilotError as exc:
        if isinstance(exc, (OSError, ValueError)):
            return ToolOutcome(err_payload("action_failed", f"{type(exc).__name__}: {exc}"))
        raise


class NoEffectTracker:
    """Counts identical consecutive actions that left the screen unchanged."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._signature: str | None = None
        self._count = 0

    def note(self, signature: str, changed: bool) -> int:
        """Record one action; returns how many times in a row it had no effect."""
        if changed:
            self._signature, self._count = None, 0
            return 0
        if signature == self._signature:
            self._count += 1
        else:
            self._signature, self._count = signature, 1
        return self._count

    def warning(self, count: int) -> str | None:
        if self.threshold <= 0 or count < self.threshold:
            return None
        return (
            f"This exact action has now been done {count} times in a row and the screen did not "
            "change. Do something different: check the screenshot, pick another target or another tool."
        )


def signature_of(name: str, arguments: dict[str, Any] | None) -> str:
    """A stable key for 'the same action' (the tool and its arguments)."""
    import orjson

    try:
        return name + orjson.dumps(arguments or {}, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return name + repr(arguments)


def tool_names(tools: Sequence[Tool]) -> list[str]:
    return [t.name for t in tools]
