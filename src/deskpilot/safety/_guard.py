"""Wiring the safety layer into a run: the policy hook, guarded hands, the kill switch.

:class:`SafetyGuard` is what the agent loop holds for one run:

- :meth:`SafetyGuard.check_action` is the tool layer's policy hook (``ToolContext.policy``):
  it gets the :data:`~deskpilot.actions.Action` a tool is about to perform (``Click``,
  ``TypeText``, ``KeyPress`` ...; a dict as the run record writes it is read), reads the
  foreground window when a rule needs it, decides, records the decision and raises
  :class:`PolicyDenied` to refuse. The full text of a ``type_text`` is checked before
  it is split into chunks, so a secret cannot slip through in pieces.
  :meth:`SafetyGuard.check_action_async` (``ToolContext.policy_async``) is the same
  check for the event loop: a confirm question waits for its answer in a thread of its
  own, so Ctrl+C, SIGTERM, the kill switch and the time limit still stop the run at
  once (cancelled, the question is withdrawn and the action denied).
- :meth:`SafetyGuard.wrap_hands` returns hands that announce every pointer target to the
  kill switch (so the agent's own moves never count as the fail-safe gesture) and
  refuse new input once the switch has tripped.
- :meth:`SafetyGuard.start` arms the kill switch and calls ``stop(reason)`` (the loop's
  own stop, thread-safe) when it trips; :meth:`SafetyGuard.close` disarms it.
- :meth:`SafetyGuard.record` is the block for ``summary.json``.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from deskpilot._errors import DeskpilotError, PolicyDenied, RunInterrupted
from deskpilot.actions import Action, Click, Hold, KeyPress, TypeText, from_record
from deskpilot.geometry import Rect
from deskpilot.safety._killswitch import KillSwitch, RunBudget, Trip, WatchBackend
from deskpilot.safety._policy import (
    ActionRequest,
    ConfirmPrompt,
    Decision,
    PendingConfirmation,
    Policy,
    policy_denied_payload,
)
from deskpilot.safety._redact import RedactOptions, TypedTexts
from deskpilot.safety._sequence import ActionSequence
from deskpilot.safety._settings import PolicySettings, SafetySettings
from deskpilot.safety._window import WindowInfo, WindowReader, open_window_reader

__all__ = ["GuardedHands", "PolicyDenied", "SafetyGuard", "action_request", "run_guarded"]

log = logging.getLogger("deskpilot.safety")


#: What the guard checks: a typed action, or a dict as the run record writes it (read
#: with :func:`deskpilot.actions.from_record`).
Checked = Action | Mapping[str, Any]


#: The kinds of action that send no input (:data:`deskpilot.actions.PASSIVE`).
_SENDS_NOTHING = frozenset({"wait", "zoom"})


def _typed(action: Checked) -> Action | None:
    if not isinstance(action, Mapping):
        return action
    try:
        return from_record(action)
    except (ValueError, TypeError, KeyError):
        return None


def _kind(action: Checked) -> str | None:
    if isinstance(action, Mapping):
        kind = action.get("kind")
        return None if kind is None else str(kind)
    return action.kind


def action_request(action: Checked) -> ActionRequest | None:
    """The :class:`ActionRequest` of an action (None: it sends no input).

    A dict that is no action record (no deskpilot version wrote it) is a pointer action of
    its ``kind``: the window rules still apply to it.
    """
    if _kind(action) in _SENDS_NOTHING:
        return None
    typed = _typed(action)
    if typed is None:
        return ActionRequest(_kind(action) or "action", pointer=True)
    if isinstance(typed, (KeyPress, Hold)):
        return ActionRequest(typed.kind, keys=(typed.combo,))
    if isinstance(typed, TypeText):
        return ActionRequest(typed.kind, text=typed.text)
    held = (typed.hold,) if isinstance(typed, Click) and typed.hold else ()
    return ActionRequest(typed.kind, keys=held, pointer=True)


class SafetyGuard:
    """Policy + kill switch + budget for one run (see the module doc)."""

    def __init__(
        self,
        policy: Policy,
        *,
        killswitch: KillSwitch | None = None,
        budget: RunBudget | None = None,
        window_reader: WindowReader | None = None,
        redact: RedactOptions | None = None,
    ) -> None:
        self.policy = policy
        self.killswitch = killswitch
        self.budget = budget
        self.window_reader = window_reader
        self.redact_options = redact or RedactOptions()
        #: With ``mask_typed_text``: every text the policy sees typed, so log lines
        #: can mask it (the loop shares one with its record redaction).
        self.typed_texts: TypedTexts | None = TypedTexts() if self.redact_options.mask_typed_text else None
        #: What earlier actions mean for the next (launcher then Enter, a secret typed in
        #: pieces); its ``secret_pieces`` are redacted from the records.
        self.sequence = ActionSequence(
            policy.detectors, allowed_secret=lambda value: any(p.fullmatch(value) for p in policy.allow_text)
        )
        self.decisions: list[dict[str, Any]] = []
        self.counts = {"checked": 0, "allowed": 0, "denied": 0, "confirmed": 0, "would_deny": 0}
        self.window_errors = 0
        #: How window rules get the foreground window (the summary's ``window`` entry).
        self.window_status = (
            f"reading ({type(window_reader).__name__})" if window_reader is not None else "none (no desktop to read)"
        )
        self._lock = threading.Lock()
        self._stop: Callable[[str], None] | None = None
        #: Confirm questions waiting for an answer: a kill-switch trip withdraws them
        #: (also for callers of the blocking :meth:`decide`).
        self._questions: set[PendingConfirmation] = set()
        if killswitch is not None:
            killswitch.add_callback(self._withdraw_questions)

    @classmethod
    def from_settings(
        cls,
        policy: PolicySettings | None = None,
        safety: SafetySettings | None = None,
        *,
        max_steps: int = 10,
        max_seconds: float = 0.0,
        monitors: Sequence[Rect] = (),
        watch_backend: Callable[[], WatchBackend] | None = None,
        window_reader: WindowReader | str | None = "auto",
        prompt: ConfirmPrompt | None = None,
    ) -> SafetyGuard:
        """Build from the ``[policy]``/``[safety]`` sections and the loop's limits.

        ``window_reader="auto"`` reads the foreground window of this desktop when the
        policy has window rules; pass None for a headless/simulated run."""
        policy_settings = policy or PolicySettings()
        safety_settings = safety or SafetySettings()
        hotkeys = tuple(safety_settings.hotkeys) if safety_settings.kill_switch else ()
        built = policy_settings.build(
            prompt=prompt,
            extra_deny_keys=[(h, "is the kill-switch hotkey") for h in hotkeys],
        )
        budget = RunBudget(max_steps=max(1, int(max_steps)), max_seconds=max_seconds,
                           hard_cap_seconds=safety_settings.hard_cap_seconds)
        switch = None
        if safety_settings.kill_switch:
            switch = KillSwitch(
                corner=safety_settings.corner,
                corner_margin=safety_settings.corner_margin,
                hotkeys=hotkeys,
                poll_interval=safety_settings.poll_interval,
                budget=budget,
                monitors=monitors,
                backend=watch_backend,
            )
        reader: WindowReader | None = None
        window_status = ""
        if window_reader == "auto":
            if not built.needs_window:
                window_status = "not needed (no window rules)"
            else:
                try:
                    reader = open_window_reader()
                except DeskpilotError as exc:  # a display that cannot be read: rules see "unknown"
                    log.warning("cannot read the foreground window: %s", exc)
                    window_status = f"unavailable: {exc}"
                else:
                    window_status = "" if reader is not None else "unavailable: no desktop"
        elif isinstance(window_reader, str):
            reader = open_window_reader(window_reader)
        else:
            reader = window_reader
        redact = RedactOptions(secrets=safety_settings.redact_secrets, mask_typed_text=safety_settings.mask_typed_text)
        guard = cls(built, killswitch=switch, budget=budget, window_reader=reader, redact=redact)
        if window_status:
            guard.window_status = window_status
        return guard

    # -- the policy hook -----------------------------------------------------------------

    def _window(self) -> WindowInfo | None:
        if self.window_reader is None or not self.policy.needs_window:
            return None
        try:
            return self.window_reader.active()
        except DeskpilotError as exc:  # the display went away: unknown, the policy decides
            self.window_errors += 1
            log.warning("cannot read the foreground window: %s", exc)
            return None

    def decide(self, action: Checked) -> Decision:
        """Decide one action dict and record the decision (a confirm question blocks
        the calling thread: on an event loop use :meth:`decide_async`)."""
        begun = self._begin(action)
        if isinstance(begun, Decision):
            return begun
        pending, started = begun
        with self._asking(pending):
            decision = pending.ask()
        return self._answered(action, pending, decision, started)

    async def decide_async(self, action: Checked) -> Decision:
        """:meth:`decide` for the event loop: a confirm question is asked in a thread of
        its own while the loop goes on. Cancelled while it waits (a stop), the question
        is withdrawn, the action is recorded as denied and the cancellation propagates."""
        begun = self._begin(action)
        if isinstance(begun, Decision):
            return begun
        pending, started = begun
        try:
            with self._asking(pending):
                decision = await _in_daemon_thread(pending)
        except asyncio.CancelledError:
            self._note(action, pending.abort(), pending.window, (time.perf_counter() - started) * 1000)
            raise
        return self._answered(action, pending, decision, started)

    def _begin(self, action: Checked) -> Decision | tuple[PendingConfirmation, float]:
        """The decision when no one needs to be asked (recorded), else the question."""
        stopping = self._stopping(action)
        if stopping is not None:
            return stopping
        request = action_request(action)
        if request is None:
            return Decision(True, "default", "observes only")
        if request.text is not None and self.typed_texts is not None:
            self.typed_texts.add(request.text)
        window = self._window()
        started = time.perf_counter()
        extra = self.sequence.findings(request.keys, request.text) if self.policy.mode != "off" else []
        result = self.policy.triage(request, window, extra)  # type: ignore[arg-type]
        if isinstance(result, PendingConfirmation):
            return result, started
        return self._note(action, result, window, (time.perf_counter() - started) * 1000)

    @contextlib.contextmanager
    def _asking(self, pending: PendingConfirmation) -> Iterator[None]:
        with self._lock:
            self._questions.add(pending)
        try:
            if self.killswitch is not None and self.killswitch.tripped:
                pending.aborted.set()
            yield
        finally:
            with self._lock:
                self._questions.discard(pending)

    def _withdraw_questions(self, trip: Trip) -> None:
        with self._lock:
            questions = list(self._questions)
        for pending in questions:
            pending.aborted.set()

    def _stopping(self, action: Checked) -> Decision | None:
        if self.killswitch is None or not self.killswitch.tripped:
            return None
        trip = self.killswitch.trip_info
        assert trip is not None
        return self._note(action, Decision(False, f"killswitch:{trip.source}", f"the run is stopping: {trip.reason}",
                                           "policy"), None)

    def _answered(self, action: Checked, pending: PendingConfirmation, decision: Decision,
                  started: float) -> Decision:
        if decision.allowed:
            # A yes that came after the kill switch tripped does not count.
            stopping = self._stopping(action)
            if stopping is not None:
                return stopping
        return self._note(action, decision, pending.window, (time.perf_counter() - started) * 1000)

    def _note(self, action: Checked, decision: Decision, window: WindowInfo | None,
              ms: float | None = None) -> Decision:
        with self._lock:
            self.counts["checked"] += 1
            self.counts["allowed" if decision.allowed else "denied"] += 1
            if decision.confirmed:
                self.counts["confirmed"] += 1
            if decision.would_deny:
                self.counts["would_deny"] += 1
            if not decision.allowed or decision.confirmed is not None or decision.would_deny:
                entry: dict[str, Any] = {"kind": _kind(action), **decision.as_dict()}
                if window is not None:
                    entry["window"] = window.describe()
                if ms is not None:
                    entry["check_ms"] = round(ms, 3)
                self.decisions.append(entry)
        if not decision.allowed:
            log.warning("policy denied %s: %s [%s]", _kind(action), decision.reason, decision.rule)
        elif (request := action_request(action)) is not None:
            self.sequence.done(request.keys, request.text, request.pointer)
        return decision

    def check_action(self, action: Checked) -> None:
        """``ToolContext.policy``: raise :class:`PolicyDenied` to refuse ``action``."""
        decision = self.decide(action)
        if not decision.allowed:
            raise PolicyDenied(decision, policy_denied_payload(decision, tool=_kind(action) or None))

    async def check_action_async(self, action: Checked) -> None:
        """``ToolContext.policy_async``: :meth:`check_action` that never blocks the loop."""
        decision = await self.decide_async(action)
        if not decision.allowed:
            raise PolicyDenied(decision, policy_denied_payload(decision, tool=_kind(action) or None))

    # -- the kill switch ------------------------------------------------------------------

    def start(self, stop: Callable[[str], None] | None = None) -> SafetyGuard:
        """Arm the kill switch; ``stop(reason)`` is called (from the watcher thread) when
        it trips. The loop's stop must be thread-safe: wrap it in call_soon_threadsafe."""
        self._stop = stop
        if self.budget is not None:
            self.budget.start()
        if self.killswitch is not None:
            if stop is not None:
                self.killswitch.add_callback(lambda trip: stop(f"kill switch ({trip.source}): {trip.reason}"))
            self.killswitch.start()
            for source, state in self.killswitch.status.items():
                log.info("kill switch %s: %s", source, state)
        return self

    def close(self) -> None:
        """Disarm the kill switch and close the window reader. Idempotent."""
        if self.killswitch is not None:
            self.killswitch.stop()
        if self.window_reader is not None:
            with contextlib.suppress(Exception):
                self.window_reader.close()
            self.window_reader = None

    def __enter__(self) -> SafetyGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def trip(self) -> Trip | None:
        return self.killswitch.trip_info if self.killswitch is not None else None

    def wrap_hands(self, hands: Any) -> GuardedHands:
        return GuardedHands(hands, self.killswitch)

    def record(self) -> dict[str, Any]:
        """The ``safety`` block of the run summary."""
        out: dict[str, Any] = {
            "policy_mode": self.policy.mode,
            "decisions": dict(self.counts),
            "denied": [d for d in self.decisions if not d["allowed"]][:50],
        }
        # Every answer to a confirm question, in order: a replay answers them the same way.
        confirmations = [
            {"kind": d.get("kind"), "rule": d.get("rule"), "confirmed": d["confirmed"]}
            for d in self.decisions
            if "confirmed" in d
        ]
        if confirmations:
            out["confirmations"] = confirmations
        out["window"] = self.window_status
        if self.window_errors:
            out["window_errors"] = self.window_errors
        if self.killswitch is not None:
            out["kill_switch"] = dict(self.killswitch.status)
            trip = self.killswitch.trip_info
            out["tripped"] = trip.as_dict() if trip is not None else None
        if self.budget is not None:
            out["budget"] = self.budget.as_dict()
        return out


