"""One MCP session's desktop: the screen it shows, the hands it moves, the guard and the record.

:class:`Desktop` holds what ``deskpilot run`` sets up for a run (:mod:`deskpilot.agent._run`),
without a model: the screen on its capture thread, the hands on their input thread, the
safety guard built by :func:`deskpilot.agent._run.build_guard` (policy, kill switch,
window rules), a :class:`~deskpilot.agent._session.Session` for the settle, the change
detection and the turn records, and a run directory (every tool call one turn).

Every input goes through :meth:`Desktop._act`, which hands the typed
:data:`~deskpilot.actions.Action` to the agent's one path (:func:`deskpilot.agent.tools.act`):
the policy checks exactly the action that is then performed, on the input thread, and the
turn records the action as sent. Nothing else in this package sends input.

The MCP SDK is not imported here (:mod:`deskpilot.mcp._server` binds these operations to
tools), so a change of SDK line touches one file.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np

from deskpilot import imaging
from deskpilot._errors import (
    ActionDeniedError,
    ArgumentError,
    DeskpilotError,
    RunInterrupted,
)
from deskpilot.actions import Action
from deskpilot.agent import (
    AgentConfig,
    CapturerScreen,
    NullReporter,
    Screen,
    Session,
    Shot,
    ThreadBound,
    Turn,
    change_box,
    expand_rect,
    resolve_limits,
)
from deskpilot.agent.client import ChatClient
from deskpilot.agent.tools import ToolContext, act, err_payload, key_names
from deskpilot.geometry import Mapping, Rect
from deskpilot.input import Hands
from deskpilot.rundir import RunLog, Summary
from deskpilot.safety import SafetyGuard

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_IMAGE",
    "Coordinates",
    "Desktop",
    "DesktopOptions",
    "ImageResult",
    "SeenFrame",
    "StepResult",
]

#: A tool result's image stays under this many bytes of base64 (Claude Desktop refuses a
#: tool result over 1 MB; the text beside the image is a few hundred bytes).
DEFAULT_MAX_BYTES = 950_000
#: The default image size: the screen fit into this box (a 4K screen is sent at 1920x1080).
DEFAULT_MAX_IMAGE = (1920, 1080)
#: The smallest image the size cap shrinks to (below it a screenshot is no use).
MIN_IMAGE_EDGE = 64
#: Frames remembered for ``frame=`` arguments.
FRAMES_KEPT = 64

Coordinates = Literal["pixels", "norm1000"]


@dataclass(frozen=True, slots=True)
class SeenFrame:
    """A screenshot the client saw: the mapping of its pixels and the screen it was taken on."""

    id: str
    mapping: Mapping
    #: The monitor layout when it was taken (rects); a frame is refused once it changed.
    layout: tuple[tuple[int, int, int, int], ...]
    monitor: int


@dataclass(slots=True)
class ImageResult:
    """A screenshot as the tool result carries it."""

    png: bytes
    frame: SeenFrame
    cursor: tuple[int, int] | None
    #: The image's base64 text length (what the size cap bounds).
    b64_bytes: int
    shrunk: bool = False

    def metadata(self) -> dict[str, Any]:
        m = self.frame.mapping
        sx, sy = m.scale
        info: dict[str, Any] = {
            "frame": self.frame.id,
            "image_size": [m.image_width, m.image_height],
            "screen_rect": [m.area.left, m.area.top, m.area.width, m.area.height],
            "scale": [round(sx, 6), round(sy, 6)],
            "monitor": self.frame.monitor,
            "cursor": None if self.cursor is None else list(m.physical_to_image(*self.cursor)),
            "cursor_screen": None if self.cursor is None else list(self.cursor),
            "png_bytes": len(self.png),
        }
        if self.shrunk:
            info["shrunk_to_fit"] = True
        return info


@dataclass(slots=True)
class StepResult:
    """What an acting tool returns: its payload and the settled screenshot after it."""

    payload: dict[str, Any]
    image: ImageResult | None = None


@dataclass(slots=True)
class DesktopOptions:
    """``deskpilot mcp``'s own settings (the rest is the agent's configuration)."""

    coordinates: Coordinates = "pixels"
    max_image: tuple[int, int] = DEFAULT_MAX_IMAGE
    max_bytes: int = DEFAULT_MAX_BYTES
    read_only: bool = False
    #: Acting tool calls allowed (None: no limit; the client paces the session).
    max_steps: int | None = None
    #: Name of the run directory (None: a timestamp).
    run_name: str | None = None
    #: Whether the kill switch watches this desktop (None: when the hands are real input).
    watch_desktop: bool | None = None
    #: Reads the monitor layout a frame is checked against (the OS's, fresh, by default).
    layout_reader: Callable[[], tuple[tuple[int, int, int, int], ...]] | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)


def _fit(width: int, height: int, box: tuple[int, int]) -> tuple[int, int]:
    """``width`` x ``height`` scaled down (never up) to fit ``box``, aspect kept."""
    scale = min(1.0, box[0] / width, box[1] / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


#: Capture backends that see the compositor's own monitors, not the X server's (on a Wayland
#: session there may be no X display, or an Xwayland one with its own, logical, layout).
_WAYLAND_CAPTURE = ("mutter", "wlroots")


def read_layout(backend: str = "mss") -> tuple[tuple[int, int, int, int], ...]:
    """The monitors as the capture backend named ``backend`` sees them now: through mss, a
    fresh connection (mss caches its list); on Wayland, the compositor's (a wlroots
    connection of its own; Mutter's session, shared with the screen's capture)."""
    if backend in _WAYLAND_CAPTURE:
        from deskpilot.capture import make_backend

        found = make_backend(backend, cursor=False)
        try:
            return tuple(m.rect.as_tuple() for m in found.monitors())
        finally:
            found.close()
    import mss

    with mss.MSS() as sct:
        return tuple((int(m["left"]), int(m["top"]), int(m["width"]), int(m["height"])) for m in sct.monitors[1:])


def _finite(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ArgumentError("invalid_args", f"{name} must be a finite number, got {value!r}")
    return float(value)


class Desktop:
    """See the module doc. Open with :meth:`open` (an async context manager)."""

    def __init__(self, config: AgentConfig, options: DesktopOptions) -> None:
        self.config = config
        self.options = options
        self.capture = ThreadBound("deskpilot-capture")
        self.runlog: RunLog | None = None
        self.session: Session | None = None
        self.guard: SafetyGuard | None = None
        self.ctx: ToolContext | None = None
        self.view_key: tuple[int | None, tuple[int, int]] | None = None
        self._screen: Screen | None = None
        self.frames: OrderedDict[str, SeenFrame] = OrderedDict()
        self.last_frame: SeenFrame | None = None
        self.layout: tuple[tuple[int, int, int, int], ...] = ()
        self.steps = 0
        self.calls = 0
        self.errors = 0
        self._frame_numbers = 0
        self._turns = 0
        self._lock = asyncio.Lock()
        self._input: Any = None  # the input thread's executor
        self._client: ChatClient | None = None
        self.stopped: str | None = None
        #: Told (from any thread) when the session must end: the kill switch tripped.
        self.on_stop: Callable[[str], None] | None = None
        self.started = time.time()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        config: AgentConfig,
        options: DesktopOptions,
        *,
        hands_factory: Callable[[], Hands] | None = None,
        screen_factory: Callable[..., Screen] | None = None,
    ) -> Any:
        desktop = cls(config, options)
        async with contextlib.AsyncExitStack() as stack:
            await desktop._setup(stack, hands_factory, screen_factory)
            yield desktop

    async def _setup(
        self,
        stack: contextlib.AsyncExitStack,
        hands_factory: Callable[[], Hands] | None,
        screen_factory: Callable[..., Screen] | None,
    ) -> None:
        import concurrent.futures

        from deskpilot.agent import build_guard, drives_desktop, open_damage, reads_x11_windows
        config = self.config
        self._screen_factory = screen_factory or CapturerScreen
        runlog = self.runlog = RunLog.create(
            config.run.runs_dir, name=self.options.run_name, save_screenshots=config.run.save_screenshots
        )
        stack.callback(self._write_summary)
        self._write_run_info()
        if sys.platform == "win32":
            # Per-monitor-v2 before any capture or input, so both use physical pixels.
            from deskpilot._win32.dpi import ensure_dpi_awareness

            self.options.extra_info["dpi_awareness"] = ensure_dpi_awareness().as_dict()
        stack.push_async_callback(self._close_screen)
        screen = await self.capture.call(lambda: self._make_screen(None, self.options.max_image))
        # The layout as the chosen capture backend sees it (``auto`` resolved: mss, mutter...).
        backend = config.screen.capture_backend
        if backend == "auto" and self.options.layout_reader is None and sys.platform != "win32":
            from deskpilot.capture import auto_backend

            backend = auto_backend("capture")
        self._read_layout = self.options.layout_reader or (lambda: read_layout(backend))
        self.layout = await self.capture.call(self._read_layout)
        executor = self._input = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="deskpilot-input")
        stack.push_async_callback(self._release_input)
        loop = asyncio.get_running_loop()
        hands: Hands = await loop.run_in_executor(executor, hands_factory or self._default_hands)
        first = await self.capture.call(screen.grab)
        ctx = self.ctx = ToolContext(
            hands=hands,
            mapping=first.mapping,
            monitor=screen.monitor,
            max_type_chars=config.agent.max_type_chars,
            _executor=executor,
        )
        desktop = self.options.watch_desktop if self.options.watch_desktop is not None else drives_desktop(hands)
        limits = resolve_limits(config)
        guard = self.guard = build_guard(
            config, self.options.max_steps or limits.max_steps, desktop=desktop and not config.agent.dry_run,
            windows=reads_x11_windows(hands),
        )
        if guard is not None:
            ctx.policy = guard.check_action
            ctx.policy_async = guard.check_action_async
            ctx.hands = guard.wrap_hands(hands)
        # The session's model client is never used: the MCP client is the model here.
        client = self._client = ChatClient("http://127.0.0.1:9/v1/chat/completions", "mcp-client")
        stack.push_async_callback(client.aclose)
        session = self.session = Session(
            config=config,
            task="mcp session",
            client=client,
            screen=screen,
            capture=self.capture,
            ctx=ctx,
            runlog=runlog,
            reporter=NullReporter(),
            mode="mcp",
            limits=limits,
            guard=guard,
        )
        stack.callback(session.wind_down)
        session.damage, session.settle_signal = open_damage(config, screen)
        if guard is not None:
            if guard.killswitch is not None:
                guard.killswitch.add_callback(lambda trip: self._stop_from_thread(f"kill switch ({trip.source}): {trip.reason}"))
            await asyncio.to_thread(guard.start)
            stack.push_async_callback(asyncio.to_thread, guard.close)

    def _default_hands(self) -> Hands:
        from deskpilot.input import InputController

        return InputController("dry" if self.config.agent.dry_run else self.config.screen.input_backend)

    def _make_screen(self, monitor: int | None, box: tuple[int, int]) -> Screen:
        """A screen of ``monitor`` (None: the configured one) at the size that fits ``box``."""
        cfg = self.config.screen
        index = monitor if monitor is not None else cfg.monitor
        factory = self._screen_factory
        # The monitor's size decides the image size: a first screen at any size reads it.
        screen = factory(size=box, monitor=index, backend=cfg.capture_backend, cursor=cfg.cursor)
        size = _fit(screen.area.width, screen.area.height, box)
        if size != screen.image_size:
            screen.close()
            screen = factory(size=size, monitor=index, backend=cfg.capture_backend, cursor=cfg.cursor)
        self.view_key = (monitor, box)
        self._screen = screen
        return screen

    def _stop_from_thread(self, reason: str) -> None:
        self.stop(reason)
        if self.on_stop is not None:
            self.on_stop(reason)

    def stop(self, reason: str) -> None:
        """End the session: typing stops within a chunk, every later call is refused."""
        if self.stopped is None:
            self.stopped = reason
        if self.ctx is not None:
            self.ctx.stop.set()

    async def _release_input(self) -> None:
        """Held keys and buttons released first (a client killed mid-action leaves nothing pressed)."""
        ctx = self.ctx
        if ctx is None:
            if self._input is not None:
                self._input.shutdown(wait=True, cancel_futures=True)
            return
        ctx.stop.set()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop.run_in_executor(self._input, ctx.hands.release_all), 5.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop.run_in_executor(self._input, ctx.hands.close), 2.0)
        ctx.close()

    async def _close_screen(self) -> None:
        screen = self._screen
        if screen is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.capture.call(screen.close), 2.0)
        self.capture.shutdown()

    def _write_run_info(self) -> None:
        from deskpilot.agent import run_info

        assert self.runlog is not None
        self.runlog.write_run_info(
            run_info(
                self.config,
                task="mcp session",
                scenario=None,
                mode="mcp",
                toolset="mcp",
                started=self.started,
                mcp={
                    "coordinates": self.options.coordinates,
                    "max_image": list(self.options.max_image),
                    "max_bytes": self.options.max_bytes,
                    "read_only": self.options.read_only,
                    "max_steps": self.options.max_steps,
                },
            )
        )

    def _write_summary(self) -> None:
        runlog, session = self.runlog, self.session
        if runlog is None:
            return
        outcome = "interrupted" if self.stopped else "answered"
        extra: dict[str, Any] = dict(self.options.extra_info)
        if self.guard is not None:
            extra["safety"] = self.guard.record()
        if session is not None:
            session.wind_down()
            summary = session.summary(
                outcome=outcome,
                answer="",
                error=f"stopped by {self.stopped}" if self.stopped else None,
                extra=extra,
            )
            summary["steps"] = self.steps
            summary["totals"]["tool_calls"] = self.calls
            summary["totals"]["tool_errors"] = self.errors
        else:
            summary = cast(Summary, {"task": "mcp session", "mode": "mcp", "outcome": "error", "error": "setup failed",
                                     "steps": 0, "started": round(self.started, 3), "ended": round(time.time(), 3), **extra})
        summary["run_dir"] = str(runlog.path)
        runlog.flush()
        summary["run_log_errors"] = list(runlog.errors)
        with contextlib.suppress(Exception):
            runlog.write_summary(summary)
        runlog.close()

    @property
    def run_dir(self) -> str:
        assert self.runlog is not None
        return str(self.runlog.path)

    # ------------------------------------------------------------------ frames
    def _register(self, mapping: Mapping) -> SeenFrame:
        self._frame_numbers += 1
        frame = SeenFrame(f"f{self._frame_numbers}", mapping, self.layout, self._monitor_index())
        self.frames[frame.id] = frame
        while len(self.frames) > FRAMES_KEPT:
            self.frames.popitem(last=False)
        self.last_frame = frame
        return frame

    def _monitor_index(self) -> int:
        key = self.view_key
        if key is not None and key[0] is not None:
            return key[0]
        return int(self.config.screen.monitor)

    async def _check_layout(self) -> bool:
        """Read the monitor layout again; True when it changed since the last read."""
        layout = await asyncio.to_thread(self._read_layout)
        changed = layout != self.layout
        self.layout = layout
        return changed

    async def frame_for(self, frame_id: str | None) -> SeenFrame:
        """The frame a call's coordinates refer to (None: the last screenshot's), refused
        when the screen's geometry changed since it was taken."""
        if frame_id is None:
            frame = self.last_frame
            if frame is None:
                raise ArgumentError("no_screenshot", "take a screenshot first: coordinates are pixels of a screenshot")
        else:
            found = self.frames.get(frame_id)
            if found is None:
                raise ArgumentError("unknown_frame", f"no frame {frame_id!r} (frames are kept for the last {FRAMES_KEPT} screenshots)")
            frame = found
        await self._check_layout()
        if frame.layout != self.layout:
            raise ArgumentError(
                "stale_frame",
                f"frame {frame.id} was taken on a screen that has changed since (monitors then "
                f"{[list(r) for r in frame.layout]}, now {[list(r) for r in self.layout]}): take a new screenshot",
                frame=frame.id,
            )
        return frame

    def point(self, frame: SeenFrame, x: float, y: float, coordinates: Coordinates | None) -> tuple[int, int]:
        """The physical pixel a call's ``x``, ``y`` name on ``frame``."""
        x, y = _finite(x, "x"), _finite(y, "y")
        mode = coordinates or self.options.coordinates
        m = frame.mapping
        if mode == "norm1000":
            if not (0 <= x <= 1000 and 0 <= y <= 1000):
                raise ArgumentError("out_of_range", f"({x:g}, {y:g}) is outside 0..1000 (coordinates=norm1000)")
            return m.norm_to_physical(x, y)
        if not (0 <= x < m.image_width and 0 <= y < m.image_height):
            raise ArgumentError(
                "out_of_range",
                f"({x:g}, {y:g}) is outside the {m.image_width}x{m.image_height} image of frame {frame.id}",
            )
        return m.image_to_physical(x, y)

    # ------------------------------------------------------------------ images
    def _encode(self, shot: Shot, max_bytes: int) -> tuple[bytes, Mapping, bool]:
        """The PNG of ``shot`` under ``max_bytes`` of base64: the configured level first,
        then the strongest level, then smaller images (each at both levels)."""
        rgb, mapping, shrunk = shot.rgb, shot.mapping, False
        level = self.config.screen.png_level
        while True:
            png = imaging.encode_png(rgb, level=level)
            if _b64_len(png) > max_bytes and level < 9:
                png = imaging.encode_png(rgb, level=9)
            if _b64_len(png) <= max_bytes:
                return png, mapping, shrunk
            height, width = rgb.shape[:2]
            if min(width, height) <= MIN_IMAGE_EDGE:
                raise ArgumentError(
                    "too_large", f"no image of this screen fits in max_bytes={max_bytes} (tried down to {width}x{height})"
                )
            factor = max(0.5, min(0.9, math.sqrt(max_bytes / _b64_len(png)) * 0.95))
            # Both sides by the same factor (the aspect ratio is the client's geometry), the
            # shorter no smaller than MIN_IMAGE_EDGE.
            factor = max(factor, MIN_IMAGE_EDGE / min(width, height))
            size = (max(1, round(width * factor)), max(1, round(height * factor)))
            rgb = np.ascontiguousarray(imaging.downscale(rgb, size))
            mapping = Mapping(mapping.area, size[0], size[1])
            shrunk = True

    async def _image(self, turn: Turn, shot: Shot, max_bytes: int | None) -> ImageResult:
        started = time.perf_counter()
        png, mapping, shrunk = await asyncio.to_thread(self._encode, shot, max_bytes or self.options.max_bytes)
        turn.timer.add("encode", (time.perf_counter() - started) * 1000)
        frame = self._register(mapping)
        assert self.runlog is not None and self.session is not None
        screenshot = self.runlog.save_screenshot(png, prefix="zoom_" if shot.zoomed else None)
        turn.record["observation"] = {
            "screenshot": screenshot,
            "mapping": self.session.describe(mapping),
            "digest": f"{imaging.frame_digest(shot.rgb) & 0xFFFFFFFFFFFFFFFF:016x}",
            "reused": False,
            "unchanged": False,
            "zoomed": shot.zoomed,
            "png_bytes": len(png),
            "sent": "image",
        }
        if not shot.zoomed and self.ctx is not None:
            self.ctx.mapping = mapping
        return ImageResult(png, frame, shot.cursor, _b64_len(png), shrunk)

    async def _use_view(self, monitor: int | None, box: tuple[int, int]) -> None:
        """Make the session's screen show ``monitor`` at the size that fits ``box`` (kept
        when it already does and the monitors have not changed)."""
        key = (monitor, box)
        if key == self.view_key and not await self._check_layout():
            return
        session = self.session
        assert session is not None
        old = self._screen
        screen = await self.capture.call(lambda: self._make_screen(monitor, box))
        if old is not None:
            with contextlib.suppress(Exception):
                await self.capture.call(old.close)
        session.screen = screen
        session.latest_full = None
        # Drawing notifications watched the old area: poll from now on.
        session.wind_down()
        session.settle_signal = "poll"

    # ------------------------------------------------------------------ turns
    def _turn(self, name: str, arguments: dict[str, Any]) -> Turn:
        self._turns += 1
        turn = Turn(self._turns, "client")
        turn.record.update({"turn": turn.number, "time": round(time.time(), 3), "mode": "mcp", "role": "client"})
        turn.record["tool_call"] = {"id": f"call_{turn.number}", "name": name, "arguments": dict(arguments)}
        return turn

    def _close(self, turn: Turn, payload: dict[str, Any]) -> None:
        assert self.session is not None
        turn.record["result"] = payload
        self.calls += 1
        if not payload.get("ok", True):
            self.errors += 1
        self.session.close_turn(turn, defer_print=False)

    async def record_refused(self, name: str, arguments: dict[str, Any], kind: str, message: str) -> None:
        """A call refused before its tool ran (malformed arguments): a turn that performed nothing."""
        async with self._lock:
            turn = self._turn(name, arguments)
            self._close(turn, err_payload(kind, message))

    @contextlib.asynccontextmanager
    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """One tool call: one at a time on this desktop, recorded as one turn whatever happens."""
        async with self._lock:
            turn = self._turn(name, arguments)
            try:
                yield turn
            except ActionDeniedError as exc:
                denial = exc.payload
                self._close(turn, dict(denial) if isinstance(denial, dict) else err_payload("policy_denied", str(exc)))
                raise
            except ArgumentError as exc:
                self._close(turn, err_payload(exc.kind, str(exc)))
                raise
            except (DeskpilotError, RunInterrupted) as exc:
                self._close(turn, err_payload(type(exc).__name__, str(exc)))
                raise
            except BaseException as exc:
                kind = "interrupted" if isinstance(exc, asyncio.CancelledError) else "error"
                self._close(turn, err_payload(kind, f"{type(exc).__name__}: {exc}"))
                raise
            else:
                if not turn.closed:
                    self._close(turn, turn.record.get("result") or {"ok": True})

    # ------------------------------------------------------------------ the one place input is sent
    async def _act(self, action: Action) -> tuple[Action, dict[str, Any]]:
        """Send ``action`` through the agent's one path (:func:`deskpilot.agent.tools.act`):
        the policy checks exactly the action that is then performed on the input thread
        (a text in chunks, the stop flag checked between them). The only place this
        package causes input. Returns the action as sent and what the client is told."""
        ctx = self.ctx
        assert ctx is not None
        if self.stopped:
            raise RunInterrupted(f"the session was stopped: {self.stopped}", reason=self.stopped)
        performed = await act(ctx, action, pauses=False)
        if performed.typed is None:
            return performed.action, {}
        return performed.action, {"typed": performed.typed, **({"interrupted": True} if performed.interrupted else {})}

    async def act(
        self, turn: Turn, actions: Sequence[Action], *, screenshot_after: bool, max_bytes: int | None = None
    ) -> StepResult:
        """Perform ``actions`` in order (each checked by the policy just before it is sent),
        then settle and report whether the screen changed, with the settled screenshot."""
        session = self.session
        assert session is not None
        if self.options.read_only:
            raise ArgumentError("read_only", "this server is read-only (--read-only): it only looks")
        if self.options.max_steps is not None and self.steps >= self.options.max_steps:
            raise ArgumentError("max_steps", f"the session's {self.options.max_steps} actions (--max-steps) are used up")
        self.steps += 1
        if self.guard is not None and self.guard.budget is not None:
            self.guard.budget.steps = self.steps
        before = session.latest_full
        assert self.ctx is not None
        turn.record["mapping"] = session.describe(self.ctx.mapping)
        payload: dict[str, Any] = {"ok": True}
        started = time.perf_counter()
        records = []
        try:
            for action in actions:
                sent, told = await self._act(action)
                payload.update(told)
                records.append(sent.to_record())
        except ActionDeniedError as exc:
            if records:
                # A sequence stops at its first denied action; the client learns what was sent.
                denial = exc.payload
                if isinstance(denial, dict):
                    denial["performed_before"] = list(records)
            raise
        finally:
            turn.timer.add("action", (time.perf_counter() - started) * 1000)
            if records:
                turn.record["action"] = records[0]
                call = turn.record.get("tool_call")
                for n, record in enumerate(records[1:], start=2):
                    # A sequence's further actions: calls of the same tool, in order.
                    turn.record.setdefault("more_calls", []).append({
                        "id": f"{call['id'] if call else 'call'}.{n}",
                        "name": call["name"] if call else "press_keys",
                        "arguments": None,
                        "result": {"ok": True},
                        "action": record,
                        "mapping": turn.record["mapping"],
                    })
        # After input: wait for the app's first reaction, then its quiet (never an early frame).
        shot = await session.capture(turn, settle_first=True, after_input=True)
        if before is None:
            changed_box: list[int] | None = [0, 0, 1000, 1000]
        elif shot is before:
            changed_box = None
        else:
            changed_box, _cursor_only = await asyncio.to_thread(change_box, before, shot)
        payload["changed"] = changed_box is not None
        payload["changed_region"] = changed_box
        turn.record["result"] = payload
        image = await self._image(turn, shot, max_bytes) if screenshot_after else None
        return StepResult(payload, image)

    # ------------------------------------------------------------------ looking
    async def screenshot(
        self,
        turn: Turn,
        *,
        monitor: int | None = None,
        region: tuple[int, int, int, int] | None = None,
        max_bytes: int | None = None,
        max_size: tuple[int, int] | None = None,
    ) -> ImageResult:
        """The monitor (or ``region`` of it: x, y, width, height in its physical pixels)
        as the client sees it; the monitor's view becomes the one acting tools show after."""
        session = self.session
        assert session is not None
        box = max_size or self.options.max_image
        await self._use_view(monitor, box)
        turn.record["result"] = {"ok": True}
        if region is None:
            shot = await session.capture(turn, settle_first=False)
            if shot.cursor is not None:
                # Where the pointer was (a replay puts its dry pointer there: the frame shows it).
                turn.record["result"]["pointer"] = list(shot.cursor)
            return await self._image(turn, shot, max_bytes)
        screen = session.screen
        area: Rect = screen.area
        x, y, w, h = region
        if w <= 0 or h <= 0 or x < 0 or y < 0 or x + w > area.width or y + h > area.height:
            raise ArgumentError("out_of_range", f"region {list(region)} is not inside the {area.width}x{area.height} monitor")
        rect = Rect(area.left + x, area.top + y, w, h)
        started = time.perf_counter()
        shot = await self.capture.call(lambda: screen.grab_region(rect))
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        return await self._image(turn, _fitted(shot, box), max_bytes)

    async def zoom(self, turn: Turn, frame: SeenFrame, corners: tuple[tuple[int, int], tuple[int, int]],
                   max_bytes: int | None = None) -> ImageResult:
        """The physical rectangle between two corners at native resolution (at least
        64 px a side), as a frame of its own: coordinates on it act there."""
        (x1, y1), (x2, y2) = corners
        rect = Rect(min(x1, x2), min(y1, y2), abs(x2 - x1) + 1, abs(y2 - y1) + 1)
        rect = expand_rect(rect, frame.mapping.area)
        session = self.session
        assert session is not None
        screen = session.screen
        started = time.perf_counter()
        shot = await self.capture.call(lambda: screen.grab_region(rect))
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        turn.record["result"] = {"ok": True}
        return await self._image(turn, shot, max_bytes)

    async def wait(
        self, turn: Turn, *, seconds: float | None, until: Literal["settled", "changed"], max_bytes: int | None
    ) -> StepResult:
        session = self.session
        assert session is not None
        before = session.latest_full
        if until == "changed":
            limit = 10.0 if seconds is None else seconds
            deadline = time.monotonic() + limit
            reference = before.probe if before is not None else None
            screen = session.screen
            while time.monotonic() < deadline:
                probe = await self.capture.call(screen.probe)
                if reference is None or probe[0] != reference[0]:
                    break
                await asyncio.sleep(0.05)
        elif seconds:
            with turn.timer.phase("settle"):
                await asyncio.sleep(seconds)
        shot = await session.capture(turn, settle_first=True)
        if before is None:
            changed = True
        elif shot is before:
            changed = False
        else:
            box, _ = await asyncio.to_thread(change_box, before, shot)
            changed = box is not None
        payload = {"ok": True, "changed": changed}
        turn.record["result"] = payload
        return StepResult(payload, await self._image(turn, shot, max_bytes))

    async def screen_info(self) -> dict[str, Any]:
        from deskpilot.capture import Capturer

        cfg = self.config.screen

        def monitors() -> list[dict[str, Any]]:
            scale = _dpi_scale()
            with Capturer(backend=cfg.capture_backend, cursor=False) as cap:
                return [
                    {
                        "index": m.index,
                        "rect": list(m.rect.as_tuple()),
                        "primary": m.primary,
                        "name": m.name,
                        "dpi_scale": scale,
                    }
                    for m in cap.monitors()
                ]

        found = await asyncio.to_thread(monitors)
        ctx = self.ctx
        assert ctx is not None
        loop = asyncio.get_running_loop()
        cursor = await loop.run_in_executor(self._input, ctx.hands.position)
        primary = next((m["index"] for m in found if m["primary"]), 1)
        return {
            "monitors": found,
            "primary": primary,
            "cursor": list(cursor),
            "coordinates": self.options.coordinates,
            "run_dir": self.run_dir,
        }

    # ------------------------------------------------------------------ argument helpers
    @staticmethod
    def key_combo(combo: str) -> str:
        """``combo`` with canonical key names, refused (nothing sent) for an unknown key."""
        from deskpilot.actions import combo_names

        if not isinstance(combo, str) or not combo.strip():
            raise ArgumentError("missing_key", "a key or combo like 'enter' or 'ctrl+shift+t' is required")
        return combo_names(combo, key_names)


def _dpi_scale() -> float | None:
    """The display scale (1.0 = 96 dpi). Windows: the user's setting (LogPixels; 1.25 at
    125 %), None when it cannot be read; X11 has no per-monitor scale (physical pixels
    are what capture and input use): 1.0."""
    if sys.platform != "win32":
        return 1.0
    import winreg

    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, r"Control Panel\Desktop") as key:
            value, _kind = winreg.QueryValueEx(key, "LogPixels")
    except OSError:
        return 1.0  # never changed from the default: 96 dpi
    return round(int(value) / 96, 4) if isinstance(value, int) and value > 0 else None


def _fitted(shot: Shot, box: tuple[int, int]) -> Shot:
    """``shot`` downscaled (area averaging) to fit ``box``; as it is when it does."""
    height, width = shot.rgb.shape[:2]
    size = _fit(width, height, box)
    if size == (width, height):
        return shot
    rgb = np.ascontiguousarray(imaging.downscale(shot.rgb, size))
    return Shot(rgb, Mapping(shot.mapping.area, size[0], size[1]), imaging.frame_digest(rgb), shot.cursor, zoomed=True)


def _b64_len(png: bytes) -> int:
    return 4 * ((len(png) + 2) // 3)


def b64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")
