"""The turn machinery: one :class:`Session` per run, driven by a mode.

A *mode* is prompts + a tool set + a turn policy (see :mod:`._modes`); everything a
mode needs from the machine lives here, so single, team and stateless modes share one
implementation of the hard parts:

``Session.ask(history, ...)``
    closes the previous turn (its record goes to ``turns.jsonl``), sends the request
    spliced from the history's cached bytes (``request.prefill``: what a prefix cache
    cannot reuse of it) and times the model wait. Before it, ``Session.step_limit()``
    says whether the run's ``max_steps`` requests are used up: a value (the mode's
    ``max_steps`` result) the mode returns, not an exception.
``Session.act(turn, call, tools)``
    runs one tool call (translated by the tool set that speaks its language, sent the one
    path of every action: :func:`deskpilot.agent.tools.act`), then settles adaptively (on X11 DAMAGE
    notifications where the server has them, :func:`._settle.settle_on_damage`; by
    polling probes elsewhere), compares the settled frame with the one before the
    action (``changed`` / ``changed_region``) and warns after repeated actions without
    visible effect. The settled probe's pixels are the next image: no second grab.
``Session.observe(turn, ...)``
    the image for the model: the settled frame of the last action when there is one
    (no second capture), a fresh settled capture otherwise, or a native-resolution
    crop after ``zoom``; PNG encoding runs in a worker thread (the native encoder
    releases the GIL) and is skipped when the same frame was encoded before.

A mode that builds its own requests and images (stateless) uses the same pieces one by
one: ``request_body`` (the server profile's fields), ``send`` (counted, timed, recorded),
``call_on_capture`` / ``settle_on`` (the capture thread, the settle policy) and
``count`` for the run's totals.

:func:`~deskpilot.agent._run.run_agent` wires it up: config -> client, screen (capture
thread), hands (input thread), run directory, terminal output, signals and the summary.

Timing: each turn records ``parse``, ``action``, ``settle``, ``capture``, ``encode``,
``request_build`` and ``model`` in milliseconds, plus ``overhead``, measured directly as
the wall time from the model's reply to the moment the next request is handed to the
HTTP client.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from deskpilot import imaging
from deskpilot._errors import ModelHTTPError, RunInterrupted
from deskpilot._untrusted import token_count
from deskpilot.agent._config import AgentConfig
from deskpilot.agent._limits import RunLimits
from deskpilot.agent._redaction import RunRedaction
from deskpilot.agent._screen import Probe, Screen, Shot, change_box, expand_rect
from deskpilot.agent._settle import (
    DamageSource,
    SettlePolicy,
    SettleResult,
    settle,
    settle_on_damage,
)
from deskpilot.agent._timings import OVERHEAD, TurnTimer, summarize
from deskpilot.agent.client._chat import ChatClient, Completion
from deskpilot.agent.client._history import (
    TEXT_BYTES_PER_TOKEN,
    History,
    Prefill,
    image_token_rule,
    png_data_url,
)
from deskpilot.agent.client._servers import ServerProfile
from deskpilot.agent.client._toolcalls import ToolCall, strip_think
from deskpilot.agent.tools._core import (
    NoEffectTracker,
    ToolContext,
    ToolOutcome,
    ToolSet,
    execute_tool_call,
    signature_of,
    speaking_toolset,
)
from deskpilot.geometry import Box
from deskpilot.geometry import Mapping as GeoMapping
from deskpilot.rundir import (
    CallRecord,
    MappingRecord,
    ObservationRecord,
    RunLog,
    Summary,
    ToolCallRecord,
    TurnRecord,
)
from deskpilot.safety import SafetyGuard, redact_text

__all__ = [
    "ModeResult",
    "NullReporter",
    "Observation",
    "Reporter",
    "Session",
    "ThreadBound",
    "Turn",
]

R = TypeVar("R")
T = TypeVar("T")

#: How many recent input-to-frame delays the settle's latency estimate spans.
LATENCY_SAMPLES = 5
#: An action this short whose reaction was already on screen when the settle began says
#: the app draws its reaction at once (a delay of 0): a click or a key, not a long typing.
QUICK_ACTION_S = 0.02


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
class Turn:
    """One model request and everything done with its answer."""

    number: int
    role: str
    timer: TurnTimer = field(default_factory=TurnTimer)
    #: The turns.jsonl line being built (``turn`` first: the modes fill in the rest).
    record: TurnRecord = field(init=False)
    reply_at: float | None = None  # perf_counter when the model's answer was complete
    closed: bool = False

    def __post_init__(self) -> None:
        self.record = {"turn": self.number}


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


class ThreadBound:
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
        capture: ThreadBound,
        ctx: ToolContext,
        runlog: RunLog,
        reporter: Reporter,
        mode: str,
        limits: RunLimits,
        guard: SafetyGuard | None = None,
        redaction: RunRedaction | None = None,
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
        self._cursor_problem_noted = False
        self.ctx = ctx
        self.runlog = runlog
        self.reporter = reporter
        self.mode = mode
        #: The run's bounds (:mod:`._limits`): ``max_steps`` model requests.
        self.limits = limits
        #: Model requests made so far (``ask`` and ``send`` count them).
        self.steps = 0
        self.started = time.time()
        self._capture = capture
        loop = config.agent
        if loop.settle == "adaptive":
            self.settle_policy = SettlePolicy(
                "adaptive",
                loop.settle_min,
                loop.settle_max,
                loop.settle_poll,
                first_reaction_s=min(loop.settle_first_reaction, loop.settle_max),
                frame_s=loop.settle_frame,
            )
        else:
            self.settle_policy = SettlePolicy(loop.settle)  # type: ignore[arg-type]
        self.no_effect = NoEffectTracker(limits.no_effect_repeats)
        #: The app's input-to-frame delays seen by the last settles after an action (see
        #: :meth:`_note_reaction`): the settle's latency estimate is their maximum.
        self._latencies: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        #: Drawing notifications to settle on (X11 DAMAGE), or None to poll; the run
        #: opens them once the session exists (and :meth:`wind_down` closes them).
        self.damage: DamageSource | None = None
        #: What the adaptive settle waits on: "damage", or "poll" (with the reason when
        #: DAMAGE was wanted but could not be had).
        self.settle_signal = "poll"
        #: When the last settle on :attr:`damage` ended (the source drained up to then).
        self._damage_drained_at: float | None = None
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
        #: The model's last answer text (what a run cut short reports as its answer).
        self.last_content = ""
        #: What this run's server wants in a request (``--server``; learns from 400s).
        self.profile = ServerProfile.for_run(config.model.server, config.model.endpoint, config.model.model)
        #: Tokens per image for the prefill accounting (None: the model's rule is unknown).
        self._image_tokens = image_token_rule(config.model.model)
        #: Per request: images / image tokens / text tokens a prefix cache cannot reuse,
        #: and images in context (see :class:`~deskpilot.agent.client._history.Prefill`).
        self.prefills: list[Prefill] = []

    @property
    def max_steps(self) -> int:
        return self.limits.max_steps

    def count(self, **increments: int) -> None:
        """Add to the run's totals (``summary.totals``): ``count(tool_calls=1)``, for what a
        mode does beside ``ask`` / ``act`` / ``show`` (which count their own)."""
        totals = self.totals
        for name, n in increments.items():
            if name not in totals:
                raise KeyError(f"no run total named {name!r} (one of {', '.join(totals)})")
            totals[name] += n

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
        if self.ctx.stop.is_set():
            # Every mode asks through here: a stop that could not cancel the mode ends it
            # at its next request, whatever the mode does with refused actions.
            raise RunInterrupted("the run is stopping", reason="stop")
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

    def step_limit(self) -> ModeResult | None:
        """The ``max_steps`` outcome once the run's model requests are used up (the mode
        returns it: a normal ending), None while another request may be made."""
        if self.steps >= self.limits.max_steps:
            return ModeResult("max_steps", strip_think(self.last_content))
        return None

    def _check_step_left(self) -> None:
        if self.steps >= self.limits.max_steps:
            # A mode that asks past its bound has a bug: it checks step_limit() first.
            raise RuntimeError(f"a request past max_steps ({self.limits.max_steps}): check Session.step_limit() first")

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
        """Send the history; returns the new turn and the model's answer.

        Only while :meth:`step_limit` is None (a request past ``max_steps`` is a bug)."""
        self._check_step_left()
        redaction = self.redaction
        if redaction is not None and tools:
            redaction.learn_tools(tools)  # before the exchange log records the answer
        previous = self._pending
        if history.image_tokens is None:
            history.image_tokens = self._image_tokens
        profile = self.profile
        profile.apply(history)

        def build() -> bytes:
            return self.request_body(
                history, tools=tools, tool_choice=tool_choice, temperature=temperature, max_tokens=max_tokens
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
        self.count(requests=1, request_bytes=len(body))
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
                    request = turn.record["request"]
                    request["images"], request["bytes"] = history.stats().images_live, len(body)
        finally:
            turn.timer.add("model", (time.perf_counter() - started) * 1000)
            self.steps += 1
        turn.reply_at = time.perf_counter()
        self._received(turn, completion)
        if redaction is not None and completion.tool_calls:
            # Texts the model asks to type are masked in log lines from now on (a mode
            # logs the answer before it runs the call).
            redaction.learn(turn.record["model"])
        return turn, completion

    def _received(self, turn: Turn, completion: Completion) -> None:
        usage = completion.usage or {}
        self.count(
            prompt_tokens=token_count(usage.get("prompt_tokens")),
            completion_tokens=token_count(usage.get("completion_tokens")),
        )
        self.last_content = completion.content
        turn.record["model"] = completion.as_record()

    def request_body(
        self,
        history: History,
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The request for ``history`` as this run's server wants it (the profile decides
        the token-limit field and whether temperature goes); the model settings fill in
        what is not given. ``extra``: more top-level fields (the profile's win)."""
        model = self.config.model
        args = self.profile.request_args(
            temperature=model.temperature if temperature is None else temperature,
            max_tokens=model.max_tokens if max_tokens is None else max_tokens,
        )
        if extra:
            args["extra"] = {**extra, **(args["extra"] or {})}
        return history.build_request(
            model=model.model,
            tools=tools,
            tool_choice=tool_choice or model.tool_choice,
            stream=model.stream,
            **args,
        )

    async def send(
        self,
        turn: Turn,
        body: bytes,
        *,
        images: int,
        meanwhile: Awaitable[Any] | None = None,
    ) -> tuple[Completion, float]:
        """Send a request a mode built itself (:meth:`request_body`) for ``turn``, counted
        and timed like :meth:`ask`'s, and close the turn with it: its overhead ends as the
        request leaves. ``meanwhile`` is awaited while the model thinks (its failure, or
        a stop, cancels the request). Returns the answer and when it was complete
        (``perf_counter``: the next turn's overhead starts there). Only while
        :meth:`step_limit` is None."""
        self._check_step_left()
        request_at = time.perf_counter()
        self.count(requests=1, request_bytes=len(body), images_sent=images)
        turn.record["request"] = {"messages": 2, "images": images, "bytes": len(body)}
        self.reporter.phase(turn.number, "model")
        model_task = asyncio.ensure_future(self.client.complete(body, context={"turn": turn.number, "role": turn.role}))
        try:
            if meanwhile is not None:
                await meanwhile
            completion: Completion = await model_task
        finally:
            if not model_task.done():
                model_task.cancel()
            turn.timer.add("model", (time.perf_counter() - request_at) * 1000)
            self.steps += 1
        replied = time.perf_counter()
        self._received(turn, completion)
        self.close_turn(turn, request_at=request_at)
        return completion, replied

    async def call_on_capture(self, fn: Callable[[], R]) -> R:
        """Run ``fn`` on the capture thread, which owns the screen's OS handles (X
        connection, GDI DC): every capture call of the run goes there."""
        return await self._capture.call(fn)

    async def settle_on(
        self, turn: Turn, grab: Callable[[], tuple[int, T]], *, baseline: int | None = None
    ) -> T:
        """Settle on frames a mode grabs itself: ``grab`` (run on the capture thread)
        returns a frame and its digest, and the run's settle policy grabs until the app
        reacted (a digest other than ``baseline``, the one of the frame before the
        action; None: no reaction to wait for) and the digests stopped changing. Time
        spent grabbing counts as ``capture``, the rest of the wait as ``settle``; the
        turn record says how it settled. Returns the settled frame."""

        async def probe() -> tuple[int, T]:
            started = time.perf_counter()
            value = await self._capture.call(grab)
            turn.timer.add("capture", (time.perf_counter() - started) * 1000)
            return value

        before = turn.timer.phases.get("capture", 0.0)
        started = time.perf_counter()
        result = await settle(probe, self.settle_policy, baseline)
        grabbed = turn.timer.phases.get("capture", 0.0) - before
        turn.timer.add("settle", max(0.0, (time.perf_counter() - started) * 1000 - grabbed))
        turn.record["settle"] = result.as_dict()
        return result.payload

    def note_cursor_problem(self, record: ObservationRecord, problem: str | None) -> None:
        """Once per run: an observation record says why frames go without the cursor."""
        if problem is not None and not self._cursor_problem_noted:
            self._cursor_problem_noted = True
            record["cursor_missing"] = problem

    # ------------------------------------------------------------------ screen
    # The settle compares a probe's pixel digest (no cursor in it: the pointer moving is
    # not the app's reaction); the whole probe, pointer included, is its payload.
    async def _probe(self, turn: Turn) -> tuple[int, Probe]:
        started = time.perf_counter()
        value = await self._capture.call(self.screen.probe)
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        return value[0], value

    async def _probe_prepared(self, turn: Turn) -> tuple[int, tuple[Probe, Shot | None]]:
        """A probe that also makes the image from its pixels, and starts encoding it,
        unless it shows what the last image showed: run speculatively while the damage
        settle waits out its quiet interval, so a settled screen is ready to send when
        the wait ends (a probe overtaken by drawing costs only idle time)."""
        last = self.latest_full
        screen = self.screen
        damage = self.damage

        def look() -> tuple[Probe, Shot | None]:
            started = time.perf_counter()
            value = screen.probe()
            if not screen.keeps_probe_pixels or (last is not None and last.probe == value):
                return value, None
            if damage is not None and damage.last_damage > started:
                return value, None  # drawn on since: the settle looks again, the image would be wasted
            shot = screen.grab_probed(pixel_digest=False)  # digested in the encode worker, overlapped
            shot.probe = value
            return value, shot

        started = time.perf_counter()
        value, shot = await self._capture.call(look)
        turn.timer.add("capture", (time.perf_counter() - started) * 1000)
        if shot is not None and self.config.agent.observe_after_action:
            self.prefetch_encode(shot)
        return value[0], (value, shot)

    async def capture(self, turn: Turn, *, settle_first: bool = True, after_input: bool = False) -> Shot:
        """A full-view frame of the settled screen.

        With ``settle_first`` the screen settles (:mod:`._settle`): ``after_input``, the
        app's first reaction to the action is waited for (pixels other than the last
        full-view frame's), then a quiet interval; on DAMAGE (:attr:`damage`) with
        speculative probes that also make the image, else by polling cheap probes
        (bounded by the settle policy); otherwise one probe. When the
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
        last_probe = self.latest_full.probe if self.latest_full is not None else None
        baseline = last_probe[0] if after_input and last_probe is not None else None
        prepared: Shot | None = None
        latency = max(self._latencies) if after_input and self._latencies else None
        if damage is not None:
            quiet_since = None if after_input else self._damage_drained_at
            spec = await settle_on_damage(
                lambda: self._probe_prepared(turn), policy, damage, baseline, latency_s=latency, quiet_since=quiet_since
            )
            self._damage_drained_at = time.perf_counter() if spec.damage is not None else None
            if spec.damage is None:  # the watcher failed: poll from now on
                self._close_damage()
                self.settle_signal = "poll (the DAMAGE connection failed)"
            result: SettleResult[Probe] = SettleResult(
                spec.payload[0], spec.digest, spec.polls, spec.stable, spec.waited_s, spec.damage,
                spec.first_reaction_s, spec.frames, spec.quiet_s, spec.ended,
            )
            prepared = spec.payload[1]
        else:
            result = await settle(lambda: self._probe(turn), policy, baseline, latency_s=latency)
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
            grab = self.screen.grab_probed if self.screen.keeps_probe_pixels else self.screen.grab
            with turn.timer.phase("capture"):
                shot = await self._capture.call(grab)
        shot.probe = key
        self.latest_full = shot
        return shot

    async def recapture(self, turn: Turn) -> None:
        """The screen changed outside a tool call (the team's loop recovery): settle now
        and show that frame at the next :meth:`observe`."""
        self.settled = await self.capture(turn, settle_first=True, after_input=True)

    def wind_down(self) -> None:
        """The run is over: no encode in flight, no drawing notifications."""
        self._drop_prefetch()
        self._close_damage()

    def _close_damage(self) -> None:
        damage, self.damage = self.damage, None
        if damage is not None:
            with contextlib.suppress(Exception):
                damage.close()

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
        self.count(frames_encoded=1)
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
        record: ObservationRecord = {
            "screenshot": encoded.screenshot,
            "mapping": self.describe(shot.mapping),
            "digest": f"{encoded.pixels & 0xFFFFFFFFFFFFFFFF:016x}",
            "reused": reused,
            "unchanged": unchanged,
            "zoomed": shot.zoomed,
            "png_bytes": len(encoded.png),
        }
        self.note_cursor_problem(record, self.screen.cursor_problem)
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
        self.count(images_sent=1)
        if record is not None:
            record["sent"] = "image"
        return True

    def describe(self, mapping: GeoMapping) -> MappingRecord:
        frame = mapping.describe()
        return {
            "monitor": self.ctx.monitor,
            "origin": frame["origin"],
            "physical_size": frame["physical_size"],
            "image_size": frame["image_size"],
            "scale": frame["scale"],
        }

    # ------------------------------------------------------------------ actions
    async def act(self, turn: Turn, call: ToolCall, tools: ToolSet) -> ToolOutcome:
        """Run one tool call; after input, settle and report what changed.

        A call in a known model's own language that ``tools`` lacks (Qwen3-VL's
        ``computer_use``, UI-TARS's action text) runs through that language's tool set, and
        its record names that tool set (``toolset``)."""
        self.reporter.phase(turn.number, "action")
        mapping_used = self.describe(self.ctx.mapping)
        before = self.latest_full
        parse_error = (call.error, call.error_message or call.error) if call.error else None
        speaking = speaking_toolset(tools, call.name, call.source)
        started = time.perf_counter()
        outcome = await execute_tool_call(speaking, call.name, call.arguments, self.ctx, parse_error=parse_error)
        action_s = time.perf_counter() - started
        turn.timer.add("action", action_s * 1000)
        self.count(tool_calls=1, tool_errors=0 if outcome.ok else 1)
        if outcome.acted:
            shot = await self.capture(turn, settle_first=True, after_input=True)
            self._note_reaction(turn.record.get("settle"), action_s)
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
        self._record_call(turn, call, outcome, mapping_used, None if speaking is tools else speaking.name)
        return outcome

    def _note_reaction(self, settle: Mapping[str, Any] | None, action_s: float) -> None:
        """Learn the app's input-to-frame delay from a settle after an action: when its
        first reaction came (after the start: the delay, at most), or 0 when a quick
        action's reaction was already on screen at the first look."""
        first = settle.get("first_reaction_ms") if settle else None
        if not isinstance(first, (int, float)):
            return  # no reaction, or no input to react to: nothing learned
        if first > 0:
            self._latencies.append(first / 1000)
        elif action_s < QUICK_ACTION_S:
            self._latencies.append(0.0)

    def _record_call(
        self, turn: Turn, call: ToolCall, outcome: ToolOutcome, mapping: MappingRecord, language: str | None
    ) -> None:
        if "tool_call" not in turn.record:
            entry: ToolCallRecord = {"id": call.id, "name": call.name, "arguments": call.arguments}
            if call.error:
                entry["raw_arguments"] = call.raw_arguments
            if language is not None:
                entry["toolset"] = language
            turn.record["tool_call"] = entry
            turn.record["result"] = outcome.payload
            turn.record["action"] = outcome.action_record
            turn.record["mapping"] = mapping
        else:
            more: CallRecord = {"id": call.id, "name": call.name, "arguments": call.arguments}
            if call.error:
                more["raw_arguments"] = call.raw_arguments
            if language is not None:
                more["toolset"] = language
            more["result"] = outcome.payload
            more["action"] = outcome.action_record
            more["mapping"] = mapping
            turn.record.setdefault("more_calls", []).append(more)

    def reject_call(self, turn: Turn, call: ToolCall, payload: dict[str, Any]) -> None:
        """Record a call answered without running (e.g. too_many_tool_calls)."""
        self.count(tool_calls=1, tool_errors=1)
        turn.record.setdefault("extra_calls", []).append({"id": call.id, "name": call.name, "result": payload})

    async def pause(self, turn: Turn, seconds: float) -> None:
        """A fixed delay (the seeds' step delay), timed as settle."""
        if seconds > 0:
            with turn.timer.phase("settle"):
                await asyncio.sleep(seconds)

    # ------------------------------------------------------------------ summary
    def summary(self, *, outcome: str, answer: str, error: str | None, extra: Mapping[str, Any] | None = None) -> Summary:
        ended = time.time()
        # cast: a mode's extra keys are Summary's too (tests/unit/rundir/test_records.py).
        return cast(Summary, {
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
        })
