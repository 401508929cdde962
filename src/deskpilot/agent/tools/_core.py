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

A tool only *translates*: its ``run`` checks the arguments and returns a
:class:`ToolOutcome` with one typed :data:`~deskpilot.actions.Action` (or none) and the
payload. :func:`execute_tool_call` sends that action the one path every action takes
(:func:`deskpilot.agent.tools._act.act`: the policy checks exactly that action, the input
thread performs it, the outcome keeps it for the record); no tool touches the hands.

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
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from deskpilot import actions
from deskpilot._errors import (
    ActionDeniedError,
    ArgumentError,
    DeskpilotError,
    InputError,
    UnknownKeyError,
)
from deskpilot.actions import (
    PASSIVE,
    Action,
    ActionRecord,
    Click,
    Drag,
    Hold,
    KeyPress,
    MoveMouse,
    Scroll,
    TypeText,
)
from deskpilot.agent.tools._protocol import TEXT_LANGUAGES, CallProtocol, NativeCalls, TextParser
from deskpilot.geometry import Box, Mapping
from deskpilot.input import Hands, parse_combo

__all__ = [
    "ERROR_TYPES",
    "NATIVE_FUNCTIONS",
    "TOOLSETS",
    "TOOLSET_NAMES",
    "Hands",
    "NoEffectTracker",
    "TextParser",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolSet",
    "err_payload",
    "execute_tool_call",
    "make_toolset",
    "ok_payload",
    "speaking_toolset",
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




ToolKind = Literal["observe", "action", "control"]


@dataclass(slots=True)
class ToolOutcome:
    """What running one call produced."""

    payload: dict[str, Any]
    #: The tool's translation of the call (None: it sends no input); once the one path
    #: (:func:`~deskpilot.agent.tools._act.act`) has sent it, exactly what was sent, for
    #: the record.
    action: Action | None = None
    #: Input was sent (set by the one path, never by a tool): the loop settles and
    #: compares frames.
    acted: bool = False
    #: The model asked to see the screen (observe_screen / take_screenshot / wait / zoom).
    observe: bool = False
    #: Region (over the current image) that the next image must show at native resolution.
    zoom: Box | None = None
    #: The model ended the task with this tool: ``(status, text)``, status ``"success"``
    #: or ``"failure"`` (qwen's terminate/answer, UI-TARS finished/call_user).
    final: tuple[str, str] | None = None
    #: What the tool read from the arguments, for a mode that keeps it (team's memory
    #: holds the variant's argument dataclass): the call is translated once. Kept when
    #: the policy or the OS refuses the action; None when the arguments were refused.
    detail: Any = None

    @property
    def ok(self) -> bool:
        return bool(self.payload.get("ok"))

    @property
    def action_record(self) -> ActionRecord | None:
        """The turn record's ``"action"``: :meth:`Action.to_record` of what was performed."""
        return None if self.action is None else self.action.to_record()


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
    policy: Callable[[Action], None] | None = None
    #: The same check for the event loop (``SafetyGuard.check_action_async``): a
    #: confirm question waits off the loop, so a stop (Ctrl+C, SIGTERM, kill switch,
    #: time limit) cancels it at once and the action is denied.
    policy_async: Callable[[Action], Awaitable[None]] | None = None
    #: Characters typed per input call; the stop flag is checked between chunks.
    type_chunk: int = 16
    #: The longest text one type_text call may type (``agent.max_type_chars``); a longer
    #: one is refused with ``text_too_long`` before any key is sent.
    max_type_chars: int = 2000
    _executor: concurrent.futures.ThreadPoolExecutor | None = None

    def check_policy(self, action: Action) -> None:
        """The policy check, blocking while a confirm question waits (sync callers)."""
        if self.policy is not None:
            self.policy(action)

    async def acheck_policy(self, action: Action) -> None:
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


@dataclass(frozen=True, slots=True)
class ToolSet:
    name: str
    tools: dict[str, Tool]
    #: The system prompt the model was trained with (None: built from the tools).
    prompt: str | None = None
    #: How the calls travel in the chat (:mod:`._protocol`): native function calls, or
    #: calls written as text (UI-TARS) with no tools sent and results sent back as text.
    protocol: CallProtocol = field(default_factory=NativeCalls)

    @property
    def text_protocol(self) -> TextParser | None:
        """The parser of calls written in a reply's text (None: the model calls natively)."""
        return None if self.protocol.sends_tools else self.protocol.read_text

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


def make_toolset(
    name: str, tools: Iterable[Tool], *, prompt: str | None = None, protocol: CallProtocol | None = None
) -> ToolSet:
    table: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in table:
            raise ValueError(f"tool set {name!r} has two tools named {tool.name!r}")
        table[tool.name] = tool
    return ToolSet(name, table, prompt, protocol if protocol is not None else NativeCalls())


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


def _combo(key: str) -> str:
    """``key`` with canonical names (``"Ctrl+C"`` -> ``"ctrl+c"``), or ``invalid_key``."""
    return actions.combo_names(key, key_names)


def key_names(combo: str) -> list[str]:
    """The canonical names of a combo's keys (the ``resolve`` of :func:`deskpilot.actions.key_combo`)."""
    return [spec.name for spec in parse_combo(combo)]


def _hold_keys(args: dict[str, Any]) -> str | None:
    value = args.get("hold")
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "+".join(value)
    if not isinstance(value, str):
        raise ArgumentError("invalid_args", f"hold must be a key name like 'ctrl', got {value!r}")
    _combo(value)
    return value


def _physical(ctx: ToolContext, box: Box) -> tuple[int, int]:
    cx, cy = box.center
    return ctx.mapping.norm_to_physical(cx, cy)


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


_BUTTONS: dict[str, Literal["left", "right", "middle"]] = {"left": "left", "right": "right", "middle": "middle"}


def _clicker(button: Literal["left", "right", "middle"], count: int, verb: str) -> ToolRun:
    async def run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        label = actions.label(args)
        box = actions.box(args)
        hold = _hold_keys(args)
        action = Click(_physical(ctx, box), button, count, label=label, hold=hold, source=box)
        return ToolOutcome(
            ok_payload(action=verb, label=label, box=box.as_list(), point=list(box.center)), action=action
        )

    return run


def click_tool(name: str = "click_element", *, button: str = "left", count: int = 1, hold: bool = False) -> Tool:
    if button not in _BUTTONS:
        raise ValueError(f"unknown mouse button {button!r} (left, right or middle)")
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
        _clicker(_BUTTONS[button], count, verb),
    )


