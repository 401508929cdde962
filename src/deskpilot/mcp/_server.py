"""The MCP tools over a :class:`~deskpilot.mcp._desktop.Desktop`, with the official SDK (v2: ``MCPServer``).

This is the only module that imports the SDK's server side. Each tool checks its
arguments (the SDK validates the typed signature; this module refuses unknown argument
names, NaN/inf, coordinates off the image and unknown keys), builds the typed
:data:`~deskpilot.actions.Action` and hands it to the desktop, which checks it with the
policy and performs it. A refusal is a tool error (``isError``) that says why; nothing
is performed for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from deskpilot._errors import ActionDeniedError, ArgumentError, DeskpilotError, RunInterrupted
from deskpilot._version import __version__
from deskpilot.actions import Action, Click, Drag, KeyPress, MoveMouse, Scroll, TypeText
from deskpilot.mcp._desktop import Coordinates, Desktop, ImageResult, StepResult, b64

__all__ = ["ACTING_TOOLS", "LOOKING_TOOLS", "TOOL_NAMES", "build_server"]

#: Tools that only look (``--read-only`` serves these alone).
LOOKING_TOOLS = ("screenshot", "zoom", "screen_info")
#: Tools that send input.
ACTING_TOOLS = ("click", "move_mouse", "drag", "scroll", "type_text", "press_keys", "wait")
TOOL_NAMES = (*LOOKING_TOOLS, *ACTING_TOOLS)

INSTRUCTIONS = """\
deskpilot drives this computer's screen, mouse and keyboard. Take a screenshot first; x and y are
pixels of the screenshot image you saw (or 0..1000 with coordinates="norm1000"); pass its `frame`
to bind a call to that image. Every acting tool returns the settled screenshot after the action.
Denied actions (system key combos, launchers, typing secrets, forbidden windows) come back as
errors that say why."""

# ---------------------------------------------------------------------- argument types
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
XCoord = Annotated[float, Field(strict=True, allow_inf_nan=False, description="x: a pixel of the screenshot image (or 0..1000 with coordinates=norm1000)")]
YCoord = Annotated[float, Field(strict=True, allow_inf_nan=False, description="y: a pixel of the screenshot image (or 0..1000 with coordinates=norm1000)")]
FrameArg = Annotated[str | None, Field(description="the `frame` of the screenshot the coordinates refer to (default: the last one)")]
CoordsArg = Annotated[Literal["pixels", "norm1000"] | None, Field(description="pixels of the image (default) or norm1000 (0..1000 over the image)")]
AfterArg = Annotated[bool, Field(strict=True, description="return the settled screenshot after the action")]
MaxBytes = Annotated[int | None, Field(strict=True, ge=10_000, le=50_000_000, description="largest image in the result, bytes of base64 (default keeps a result under 1 MB)")]
Button = Literal["left", "right", "middle"]


def _text(data: dict[str, Any]) -> TextContent:
    return TextContent(type="text", text=json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def _image_blocks(image: ImageResult, extra: dict[str, Any] | None = None) -> list[ContentBlock]:
    meta = image.metadata()
    if extra:
        meta = {**extra, **meta}
    return [ImageContent(type="image", data=b64(image.png), mime_type="image/png"), _text(meta)]


def _step_result(step: StepResult) -> CallToolResult:
    if step.image is None:
        return CallToolResult(content=[_text(step.payload)])
    return CallToolResult(content=_image_blocks(step.image, step.payload))


def _refusal(exc: BaseException) -> ToolError:
    """The tool error the client reads: the reason, never a traceback."""
    if isinstance(exc, ActionDeniedError):
        payload = exc.payload or {}
        error = payload.get("error")
        reason = error.get("message") if isinstance(error, dict) else None
        rule = exc.details.get("rule")
        text = f"policy_denied: {reason or exc}" + (f" (rule {rule})" if rule else "")
        before = payload.get("performed_before")
        if before:
            text += "; sent before it: " + ", ".join(str(r.get("key") or r.get("kind")) for r in before)
        return ToolError(text)
    if isinstance(exc, ArgumentError):
        return ToolError(f"{exc.kind}: {exc}")
    if isinstance(exc, RunInterrupted):
        return ToolError(f"stopped: {exc}")
    return ToolError(f"{type(exc).__name__}: {exc}")


class _McpServer(MCPServer[Any]):
    """MCPServer that refuses argument names a tool does not have (the SDK ignores them)
    and records calls refused before a tool ran (malformed arguments) as turns."""

    def __init__(self, desktop: Desktop, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.desktop = desktop
        self.parameters: dict[str, frozenset[str]] = {}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        allowed = self.parameters.get(name)
        if allowed is not None:
            unknown = sorted(set(arguments) - allowed)
            if unknown:
                message = f"unknown argument {', '.join(map(repr, unknown))} for {name} (it takes {', '.join(sorted(allowed)) or 'none'})"
                await self.desktop.record_refused(name, arguments, "invalid_args", message)
                raise ToolError(f"invalid_args: {message}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.__cause__.errors()})
                await self.desktop.record_refused(name, arguments, "invalid_args", f"invalid {', '.join(fields)}")
            raise


def build_server(desktop: Desktop, *, tools: tuple[str, ...] | None = None) -> MCPServer[Any]:
    """The MCP server of ``desktop``: ``tools`` (None: all; ``--read-only``: the looking ones)."""
    server = _McpServer(
        desktop,
        name="deskpilot",
        title="deskpilot desktop",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    wanted = set(tools if tools is not None else TOOL_NAMES)
    if desktop.options.read_only:
        wanted &= set(LOOKING_TOOLS)
    unknown = wanted - set(TOOL_NAMES)
    if unknown:
        raise ValueError(f"unknown tools {sorted(unknown)} (deskpilot serves {', '.join(TOOL_NAMES)})")

    def add(fn: Callable[..., Any], *, read_only: bool, destructive: bool, title: str) -> None:
        name = fn.__name__.removeprefix("tool_")
        if name not in wanted:
            return
        import inspect

        server.parameters[name] = frozenset(inspect.signature(fn).parameters)
        server.add_tool(
            fn,
            name=name,
            title=title,
            description=(fn.__doc__ or "").strip(),
            annotations=ToolAnnotations(
                title=title,
                read_only_hint=read_only,
                destructive_hint=destructive,
                idempotent_hint=read_only,
                open_world_hint=False,
            ),
            structured_output=False,
        )

    async def act(name: str, arguments: dict[str, Any], build: Callable[[], Any], *, after: bool,
                  max_bytes: int | None) -> CallToolResult:
        try:
            async with desktop.call(name, arguments) as turn:
                built = await build()
                actions: list[Action] = built if isinstance(built, list) else [built]
                step = await desktop.act(turn, actions, screenshot_after=after, max_bytes=max_bytes)
                return _step_result(step)
        except (DeskpilotError, RunInterrupted) as exc:
            raise _refusal(exc) from None

    async def point(x: float, y: float, frame: str | None, coordinates: Coordinates | None) -> tuple[int, int]:
        found = await desktop.frame_for(frame)
        return desktop.point(found, x, y, coordinates)

    # ------------------------------------------------------------------ looking
    async def tool_screenshot(
        monitor: Annotated[int | None, Field(strict=True, ge=1, le=64, description="1-based monitor (default: the configured one)")] = None,
        region: Annotated[list[Annotated[int, Field(strict=True)]] | None, Field(min_length=4, max_length=4, description="[x, y, width, height] in physical pixels of the monitor")] = None,
        max_bytes: MaxBytes = None,
        max_width: Annotated[int | None, Field(strict=True, ge=64, le=16384, description="largest image width (default 1920)")] = None,
        max_height: Annotated[int | None, Field(strict=True, ge=64, le=16384, description="largest image height (default 1080)")] = None,
    ) -> CallToolResult:
        """Capture the screen as a PNG, with its `frame` id, image size, the screen rectangle it shows, the scale and the cursor position. Coordinates you send later are pixels of this image."""
        arguments = {k: v for k, v in {"monitor": monitor, "region": region, "max_bytes": max_bytes,
                                        "max_width": max_width, "max_height": max_height}.items() if v is not None}
        box = None
        if max_width is not None or max_height is not None:
            default = desktop.options.max_image
            box = (max_width or default[0], max_height or default[1])
        try:
            async with desktop.call("screenshot", arguments) as turn:
                image = await desktop.screenshot(
                    turn, monitor=monitor, region=tuple(region) if region else None,  # type: ignore[arg-type]
                    max_bytes=max_bytes, max_size=box,
                )
                return CallToolResult(content=_image_blocks(image))
        except (DeskpilotError, RunInterrupted) as exc:
            raise _refusal(exc) from None

    async def tool_zoom(
        x1: XCoord, y1: YCoord, x2: XCoord, y2: YCoord,
        frame: FrameArg = None, coordinates: CoordsArg = None, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Show the region between (x1, y1) and (x2, y2) of a screenshot at native resolution (a new frame: coordinates on it act inside that region)."""
        arguments = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, **({"frame": frame} if frame else {})}
        try:
            async with desktop.call("zoom", arguments) as turn:
                found = await desktop.frame_for(frame)
                a = desktop.point(found, x1, y1, coordinates)
                b = desktop.point(found, x2, y2, coordinates)
                image = await desktop.zoom(turn, found, (a, b), max_bytes)
                return CallToolResult(content=_image_blocks(image))
        except (DeskpilotError, RunInterrupted) as exc:
            raise _refusal(exc) from None

    async def tool_screen_info() -> CallToolResult:
        """The monitors with their positions (physical pixels) and DPI scale, the primary one, and the cursor position."""
        try:
            async with desktop.call("screen_info", {}) as turn:
                info = await desktop.screen_info()
                turn.record["result"] = {"ok": True}
                return CallToolResult(content=[_text(info)])
        except (DeskpilotError, RunInterrupted) as exc:
            raise _refusal(exc) from None

    # ------------------------------------------------------------------ acting
    async def tool_click(
        x: XCoord, y: YCoord,
        button: Button = "left",
        count: Annotated[int, Field(strict=True, ge=1, le=3, description="1 click, 2 double, 3 triple")] = 1,
        frame: FrameArg = None, coordinates: CoordsArg = None,
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Click at (x, y) of the screenshot image; returns whether the screen changed and the settled screenshot after the click."""
        async def build() -> Action:
            return Click(await point(x, y, frame, coordinates), button, count)

        args = {"x": x, "y": y, "button": button, "count": count, **({"frame": frame} if frame else {})}
        return await act("click", args, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_move_mouse(
        x: XCoord, y: YCoord, frame: FrameArg = None, coordinates: CoordsArg = None,
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Move the pointer to (x, y) of the screenshot image (hover)."""
        async def build() -> Action:
            return MoveMouse(await point(x, y, frame, coordinates))

        args = {"x": x, "y": y, **({"frame": frame} if frame else {})}
        return await act("move_mouse", args, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_drag(
        x1: XCoord, y1: YCoord, x2: XCoord, y2: YCoord,
        button: Button = "left", frame: FrameArg = None, coordinates: CoordsArg = None,
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Press at (x1, y1), move to (x2, y2) and release (a drag with the left button)."""
        async def build() -> Action:
            if button != "left":
                raise ArgumentError("unsupported", f"drag presses the left button; {button} drags are not supported")
            start = await point(x1, y1, frame, coordinates)
            end = await point(x2, y2, frame, coordinates)
            return Drag(start, end)

        args = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "button": button, **({"frame": frame} if frame else {})}
        return await act("drag", args, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_scroll(
        x: XCoord, y: YCoord,
        direction: Literal["up", "down", "left", "right"],
        amount: Annotated[int, Field(strict=True, ge=1, le=50, description="wheel notches")] = 3,
        frame: FrameArg = None, coordinates: CoordsArg = None,
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Scroll the mouse wheel at (x, y): `amount` notches up, down, left or right."""
        async def build() -> Action:
            where = await point(x, y, frame, coordinates)
            dy = {"down": amount, "up": -amount}.get(direction, 0)
            dx = {"right": amount, "left": -amount}.get(direction, 0)
            return Scroll(where, dy=dy, dx=dx)

        args = {"x": x, "y": y, "direction": direction, "amount": amount, **({"frame": frame} if frame else {})}
        return await act("scroll", args, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_type_text(
        text: Annotated[str, Field(strict=True, min_length=1, description="the text, exactly as it should appear (any Unicode)")],
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Type text into the focused field exactly as given (any Unicode, whatever the keyboard layout and lock keys). Click the field first."""
        limit = desktop.config.agent.max_type_chars

        async def build() -> Action:
            if len(text) > limit:
                raise ArgumentError("text_too_long", f"text has {len(text)} characters; at most {limit} per call: type it in parts")
            return TypeText(text)

        return await act("type_text", {"text": text}, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_press_keys(
        keys: Annotated[str | list[Annotated[str, Field(strict=True)]], Field(description='a key or combo ("enter", "ctrl+shift+t") or a sequence of them (["ctrl+a", "delete"])')],
        screenshot_after: AfterArg = True, max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Press a key or a combination, or several in order: enter, tab, escape, backspace, delete, arrows, home, end, pageup, pagedown, f1..f12, ctrl+c, ctrl+shift+t."""
        sequence = [keys] if isinstance(keys, str) else list(keys)

        async def build() -> list[Action]:
            if not sequence or len(sequence) > 32:
                raise ArgumentError("invalid_args", "keys must be a combo or a list of 1..32 combos")
            # Every name is checked before anything is pressed: an unknown key sends nothing.
            return [KeyPress(Desktop.key_combo(combo)) for combo in sequence]

        return await act("press_keys", {"keys": keys}, build, after=screenshot_after, max_bytes=max_bytes)

    async def tool_wait(
        seconds: Annotated[float | None, Field(strict=True, ge=0, le=60, allow_inf_nan=False, description="settled: pause this long first; changed: the longest to wait (default 10)")] = None,
        until: Literal["settled", "changed"] = "settled",
        max_bytes: MaxBytes = None,
    ) -> CallToolResult:
        """Wait until the screen has settled (or until it changes), then return whether it changed and the settled screenshot."""
        arguments = {"until": until, **({"seconds": seconds} if seconds is not None else {})}
        try:
            async with desktop.call("wait", arguments) as turn:
                return _step_result(await desktop.wait(turn, seconds=seconds, until=until, max_bytes=max_bytes))
        except (DeskpilotError, RunInterrupted) as exc:
            raise _refusal(exc) from None

    add(tool_screenshot, read_only=True, destructive=False, title="Screenshot")
    add(tool_zoom, read_only=True, destructive=False, title="Zoom into a region")
    add(tool_screen_info, read_only=True, destructive=False, title="Monitors and cursor")
    add(tool_click, read_only=False, destructive=True, title="Click")
    add(tool_move_mouse, read_only=False, destructive=False, title="Move the pointer")
    add(tool_drag, read_only=False, destructive=True, title="Drag")
    add(tool_scroll, read_only=False, destructive=False, title="Scroll")
    add(tool_type_text, read_only=False, destructive=True, title="Type text")
    add(tool_press_keys, read_only=False, destructive=True, title="Press keys")
    add(tool_wait, read_only=True, destructive=False, title="Wait for the screen")
    return server
