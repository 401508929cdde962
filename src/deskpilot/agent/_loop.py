"""The shared loop machinery: one :class:`Session` per run, driven by a mode.

A *mode* is prompts + a tool set + a turn policy (see :mod:`._modes`); everything a
mode needs from the machine lives here, so single, team and stateless modes share one
implementation of the hard parts:

``Session.ask(history, ...)``
    closes the previous turn (its record goes to ``turns.jsonl``), sends the request
    spliced from the history's cached bytes (``request.prefill``: what a prefix cache
    cannot reuse of it) and times the model wait. Raises
    :class:`StepLimit` when ``max_steps`` requests were made.
``Session.act(turn, call, tools)``
    runs one tool call on the input thread, then settles adaptively (on X11 DAMAGE
    notifications where the server has them, :func:`._settle.settle_on_damage`; by
    polling probes elsewhere), compares the settled frame with the one before the
    action (``changed`` / ``changed_region``) and warns after repeated actions without
    visible effect. The settled probe's pixels are the next image: no second grab.
``Session.observe(turn, ...)``
    the image for the model: the settled frame of the last action when there is one
    (no second capture), a fresh settled capture otherwise, or a native-resolution
    crop after ``zoom``; PNG encoding runs in a worker thread (the native encoder
    releases the GIL) and is skipped when the same frame was encoded before.

:func:`run_agent` wires it up: config -> client, screen (capture thread), hands (input
thread), run directory, terminal output, Ctrl+C/SIGTERM handling (stop within a
second, release held keys and buttons, write the record) and the summary.

Timing: each turn records ``parse``, ``action``, ``settle``, ``capture``, ``encode``,
``request_build`` and ``model`` in milliseconds, plus ``overhead``, measured directly as
the wall time from the model's reply to the moment the next request is handed to the
HTTP client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import os
import platform
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import orjson

from deskpilot import imaging
from deskpilot._errors import (
    ConfigError,
    DeskpilotError,
    ModelHTTPError,
    ModelStreamError,
    PlatformError,
    RunInterrupted,
)
from deskpilot._untrusted import token_count
from deskpilot._version import __version__
from deskpilot.agent._client import ChatClient, Completion
from deskpilot.agent._config import AgentConfig
from deskpilot.agent._exchange_log import ExchangeLog
from deskpilot.agent._history import (
    TEXT_BYTES_PER_TOKEN,
    History,
    Prefill,
    image_token_rule,
    png_data_url,
)
from deskpilot.agent._runlog import RunLog, RunLogError, dumps_json
from deskpilot.agent._scenarios import Scenario
from deskpilot.agent._screen import CapturerScreen, Probe, Screen, Shot, change_box, expand_rect
from deskpilot.agent._servers import ServerProfile
from deskpilot.agent._settle import (
    DamageSource,
    SettlePolicy,
    SettleResult,
    settle,
    settle_on_damage,
)
from deskpilot.agent._timings import OVERHEAD, TurnTimer, summarize
from deskpilot.agent._toolcalls import ToolCall, strip_think
from deskpilot.agent._tools import (
    Hands,
    NoEffectTracker,
    ToolContext,
    ToolOutcome,
    ToolSet,
    execute_tool_call,
    signature_of,
)
from deskpilot.geometry import Box
from deskpilot.geometry import Mapping as GeoMapping
from deskpilot.safety import (
    PolicySettings,
    RedactOptions,
    SafetyGuard,
    SafetySettings,
    Trip,
    redact,
    redact_text,
)
from deskpilot.safety._policy import ConfirmPrompt
from deskpilot.safety._redact import TypedTexts, typing_tool_names

__all__ = [
    "ModeResult",
    "Observation",
    "Reporter",
    "RunResult",
    "Session",
    "StepLimit",
    "Turn",
    "run_agent",
    "run_agent_async",
]

R = TypeVar("R")


#: The stop reason when a run file cannot be written.
_RUN_FILES = "run files"


class _Shutdown:
    """What a stopping run is doing, for a second Ctrl+C to say (and the CLI to print)."""

    __slots__ = ("phase",)

    def __init__(self) -> None:
        #: None until the run's signal handlers are installed; then "running" and,
        #: once the run stops, the clean-up step in progress.
        self.phase: str | None = None


_SHUTDOWN: contextvars.ContextVar[_Shutdown | None] = contextvars.ContextVar("deskpilot_shutdown", default=None)


def _phase(text: str) -> None:
    shutdown = _SHUTDOWN.get()
    if shutdown is not None:
        shutdown.phase = text


class _SetupInterrupted(Exception):
    """A stop signal arrived before the mode started."""


class StepLimit(DeskpilotError):
    """The run used its ``max_steps`` model requests (not an error: an outcome)."""


@dataclass(slots=True)
class ModeResult:
    """What a mode's ``run`` returns: the outcome word and the final answer text."""

    #: "answered" (finished on purpose), "truncated" (cut at the token limit),
    #: "no_action" (nothing actionable after one reminder), "max_steps", or a mode's own
    #: word ("done", "blocked", ...). "server_error" and "error" come from run_agent.
    outcome: str
    answer: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunResult:
    outcome: str
    answer: str
    steps: int
    run_dir: Path
    summary: dict[str, Any]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome not in ("error", "server_error", "interrupted")


@dataclass(slots=True)
class Turn:
    """One model request and everything done with its answer."""

    number: int
    role: str
    timer: TurnTimer = field(default_factory=TurnTimer)
    record: dict[str, Any] = field(default_factory=dict)
    reply_at: float | None = None  # perf_counter when the model's answer was complete
    closed: bool = False


@dataclass(slots=True)
class Observation:
    """One image prepared for the model."""

    shot: Shot
    png: bytes
    data_url: bytes
    screenshot: str | None
    reused: bool  # the same frame was encoded before: no new encode, no new file
    unchanged: bool  # same pixels as the last image the model got

    @property
    def mapping(self) -> GeoMapping:
        return self.shot.mapping


class Reporter(Protocol):
    """Live progress (the rich console, or nothing)."""

    def start(self, info: Mapping[str, Any]) -> None: ...
    def phase(self, turn: int, phase: str) -> None: ...
    def turn(self, record: Mapping[str, Any]) -> None: ...
    def finish(self, summary: Mapping[str, Any]) -> None: ...


class NullReporter:
    def start(self, info: Mapping[str, Any]) -> None:
        pass

    def phase(self, turn: int, phase: str) -> None:
        pass

    def turn(self, record: Mapping[str, Any]) -> None:
        pass

    def finish(self, summary: Mapping[str, Any]) -> None:
        pass


@dataclass(slots=True)
class _Encoded:
    png: bytes
    data_url: bytes
    screenshot: str | None
    #: The digest of the image's pixels for the record (``observation.digest``, which a
    #: replay recomputes from the saved screenshots).
    pixels: int = 0


class _ThreadBound:
    """One worker thread that owns an OS handle (X connection, DC): every call goes there."""

    def __init__(self, name: str) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)

    async def call(self, fn: Callable[[], R]) -> R:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


