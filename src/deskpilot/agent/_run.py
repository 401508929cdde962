"""The run lifecycle: :func:`run_agent` sets one run up, plays its mode and writes its record.

Setup opens the run's resources in order (signal handlers, run files, model client,
screen on its capture thread, hands on their input thread, safety guard, drawing
notifications, wall-time timer), each registering its clean-up on one
:class:`contextlib.AsyncExitStack` where it is opened; the stack closes them in reverse:
held keys and buttons are released first, then the screen, the model connection and the
run files (each ending on a full line), then the kill switch is disarmed and the signal
handlers go last, so a second Ctrl+C during clean-up is answered, not raised into it.
The summary is written before any of that, on every ending a run can have: an answer,
``max_steps``, the time limit, Ctrl+C/SIGTERM, the kill switch, a server or setup
error, a run file the disk refused, a bug (recorded, then raised).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx

from deskpilot import imaging
from deskpilot._errors import (
    ConfigError,
    DeskpilotError,
    ModelStreamError,
    PlatformError,
    RunInterrupted,
    RunLogError,
)
from deskpilot._version import __version__
from deskpilot.agent._config import AgentConfig
from deskpilot.agent._limits import RunLimits, resolve_limits
from deskpilot.agent._redaction import (
    RedactingExchangeLog,
    RunRedaction,
    redact_options,
    scrub_run_files,
)
from deskpilot.agent._scenarios import Scenario
from deskpilot.agent._screen import CapturerScreen, Screen
from deskpilot.agent._session import ModeResult, NullReporter, Reporter, Session, ThreadBound
from deskpilot.agent._settle import DamageSource
from deskpilot.agent.client._chat import ChatClient
from deskpilot.agent.client._toolcalls import strip_think
from deskpilot.agent.tools._core import Hands, ToolContext
from deskpilot.rundir import ExchangeLog, RunInfo, RunLog, Summary
from deskpilot.safety import ConfirmPrompt, PolicySettings, SafetyGuard, SafetySettings, Trip

__all__ = [
    "RunResult",
    "build_guard",
    "describe_guard",
    "drives_desktop",
    "reads_x11_windows",
    "run_agent",
    "run_agent_async",
]


#: The stop reason when a run file cannot be written.
_RUN_FILES = "run files"


class _Shutdown:
    """What a stopping run is doing, for a second Ctrl+C to say (and the CLI to print)."""

    __slots__ = ("held", "phase")

    def __init__(self) -> None:
        #: None until the run's signal handlers are installed; then "running" and,
        #: once the run stops, the clean-up step in progress.
        self.phase: str | None = None
        #: A Ctrl+C reached Python code in this phase: the clean-up that still runs
        #: after it does not change what the message names.
        self.held = False


_SHUTDOWN: contextvars.ContextVar[_Shutdown | None] = contextvars.ContextVar("deskpilot_shutdown", default=None)


def _phase(text: str) -> None:
    shutdown = _SHUTDOWN.get()
    if shutdown is not None and not shutdown.held:
        shutdown.phase = text


class _SetupInterrupted(Exception):
    """A stop signal arrived before the mode started."""


@dataclass(slots=True)
class RunResult:
    outcome: str
    answer: str
    steps: int
    run_dir: Path
    summary: Summary
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome not in ("error", "server_error", "interrupted")


@dataclass(slots=True)
class _Ending:
    """How the run ended, as the summary says it."""

    outcome: str = "error"
    answer: str = ""
    error: str | None = None
    #: More summary keys (the mode's own, the DPI awareness, error details, safety).
    extra: dict[str, Any] = field(default_factory=dict)

    def failed(self, exc: BaseException, outcome: str = "error") -> None:
        self.outcome, self.error = outcome, f"{type(exc).__name__}: {exc}"
        if isinstance(exc, DeskpilotError):
            self.extra["error_details"] = _jsonable(exc.details)


def _describe_task(task: str | Scenario) -> tuple[str, Scenario | None]:
    if isinstance(task, Scenario):
        return task.task, task
    return task, None


class _Stop:
    """How a run is stopped: Ctrl+C/SIGTERM, the wall-time timer, the kill switch, a run
    file the disk refused. The first reason is the one the record gives; stopping sets
    the tools' stop flag (long actions stop between chunks) and cancels the mode."""

    def __init__(self, loop: asyncio.AbstractEventLoop, shutdown: _Shutdown) -> None:
        self.loop = loop
        self.shutdown = shutdown
        self.reasons: list[str] = []
        self.ctx: ToolContext | None = None
        self.mode_task: asyncio.Task[ModeResult] | None = None

    def __call__(self, reason: str) -> None:
        if self.reasons and reason in ("SIGINT", "SIGTERM") and self.shutdown.phase not in (None, "running"):
            # Pressed again while the run cleans up: the clean-up is bounded (held input
            # is released first, each step has a timeout), so say what it is doing.
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"deskpilot: {reason} again while {self.shutdown.phase}; exiting as soon as that is done\n"
                )
                sys.stderr.flush()
            return
        if not self.reasons:
            self.reasons.append(reason)
        if self.ctx is not None:
            self.ctx.stop.set()
        if self.mode_task is not None and not self.mode_task.done():
            self.mode_task.cancel()

    def from_thread(self, reason: str) -> None:
        """Stop from another thread (the run-file writer, the kill switch's watcher)."""
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over anyway
            self.loop.call_soon_threadsafe(self, reason)

    def install_signals(self, stack: contextlib.AsyncExitStack) -> None:
        """Ctrl+C and SIGTERM stop the run; the handlers are removed when the stack closes
        (last: a second Ctrl+C during clean-up is answered, not raised into a step)."""
        installed: list[signal.Signals] = []
        replaced: list[tuple[signal.Signals, Any]] = []
        loop = self.loop
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
            try:
                loop.add_signal_handler(sig, self, name)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # Windows: no loop signal handlers
                previous = signal.signal(sig, lambda *_a, _n=name: loop.call_soon_threadsafe(self, _n))  # type: ignore[misc]
                replaced.append((sig, previous))

        def uninstall() -> None:
            _phase("stopping worker threads")
            for sig in installed:
                with contextlib.suppress(RuntimeError):  # the loop is closing
                    loop.remove_signal_handler(sig)
            for sig, previous in replaced:
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(sig, previous)

        stack.callback(uninstall)

    def interrupted(self, ending: _Ending, session: Session, exc: BaseException | None = None) -> None:
        """The mode was stopped: the outcome says by what."""
        reason = self.reasons[0] if self.reasons else str(exc)
        ending.outcome = "max_time" if reason == "max_time" else "interrupted"
        ending.error = None if ending.outcome == "max_time" else f"stopped by {reason}"
        ending.answer = strip_think(session.last_content)