class GuardedHands:
    """Any ``Hands`` with pointer targets announced to the kill switch and input refused
    after a trip. Every other attribute passes through."""

    def __init__(self, hands: Any, killswitch: KillSwitch | None) -> None:
        self._hands = hands
        self._switch = killswitch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hands, name)

    def _gate(self) -> None:
        if self._switch is not None and self._switch.tripped:
            trip = self._switch.trip_info
            assert trip is not None
            raise RunInterrupted(f"input refused: {trip.reason}", reason=trip.source)

    def _note(self, x: Any, y: Any) -> None:
        if self._switch is not None and x is not None and y is not None:
            self._switch.note_pointer(round(float(x)), round(float(y)))

    def move(self, x: float, y: float) -> Any:
        self._gate()
        self._note(x, y)
        return self._hands.move(x, y)

    def click(self, x: float | None = None, y: float | None = None, button: Any = "left", count: int = 1) -> None:
        self._gate()
        self._note(x, y)
        self._hands.click(x, y, button, count)

    def mouse_down(self, button: Any = "left") -> None:
        self._gate()
        self._hands.mouse_down(button)

    def mouse_up(self, button: Any = "left") -> None:
        self._hands.mouse_up(button)  # releasing is always allowed

    def drag(self, start: Sequence[float], end: Sequence[float] | None = None, *, duration: float = 0.3,
             steps: int = 20) -> None:
        self._gate()
        target = end if end is not None else start
        if self._switch is not None and target is not None and len(target) >= 2:
            # The drag presses at its start, which may be a corner too: announce both.
            via = [(round(float(start[0])), round(float(start[1])))] if end is not None and len(start) >= 2 else []
            self._switch.note_pointer(round(float(target[0])), round(float(target[1])), via=via)
        self._hands.drag(start, end, duration=duration, steps=steps)

    def scroll(self, x: float | None = None, y: float | None = None, *, dy: int = 0, dx: int = 0) -> None:
        self._gate()
        self._note(x, y)
        self._hands.scroll(x, y, dy=dy, dx=dx)

    def type_text(self, text: str) -> None:
        self._gate()
        self._hands.type_text(text)

    def key(self, combo: str) -> None:
        self._gate()
        self._hands.key(combo)

    @contextlib.contextmanager
    def hold(self, *keys: str) -> Iterator[Any]:
        self._gate()
        with self._hands.hold(*keys) as held:
            yield held

    def release_all(self) -> None:
        self._hands.release_all()

    def sync(self) -> None:
        self._hands.sync()

    def position(self) -> tuple[int, int]:
        x, y = self._hands.position()
        return int(x), int(y)