class Session:
    """The machinery of one run (see the module docstring). Modes use only its methods."""

    def __init__(
        self,
        *,
        config: AgentConfig,
        task: str,
        client: ChatClient,
        screen: Screen,
        capture: _ThreadBound,
        ctx: ToolContext,
        runlog: RunLog,
        reporter: Reporter,
        mode: str,
        max_steps: int,
        guard: SafetyGuard | None = None,
        redaction: _RunRedaction | None = None,
    ) -> None:
        self.config = config
        #: How records and log lines are redacted (None: they are not).
        self.redaction = redaction
        #: The run's safety layer (policy hook, guarded hands, kill switch, budget), or
        #: None with ``[safety] enabled = false``.
        self.guard = guard
        self.task = task
        self.client = client
        self.screen = screen
        #: Whether a turn record already says why frames go without the cursor.
        self.cursor_problem_noted = False
        self.ctx = ctx
        self.runlog = runlog
        self.reporter = reporter
        self.mode = mode
        self.max_steps = max_steps
        self.steps = 0
        self.started = time.time()
        self._capture = capture
        loop = config.agent
        if loop.settle == "adaptive":
            self.settle_policy = SettlePolicy("adaptive", loop.settle_min, loop.settle_max, loop.settle_poll)
        else:
            self.settle_policy = SettlePolicy(loop.settle)  # type: ignore[arg-type]
        self.no_effect = NoEffectTracker(loop.no_effect_repeats)
        #: Drawing notifications to settle on (X11 DAMAGE), or None to poll.
        self.damage: DamageSource | None = None
        #: What the adaptive settle waits on: "damage", or "poll" (with the reason when
        #: DAMAGE was wanted but could not be had).
        self.settle_signal = "poll"
        #: The last full-view frame captured (for change detection).
        self.latest_full: Shot | None = None
        #: The last image the model was sent.
        self.current: Observation | None = None
        #: The settled frame of the last action, not yet shown to the model.
        self.settled: Shot | None = None
        self._encoded: OrderedDict[int, _Encoded] = OrderedDict()
        self._prefetch: tuple[int, asyncio.Task[_Encoded]] | None = None
        self._pending: Turn | None = None
        self._turn_numbers = 0
        self.timing_rows: list[dict[str, float]] = []
        self.totals: dict[str, int] = {
            "requests": 0,
            "tool_calls": 0,
            "tool_errors": 0,
            "request_bytes": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "images_sent": 0,
            "frames_encoded": 0,
        }
        self.last_content = ""
        #: What this run's server wants in a request (``--server``; learns from 400s).
        self.profile = ServerProfile.for_run(config.model.server, config.model.endpoint, config.model.model)
        #: Tokens per image for the prefill accounting (None: the model's rule is unknown).
        self._image_tokens = image_token_rule(config.model.model)
        #: Per request: images / image tokens / text tokens a prefix cache cannot reuse,
        #: and images in context (see :class:`~deskpilot.agent._history.Prefill`).
        self.prefills: list[Prefill] = []

    def _count_prefill(self, prefill: Prefill) -> None:
        self.prefills.append(prefill)

    def prefill_summary(self) -> dict[str, Any] | None:
        """``summary.prefill``: totals and per-request averages over the run."""
        rows = self.prefills
        if not rows:
            return None
        n = len(rows)
        image_tokens = None if any(r.image_tokens is None for r in rows) else sum(r.image_tokens or 0 for r in rows)
        text_tokens = sum(r.text_tokens for r in rows)
        images = sum(r.images for r in rows)
        # The first request has nothing to reuse: the per-turn figures are over the rest.
        later = rows[1:] or rows
        m = len(later)
        later_image_tokens = None if image_tokens is None else sum(r.image_tokens or 0 for r in later)
        return {
            "requests": n,
            "images": images,
            "image_tokens": image_tokens,
            "text_tokens": text_tokens,
            "images_per_turn": round(sum(r.images for r in later) / m, 3),
            "image_tokens_per_turn": None if later_image_tokens is None else round(later_image_tokens / m, 1),
            "text_tokens_per_turn": round(sum(r.text_tokens for r in later) / m, 1),
            "max_images_in_context": max(r.images_in_context for r in rows),
            "text_bytes_per_token": TEXT_BYTES_PER_TOKEN,
        }

    # ------------------------------------------------------------------ turns
    def start(self, role: str = "agent") -> Turn:
        """Turn 0: the initial observation, before any request."""
        turn = Turn(0, role)
        turn.record.update({"turn": 0, "time": round(time.time(), 3), "mode": self.mode, "role": role})
        self._pending = turn
        return turn

    @property
    def pending(self) -> Turn | None:
        return self._pending

    def _open(self, role: str) -> Turn:
        self._turn_numbers += 1
        turn = Turn(self._turn_numbers, role)
        turn.record.update({"turn": turn.number, "time": round(time.time(), 3), "mode": self.mode, "role": role})
        self._pending = turn
        return turn

    def close_turn(self, turn: Turn, *, request_at: float | None = None, defer_print: bool = True) -> None:
        """Write a turn's record (once). ``request_at`` ends its overhead interval."""
        if turn.closed:
            return
        turn.closed = True
        timings = {k: round(v, 3) for k, v in turn.timer.phases.items()}
        if turn.reply_at is not None and request_at is not None:
            timings[OVERHEAD] = round((request_at - turn.reply_at) * 1000, 3)
        turn.record["timings"] = timings
        self.timing_rows.append(timings)
        # What is written (and shown) is redacted when the safety layer redacts; the
        # mode keeps the original record.
        written = self.runlog.write_turn(turn.record)
        loop: asyncio.AbstractEventLoop | None = None
        if defer_print:
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_running_loop()
        if loop is not None:
            # Printed while the next request is in flight, not before it leaves.
            loop.call_soon(self.reporter.turn, written)
        else:
            self.reporter.turn(written)
        if self._pending is turn:
            self._pending = None

    def check_limits(self) -> None:
        if self.steps >= self.max_steps:
            raise StepLimit(f"reached max_steps ({self.max_steps})", steps=self.steps)

    def redact_text(self, text: str) -> str:
        """``text`` as logs may keep it: secrets replaced when the safety layer redacts,
        and with ``mask_typed_text`` every text typed so far (for a mode's own log
        files and log lines; turn records are redacted by the run log)."""
        if self.redaction is not None:
            return self.redaction.text(text)
        guard = self.guard
        if guard is None or not guard.redact_options.secrets:
            return text
        return redact_text(text, guard.redact_options.detectors)

    async def ask(
        self,
        history: History,
        *,
        role: str = "agent",
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        on_tool_call: Callable[[Turn, ToolCall], Awaitable[None] | None] | None = None,
    ) -> tuple[Turn, Completion]:
        """Send the history; returns the new turn and the model's answer."""
        self.check_limits()
        redaction = self.redaction
        if redaction is not None and tools:
            redaction.learn_tools(tools)  # before the exchange log records the answer
        model = self.config.model
        previous = self._pending
        if history.image_tokens is None:
            history.image_tokens = self._image_tokens
        profile = self.profile
        profile.apply(history)

        def build() -> bytes:
            return history.build_request(
                model=model.model,
                tools=tools,
                tool_choice=tool_choice or model.tool_choice,
                stream=model.stream,
                **profile.request_args(
                    temperature=model.temperature if temperature is None else temperature,
                    max_tokens=model.max_tokens if max_tokens is None else max_tokens,
                ),
            )

        with previous.timer.phase("request_build") if previous else nullcontext():
            body = build()
        stats = history.stats()
        request_at = time.perf_counter()
        if previous is not None:
            self.close_turn(previous, request_at=request_at)
        turn = self._open(role)
        turn.record["request"] = {"messages": stats.messages, "images": stats.images_live, "bytes": len(body)}
        prefill = history.last_prefill
        if prefill is not None:
            turn.record["request"]["prefill"] = prefill.as_dict()
            self._count_prefill(prefill)
        self.totals["requests"] += 1
        self.totals["request_bytes"] += len(body)
        self.reporter.phase(turn.number, "model")
        callback = None
        if on_tool_call is not None:
            hook = on_tool_call

            def callback(call: ToolCall) -> Awaitable[None] | None:
                return hook(turn, call)

        started = time.perf_counter()
        try:
            while True:
                try:
                    completion = await self.client.complete(
                        body, context={"turn": turn.number, "role": role}, on_tool_call=callback
                    )
                    break
                except ModelHTTPError as exc:
                    # A 400 that says what the server wants (the token-limit field, no
                    # temperature, fewer images): adapt once per lesson and resend the turn.
                    lesson = profile.learn(exc, history)
                    if lesson is None:
                        raise
                    turn.record.setdefault("server_adapted", []).append(lesson)
                    body = build()
                    turn.record["request"].update(images=history.stats().images_live, bytes=len(body))
        finally:
            turn.timer.add("model", (time.perf_counter() - started) * 1000)
            self.steps += 1
        turn.reply_at = time.perf_counter()
        usage = completion.usage or {}
        self.totals["prompt_tokens"] += token_count(usage.get("prompt_tokens"))
        self.totals["completion_tokens"] += token_count(usage.get("completion_tokens"))
        self.last_content = completion.content
        turn.record["model"] = completion.as_record()
        if redaction is not None and completion.tool_calls:
            # Texts the model asks to type are masked in log lines from now on (a mode
            # logs the answer before it runs the call).
            redaction.learn(turn.record["model"])
        return turn, completion

    # ------------------------------------------------------------------ screen
    async def _probe(self, turn: Turn) -> tuple[Probe, Probe]:
        started = time.perf_counter()
        value = await self._capture.call(self.screen.probe)
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        return value, value

    async def _probe_prepared(self, turn: Turn) -> tuple[Probe, tuple[Probe, Shot | None]]:
        """A probe that also makes the image from its pixels, and starts encoding it,
        unless it shows what the last image showed: run speculatively while the damage
        settle waits out its quiet interval, so a settled screen is ready to send when
        the wait ends (a probe overtaken by drawing costs only idle time)."""
        last = self.latest_full
        grab_probed = getattr(self.screen, "grab_probed", None)
        damage = self.damage

        def look() -> tuple[Probe, Shot | None]:
            started = time.perf_counter()
            value = self.screen.probe()
            if grab_probed is None or (last is not None and last.probe == value):
                return value, None
            if getattr(damage, "last_damage", 0.0) > started:
                return value, None  # drawn on since: the settle looks again, the image would be wasted
            shot: Shot = grab_probed(pixel_digest=False)  # digested in the encode worker, overlapped
            shot.probe = value
            return value, shot

        started = time.perf_counter()
        value, shot = await self._capture.call(look)
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        if shot is not None and self.config.agent.observe_after_action:
            self.prefetch_encode(shot)
        return value, (value, shot)

    async def capture(self, turn: Turn, *, settle_first: bool = True) -> Shot:
        """A full-view frame of the settled screen.

        With ``settle_first`` the screen settles: on DAMAGE (:attr:`damage`) a quiet
        interval with speculative probes that also make the image, else cheap probes
        until two match (bounded by the settle policy); otherwise one probe. When the
        settled probe equals the one of the last full-view frame, that frame is returned
        as is (no grab, and its PNG is already encoded); otherwise the image is made from
        the settled probe's pixels. Time spent probing and making the image counts as
        ``capture`` (only as long as the wall time it took), the rest of the wait as
        ``settle``.
        """
        self.reporter.phase(turn.number, "settle" if settle_first else "capture")
        policy = self.settle_policy if settle_first else SettlePolicy("none")
        before = turn.timer.phases.get("capture", 0.0)
        started = time.perf_counter()
        damage = self.damage if settle_first and policy.mode == "adaptive" else None
        prepared: Shot | None = None
        if damage is not None:
            spec = await settle_on_damage(lambda: self._probe_prepared(turn), policy, damage)
            if spec.damage is None:  # the watcher failed: poll from now on
                self._close_damage()
                self.settle_signal = "poll (the DAMAGE connection failed)"
            result: SettleResult[Probe] = SettleResult(
                spec.payload[0], spec.digest, spec.polls, spec.stable, spec.waited_s, spec.damage
            )
            prepared = spec.payload[1]
        else:
            result = await settle(lambda: self._probe(turn), policy)
        # Speculative probes overlap the quiet wait: only the wall time counts, once.
        waited = (time.perf_counter() - started) * 1000
        probed = min(turn.timer.phases.get("capture", 0.0) - before, waited)
        if damage is not None:
            turn.timer.phases["capture"] = before + probed
        if settle_first:
            turn.timer.add("settle", max(0.0, waited - probed))
            turn.record["settle"] = result.as_dict()
        key = result.payload
        last = self.latest_full
        if last is not None and last.probe == key:
            turn.record["screen_unchanged"] = True
            return last
        if prepared is not None:
            shot = prepared
        else:
            # The settled probe's pixels become the image (no second grab of the screen).
            grab = getattr(self.screen, "grab_probed", None) or self.screen.grab
            with turn.timer.phase("capture"):
                shot = await self._capture.call(grab)
        shot.probe = key
        self.latest_full = shot
        return shot

    def _close_damage(self) -> None:
        damage, self.damage = self.damage, None
        closer = getattr(damage, "close", None)
        if callable(closer):
            with contextlib.suppress(Exception):
                closer()

    def _encode_sync(self, shot: Shot) -> _Encoded:
        png = imaging.encode_png(shot.rgb, level=self.config.screen.png_level)
        # A shot keyed by its probe (no pass over the image on the critical path) gets its
        # pixel digest here, in the encode worker, overlapped with the settle.
        pixels = shot.digest if shot.pixel_digest else imaging.frame_digest(shot.rgb)
        return _Encoded(png, png_data_url(png), None, pixels)

    def prefetch_encode(self, shot: Shot) -> None:
        """Start encoding ``shot`` in a worker thread now (the next observe awaits it)."""
        if shot.digest in self._encoded or (self._prefetch and self._prefetch[0] == shot.digest):
            return
        self._drop_prefetch()
        task = asyncio.ensure_future(asyncio.to_thread(self._encode_sync, shot))
        self._prefetch = (shot.digest, task)

    def _drop_prefetch(self) -> None:
        if self._prefetch is not None:
            task = self._prefetch[1]
            if not task.done():
                task.cancel()
            self._prefetch = None

    async def _encoded_for(self, turn: Turn, shot: Shot) -> tuple[_Encoded, bool]:
        cached = self._encoded.get(shot.digest)
        if cached is not None:
            self._encoded.move_to_end(shot.digest)
            return cached, True
        self.reporter.phase(turn.number, "encode")
        started = time.perf_counter()
        if self._prefetch is not None and self._prefetch[0] == shot.digest:
            task = self._prefetch[1]
            self._prefetch = None
            encoded = await task
        else:
            encoded = await asyncio.to_thread(self._encode_sync, shot)
        turn.timer.add("encode", (time.perf_counter() - started) * 1000)
        self.totals["frames_encoded"] += 1
        encoded.screenshot = self.runlog.save_screenshot(encoded.png, prefix="zoom_" if shot.zoomed else None)
        self._encoded[shot.digest] = encoded
        while len(self._encoded) > 4:
            self._encoded.popitem(last=False)
        return encoded, False

    async def observe(self, turn: Turn, *, zoom: Box | None = None, fresh: bool = False) -> Observation:
        """The next image for the model (see the module docstring).

        ``zoom``: a box over the current image to show at native resolution. ``fresh``:
        capture again even if an action's settled frame is waiting.
        """
        if zoom is not None:
            area = self.latest_full.mapping.area if self.latest_full else self.ctx.mapping.area
            rect = expand_rect(self.ctx.mapping.norm_box_to_physical(zoom), area)
            self.reporter.phase(turn.number, "capture")
            with turn.timer.phase("capture"):
                shot = await self._capture.call(lambda: self.screen.grab_region(rect))
        elif self.settled is not None and not fresh:
            shot = self.settled
        else:
            shot = await self.capture(turn, settle_first=self.current is not None)
        self.settled = None
        encoded, reused = await self._encoded_for(turn, shot)
        unchanged = self.current is not None and self.current.shot.digest == shot.digest and not shot.zoomed
        obs = Observation(shot, encoded.png, encoded.data_url, encoded.screenshot, reused, unchanged)
        record: dict[str, Any] = {
            "screenshot": encoded.screenshot,
            "mapping": self.describe(shot.mapping),
            "digest": f"{encoded.pixels & 0xFFFFFFFFFFFFFFFF:016x}",
            "reused": reused,
            "unchanged": unchanged,
            "zoomed": shot.zoomed,
            "png_bytes": len(encoded.png),
        }
        problem = getattr(self.screen, "cursor_problem", None)
        if problem is not None and not self.cursor_problem_noted:
            # Once per run: frames go on without the cursor, the record says why.
            self.cursor_problem_noted = True
            record["cursor_missing"] = problem
        turn.record["observation"] = record
        return obs

    def show(self, turn: Turn, history: History, obs: Observation, *, text: str, force_image: bool = True) -> bool:
        """Add an observation to ``history``: the image, or (when ``force_image`` is off
        and the pixels are the ones the model already has) a one-line note. Returns
        whether the image was sent. The tools' coordinate frame follows the image."""
        record = turn.record.get("observation")
        if obs.unchanged and not force_image:
            history.add_user(text)
            if record is not None:
                record["sent"] = "note"
            return False
        history.add_observation(obs.data_url, text=text, label=obs.screenshot or None)
        self.ctx.mapping = obs.mapping
        self.current = obs
        self.totals["images_sent"] += 1
        if record is not None:
            record["sent"] = "image"
        return True

    def describe(self, mapping: GeoMapping) -> dict[str, Any]:
        return {"monitor": self.ctx.monitor, **mapping.describe()}

    # ------------------------------------------------------------------ actions
    async def act(self, turn: Turn, call: ToolCall, tools: ToolSet) -> ToolOutcome:
        """Run one tool call; after input, settle and report what changed."""
        self.reporter.phase(turn.number, "action")
        mapping_used = self.describe(self.ctx.mapping)
        before = self.latest_full
        parse_error = (call.error, call.error_message or call.error) if call.error else None
        started = time.perf_counter()
        outcome = await execute_tool_call(tools, call.name, call.arguments, self.ctx, parse_error=parse_error)
        turn.timer.add("action", (time.perf_counter() - started) * 1000)
        self.totals["tool_calls"] += 1
        if not outcome.ok:
            self.totals["tool_errors"] += 1
        if outcome.acted:
            shot = await self.capture(turn, settle_first=True)
            self.settled = shot
            if self.config.agent.observe_after_action:
                self.prefetch_encode(shot)
            started = time.perf_counter()
            if before is None:
                changed_box, cursor_only = [0, 0, 1000, 1000], False
            elif shot is before:
                changed_box, cursor_only = None, False
            else:
                changed_box, cursor_only = await asyncio.to_thread(change_box, before, shot)
            changed = changed_box is not None
            outcome.payload["changed"] = changed
            outcome.payload["changed_region"] = changed_box
            if cursor_only:
                outcome.payload["pointer_moved_only"] = True
            repeats = self.no_effect.note(signature_of(call.name, call.arguments), changed)
            warning = self.no_effect.warning(repeats)
            if warning:
                outcome.payload["no_effect_repeats"] = repeats
                outcome.payload["warning"] = warning
            turn.timer.add("settle", (time.perf_counter() - started) * 1000)
        self._record_call(turn, call, outcome, mapping_used)
        return outcome

    def _record_call(self, turn: Turn, call: ToolCall, outcome: ToolOutcome, mapping: dict[str, Any]) -> None:
        entry = {"id": call.id, "name": call.name, "arguments": call.arguments}
        if call.error:
            entry["raw_arguments"] = call.raw_arguments
        if "tool_call" not in turn.record:
            turn.record["tool_call"] = entry
            turn.record["result"] = outcome.payload
            turn.record["action"] = outcome.action_record
            turn.record["mapping"] = mapping
        else:
            turn.record.setdefault("more_calls", []).append(
                {**entry, "result": outcome.payload, "action": outcome.action_record, "mapping": mapping}
            )

    def reject_call(self, turn: Turn, call: ToolCall, payload: dict[str, Any]) -> None:
        """Record a call answered without running (e.g. too_many_tool_calls)."""
        self.totals["tool_calls"] += 1
        self.totals["tool_errors"] += 1
        turn.record.setdefault("extra_calls", []).append({"id": call.id, "name": call.name, "result": payload})

    async def pause(self, turn: Turn, seconds: float) -> None:
        """A fixed delay (the seeds' step delay), timed as settle."""
        if seconds > 0:
            with turn.timer.phase("settle"):
                await asyncio.sleep(seconds)

    # ------------------------------------------------------------------ summary
    def summary(self, *, outcome: str, answer: str, error: str | None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        ended = time.time()
        return {
            "task": self.task,
            "mode": self.mode,
            "model": self.config.model.model,
            "endpoint": self.config.model.endpoint,
            "outcome": outcome,
            "error": error,
            "answer": answer,
            "steps": self.steps,
            "max_steps": self.max_steps,
            "started": round(self.started, 3),
            "ended": round(ended, 3),
            "duration_s": round(ended - self.started, 3),
            "screenshots": list(self.runlog.screenshots),
            "screenshot_dir": str(self.runlog.dump_dir),
            "totals": dict(self.totals),
            "phases": {s.phase: s.as_dict() for s in summarize(self.timing_rows)},
            # Only when the server's answers changed the requests (keeps plain runs' summaries as they were).
            **({"server": self.profile.describe()} if self.profile.learned else {}),
            "settle_signal": self.settle_signal,
            "prefill": self.prefill_summary(),
            **(dict(extra) if extra else {}),
        }


# ---------------------------------------------------------------------- run_agent


def _describe_task(task: str | Scenario) -> tuple[str, Scenario | None]:
    if isinstance(task, Scenario):
        return task.task, task
    return task, None


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
) -> RunResult:
    """Run one task with the mode ``config.agent.mode``; never raises for a run that
    started (the outcome says what happened), only for invalid setup.

    The safety layer (``[policy]``/``[safety]``, on unless ``safety.enabled`` is false)
    checks every action, bounds the run by steps and wall time, redacts the records
    and arms the kill switch. ``watch_desktop``: whether the kill switch watches the
    fail-safe corner and the hotkey and window rules read the foreground window; by
    default only when the hands are an :class:`~deskpilot.input.InputController` that
    sends real input (not dry-run, simulated or wrapped hands). ``confirm_prompt``
    answers the policy's confirm questions instead of the terminal (a replay answers
    them as recorded).
    """
    from deskpilot.agent._modes import get_mode

    text, scenario = _describe_task(task)
    mode_spec = get_mode(config.agent.mode)
    mode = mode_spec.factory(config)
    reporter = reporter or NullReporter()
    max_steps = scenario.max_steps if scenario and scenario.max_steps and "agent.max_steps" not in _explicit(config) else config.agent.max_steps
    # A mode with its own bound (team: 30 / 50 per seed variant) wins over the core default.
    if "agent.max_steps" not in _explicit(config) and not (scenario and scenario.max_steps):
        max_steps = getattr(mode, "max_steps", None) or max_steps

    runlog = RunLog.create(
        config.run.runs_dir,
        name=run_name,
        dump_dir=config.run.dump_dir or None,
        dump_prefix=config.run.dump_prefix,
        dump_start=config.run.dump_start,
        save_screenshots=config.run.save_screenshots,
    )
    redact_options = _redact_options(config)
    exchange: ExchangeLog | None = None
    redaction: _RunRedaction | None = None
    if redact_options is not None:
        redaction = _RunRedaction(redact_options)
        # A text protocol (UI-TARS) writes what it types into its reply text: the
        # exchange log records that reply before any call has run, so read it there.
        redaction.text_protocol = getattr(getattr(mode, "tools", None), "text_protocol", None)
        runlog.redactor = redaction.record
        if config.run.exchange_log:
            exchange = _RedactingExchangeLog(runlog.exchange_log_path, redaction)
    elif config.run.exchange_log:
        exchange = ExchangeLog(runlog.exchange_log_path)
    if exchange is not None:
        exchange.on_failure = runlog.fail  # one failure path for every run file
    guard: SafetyGuard | None = None
    capture = _ThreadBound("deskpilot-capture")
    client: ChatClient | None = None
    screen: Screen | None = None
    ctx: ToolContext | None = None
    # The input thread and the hands before ``ctx`` owns them: a setup step that fails
    # in between (the first grab) must still release and close them.
    input_thread: concurrent.futures.ThreadPoolExecutor | None = None
    early_hands: Hands | None = None
    session: Session | None = None
    outcome, answer, error = "error", "", None
    interrupted: list[str] = []
    mode_task: asyncio.Task[ModeResult] | None = None
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    replaced: list[tuple[signal.Signals, Any]] = []
    timer_handle: asyncio.TimerHandle | None = None
    started_wall = time.time()
    extra: dict[str, Any] = {}

    shutdown = _SHUTDOWN.get()
    if shutdown is None:
        shutdown = _Shutdown()
        _SHUTDOWN.set(shutdown)

    def stop(reason: str) -> None:
        if interrupted and reason in ("SIGINT", "SIGTERM") and shutdown.phase not in (None, "running"):
            # Pressed again while the run cleans up: the clean-up is bounded (held input
            # is released first, each step has a timeout), so say what it is doing.
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"deskpilot: {reason} again while {shutdown.phase}; exiting as soon as that is done\n")
                sys.stderr.flush()
            return
        if not interrupted:
            interrupted.append(reason)
        if ctx is not None:
            ctx.stop.set()
        if mode_task is not None and not mode_task.done():
            mode_task.cancel()

    def run_files_failed(exc: RunLogError) -> None:
        # From the writer thread (or the loop): the disk refused a run file. The run
        # stops like an interrupt; the outcome is an error that says which file and why.
        with contextlib.suppress(RuntimeError):  # the loop already closed: nothing to stop
            loop.call_soon_threadsafe(stop, _RUN_FILES)

    runlog.on_failure = run_files_failed

    def time_up() -> None:
        # Whichever bound fires first, the loop's timer or the kill switch's budget
        # watcher, the record says the same: tripped by max_seconds, outcome max_time.
        switch = guard.killswitch if guard is not None else None
        if switch is not None:
            switch.trip(f"reached the time limit ({_wall_time_limit(config):g} s)", "max_seconds")
        stop("max_time")

    try:
        # Handlers first: Ctrl+C during setup must still end in a written record.
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
                try:
                    loop.add_signal_handler(sig, stop, name)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):  # Windows: no loop signal handlers
                    previous = signal.signal(sig, lambda *_a, _n=name: loop.call_soon_threadsafe(stop, _n))  # type: ignore[misc]
                    replaced.append((sig, previous))
        shutdown.phase = "running"
        runlog.write_run_info(
            {
                "task": text,
                "scenario": scenario.as_dict() if scenario else None,
                "mode": mode_spec.name,
                "toolset": config.agent.toolset,
                "config": config.as_dict(),
                "config_sources": dict(config.sources),
                "config_file": str(config.file) if config.file else None,
                "deskpilot": __version__,
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "imaging_backend": imaging.BACKEND,
                "started": round(started_wall, 3),
                "pid": os.getpid(),
            }
        )
        runlog.write_summary({"task": text, "mode": mode_spec.name, "outcome": "running", "started": round(started_wall, 3)})
        model = config.model
        client = ChatClient(
            model.endpoint,
            model.model,
            timeout=model.timeout,
            max_response_bytes=max(1, int(model.max_response_mb * 1024 * 1024)),
            max_retries=model.retries,
            stream=model.stream,
            api_key=model.api_key or None,
            exchange_log=exchange,
            transport=transport,
            num_ctx=model.num_ctx,
        )
        # No retry wait may outlast the run (a Retry-After longer than what is left fails at once).
        client.run_deadline = time.monotonic() + _wall_time_limit(config)
        if screen_factory is None:
            size = (config.screen.image_width, config.screen.image_height)

            def screen_factory() -> Screen:
                return CapturerScreen(
                    size=size,
                    monitor=config.screen.monitor,
                    backend=config.screen.capture_backend,
                    cursor=config.screen.cursor,
                )

        if sys.platform == "win32":
            # Per-monitor-v2 before any capture or input, so both use physical pixels.
            from deskpilot._win32.dpi import ensure_dpi_awareness

            extra["dpi_awareness"] = ensure_dpi_awareness().as_dict()
        screen = await capture.call(screen_factory)
        hands: Hands
        input_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="deskpilot-input")
        if hands_factory is None:
            from deskpilot.input import InputController

            backend = "dry" if config.agent.dry_run else config.screen.input_backend

            def hands_factory() -> Hands:
                return InputController(backend)

        hands = early_hands = await loop.run_in_executor(input_thread, hands_factory)
        first = await capture.call(screen.grab)  # the mapping tools start with
        ctx = ToolContext(
            hands=hands,
            mapping=first.mapping,
            monitor=screen.monitor,
            seed_delays=config.agent.settle == "fixed",
            max_type_chars=config.agent.max_type_chars,
            _executor=input_thread,
        )
        desktop = watch_desktop if watch_desktop is not None else drives_desktop(hands)
        guard = build_guard(config, max_steps, desktop=desktop and not config.agent.dry_run, prompt=confirm_prompt)
        if guard is not None:
            # Every tool checks its action here before any input is sent; the guarded
            # hands tell the kill switch where the agent itself puts the pointer and
            # refuse input once it has tripped.
            # Coroutines check through policy_async: a confirm question waits off the
            # event loop, so a stop during it still ends the run at once.
            ctx.policy = guard.check_action
            ctx.policy_async = guard.check_action_async
            ctx.hands = guard.wrap_hands(hands)
            if redaction is not None and redaction.typed is not None:
                guard.typed_texts = redaction.typed  # texts it checks are texts typed
            if redaction is not None:
                # Pieces of a secret typed across calls, found by the policy: redacted
                # from every record written from then on (and the earlier ones at the end).
                redaction.secret_pieces = guard.sequence.secret_pieces
        session = Session(
            config=config,
            task=text,
            client=client,
            screen=screen,
            capture=capture,
            ctx=ctx,
            runlog=runlog,
            reporter=reporter,
            mode=mode_spec.name,
            max_steps=max_steps,
            guard=guard,
            redaction=redaction,
        )
        session.damage, session.settle_signal = _open_damage(config, screen)
        if guard is not None:
            if guard.killswitch is not None:
                guard.killswitch.add_callback(lambda trip: _stop_threadsafe(loop, stop, trip))
            # Arming grabs the hotkey over a new X connection: off the event loop.
            await asyncio.to_thread(guard.start)
        reporter.start(
            {
                "task": text,
                "scenario": scenario.ref if scenario else None,
                "mode": mode_spec.name,
                "toolset": config.agent.toolset,
                "model": model.model,
                "endpoint": model.endpoint,
                "run_dir": str(runlog.path),
                "max_steps": max_steps,
                "screen": first.mapping.describe(),
                "input": "dry-run" if config.agent.dry_run else config.screen.input_backend,
                "safety": describe_guard(guard),
            }
        )
        # Wall time is always bounded, by the loop itself: agent.max_seconds, else the
        # safety hard cap, with or without the kill switch (whose budget watcher stops
        # the run too when it runs) and with --no-safety.
        timer_handle = loop.call_later(_wall_time_limit(config), time_up)
        if interrupted:  # a signal arrived during setup
            raise _SetupInterrupted
        mode_task = asyncio.ensure_future(mode.run(session))
        try:
            result = await mode_task
            # The mode's own summary keys join what setup recorded (the DPI awareness).
            outcome, answer, extra = result.outcome, result.answer, {**extra, **result.extra}
        except asyncio.CancelledError:
            if not interrupted:
                raise
            outcome = "max_time" if interrupted[0] == "max_time" else "interrupted"
            error = None if outcome == "max_time" else f"stopped by {interrupted[0]}"
            answer = strip_think(session.last_content)
        except RunLogError:
            if runlog.failure is None:
                raise
            answer = strip_think(session.last_content)
        except StepLimit:
            outcome, answer = "max_steps", strip_think(session.last_content)
        except KeyboardInterrupt:
            outcome, error = "interrupted", "stopped by KeyboardInterrupt"
        except RunInterrupted as exc:
            # The kill switch tripped and the guarded hands refused input before the
            # loop's stop (scheduled from the watcher thread) cancelled the mode.
            reason = interrupted[0] if interrupted else str(exc)
            outcome = "max_time" if reason == "max_time" else "interrupted"
            error = None if outcome == "max_time" else f"stopped by {reason}"
            answer = strip_think(session.last_content)
        except DeskpilotError as exc:
            # An error event in a stream, or a stream cut short: the server failed
            # mid-answer (not a configuration problem), an outcome of its own.
            outcome = "server_error" if isinstance(exc, ModelStreamError) else "error"
            error = f"{type(exc).__name__}: {exc}"
            extra["error_details"] = _jsonable(exc.details)
    except _SetupInterrupted:
        outcome, error = "interrupted", f"stopped by {interrupted[0]} before the first request"
    except KeyboardInterrupt:
        outcome, error = "interrupted", "stopped by KeyboardInterrupt"
    except DeskpilotError as exc:
        outcome, error = "error", f"{type(exc).__name__}: {exc}"
        extra["error_details"] = _jsonable(exc.details)
    except Exception as exc:  # a bug: record it, then let it propagate
        outcome, error = "error", f"{type(exc).__name__}: {exc}"
        if guard is not None:
            extra["safety"] = _safety_record(guard, session)
        _finish(runlog, session, text, mode_spec.name, outcome, answer, error, extra, reporter, started_wall)
        await _cleanup(ctx, screen, capture, client, exchange, runlog, installed, loop, timer_handle, guard,
                       orphan=(input_thread, early_hands))
        _uninstall(loop, installed, replaced)
        raise
    except BaseException:  # cancelled from outside: no record to write, but disarm and release
        if guard is not None:
            guard.close()
        if session is not None:
            session._close_damage()
        raise
    if guard is not None:
        extra["safety"] = _safety_record(guard, session)
    summary = _finish(runlog, session, text, mode_spec.name, outcome, answer, error, extra, reporter, started_wall)
    outcome, error = summary["outcome"], summary["error"]
    await _cleanup(ctx, screen, capture, client, exchange, runlog, installed, loop, timer_handle, guard,
                   orphan=(input_thread, early_hands))
    if redaction is not None and redaction.secret_pieces:
        _phase("redacting the pieces of a secret from the run files")
        _scrub_run_files(runlog, redaction.secret_pieces)
    if config.run.lmstudio_logs != "off":
        _phase("exporting the LM Studio logs")
        from deskpilot.agent._lmstudio_logs import export_lmstudio_logs

        exported = export_lmstudio_logs(
            runlog.path,
            since=started_wall,
            until=time.time(),
            log_dir=config.run.lmstudio_log_dir or None,
            required=config.run.lmstudio_logs == "on",
            endpoint=config.model.endpoint,  # auto: only a local LM Studio's logs
        )
        if exported:
            summary["lmstudio_logs"] = [str(p.name) for p in exported]
            runlog.write_summary(summary)
    _uninstall(loop, installed, replaced)
    return RunResult(outcome, answer, session.steps if session else 0, runlog.path, summary, error)