def typing(text: str, **payload: Any) -> ToolOutcome:
    """A text to type: ``typed`` in the payload becomes the characters really typed, and
    ``interrupted`` is added when a stop ended the typing between two chunks (see
    :func:`~deskpilot.agent.tools._act.act`)."""
    return ToolOutcome(ok_payload(**payload, typed=len(text)), action=TypeText(text))


async def _type_text(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    return typing(actions.text(args, limit=ctx.max_type_chars), action="type_text")


def type_tool(name: str = "type_text") -> Tool:
    return Tool(
        name,
        "Type text into the focused field, exactly as given (any Unicode). Click the field first.",
        {"type": "object", "properties": {"text": {"type": "string", "description": "The text to type."}}, "required": ["text"]},
        _type_text,
    )


async def _press_key(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    # The canonical names (``"Ctrl+C"`` -> ``"ctrl+c"``) name the same keys as the model's
    # spelling: they are what the policy checks, the hands are sent and the record keeps.
    combo = actions.key_combo(args, key_names, keys=("key", "keys"))
    return ToolOutcome(ok_payload(action="press_key", key=combo), action=KeyPress(combo))


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
        label = actions.label(args, required=False)
        box = actions.box(args)
        direction = fixed_direction
        if direction is None:
            raw = args.get("direction", "down")
            if not isinstance(raw, str) or raw.strip().lower() not in _DIRECTIONS:
                raise ArgumentError("invalid_args", f"direction must be up, down, left or right, got {raw!r}")
            direction = raw.strip().lower()
        amount = actions.integer(args, "amount", default=default_amount, low=1, high=50)
        sy, sx = _DIRECTIONS[direction]
        action = Scroll(_physical(ctx, box), dy=sy * amount, dx=sx * amount, source=box)
        payload = ok_payload(action="scroll", direction=direction, amount=amount, point=list(box.center))
        if label:
            payload["label"] = label
        return ToolOutcome(payload, action=action)

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
    label = actions.label(args, required=False)
    start_box = actions.box(args, "start")
    end_box = actions.box(args, "end")
    action = Drag(_physical(ctx, start_box), _physical(ctx, end_box), label=label, source=(start_box, end_box))
    return ToolOutcome(ok_payload(action="drag", start=list(start_box.center), end=list(end_box.center)), action=action)


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
    combo = actions.key_combo(args, key_names, example="'shift' or 'right'", like=None, lists=False)
    seconds = actions.number(args, "seconds", default=0.5, low=0.0, high=5.0)
    return ToolOutcome(ok_payload(action="hold_key", key=combo, seconds=seconds), action=Hold(combo, seconds))


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
    seconds = actions.number(args, "seconds", default=1.0, low=0.0, high=30.0)
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
    box = actions.box(args)
    if box.x2 - box.x1 < 1 or box.y2 - box.y1 < 1:
        raise ArgumentError("invalid_box", "zoom needs an area [x1, y1, x2, y2], not a point")
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
    nx, ny = actions.coordinate(args, "x"), actions.coordinate(args, "y")
    action = MoveMouse(ctx.mapping.norm_to_physical(nx, ny), source=Box(nx, ny, nx, ny))
    area = ctx.mapping.area
    return ToolOutcome(
        ok_payload(action="move_mouse", x=nx, y=ny, screen_w=area.width, screen_h=area.height), action=action
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
    # At the pointer: the one path reads where it is, and checks and clicks that point.
    return ToolOutcome(ok_payload(action="click_mouse"), action=Click(None))


def click_mouse_tool(name: str = "click_mouse") -> Tool:
    return Tool(
        name,
        "Left-click at the current mouse position (use move_mouse first).",
        {"type": "object", "properties": {}, "required": []},
        _click_mouse,
    )


async def _scroll_down(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(ok_payload(action="scroll_down"), action=Scroll(None, dy=1))


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
    from deskpilot.agent.tools._qwen import qwen_toolset

    return qwen_toolset()


def _uitars() -> ToolSet:
    from deskpilot.agent.tools._uitars import uitars_toolset

    return uitars_toolset("1.5")


def _uitars_10() -> ToolSet:
    from deskpilot.agent.tools._uitars import uitars_toolset

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


#: A call a tool set lacks, named as a model's own trained function, and the tool set that
#: speaks it (Qwen3-VL calls ``computer_use`` whatever tools it is offered).
NATIVE_FUNCTIONS = {"computer_use": "qwen"}


@functools.cache
def _builtin(ident: str) -> ToolSet:
    return TOOLSETS[ident]()


def speaking_toolset(tools: ToolSet, name: str, source: str) -> ToolSet:
    """The tool set that runs a call: ``tools``, or, for a call in a known model's own
    language that ``tools`` lacks, that language's tool set (same one path, same mapping
    of its coordinates): UI-TARS action text under a native tool set (``source``
    ``"uitars"``), Qwen3-VL's ``computer_use`` under a tool set without it."""
    language = TEXT_LANGUAGES.get(source)
    if language is not None and tools.text_protocol is None:
        return _builtin(language)
    if name not in tools.tools and name in NATIVE_FUNCTIONS:
        return _builtin(NATIVE_FUNCTIONS[name])
    return tools


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
    if tool is None and not name and parse_error is not None:
        # A reply the tool set could not read names no tool (a UI-TARS ``Action:`` that
        # does not parse): the model is told what the parser found, not "unknown tool ''".
        return ToolOutcome(err_payload(*parse_error))
    if tool is None:
        shown = name if name else "<empty>"
        return ToolOutcome(err_payload("unknown_tool", f"unknown tool {shown!r}; available: {', '.join(tools.names)}"))
    if parse_error is not None:
        return ToolOutcome(err_payload(*parse_error))
    if arguments is None:
        return ToolOutcome(err_payload("invalid_args", "arguments must be a JSON object"))
    try:
        return await _translate_and_act(tool, ctx, arguments)
    except DeskpilotError as exc:
        refused = _refusal(exc)
        if refused is None:
            raise
        return refused


def _refusal(exc: DeskpilotError) -> ToolOutcome | None:
    """The payload of a call the arguments, the policy or the OS refused (None: not a
    refusal, e.g. a stop, which propagates)."""
    if isinstance(exc, UnknownKeyError):
        return ToolOutcome(err_payload("invalid_key", str(exc)))
    if isinstance(exc, InputError):
        # The input layer refused (InputArgumentError is an ArgumentError too): the
        # arguments passed the tool's checks, so the action failed.
        return ToolOutcome(err_payload("action_failed", f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, ArgumentError):
        return ToolOutcome(err_payload(exc.kind, exc.message))
    if isinstance(exc, ActionDeniedError):
        # The safety layer's PolicyDenied carries the payload the model should read (why,
        # which rule, do not retry as is); any other refusal gets the same error type.
        payload = exc.payload
        if isinstance(payload, dict):
            return ToolOutcome(payload)
        return ToolOutcome(err_payload("policy_denied", str(exc)))
    if isinstance(exc, (OSError, ValueError)):
        return ToolOutcome(err_payload("action_failed", f"{type(exc).__name__}: {exc}"))
    return None


async def _translate_and_act(tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    """The tool translates the call; its action, if any, goes the one path to the desktop.
    A refusal on the way keeps what the tool read from the arguments (``detail``)."""
    from deskpilot.agent.tools._act import act  # beside this module, which it builds on

    outcome = await tool.run(ctx, arguments)
    if outcome.action is None or isinstance(outcome.action, PASSIVE):
        return outcome
    try:
        performed = await act(ctx, outcome.action)
    except DeskpilotError as exc:
        refused = _refusal(exc)
        if refused is None:
            raise
        refused.detail = outcome.detail
        return refused
    outcome.action = performed.action
    outcome.acted = True
    if performed.typed is not None and "typed" in outcome.payload:
        outcome.payload["typed"] = performed.typed
        if performed.interrupted:
            outcome.payload.pop("submitted", None)  # the Enter at the text's end was not typed
            outcome.payload["interrupted"] = True
    return outcome


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
