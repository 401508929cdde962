"""Adaptive settle: wait until the app has reacted to the input and finished drawing.

A screenshot taken before the app reacted (the previous frame sent again as "unchanged"),
or in the middle of its reaction (half a smooth scroll, a checkbox without its tick), makes
the model act on a screen that is not there. So a settle after an input has two parts:

1. **The first reaction.** The app draws its reaction a frame or more after the input
   (Chromium: its next 16.7 ms frame, later on a loaded machine); "nothing drawn since the
   input" does not mean "settled". The settle waits until the working area differs from
   the frame before the action (the ``baseline`` digest), bounded by
   ``first_reaction_s``: an action with no visible effect costs that bound and ends as
   ``"no_reaction"`` (the screen honestly unchanged).
2. **Quiet.** Then it waits until nothing has been drawn for a *quiet interval* longer
   than the app's own frame interval, learned from the spacing of the drawing seen in
   this settle: ``QUIET_FACTOR`` x the longest gap between two frames (drawing bursts),
   never below ``frame_s`` (the frame interval assumed before a second frame shows the
   app's own; a 60 Hz browser's next animation frame) nor ``poll_s``, at most
   ``quiet_max_s``. An animation or a smooth scroll is waited out, up to ``max_s``; an
   app that draws once costs one quiet interval; a spinner that never stops ends at
   ``max_s`` as ``"max"``, the frame marked as still changing (``stable`` false).

When the first look already shows a reaction (drawn during the action: typed characters,
a button's press), the reaction to the action's *last* input may still be on its way: quiet
then counts from the start plus the app's input-to-frame delay (``latency_s``: what earlier
settles saw, the session learns it; two assumed frames before it has).

Both parts look only at the working area and only at its pixels: a probe's digest has no
cursor in it, so the pointer moving to the click point is not the app's reaction (the
record's ``pointer_moved_only`` says when that was all).

:class:`SettleWatch` is that decision, kept apart from waiting (times are given to it,
so the unit tests drive it with a fake clock). Two drivers feed it:

- :func:`settle` *polls*: a probe (a cheap capture returning a frame digest and its
  payload) every ``poll_s``, start to start; a probe whose digest differs from the one
  before is a frame. Windows (GDI), X11 without DAMAGE, any screen.
- :func:`settle_on_damage` waits on *drawing notifications* (:class:`DamageSource`: X11
  DAMAGE today, :mod:`deskpilot._x11._damage`; any backend that can say "something was
  drawn on the working area" fits): notifications are frames, and a probe is taken
  speculatively when the settle starts and after each burst of drawing, so the settled
  frame is usually in hand when the quiet interval ends. A probe counts as the settled
  frame only if nothing was drawn after it started. Before the first reaction a
  notification only makes it look: drawing that leaves the pixels as they were (the
  pointer's sprite, a repaint of the same pixels) is not a reaction.

The last probe's payload is returned, so the loop reuses that frame as the next
observation instead of capturing again. ``mode="fixed"`` keeps the seeds' behaviour
(sleep ``fixed_s``, then one probe) and ``mode="none"`` probes once without waiting.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from deskpilot.capture import DamageSource
from deskpilot.rundir import SettleRecord

__all__ = [
    "ANIMATION_QUIET_S",
    "BURST_S",
    "FIRST_REACTION_S",
    "FRAME_S",
    "QUIET_FACTOR",
    "QUIET_MAX_S",
    "DamageSource",
    "SettleEnd",
    "SettlePolicy",
    "SettleResult",
    "SettleWatch",
    "settle",
    "settle_on_damage",
]

T = TypeVar("T")

SettleMode = Literal["adaptive", "fixed", "none"]
#: How an adaptive settle ended: a quiet interval passed after the app's reaction; the
#: ``max_s`` bound (still changing); no reaction within ``first_reaction_s``.
SettleEnd = Literal["quiet", "max", "no_reaction"]

#: How long the app may take to show a first reaction to an input. Chromium draws an
#: input's effect in its next frame (16.7 ms at 60 Hz) after the renderer has handled the
#: event; on a loaded 2-core machine that took up to ~120 ms in the issue's runs
#: (typing, paste, clicks into fields). 0.3 s is ~18 frames: the first frame of any
#: toolkit that is not frozen, and what an action without visible effect costs.
FIRST_REACTION_S = 0.3
#: The frame interval assumed before the app's own shows (a 60 Hz compositor's).
FRAME_S = 1 / 60
#: Quiet = this many frame intervals without drawing: one missed frame (a compositor
#: that skips one under load) does not end an animation early.
QUIET_FACTOR = 2.0
#: The longest quiet interval: an app drawing less often than every 2 x 0.25 s is not
#: animating, it is ticking (a clock, a blinking caret), and waiting longer shows nothing
#: new.
QUIET_MAX_S = 0.5
#: The shortest quiet interval once the reaction is an animation (three frames or more):
#: an app drawing at 60 Hz on a loaded machine misses its timer by 30-90 ms now and then
#: (Tk's and Chromium's alike, measured on a shared 2-core machine), and a hitch early
#: in an animation must not look like its end. It costs an animation's end 0.1 s at most.
ANIMATION_QUIET_S = 0.1
#: Notifications closer than this belong to one frame (a frame is drawn in several
#: requests: tiles, a caret, a scrollbar).
BURST_S = 0.004


@dataclass(frozen=True, slots=True)
class SettlePolicy:
    mode: SettleMode = "adaptive"
    min_s: float = 0.0
    max_s: float = 1.5
    poll_s: float = 0.01
    fixed_s: float = 0.0
    #: Bound on the wait for the app's first reaction to an input.
    first_reaction_s: float = FIRST_REACTION_S
    #: The app's frame interval until its drawing in this settle shows its own.
    frame_s: float = FRAME_S
    #: The longest quiet interval, however far apart the frames were.
    quiet_max_s: float = QUIET_MAX_S
    #: The shortest quiet interval after three frames or more (an animation).
    animation_quiet_s: float = ANIMATION_QUIET_S

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "fixed", "none"):
            raise ValueError(f"settle mode {self.mode!r} is not adaptive, fixed or none")
        times = (
            self.min_s, self.max_s, self.poll_s, self.fixed_s, self.first_reaction_s, self.frame_s,
            self.quiet_max_s, self.animation_quiet_s,
        )
        if min(times) < 0 or not all(math.isfinite(t) for t in times):
            raise ValueError("settle times must be finite and >= 0")
        if self.max_s < self.min_s:
            raise ValueError(f"settle max {self.max_s} s is below min {self.min_s} s")

    def quiet_s(self, frame_gap: float = 0.0, frames: int = 1) -> float:
        """The quiet interval after ``frames`` frames whose longest gap was ``frame_gap``
        s (0: one frame seen so far)."""
        quiet = QUIET_FACTOR * max(self.frame_s, frame_gap)
        if frames >= 3:
            quiet = max(quiet, self.animation_quiet_s)
        return max(self.poll_s, min(quiet, self.quiet_max_s))


@dataclass(frozen=True, slots=True)
class SettleResult(Generic[T]):
    payload: T
    digest: Hashable
    polls: int
    stable: bool  # quiet (or no reaction): the screen is as the app left it; False: still changing at max, or fixed/none mode
    waited_s: float
    damage: int | None = None  # damage notifications seen (None: settled by polling)
    #: After an input: when the app's first reaction was seen (None: none, or no input to react to).
    first_reaction_s: float | None = None
    #: Frames seen: bursts of drawing notifications, or probes that differed from the one before.
    frames: int | None = None
    #: The quiet interval the settle ended with (None: no reaction, or fixed/none mode).
    quiet_s: float | None = None
    #: How it ended (None: fixed/none mode).
    ended: SettleEnd | None = None

    def as_dict(self) -> SettleRecord:
        out: SettleRecord = {"polls": self.polls, "stable": self.stable, "waited_ms": round(self.waited_s * 1000, 3)}
        if self.damage is not None:
            out["damage"] = self.damage
        if self.ended is not None:
            out["ended"] = self.ended
        if self.first_reaction_s is not None:
            out["first_reaction_ms"] = round(self.first_reaction_s * 1000, 3)
        if self.frames is not None:
            out["frames"] = self.frames
        if self.quiet_s is not None:
            out["quiet_ms"] = round(self.quiet_s * 1000, 3)
        return out


class SettleWatch:
    """What one adaptive settle has seen, and whether it may end: the decision of both
    drivers, given times (``time.perf_counter`` values, or a test's fake clock).

    ``baseline``: the digest of the frame before the input; None: there was no input
    (a plain look at the screen), only quiet is waited for. ``notified``: drawing
    notifications (:meth:`drawn`) report every drawing, so a probe is fresh while none
    arrived after it started; without them only probes show change, and quiet means
    probes spanning the quiet interval all equal.
    """

    def __init__(
        self,
        policy: SettlePolicy,
        start: float,
        baseline: Hashable | None = None,
        *,
        notified: bool = False,
        latency_s: float | None = None,
        quiet_since: float | None = None,
    ) -> None:
        self.policy = policy
        self.start = start
        self.baseline = baseline
        self.notified = notified
        #: The app's delay from an input to its frame (earlier settles'; None: two assumed
        #: frames), at most the first-reaction bound. When the first look already shows a
        #: reaction (to the action's earlier input: typed characters, a button's press),
        #: the reaction to its last input may still come that long after the start, so
        #: quiet is counted from there at the earliest.
        self.latency_s = min(
            QUIET_FACTOR * policy.frame_s if latency_s is None else max(0.0, latency_s), policy.first_reaction_s
        )
        self.not_before = -math.inf
        #: When the app's first reaction was seen (the settle start without an input).
        self.reacted_at: float | None = start if baseline is None else None
        #: The last moment to see a first reaction (at least ``min_s``: an app known to
        #: react late), at most ``max_s``.
        self.reaction_by = start + min(max(policy.first_reaction_s, policy.min_s), policy.max_s)
        # Notified, the first look: at once after an input (the app may have reacted
        # during it); without one, half a quiet interval in, so a screen that changed
        # without a notification in that time is seen as it is after the change.
        quiet = policy.quiet_s()
        self.first_look_at = start
        if baseline is None and notified and quiet_since is None:
            self.first_look_at = start + max(quiet, policy.min_s) - quiet / 2
        #: Starts of the frames (bursts of drawing, or changed probes) since the reaction.
        self.frames: list[float] = []
        #: The longest gap between two frames' starts.
        self.frame_gap = 0.0
        #: The last drawing (or change seen by a probe) once the app reacted. A look
        #: without input on a source that has reported nothing since ``quiet_since`` (the
        #: end of the last settle) has been quiet since then.
        self.last_activity = start
        if baseline is None and notified and quiet_since is not None:
            self.last_activity = min(start, quiet_since)
        #: The last drawing notification (any, reacted or not).
        self.last_drawn = -math.inf
        self.notifications = 0
        self.probes = 0
        self.digest: Hashable | None = None
        self.probed_at: float | None = None
        # Notifications before the reaction, not yet known to be the app's: a probe that
        # still shows the baseline says they changed nothing (the pointer's sprite).
        self._pending: list[float] = []

    @property
    def reacted(self) -> bool:
        return self.reacted_at is not None

    @property
    def quiet_s(self) -> float:
        return self.policy.quiet_s(self.frame_gap, len(self.frames))

    def drawn(self, at: float, count: int = 1) -> None:
        """``count`` drawing notifications on the working area arrived at ``at``."""
        self.notifications += count
        self.last_drawn = max(self.last_drawn, at)
        if self.reacted_at is None:
            self._pending.append(at)
        else:
            self._activity(at)

    def _activity(self, at: float) -> None:
        frames = self.frames
        if not frames or at - self.last_activity > BURST_S:
            if frames:
                self.frame_gap = max(self.frame_gap, at - frames[-1])
            frames.append(at)
        self.last_activity = max(self.last_activity, at)

    def probed(self, started: float, digest: Hashable) -> None:
        """A probe that started at ``started`` saw ``digest``."""
        previous, previous_at = self.digest, self.probed_at
        self.probes += 1
        self.digest, self.probed_at = digest, started
        if self.reacted_at is None:
            if digest == self.baseline:
                # What was drawn before this look began changed nothing on screen.
                self._pending = [t for t in self._pending if t >= started]
                return
            pending, self._pending = self._pending, []
            if self.probes == 1:
                # Already there at the first look: drawn during the action, or just after.
                self.reacted_at = self.start
                self.not_before = self.start + self.latency_s
            elif pending:
                # Drawing reported since the last look that still showed the baseline; a
                # look that was slow to grab may have seen only the latest burst's: the
                # reaction is that burst (earlier ones may have changed nothing, a sprite).
                self.reacted_at = _last_burst(pending)
            else:
                self.reacted_at = started
            for at in [t for t in pending if t >= self.reacted_at] or [self.reacted_at]:
                self._activity(at)
            return
        if previous is not None and digest != previous and not (
            self.notified and previous_at is not None and self.last_drawn >= previous_at
        ):
            # A change seen by looking: polling, or drawing nobody reported.
            self._activity(started)

    def verdict(self, now: float) -> SettleEnd | None:
        """How the settle ends at ``now`` with the probes so far (None: not yet)."""
        probed_at = self.probed_at
        if probed_at is None:
            return None
        policy = self.policy
        if self.reacted_at is None:
            return "no_reaction" if probed_at >= self.reaction_by else None
        last = self.last_activity
        since = max(last, self.not_before)
        if now - self.start >= policy.min_s:
            if self.notified:
                if probed_at >= last and now - since >= self.quiet_s:
                    return "quiet"
            elif probed_at - since >= self.quiet_s:
                return "quiet"
        if now - self.start >= policy.max_s and probed_at >= min(last, self.start + policy.max_s):
            return "max"
        return None

    def wants_probe(self, now: float) -> bool:
        """Notified driver: whether to look again now (no probe in flight)."""
        probed_at = self.probed_at
        if probed_at is None:
            return now >= self.first_look_at or now - self.start >= self.policy.max_s
        if self.last_drawn >= probed_at:
            return True  # drawing since the last look began
        if self.reacted_at is None:
            return now >= self.reaction_by > probed_at  # a last look for a silent reaction
        return now - self.start >= self.policy.max_s and probed_at < min(self.last_activity, self.start + self.policy.max_s)

    def wake_at(self) -> float:
        """Notified driver: when the verdict may change without a notification."""
        policy = self.policy
        until_max = self.start + policy.max_s
        if self.probed_at is None:
            return min(self.first_look_at, until_max)
        if self.reacted_at is None:
            return min(self.reaction_by, until_max)
        since = max(self.last_activity, self.not_before)
        return min(until_max, max(since + self.quiet_s, self.start + policy.min_s))

    def result(self, payload: T, digest: Hashable, now: float, ended: SettleEnd, damage: int | None) -> SettleResult[T]:
        reacted = self.reacted_at
        return SettleResult(
            payload,
            digest,
            self.probes,
            ended != "max",
            now - self.start,
            damage,
            first_reaction_s=None if reacted is None or self.baseline is None else reacted - self.start,
            frames=len(self.frames),
            quiet_s=None if reacted is None else self.quiet_s,
            ended=ended,
        )


def _last_burst(times: list[float]) -> float:
    """The start of the last burst (notifications closer than :data:`BURST_S`) in ``times``."""
    start = times[-1]
    for at in reversed(times[:-1]):
        if start - at > BURST_S:
            break
        start = at
    return start


Prober = Callable[[], Awaitable[tuple[Hashable, T]]]


async def settle(
    probe: Prober[T],
    policy: SettlePolicy,
    baseline: Hashable | None = None,
    *,
    latency_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> SettleResult[T]:
    """Poll ``probe`` (``-> (digest, payload)``; any comparable digest) every
    ``policy.poll_s`` until the app reacted (a digest other than ``baseline``; None: no
    input to wait for) and then showed no change for a quiet interval, or a bound.
    ``latency_s``: the app's input-to-frame delay seen so far (:class:`SettleWatch`).

    ``clock`` and ``sleep`` are the time it runs on (tests: a fake clock). Cancellation
    (Ctrl+C) propagates from the sleeps and the probe immediately.
    """
    start = clock()
    if policy.mode != "adaptive":
        if policy.mode == "fixed" and policy.fixed_s > 0:
            await sleep(policy.fixed_s)
        digest, payload = await probe()
        return SettleResult(payload, digest, 1, False, clock() - start)
    watch = SettleWatch(policy, start, baseline, latency_s=latency_s)
    while True:
        started = clock()
        digest, payload = await probe()
        watch.probed(started, digest)
        now = clock()
        ended = watch.verdict(now)
        if ended is not None:
            return watch.result(payload, digest, now, ended, None)
        # poll_s is the sampling period, start to start: a probe that itself takes 8 ms
        # leaves 2 ms to sleep at the default 10 ms. No sleep past the bounds.
        deadline = started + policy.poll_s
        if watch.reacted_at is None:
            deadline = min(deadline, watch.reaction_by)
        wait = min(deadline, start + policy.max_s) - now
        if wait > 0:
            await sleep(wait)


async def settle_on_damage(
    probe: Prober[T],
    policy: SettlePolicy,
    source: DamageSource,
    baseline: Hashable | None = None,
    *,
    latency_s: float | None = None,
    quiet_since: float | None = None,
) -> SettleResult[T]:
    """Settle on ``source``'s notifications (see the module docstring): the app's first
    reaction to the input (a probe other than ``baseline``; None: no input), then a
    quiet interval with nothing drawn, bounded by the policy. Modes other than
    adaptive, and a source that fails, fall back to :func:`settle`.

    ``quiet_since``: when ``source`` was last drained (the end of the previous settle on
    it; None: unknown): without an input, a screen with nothing drawn since then has been
    quiet that long, and one probe suffices.

    Runs on the event loop's thread (``loop.add_reader``): cancellation is immediate.
    """
    if policy.mode != "adaptive":
        return await settle(probe, policy, baseline, latency_s=latency_s)
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    start = clock()
    watch = SettleWatch(policy, start, baseline, notified=True, latency_s=latency_s, quiet_since=quiet_since)
    woke = asyncio.Event()
    failed = False
    fd = source.fileno()

    def readable() -> None:
        nonlocal failed
        try:
            seen = source.drain()
        except Exception:  # a dead connection: stop listening, poll instead
            failed = True
            loop.remove_reader(fd)
            woke.set()
            return
        if seen:
            watch.drawn(clock(), seen)
            woke.set()

    # Drawing reported before the settle began was drawn during the action: maybe the
    # app's reaction already (the first probe tells), and it counts as activity.
    early = source.drain()
    if early:
        watch.drawn(start, early)
    loop.add_reader(fd, readable)
    spec: asyncio.Future[tuple[Hashable, T]] | None = None
    spec_started = 0.0
    latest: tuple[Hashable, T] | None = None
    waiter: asyncio.Task[bool] | None = None
    try:
        while not failed:
            now = clock()
            if spec is not None and spec.done():
                latest = spec.result()  # a failed probe raises here
                spec = None
                watch.probed(spec_started, latest[0])
            if spec is None:
                ended = watch.verdict(now)
                if ended is not None and latest is not None:
                    return watch.result(latest[1], latest[0], now, ended, watch.notifications)
                if watch.wants_probe(now):
                    spec_started = now
                    spec = asyncio.ensure_future(probe())
                    continue
            woke.clear()
            waiter = asyncio.ensure_future(woke.wait())
            pending: set[asyncio.Future[Any]] = {waiter}
            timeout: float | None = None
            if spec is not None:
                pending.add(spec)  # nothing to decide before it is back (or drawing is reported)
            else:
                # At least a millisecond: a verdict due now was taken above.
                timeout = max(0.001, watch.wake_at() - now)
            await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            waiter = None
    finally:
        if waiter is not None:
            waiter.cancel()
        if not failed:
            loop.remove_reader(fd)
        if spec is not None and not spec.done():
            spec.cancel()
    # The source failed: poll for the rest of the bound (still waiting for the reaction
    # if none was seen yet).
    elapsed = clock() - start
    rest = max(0.0, policy.max_s - elapsed)
    reaction_left = max(0.0, watch.reaction_by - clock()) if not watch.reacted else 0.0
    polled = await settle(
        probe,
        SettlePolicy(
            "adaptive",
            min(max(0.0, policy.min_s - elapsed), rest),
            rest,
            policy.poll_s,
            first_reaction_s=reaction_left,
            frame_s=policy.frame_s,
            quiet_max_s=policy.quiet_max_s,
            animation_quiet_s=policy.animation_quiet_s,
        ),
        None if watch.reacted else baseline,
        latency_s=latency_s,
    )
    reaction = watch.reacted_at - start if watch.reacted_at is not None and baseline is not None else None
    if reaction is None and polled.first_reaction_s is not None:
        reaction = elapsed + polled.first_reaction_s
    return SettleResult(
        polled.payload,
        polled.digest,
        watch.probes + polled.polls,
        polled.stable,
        clock() - start,
        None,
        first_reaction_s=reaction,
        frames=len(watch.frames) + (polled.frames or 0),
        quiet_s=polled.quiet_s,
        ended=polled.ended,
    )