# ---------------------------------------------------------------------- the safety layer


def drives_desktop(hands: Any) -> bool:
    """Whether ``hands`` send real input to this desktop (XTest, SendInput): only then
    does the kill switch watch the pointer and the hotkey, and do window rules read the
    foreground window. Simulated, dry-run and wrapped hands have no desktop of their own
    (pass ``watch_desktop=True`` to :func:`run_agent_async` for wrappers of real hands)."""
    from deskpilot.input import InputController

    return isinstance(hands, InputController) and hands.backend.name != "dry"


def _no_desktop() -> Any:
    raise PlatformError("no desktop behind the input (simulated or dry-run): nothing to watch", call="watch")


def build_guard(
    config: AgentConfig, max_steps: int, *, desktop: bool, prompt: ConfirmPrompt | None = None
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
        max_seconds=config.agent.max_seconds,
        watch_backend=None if desktop else _no_desktop,
        window_reader="auto" if desktop else None,
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
    session's count, which stateless mode keeps without ``Session.ask``) against the
    bound the mode ran with (team mode sets its variant's own)."""
    if guard.budget is not None and session is not None:
        guard.budget.steps = session.steps
        guard.budget.max_steps = max(1, session.max_steps)
    return guard.record()


def _stop_threadsafe(loop: asyncio.AbstractEventLoop, stop: Callable[[str], None], trip: Trip) -> None:
    """The kill switch's callback (watcher thread): stop the run on the loop's thread."""
    reason = "max_time" if trip.source == "max_seconds" else f"kill switch ({trip.source}): {trip.reason}"
    with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over anyway
        loop.call_soon_threadsafe(stop, reason)


def _wall_time_limit(config: AgentConfig) -> float:
    """Seconds the loop's own timer allows the run: ``agent.max_seconds``, or the
    ``[safety] hard_cap_seconds`` when that is 0 (read even with the safety layer off)."""
    if config.agent.max_seconds > 0:
        return float(config.agent.max_seconds)
    return float(config.section(SafetySettings).hard_cap_seconds)


def _redact_options(config: AgentConfig) -> RedactOptions | None:
    safety = config.section(SafetySettings)
    if not safety.enabled or not (safety.redact_secrets or safety.mask_typed_text):
        return None
    return RedactOptions(secrets=safety.redact_secrets, mask_typed_text=safety.mask_typed_text)


class _RunRedaction:
    """One run's redaction of records and log lines (secrets; typed text on request).

    With ``mask_typed_text`` it learns as the run goes: the typing tools of every tool
    set sent to the model (from their definitions: team 003's ``type_text_input``),
    and every text typed (from the model's calls, the records, the policy checks), so
    that a line written later masks where it echoes one ("Typed: hello")."""

    def __init__(self, options: RedactOptions) -> None:
        self.options = options
        self._no_images = dataclasses.replace(options, images=False)
        self.typed: TypedTexts | None = TypedTexts() if options.mask_typed_text else None
        self._tools: list[dict[str, Any]] | None = None
        #: The run's text protocol (UI-TARS), whose typed texts sit in the reply text.
        self.text_protocol: Any = None
        self.secret_pieces: list[str] = []

    def learn_tools(self, tools: list[dict[str, Any]]) -> None:
        if self.typed is None or tools is self._tools:
            return
        self._tools = tools
        names = typing_tool_names(tools)
        if not names <= self.options.typing_actions:
            self.options = dataclasses.replace(self.options, typing_actions=self.options.typing_actions | names)
            self._no_images = dataclasses.replace(self.options, images=False)

    def learn(self, record: Any) -> None:
        if self.typed is not None:
            self.typed.add_from(record, self.options)

    def record(self, record: Any, *, images: bool = True) -> Any:
        if self.typed is not None and self.text_protocol is not None:
            self._learn_text_calls(record)
        out = redact(record, self.options if images else self._no_images, typed=self.typed)
        return _mask_pieces(out, self.secret_pieces) if self.secret_pieces else out

    def _learn_text_calls(self, value: Any) -> None:
        """Typed texts of text-protocol actions (``type(content='...')``) in any string."""
        if isinstance(value, str):
            if "Action:" in value and self.typed is not None:
                for call in self.text_protocol(value, lambda: "redact"):
                    text = (call.arguments or {}).get("content")
                    if call.name == "type" and isinstance(text, str) and text:
                        self.typed.add(text, text.replace("\\n", "\n").rstrip("\n"))
        elif isinstance(value, dict):
            for item in value.values():
                self._learn_text_calls(item)
        elif isinstance(value, list):
            for item in value:
                self._learn_text_calls(item)

    def text(self, text: str) -> str:
        if self.secret_pieces:
            text = _mask_pieces(text, self.secret_pieces)
        if self.typed is not None:
            text = self.typed.mask(text)
        return redact_text(text, self.options.detectors) if self.options.secrets else text


SPLIT_SECRET_MARK = "[REDACTED:split_secret]"
MIN_PIECE_CHARS = 4


def _mask_pieces(value: Any, pieces: list[str]) -> Any:
    """``value`` with every piece of a secret typed across calls replaced (in strings,
    JSON argument strings included: secret alphabets need no JSON escapes)."""
    if isinstance(value, str):
        for piece in sorted(set(pieces), key=len, reverse=True):
            # Shorter pieces are not secrets on their own and would mask ordinary words.
            if len(piece.strip()) >= MIN_PIECE_CHARS and piece in value:
                value = value.replace(piece, SPLIT_SECRET_MARK)
        return value
    if isinstance(value, list):
        return [_mask_pieces(v, pieces) for v in value]
    if isinstance(value, dict):
        return {k: _mask_pieces(v, pieces) for k, v in value.items()}
    return value


def _scrub_run_files(runlog: RunLog, pieces: list[str]) -> None:
    """Lines written before a split secret was recognised hold its earlier pieces: rewrite
    those files with them redacted (atomically; a file that cannot be rewritten is noted)."""
    for name in ("turns.jsonl", "exchange.jsonl", "execution_log.txt"):
        path = runlog.path / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            runlog.errors.append(f"redacting {name}: {exc}")
            continue
        if name.endswith(".jsonl"):
            # Values only, line by line: a piece may also spell part of a key or of JSON.
            lines = []
            for line in data.splitlines(keepends=True):
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError:
                    lines.append(line)
                    continue
                masked = _mask_pieces(value, pieces)
                lines.append(line if masked == value else dumps_json(masked) + b"\n")
            scrubbed = b"".join(lines)
        else:
            scrubbed = _mask_pieces(data.decode("utf-8", "replace"), pieces).encode("utf-8")
        if scrubbed != data:
            try:
                runlog.replace_file(name, scrubbed)
            except (OSError, RunLogError) as exc:
                runlog.errors.append(f"redacting {name}: {exc}")


class _RedactingExchangeLog(ExchangeLog):
    """The exchange log with secrets (and, on request, typed text) redacted: the model's
    replies and the history it is sent hold whatever it typed. Images are already
    summarized by the log itself."""

    def __init__(self, path: Path, redaction: _RunRedaction) -> None:
        super().__init__(path)
        self.redaction = redaction

    def write(self, record: dict[str, Any]) -> None:
        super().write(self.redaction.record(record, images=False))


def _restore(replaced: list[tuple[signal.Signals, Any]]) -> None:
    for sig, previous in replaced:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, previous)


def _open_damage(config: AgentConfig, screen: Screen) -> tuple[DamageSource | None, str]:
    """The run's drawing notifications for the adaptive settle, and what it settles on.

    X11 DAMAGE where the screen is captured from an X server that has it; polling
    probes elsewhere (Windows, macOS, simulated screens), with ``settle_signal = "poll"``
    and whenever the watcher cannot be made (``"damage"`` then is an error)."""
    wanted = config.agent.settle_signal
    if config.agent.settle != "adaptive" or wanted == "poll":
        return None, "poll"
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
    from deskpilot._x11._damage import DamageWatcher

    try:
        # Only drawing on the working area counts (not a video on another monitor).
        return DamageWatcher(area=screen.area), "damage"
    except PlatformError as exc:
        if wanted == "damage":
            raise
        return None, f"poll ({exc})"


def _explicit(config: AgentConfig) -> set[str]:
    return {k for k, v in config.sources.items() if v != "default"}


def _jsonable(details: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in details.items():
        out[key] = value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    return out


def _finish(
    runlog: RunLog,
    session: Session | None,
    task: str,
    mode: str,
    outcome: str,
    answer: str,
    error: str | None,
    extra: dict[str, Any],
    reporter: Reporter,
    started: float,
) -> dict[str, Any]:
    _phase("writing the run record (turns.jsonl, summary.json)")
    if session is not None:
        session._drop_prefetch()
        session._close_damage()
        pending = session.pending
        if pending is not None:
            if outcome in ("answered",) and "final" not in pending.record:
                pending.record["final"] = True
            if outcome != "answered":
                pending.record["ended_by"] = outcome
            session.close_turn(pending, defer_print=False)
        summary = session.summary(outcome=outcome, answer=answer, error=error, extra=extra)
    else:
        summary = {
            "task": task,
            "mode": mode,
            "outcome": outcome,
            "error": error,
            "answer": answer,
            "steps": 0,
            "started": round(started, 3),
            "ended": round(time.time(), 3),
            **extra,
        }
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
    reporter.finish({**summary, "run_dir": str(runlog.path)})
    return summary


async def _cleanup(
    ctx: ToolContext | None,
    screen: Screen | None,
    capture: _ThreadBound,
    client: ChatClient | None,
    exchange: ExchangeLog | None,
    runlog: RunLog,
    installed: list[signal.Signals],
    loop: asyncio.AbstractEventLoop,
    timer_handle: asyncio.TimerHandle | None,
    guard: SafetyGuard | None = None,
    *,
    orphan: tuple[concurrent.futures.ThreadPoolExecutor | None, Hands | None] = (None, None),
) -> None:
    """Release held input first (it matters most), then close everything else.

    ``orphan``: the input thread and the hands made before setup failed, when no
    ``ctx`` took them over (ignored when ``ctx`` exists: it owns them)."""
    if timer_handle is not None:
        timer_handle.cancel()
    try:
        await _release_and_close(ctx, screen, capture, client, exchange, runlog, installed, loop, orphan)
    finally:
        if guard is not None:
            # Disarm the kill switch (ungrab the hotkey, stop the watcher) and close the
            # window reader, after the held keys are released.
            _phase("disarming the kill switch")
            await asyncio.to_thread(guard.close)


def _uninstall(loop: asyncio.AbstractEventLoop, installed: list[signal.Signals],
               replaced: list[tuple[signal.Signals, Any]]) -> None:
    """The run's signal handlers go last: a second Ctrl+C during clean-up is answered
    (see ``stop``), not raised into the middle of a step."""
    _phase("stopping worker threads")
    for sig in installed:
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.remove_signal_handler(sig)
    _restore(replaced)


async def _release_and_close(
    ctx: ToolContext | None,
    screen: Screen | None,
    capture: _ThreadBound,
    client: ChatClient | None,
    exchange: ExchangeLog | None,
    runlog: RunLog,
    installed: list[signal.Signals],
    loop: asyncio.AbstractEventLoop,
    orphan: tuple[concurrent.futures.ThreadPoolExecutor | None, Hands | None] = (None, None),
) -> None:
    _phase("releasing held keys and mouse buttons")
    if ctx is not None:
        ctx.stop.set()
        if ctx._executor is not None:
            await _release_hands(loop, ctx._executor, ctx.hands)
        ctx.close()
    elif orphan[0] is not None:
        executor, hands = orphan[0], orphan[1]
        if hands is not None:
            await _release_hands(loop, executor, hands)
        executor.shutdown(wait=True, cancel_futures=True)
    _phase("closing the screen capture")
    if screen is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(capture.call(screen.close), 2.0)
    capture.shutdown()
    _phase("closing the connection to the model server")
    if client is not None:
        await client.aclose()
    _phase("closing the run files")
    if exchange is not None:
        exchange.close()
    runlog.close()


async def _release_hands(
    loop: asyncio.AbstractEventLoop, executor: concurrent.futures.ThreadPoolExecutor, hands: Hands
) -> None:
    """Release held keys and buttons, then close the hands, on their input thread."""
    # Failures here must not stop the record from being written.
    with contextlib.suppress(Exception):
        await asyncio.wait_for(loop.run_in_executor(executor, hands.release_all), 2.0)
    closer = getattr(hands, "close", None)
    if callable(closer):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop.run_in_executor(executor, closer), 2.0)


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