async def run_guarded(mode: Any, session: Any, guard: SafetyGuard) -> Any:
    """Run ``mode.run(session)`` under ``guard`` without touching the loop's code.

    Installs the policy hook and the guarded hands on ``session.ctx``, arms the kill
    switch and races the mode against it: on a trip the mode is cancelled (held input
    is released by the loop's cleanup) and :class:`RunInterrupted` is raised. This is
    the fallback for loops that do not wire :class:`SafetyGuard` themselves; wiring it
    into the loop's own stop (see :meth:`SafetyGuard.start`) is preferred.
    """
    import asyncio

    ctx = session.ctx
    # The agent's ToolContext: the synchronous hook and the one the one path awaits.
    ctx.policy = guard.check_action
    ctx.policy_async = guard.check_action_async
    ctx.hands = guard.wrap_hands(ctx.hands)
    guard.start()
    inner = asyncio.ensure_future(mode.run(session))
    if guard.killswitch is None:
        try:
            return await inner
        finally:
            guard.close()
    tripped = asyncio.ensure_future(guard.killswitch.wait())
    try:
        done, _ = await asyncio.wait({inner, tripped}, return_when=asyncio.FIRST_COMPLETED)
        if inner in done:
            return inner.result()
        ctx.stop.set()
        inner.cancel()
        await asyncio.wait({inner}, timeout=2.0)
        trip = tripped.result()
        raise trip.error()
    finally:
        for task in (inner, tripped):
            if not task.done():
                task.cancel()
        guard.close()


def _in_daemon_thread(pending: PendingConfirmation) -> asyncio.Future[Decision]:
    """``pending.ask()`` in a daemon thread of its own, as a future of the running loop.

    Not the loop's executor: a question nobody answers must never hold up the
    executor's shutdown at the end of ``asyncio.run`` (the terminal prompt returns soon
    after an abort, a custom prompt may not)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Decision] = loop.create_future()

    def deliver(fn: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(fn)

    def settle_result(decision: Decision) -> None:
        if not future.done():
            future.set_result(decision)

    def settle_error(exc: BaseException) -> None:
        if not future.done():
            future.set_exception(exc)

    def run() -> None:
        try:
            decision = pending.ask()
        except KeyboardInterrupt:  # Ctrl+C read by the Windows console prompt
            decision = pending.abort()
            _thread.interrupt_main()  # the main thread's SIGINT handling stops the run
        except BaseException as exc:
            error = exc  # ``exc`` is unbound after this block; the callback runs later
            deliver(lambda: settle_error(error))
            return
        deliver(lambda: settle_result(decision))

    threading.Thread(target=run, name="deskpilot-confirm", daemon=True).start()
    return future