def _open_records(config: AgentConfig, runlog: RunLog, mode: Any) -> tuple[RunRedaction | None, ExchangeLog | None]:
    """The run's redaction (None: records are written as they are) and exchange log."""
    from deskpilot.agent.modes._registry import TextCallMode

    options = redact_options(config)
    exchange: ExchangeLog | None = None
    redaction: RunRedaction | None = None
    if options is not None:
        redaction = RunRedaction(options)
        # A text protocol (UI-TARS) writes what it types into its reply text: the
        # exchange log records that reply before any call has run, so read it there.
        redaction.text_protocol = mode.text_protocol if isinstance(mode, TextCallMode) else None
        runlog.redactor = redaction.record
        if config.run.exchange_log:
            exchange = RedactingExchangeLog(runlog.exchange_log_path, redaction)
    elif config.run.exchange_log:
        exchange = ExchangeLog(runlog.exchange_log_path)
    if exchange is not None:
        exchange.on_failure = runlog.fail  # one failure path for every run file
    return redaction, exchange


class _Run:
    """One run's resources while it is set up, played and closed (see the module doc)."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        task: str,
        scenario: Scenario | None,
        mode_name: str,
        limits: RunLimits,
        runlog: RunLog,
        reporter: Reporter,
        stop: _Stop,
    ) -> None:
        self.config = config
        self.task = task
        self.scenario = scenario
        self.mode_name = mode_name
        self.limits = limits
        self.runlog = runlog
        self.reporter = reporter
        self.stop = stop
        self.started = time.time()
        self.redaction: RunRedaction | None = None
        self.exchange: ExchangeLog | None = None
        self.guard: SafetyGuard | None = None
        self.screen: Screen | None = None
        #: The hands before the tool context owns them: a setup step that fails in
        #: between (the first grab) must still release and close them.
        self.hands: Hands | None = None
        self.session: Session | None = None
        #: The summary once written (the finishing steps after the files close need it).
        self.summary: Summary | None = None

    # ------------------------------------------------------------------ setup
    async def open(
        self,
        stack: contextlib.AsyncExitStack,
        mode: Any,
        *,
        screen_factory: Callable[[], Screen] | None,
        hands_factory: Callable[[], Hands] | None,
        transport: httpx.AsyncBaseTransport | None,
        handle_signals: bool,
        watch_desktop: bool | None,
        confirm_prompt: ConfirmPrompt | None,
        extra: dict[str, Any],
    ) -> Session:
        """Open everything the mode needs, each with its clean-up on ``stack``."""
        config, runlog, loop = self.config, self.runlog, self.stop.loop
        # Handlers first: Ctrl+C during setup must still end in a written record.
        if handle_signals and threading.current_thread() is threading.main_thread():
            self.stop.install_signals(stack)
        stack.push(self._after_files_closed)
        # The kill switch is disarmed after everything below is closed: after the held
        # keys are released above all (its slot is taken before the hands exist).
        stack.push_async_callback(self._disarm)
        self.redaction, self.exchange = _open_records(config, runlog, mode)
        stack.callback(self._close_files)
        self.stop.shutdown.phase = "running"
        self._write_run_info()
        client = self._client(transport)
        stack.push_async_callback(self._close_client, client)
        if sys.platform == "win32":
            # Per-monitor-v2 before any capture or input, so both use physical pixels.
            from deskpilot._win32.dpi import ensure_dpi_awareness

            extra["dpi_awareness"] = ensure_dpi_awareness().as_dict()
        capture = ThreadBound("deskpilot-capture")
        stack.push_async_callback(self._close_screen, capture)
        screen = self.screen = await capture.call(screen_factory or self._default_screen)
        input_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="deskpilot-input")
        stack.push_async_callback(self._release_input, input_thread)
        hands = self.hands = await loop.run_in_executor(input_thread, hands_factory or self._default_hands)
        first = await capture.call(screen.grab)  # the mapping tools start with
        ctx = self.stop.ctx = ToolContext(
            hands=hands,
            mapping=first.mapping,
            monitor=screen.monitor,
            seed_delays=config.agent.settle == "fixed",
            max_type_chars=config.agent.max_type_chars,
            _executor=input_thread,
        )
        desktop = watch_desktop if watch_desktop is not None else drives_desktop(hands)
        self.guard = guard = build_guard(
            config, self.limits.max_steps, desktop=desktop and not config.agent.dry_run, prompt=confirm_prompt,
            windows=reads_x11_windows(hands),
        )
        if guard is not None:
            self._wire_guard(guard, ctx, hands)
        session = self.session = Session(
            config=config,
            task=self.task,
            client=client,
            screen=screen,
            capture=capture,
            ctx=ctx,
            runlog=runlog,
            reporter=self.reporter,
            mode=self.mode_name,
            limits=self.limits,
            guard=guard,
            redaction=self.redaction,
        )
        stack.callback(session.wind_down)
        session.damage, session.settle_signal = open_damage(config, screen)
        if guard is not None:
            if guard.killswitch is not None:
                guard.killswitch.add_callback(lambda trip: self.stop.from_thread(_trip_reason(trip)))
            # Arming grabs the hotkey over a new X connection: off the event loop.
            await asyncio.to_thread(guard.start)
        self._report_start(first.mapping.describe())
        # Wall time is always bounded, by the loop itself: agent.max_seconds, else the
        # safety hard cap, with or without the kill switch (whose budget watcher stops
        # the run too when it runs) and with --no-safety.
        timer = loop.call_later(self.limits.wall_seconds, self._time_up)
        stack.callback(timer.cancel)
        return session

    def _write_run_info(self) -> None:
        config, runlog = self.config, self.runlog
        runlog.write_run_info(
            run_info(
                config,
                task=self.task,
                scenario=self.scenario.as_dict() if self.scenario else None,
                mode=self.mode_name,
                toolset=config.agent.toolset,
                started=self.started,
            )
        )
        runlog.write_summary(
            {"task": self.task, "mode": self.mode_name, "outcome": "running", "started": round(self.started, 3)}
        )

    def _report_start(self, screen: dict[str, Any]) -> None:
        config = self.config
        self.reporter.start(
            {
                "task": self.task,
                "scenario": self.scenario.ref if self.scenario else None,
                "mode": self.mode_name,
                "toolset": config.agent.toolset,
                "model": config.model.model,
                "endpoint": config.model.endpoint,
                "run_dir": str(self.runlog.path),
                "max_steps": self.limits.max_steps,
                "screen": screen,
                "input": "dry-run" if config.agent.dry_run else config.screen.input_backend,
                "safety": describe_guard(self.guard),
            }
        )

    def _client(self, transport: httpx.AsyncBaseTransport | None) -> ChatClient:
        model = self.config.model
        client = ChatClient(
            model.endpoint,
            model.model,
            timeout=model.timeout,
            max_response_bytes=max(1, int(model.max_response_mb * 1024 * 1024)),
            max_retries=model.retries,
            stream=model.stream,
            api_key=model.api_key or None,
            exchange_log=self.exchange,
            transport=transport,
            num_ctx=model.num_ctx,
        )
        # No retry wait may outlast the run (a Retry-After longer than what is left fails at once).
        client.run_deadline = time.monotonic() + self.limits.wall_seconds
        return client

    def _default_screen(self) -> Screen:
        screen = self.config.screen
        return CapturerScreen(
            size=(screen.image_width, screen.image_height),
            monitor=screen.monitor,
            backend=screen.capture_backend,
            cursor=screen.cursor,
        )

    def _default_hands(self) -> Hands:
        from deskpilot.input import InputController

        return InputController("dry" if self.config.agent.dry_run else self.config.screen.input_backend)

    def _wire_guard(self, guard: SafetyGuard, ctx: ToolContext, hands: Hands) -> None:
        # Every tool checks its action here before any input is sent; the guarded
        # hands tell the kill switch where the agent itself puts the pointer and
        # refuse input once it has tripped.
        # Coroutines check through policy_async: a confirm question waits off the
        # event loop, so a stop during it still ends the run at once.
        ctx.policy = guard.check_action
        ctx.policy_async = guard.check_action_async
        ctx.hands = guard.wrap_hands(hands)
        redaction = self.redaction
        if redaction is not None and redaction.typed is not None:
            guard.typed_texts = redaction.typed  # texts it checks are texts typed
        if redaction is not None:
            # Pieces of a secret typed across calls, found by the policy: redacted
            # from every record written from then on (and the earlier ones at the end).
            redaction.secret_pieces = guard.sequence.secret_pieces

    def _time_up(self) -> None:
        # Whichever bound fires first, the loop's timer or the kill switch's budget
        # watcher, the record says the same: tripped by max_seconds, outcome max_time.
        switch = self.guard.killswitch if self.guard is not None else None
        if switch is not None:
            switch.trip(f"reached the time limit ({self.limits.wall_seconds:g} s)", "max_seconds")
        self.stop("max_time")

    # ------------------------------------------------------------------ play
    async def play(self, mode: Any, session: Session, ending: _Ending) -> None:
        """Run the mode; whatever ends it, ``ending`` says how (errors of setup and bugs
        are the caller's)."""
        stop = self.stop
        stop.mode_task = asyncio.ensure_future(mode.run(session))
        try:
            result: ModeResult = await stop.mode_task
            # The mode's own summary keys join what setup recorded (the DPI awareness).
            ending.outcome, ending.answer = result.outcome, result.answer
            ending.extra.update(result.extra)
        except asyncio.CancelledError:
            if not stop.reasons:
                raise
            stop.interrupted(ending, session)
        except RunLogError:
            if self.runlog.failure is None:
                raise
            ending.answer = strip_think(session.last_content)
        except KeyboardInterrupt:
            ending.outcome, ending.error = "interrupted", "stopped by KeyboardInterrupt"
        except RunInterrupted as exc:
            # The kill switch tripped and the guarded hands refused input before the
            # loop's stop (scheduled from the watcher thread) cancelled the mode.
            stop.interrupted(ending, session, exc)
        except DeskpilotError as exc:
            # An error event in a stream, or a stream cut short: the server failed
            # mid-answer (not a configuration problem), an outcome of its own.
            ending.failed(exc, "server_error" if isinstance(exc, ModelStreamError) else "error")

    # ------------------------------------------------------------------ finish
    def finish(self, ending: _Ending) -> Summary:
        """Write the run's record: the pending turn, then the summary (and show it)."""
        try:
            return self._write_record(ending)
        except KeyboardInterrupt:
            # Ctrl+C outside the run's handlers: it says it came while the record was
            # written, though the clean-up (held input released first) still runs.
            self.stop.shutdown.held = True
            raise

    def _write_record(self, ending: _Ending) -> Summary:
        runlog, session = self.runlog, self.session
        if self.guard is not None:
            ending.extra["safety"] = _safety_record(self.guard, session)
        _phase("writing the run record (turns.jsonl, summary.json)")
        if session is not None:
            session.wind_down()
            pending = session.pending
            if pending is not None:
                if ending.outcome == "answered" and "final" not in pending.record:
                    pending.record["final"] = True
                if ending.outcome != "answered":
                    pending.record["ended_by"] = ending.outcome
                session.close_turn(pending, defer_print=False)
            summary = session.summary(
                outcome=ending.outcome, answer=ending.answer, error=ending.error, extra=ending.extra
            )
        else:
            # cast: the mode's extra keys are Summary's too (tests/unit/rundir/test_records.py).
            summary = cast(Summary, {
                "task": self.task,
                "mode": self.mode_name,
                "outcome": ending.outcome,
                "error": ending.error,
                "answer": ending.answer,
                "steps": 0,
                "started": round(self.started, 3),
                "ended": round(time.time(), 3),
                **ending.extra,
            })
        summary["run_dir"] = str(runlog.path)
        runlog.flush()
        failure = runlog.failure
        if failure is not None:
            # A run file could not be written (disk full, read-only, run directory gone):
            # whatever stopped the run, the record is incomplete and the summary says why.
            summary["outcome"], summary["error"] = "error", f"{type(failure).__name__}: {failure}"
            summary["error_details"] = _jsonable(failure.details)
        summary["run_log_errors"] = list(runlog.errors)
        try:
            runlog.write_summary(summary)
        except (OSError, RunLogError) as exc:
            if str(exc) not in summary["run_log_errors"]:
                summary["run_log_errors"] = [*runlog.errors, f"summary.json: {exc}"]
        self.reporter.finish({**summary, "run_dir": str(runlog.path)})
        self.summary = summary
        return summary

    # ------------------------------------------------------------------ clean-up (reverse order of setup)
    async def _release_input(self, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        """Release held keys and buttons first (it matters most), then close the hands."""
        _phase("releasing held keys and mouse buttons")
        ctx = self.stop.ctx
        if ctx is not None:
            ctx.stop.set()
        hands = ctx.hands if ctx is not None else self.hands
        if hands is not None:
            await _release_hands(self.stop.loop, executor, hands)
        if ctx is not None:
            ctx.close()  # its executor is this input thread
        else:
            executor.shutdown(wait=True, cancel_futures=True)

    async def _close_screen(self, capture: ThreadBound) -> None:
        _phase("closing the screen capture")
        screen = self.screen
        if screen is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(capture.call(screen.close), 2.0)
        capture.shutdown()

    async def _close_client(self, client: ChatClient) -> None:
        _phase("closing the connection to the model server")
        await client.aclose()

    def _close_files(self) -> None:
        _phase("closing the run files")
        if self.exchange is not None:
            self.exchange.close()
        self.runlog.close()

    async def _disarm(self) -> None:
        if self.guard is not None:
            # Disarm the kill switch (ungrab the hotkey, stop the watcher) and close the
            # window reader, after the held keys are released.
            _phase("disarming the kill switch")
            await asyncio.to_thread(self.guard.close)

    def _after_files_closed(self, exc_type: type[BaseException] | None, *_exc: object) -> bool:
        """A run that ended (not raised): the pieces of a split secret out of the files,
        and the LM Studio logs beside them."""
        summary = self.summary
        if exc_type is not None or summary is None:
            return False
        runlog, config = self.runlog, self.config
        if self.redaction is not None and self.redaction.secret_pieces:
            _phase("redacting the pieces of a secret from the run files")
            scrub_run_files(runlog, self.redaction.secret_pieces)
        if config.run.lmstudio_logs != "off":
            _phase("exporting the LM Studio logs")
            from deskpilot.agent.client._lmstudio_logs import export_lmstudio_logs

            exported = export_lmstudio_logs(
                runlog.path,
                since=self.started,
                until=time.time(),
                log_dir=config.run.lmstudio_log_dir or None,
                required=config.run.lmstudio_logs == "on",
                endpoint=config.model.endpoint,  # auto: only a local LM Studio's logs
            )
            if exported:
                summary["lmstudio_logs"] = [str(p.name) for p in exported]
                runlog.write_summary(summary)
        return False


async def _release_hands(
    loop: asyncio.AbstractEventLoop, executor: concurrent.futures.ThreadPoolExecutor, hands: Hands
) -> None:
    """Release held keys and buttons, then close the hands, on their input thread."""
    # Failures here must not stop the record from being written.
    with contextlib.suppress(Exception):
        await asyncio.wait_for(loop.run_in_executor(executor, hands.release_all), 2.0)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(loop.run_in_executor(executor, hands.close), 2.0)


async def run_agent_async(
    config: AgentConfig,
    task: str | Scenario,
    *,
    screen_factory: Callable[[], Screen] | None = None,
    hands_factory: Callable[[], Hands] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    reporter: Reporter | None = None,
    handle_signals: bool = True,
    run_name: str | None = None,
    watch_desktop: bool | None = None,
    confirm_prompt: ConfirmPrompt | None = None,
    allow_xwayland: bool = False,
) -> RunResult:
    """Run one task with the mode ``config.agent.mode``; never raises for a run that
    started (the outcome says what happened), only for invalid setup.

    With the default screen (no ``screen_factory``), a desktop that capture cannot see
    (Xwayland: a Wayland session) is refused before anything starts, with a
    :class:`~deskpilot.errors.ScreenNotVisibleError` that says what to do; ``allow_xwayland``
    (or ``DESKPILOT_ALLOW_XWAYLAND=1``) goes on anyway, for X11 windows only
    (:func:`deskpilot.capture.check_screen_visible`).

    The safety layer (``[policy]``/``[safety]``, on unless ``safety.enabled`` is false)
    checks every action, bounds the run by steps and wall time, redacts the records
    and arms the kill switch. ``watch_desktop``: whether the kill switch watches the
    fail-safe corner and the hotkey and window rules read the foreground window; by
    default only when the hands are an :class:`~deskpilot.input.InputController` that
    sends real input (not dry-run, simulated or wrapped hands). ``confirm_prompt``
    answers the policy's confirm questions instead of the terminal (a replay answers
    them as recorded).
    """
    from deskpilot.agent.modes._registry import get_mode

    if screen_factory is None:
        # Before the run directory exists: a model must never be shown a black desktop.
        from deskpilot.capture import check_screen_visible

        check_screen_visible(allow_xwayland=allow_xwayland, capture=config.screen.capture_backend)
    text, scenario = _describe_task(task)
    mode_spec = get_mode(config.agent.mode)
    mode = mode_spec.factory(config)
    runlog = RunLog.create(
        config.run.runs_dir,
        name=run_name,
        dump_dir=config.run.dump_dir or None,
        dump_prefix=config.run.dump_prefix,
        dump_start=config.run.dump_start,
        save_screenshots=config.run.save_screenshots,
    )
    shutdown = _SHUTDOWN.get()
    if shutdown is None:
        shutdown = _Shutdown()
        _SHUTDOWN.set(shutdown)
    stop = _Stop(asyncio.get_running_loop(), shutdown)
    # From the writer thread (or the loop): the disk refused a run file. The run stops
    # like an interrupt; the outcome is an error that says which file and why.
    runlog.on_failure = lambda _exc: stop.from_thread(_RUN_FILES)
    run = _Run(
        config,
        task=text,
        scenario=scenario,
        mode_name=mode_spec.name,
        limits=resolve_limits(config, scenario, mode),
        runlog=runlog,
        reporter=reporter or NullReporter(),
        stop=stop,
    )
    ending = _Ending()
    async with contextlib.AsyncExitStack() as stack:
        try:
            session = await run.open(
                stack,
                mode,
                screen_factory=screen_factory,
                hands_factory=hands_factory,
                transport=transport,
                handle_signals=handle_signals,
                watch_desktop=watch_desktop,
                confirm_prompt=confirm_prompt,
                extra=ending.extra,
            )
            if stop.reasons:  # a signal arrived during setup
                raise _SetupInterrupted
            await run.play(mode, session, ending)
        except _SetupInterrupted:
            ending.outcome, ending.error = "interrupted", f"stopped by {stop.reasons[0]} before the first request"
        except KeyboardInterrupt:
            ending.outcome, ending.error = "interrupted", "stopped by KeyboardInterrupt"
        except DeskpilotError as exc:
            ending.failed(exc)
        except Exception as exc:  # a bug: record it, then let it propagate (the stack closes everything)
            ending.outcome, ending.error = "error", f"{type(exc).__name__}: {exc}"
            run.finish(ending)
            raise
        # Anything else (cancelled from outside) has no record to write; the stack
        # still releases and closes what was opened.
        summary = run.finish(ending)
    steps = run.session.steps if run.session else 0
    return RunResult(summary["outcome"], ending.answer, steps, runlog.path, summary, summary["error"])


def run_agent(config: AgentConfig, task: str | Scenario, **kwargs: Any) -> RunResult:
    """Blocking wrapper of :func:`run_agent_async` (its own event loop).

    Ctrl+C outside the run's own handlers (before they are installed, or while the event
    loop winds down after they are removed) is a :class:`RunInterrupted` that says when
    it came; the CLI prints it and exits 130.
    """
    shutdown = _Shutdown()
    token = _SHUTDOWN.set(shutdown)
    try:
        return asyncio.run(run_agent_async(config, task, **kwargs))
    except KeyboardInterrupt as exc:
        if shutdown.phase in (None, "running"):
            raise RunInterrupted("interrupted before the run started", reason="SIGINT") from exc
        raise RunInterrupted(
            f"interrupted again while {shutdown.phase}; the run had already stopped "
            "(its record is in the run directory)",
            reason="SIGINT",
            phase=shutdown.phase,
        ) from exc
    finally:
        _SHUTDOWN.reset(token)


# ---------------------------------------------------------------------- the safety layer


def run_info(
    config: AgentConfig,
    *,
    task: str,
    scenario: dict[str, Any] | None,
    mode: str,
    toolset: str,
    started: float,
    **more: Any,
) -> RunInfo:
    """``run.json``: what ran, with which settings, where and when (every run directory's,
    an agent run's or an MCP session's; ``more`` adds a mode's own keys at the end)."""
    # cast: a mode's own keys (``mcp``) are RunInfo's too (tests/unit/rundir/test_records.py).
    return cast(RunInfo, {
        "task": task,
        "scenario": scenario,
        "mode": mode,
        "toolset": toolset,
        "config": config.as_dict(),
        "config_sources": dict(config.sources),
        "config_file": str(config.file) if config.file else None,
        "deskpilot": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "imaging_backend": imaging.BACKEND,
        "started": round(started, 3),
        "pid": os.getpid(),
        **more,
    })


def drives_desktop(hands: Any) -> bool:
    """Whether ``hands`` send real input to this desktop (XTest, SendInput): only then
    does the kill switch watch the pointer and the hotkey, and do window rules read the
    foreground window. Simulated, dry-run and wrapped hands have no desktop of their own
    (pass ``watch_desktop=True`` to :func:`run_agent_async` for wrappers of real hands)."""
    from deskpilot.input import InputController

    return isinstance(hands, InputController) and hands.backend.name != "dry"


def reads_x11_windows(hands: Any) -> bool:
    """Whether window rules can read the foreground window through X11: not with Mutter's
    (GNOME Wayland) hands, whose windows Xwayland does not show (only its own X11 ones):
    rules then see "no window" rather than a wrong one."""
    from deskpilot.input import InputController

    return not (isinstance(hands, InputController) and hands.backend.name == "mutter")


def _no_desktop() -> Any:
    raise PlatformError("no desktop behind the input (simulated or dry-run): nothing to watch", call="watch")


def build_guard(
    config: AgentConfig, max_steps: int, *, desktop: bool, prompt: ConfirmPrompt | None = None,
    windows: bool = True,
) -> SafetyGuard | None:
    """The run's :class:`SafetyGuard` from ``[policy]``/``[safety]`` (None when disabled).
    ``prompt`` answers confirm questions (default: ask on the terminal).

    Without a desktop the kill switch keeps its run budget and programmatic trip (its
    watcher thread only checks the clock: no X connection, no hotkey grab) and window
    rules see "no window" (``policy.unknown_window`` decides)."""
    safety = config.section(SafetySettings)
    if not safety.enabled:
        return None
    return SafetyGuard.from_settings(
        config.section(PolicySettings),
        safety,
        max_steps=max_steps,
        # The kill switch's budget reads 0 as "the hard cap" (its own vocabulary).
        max_seconds=resolve_limits(config).max_seconds or 0.0,
        watch_backend=None if desktop else _no_desktop,
        window_reader="auto" if desktop and windows else None,
        prompt=prompt,
    )


def describe_guard(guard: SafetyGuard | None) -> str:
    """One line for the terminal: what guards this run and how to stop it."""
    if guard is None:
        return "off (--no-safety): no policy, no kill switch, no redaction"
    parts = [f"policy {guard.policy.mode}"]
    switch = guard.killswitch
    if switch is None:
        parts.append("kill switch off")
    else:
        hotkey, corner = switch.status.get("hotkey", ""), switch.status.get("corner", "")
        ways = []
        if hotkey.startswith("armed: "):
            ways.append(hotkey[len("armed: "):].split(";")[0])
        if corner.startswith("armed"):
            ways.append("pointer into a screen corner")
        parts.append(f"kill switch: {' or '.join(ways)}" if ways else "kill switch: no desktop to watch")
    if guard.budget is not None:
        parts.append(f"limit {guard.budget.limit_seconds:g} s")
    return " · ".join(parts)


def _safety_record(guard: SafetyGuard, session: Session | None) -> dict[str, Any]:
    """``summary.safety``; the budget counts the model requests every mode made (the
    session's count, ``ask`` and ``send`` alike) against the bound the run ran with."""
    if guard.budget is not None and session is not None:
        guard.budget.steps = session.steps
        guard.budget.max_steps = max(1, session.max_steps)
    return guard.record()


def _trip_reason(trip: Trip) -> str:
    """What stopped the run when the kill switch tripped (its time budget: max_time)."""
    return "max_time" if trip.source == "max_seconds" else f"kill switch ({trip.source}): {trip.reason}"


def open_damage(config: AgentConfig, screen: Screen) -> tuple[DamageSource | None, str]:
    """The run's drawing notifications for the adaptive settle, and what it settles on.

    X11 DAMAGE where the screen is captured from an X server that has it; the stream's
    frames on GNOME Wayland (the mutter backend: a frame is sent only on damage) and
    screencopy's damage on wlroots (``copy_with_damage``); polling
    probes elsewhere (Windows, macOS, simulated screens), with ``settle_signal = "poll"``
    and whenever the watcher cannot be made (``"damage"`` then is an error)."""
    wanted = config.agent.settle_signal
    if config.agent.settle != "adaptive" or wanted == "poll":
        return None, "poll"
    if isinstance(screen, CapturerScreen) and screen.backend_name in ("mutter", "wlroots"):
        # Wayland: Mutter sends a stream frame only when something was drawn; wlroots'
        # screencopy answers copy_with_damage once something was drawn.
        try:
            return screen.backend_damage(), "damage"
        except PlatformError as exc:
            if wanted == "damage":
                raise
            return None, f"poll ({exc})"
    if not (
        isinstance(screen, CapturerScreen)
        and sys.platform.startswith("linux")
        and screen.backend_name == "mss"
        and os.environ.get("DISPLAY")
    ):
        if wanted == "damage":
            raise ConfigError("agent.settle_signal = damage needs an X11 display captured with mss",
                              where="agent.settle_signal")
        return None, "poll"
    from deskpilot._x11 import DamageWatcher

    try:
        # Only drawing on the working area counts (not a video on another monitor).
        return DamageWatcher(area=screen.area), "damage"
    except PlatformError as exc:
        if wanted == "damage":
            raise
        return None, f"poll ({exc})"



def _jsonable(details: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in details.items():
        out[key] = value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    return out

