"""Adaptive settle (:mod:`deskpilot.agent._settle`): the app's first reaction to an
input, then a quiet interval longer than its own frame interval, bounded by max.

The decision (:class:`SettleWatch`) and the polling driver run on a fake clock here: the
apps' drawing happens at scripted times, so every case is deterministic (no wall-clock
assertion). The DAMAGE driver, which waits on a real descriptor, is tested in
tests/unit/_x11/test_damage.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable

import pytest

from deskpilot.agent._settle import (
    FIRST_REACTION_S,
    FRAME_S,
    QUIET_FACTOR,
    SettlePolicy,
    SettleResult,
    SettleWatch,
    settle,
)

DEFAULT = SettlePolicy()  # the run's defaults: first reaction 0.3 s, frames 1/60 s, max 1.5 s
BASE = 0  # the digest of the frame before the action


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


# --- an app on a fake clock ------------------------------------------------------------


class FakeTime:
    """A clock that only moves when the settle sleeps or a probe takes time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class App:
    """What the screen shows: the number of frames the app has drawn by then (``BASE``
    before its first), frames at the given times after the action. A probe takes
    ``grab_s`` and sees the screen as it was when it started."""

    def __init__(self, clock: FakeTime, frames_at: list[float], grab_s: float = 0.004) -> None:
        self.clock = clock
        self.t0 = clock.now
        self.frames_at = sorted(frames_at)
        self.grab_s = grab_s
        self.probes: list[float] = []

    def shown(self, at: float) -> int:
        return sum(1 for f in self.frames_at if self.t0 + f <= at)

    async def probe(self) -> tuple[Hashable, str]:
        at = self.clock.now
        self.probes.append(at - self.t0)
        drawn = self.shown(at)
        self.clock.now += self.grab_s
        return drawn, f"frame:{drawn}"


def polled(
    frames_at: list[float], policy: SettlePolicy = DEFAULT, baseline: Hashable | None = BASE, grab_s: float = 0.004
) -> tuple[SettleResult[str], App]:
    clock = FakeTime()
    app = App(clock, frames_at, grab_s)
    result = run(settle(app.probe, policy, baseline, clock=clock, sleep=clock.sleep))
    return result, app


def sixty_hz(start: float, duration: float) -> list[float]:
    return [start + i * FRAME_S for i in range(int(duration / FRAME_S) + 1)]


# --- polling on the fake clock ----------------------------------------------------------


@pytest.mark.parametrize("late", [0.010, 0.150])
def test_a_late_first_reaction_is_waited_for(late: float) -> None:
    # Before the fix, two equal probes 10 ms apart ended the settle before the app drew.
    result, _ = polled([late])
    assert result.ended == "quiet" and result.stable
    assert result.payload == "frame:1"  # the frame with the reaction
    assert result.first_reaction_s is not None and late - 1e-9 <= result.first_reaction_s < late + DEFAULT.poll_s + 0.005
    assert result.frames == 1
    # One frame seen: quiet is two assumed frame intervals, and it was waited out.
    assert result.quiet_s == pytest.approx(QUIET_FACTOR * FRAME_S)
    assert result.waited_s >= result.first_reaction_s + result.quiet_s


def test_a_60hz_animation_is_waited_out_to_its_last_frame() -> None:
    frames = sixty_hz(0.02, 0.4)  # a 400 ms CSS transition, one frame every 16.7 ms
    result, _ = polled(frames)
    assert result.ended == "quiet" and result.stable
    assert result.payload == f"frame:{len(frames)}"  # its last frame, not one from the middle
    assert result.waited_s >= frames[-1]
    assert result.frames is not None and result.frames >= len(frames) // 2  # sampled every 10 ms
    # The quiet interval learned from the probes' spacing of the changes is still short.
    assert result.quiet_s is not None and result.quiet_s <= 0.1


def test_an_animation_with_a_dropped_frame_is_not_cut_at_the_gap() -> None:
    # 60 Hz, then one 50 ms hitch (a loaded machine), then more frames.
    frames = [*sixty_hz(0.02, 0.1), 0.17, 0.187, 0.204]
    result, _ = polled(frames)
    assert result.payload == f"frame:{len(frames)}"
    assert result.ended == "quiet"
    assert result.quiet_s is not None and result.quiet_s >= QUIET_FACTOR * 0.04  # the gap as the 10 ms probes saw it


def test_no_reaction_ends_at_the_first_reaction_bound() -> None:
    result, _ = polled([])
    assert result.ended == "no_reaction" and result.stable
    assert result.payload == "frame:0" and result.first_reaction_s is None
    assert FIRST_REACTION_S <= result.waited_s < FIRST_REACTION_S + DEFAULT.poll_s + 0.005
    assert result.frames == 0 and result.quiet_s is None
    assert result.as_dict()["ended"] == "no_reaction"
    assert "first_reaction_ms" not in result.as_dict()


def test_a_reaction_after_the_bound_is_not_waited_for() -> None:
    result, _ = polled([0.5])
    assert result.ended == "no_reaction" and result.payload == "frame:0"


def test_endless_changes_end_at_max_marked_still_changing() -> None:
    frames = sixty_hz(0.01, 5.0)  # a spinner that never stops
    result, _ = polled(frames, SettlePolicy(max_s=0.6))
    assert result.ended == "max" and not result.stable
    assert 0.6 <= result.waited_s < 0.6 + DEFAULT.poll_s + 0.005
    shown = int(result.payload.split(":")[1])
    assert shown >= sum(1 for f in frames if f <= 0.6 - DEFAULT.poll_s)  # the latest look, taken at the bound
    assert result.as_dict()["stable"] is False


def polled_with(
    frames_at: list[float], latency_s: float | None, policy: SettlePolicy = DEFAULT
) -> tuple[SettleResult[str], App]:
    clock = FakeTime()
    app = App(clock, frames_at)
    result = run(settle(app.probe, policy, BASE, latency_s=latency_s, clock=clock, sleep=clock.sleep))
    return result, app


def test_a_reaction_drawn_during_the_action_counts_from_the_start() -> None:
    # The app drew before the settle started (typed characters): the first probe differs.
    result, app = polled_with([-0.05], latency_s=0.0)  # an app whose frames follow input at once
    assert result.ended == "quiet" and result.first_reaction_s == 0.0
    assert result.waited_s == pytest.approx(app.probes[-1] + app.grab_s)
    assert result.waited_s < QUIET_FACTOR * FRAME_S + 2 * DEFAULT.poll_s


def test_after_a_reaction_during_the_action_the_last_inputs_frame_is_waited_for() -> None:
    # Earlier characters drawn during the typing; the last one's frame comes 45 ms after
    # the action, later than one quiet interval (33 ms) but within the app's latency.
    frames = [-0.05, 0.045]
    result, _ = polled_with(frames, latency_s=0.04)  # the app's input-to-frame delay seen before
    assert result.payload == "frame:2" and result.ended == "quiet"
    # Not known yet: two assumed frames (33 ms) of latency, then the quiet interval.
    result, _ = polled_with([-0.05, 0.03], latency_s=None)
    assert result.payload == "frame:2"
    assert result.waited_s >= QUIET_FACTOR * FRAME_S * 2


def test_a_look_without_input_waits_only_for_quiet() -> None:
    result, _ = polled([], baseline=None)
    assert result.ended == "quiet" and result.payload == "frame:0"
    assert result.first_reaction_s is None and "first_reaction_ms" not in result.as_dict()
    assert result.waited_s < FIRST_REACTION_S  # not the first-reaction bound
    assert result.waited_s >= QUIET_FACTOR * FRAME_S


def test_min_is_a_floor_for_the_reaction_wait_and_the_end() -> None:
    result, _ = polled([0.4], SettlePolicy(min_s=0.5))  # an app known to react late
    assert result.payload == "frame:1" and result.waited_s >= 0.5


def test_frame_zero_and_poll_trust_the_gaps_alone() -> None:
    # settle_frame = 0: an app that draws once (Tk) costs one poll interval of quiet.
    result, _ = polled([0.02], SettlePolicy(frame_s=0.0))
    assert result.ended == "quiet" and result.quiet_s == pytest.approx(DEFAULT.poll_s)


def test_probes_take_the_poll_period_start_to_start() -> None:
    clock = FakeTime()
    app = App(clock, [], grab_s=0.004)
    run(settle(app.probe, SettlePolicy(first_reaction_s=0.05), BASE, clock=clock, sleep=clock.sleep))
    gaps = [b - a for a, b in zip(app.probes, app.probes[1:], strict=False)]
    assert all(g == pytest.approx(0.01) for g in gaps[:-1])


def test_record_keys() -> None:
    result, _ = polled([0.03])
    record = result.as_dict()
    assert set(record) == {"polls", "stable", "waited_ms", "ended", "first_reaction_ms", "frames", "quiet_ms"}
    assert record["first_reaction_ms"] == pytest.approx(30, abs=11)
    assert record["quiet_ms"] == pytest.approx(QUIET_FACTOR * FRAME_S * 1000, abs=0.01)


# --- the decision with drawing notifications, on a fake timeline -----------------------


def notified(
    policy: SettlePolicy,
    events: list[tuple[float, str, Hashable]],
    baseline: Hashable | None = BASE,
    step: float = 0.001,
) -> tuple[str | None, float, SettleWatch]:
    """Feed a :class:`SettleWatch` scripted ``(t, "draw" | "probe", digest)`` events and
    ask for its verdict every ``step`` s; returns (verdict, when, watch)."""
    watch = SettleWatch(policy, 0.0, baseline, notified=True)
    queue = sorted(events, key=lambda e: e[0])
    t = 0.0
    while t < 10:
        while queue and queue[0][0] <= t:
            at, kind, digest = queue.pop(0)
            if kind == "draw":
                watch.drawn(at)
            else:
                watch.probed(at, digest)
        ended = watch.verdict(t)
        if ended is not None:
            return ended, t, watch
        t = round(t + step, 6)
    return None, t, watch


def test_notified_pointer_sprite_damage_is_not_a_reaction() -> None:
    # The pointer moved to the click point: its sprite was redrawn (damage), but the
    # pixels (no cursor in a probe) are the baseline's; the app never reacts.
    events: list[tuple[float, str, Hashable]] = [(0.0, "draw", None), (0.0005, "probe", BASE), (0.3, "probe", BASE)]
    ended, when, watch = notified(DEFAULT, events)
    assert ended == "no_reaction" and when == pytest.approx(0.3)
    assert not watch.reacted and watch.frames == []


def test_notified_late_reaction_then_quiet() -> None:
    events: list[tuple[float, str, Hashable]] = [
        (0.0, "probe", BASE),
        (0.15, "draw", None),
        (0.151, "probe", 1),  # the look after the drawing sees the reaction
    ]
    ended, when, watch = notified(DEFAULT, events)
    assert ended == "quiet"
    assert watch.reacted_at == pytest.approx(0.15)  # the drawing, not the look
    assert when == pytest.approx(0.15 + QUIET_FACTOR * FRAME_S, abs=0.0015)


def test_notified_60hz_frames_for_400ms_then_stop() -> None:
    frames = sixty_hz(0.02, 0.4)
    events: list[tuple[float, str, Hashable]] = [(0.0, "probe", BASE)]
    for i, at in enumerate(frames):
        events += [(at, "draw", None), (at + 0.002, "draw", None), (at + 0.005, "probe", i + 1)]  # two requests a frame
    ended, when, watch = notified(DEFAULT, events)
    assert ended == "quiet" and watch.digest == len(frames)
    assert len(watch.frames) == len(frames)  # the two requests of a frame are one burst
    assert when >= frames[-1] + QUIET_FACTOR * FRAME_S - 0.001
    assert watch.frame_gap == pytest.approx(FRAME_S, abs=1e-6)


def test_notified_endless_drawing_ends_at_max() -> None:
    frames = sixty_hz(0.01, 3.0)
    events: list[tuple[float, str, Hashable]] = [(0.0, "probe", BASE)]
    for i, at in enumerate(frames):
        events += [(at, "draw", None), (at + 0.003, "probe", i + 1)]
    ended, when, _ = notified(SettlePolicy(max_s=0.5), events)
    assert ended == "max" and when == pytest.approx(0.5, abs=0.02)


def test_notified_a_probe_started_before_the_last_drawing_is_not_the_settled_frame() -> None:
    events: list[tuple[float, str, Hashable]] = [
        (0.0, "probe", BASE),
        (0.02, "draw", None),
        (0.021, "probe", 1),
        (0.03, "draw", None),  # drawn after that look began: it is stale
    ]
    ended, _, watch = notified(DEFAULT, events)
    assert ended is None  # never settled on the stale look, not even at max
    assert watch.wants_probe(0.04)  # the driver looks again


def test_notified_silent_reaction_found_by_the_last_look() -> None:
    # Drawing nobody reported (no notification): the look at the bound sees it.
    events: list[tuple[float, str, Hashable]] = [(0.0, "probe", BASE), (0.3, "probe", 1)]
    ended, _, watch = notified(DEFAULT, events)
    assert ended == "quiet" and watch.reacted_at == pytest.approx(0.3)
    watch2 = SettleWatch(DEFAULT, 0.0, BASE, notified=True)
    watch2.probed(0.0, BASE)
    assert not watch2.wants_probe(0.1) and watch2.wants_probe(0.3)  # the last look is due at the bound
    assert watch2.wake_at() == pytest.approx(FIRST_REACTION_S)


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="below min"):
        SettlePolicy("adaptive", min_s=2.0, max_s=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        SettlePolicy("adaptive", poll_s=-1)
    with pytest.raises(ValueError, match=">= 0"):
        SettlePolicy("adaptive", first_reaction_s=float("nan"))
    with pytest.raises(ValueError, match="settle mode"):
        SettlePolicy("sometimes")  # type: ignore[arg-type]


def test_quiet_interval_rule() -> None:
    policy = SettlePolicy(poll_s=0.01, frame_s=FRAME_S, quiet_max_s=0.5)
    assert policy.quiet_s() == pytest.approx(QUIET_FACTOR * FRAME_S)  # one frame seen
    assert policy.quiet_s(0.05) == pytest.approx(0.1)  # a 20 Hz app
    assert policy.quiet_s(2.0) == 0.5  # a ticking clock: capped
    assert SettlePolicy(poll_s=0.05, frame_s=0.0).quiet_s(0.001) == 0.05  # never below poll


# --- fixed / none modes and cancellation (real time, no timing assertion) ---------------


class Script:
    def __init__(self, digests: list[int]) -> None:
        self.digests = digests
        self.calls = 0

    async def __call__(self) -> tuple[int, str]:
        self.calls += 1
        return self.digests[min(self.calls, len(self.digests)) - 1], f"frame{self.calls}"


def test_fixed_and_none_modes_probe_once() -> None:
    probe = Script([1, 2])
    result = run(settle(probe, SettlePolicy("fixed", fixed_s=0.02)))
    assert result.polls == 1 and not result.stable and result.waited_s >= 0.02
    assert result.ended is None and set(result.as_dict()) == {"polls", "stable", "waited_ms"}
    probe = Script([1, 2])
    result = run(settle(probe, SettlePolicy("none")))
    assert result.polls == 1 and result.payload == "frame1"


def test_real_clock_static_screen() -> None:
    result = run(settle(Script([7]), SettlePolicy("adaptive", poll_s=0.001, frame_s=0.002)))
    assert result.stable and result.ended == "quiet" and result.payload.startswith("frame")


def test_cancellation_propagates() -> None:
    async def slow() -> tuple[int, None]:
        await asyncio.sleep(10)
        return 0, None

    async def main() -> None:
        task = asyncio.ensure_future(settle(slow, SettlePolicy("adaptive")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())


_unused: Callable[[], float] = time.perf_counter  # the drivers' default clock


def test_notified_look_without_input_after_a_quiet_source_needs_one_probe() -> None:
    # Nothing reported since the last settle ended a second ago: one look, no waiting.
    watch = SettleWatch(DEFAULT, 10.0, None, notified=True, quiet_since=9.0)
    assert watch.wants_probe(10.0)
    watch.probed(10.0, 5)
    assert watch.verdict(10.004) == "quiet"
    # Drawing reported at once (in the source when the settle began): a quiet interval from it.
    watch = SettleWatch(DEFAULT, 10.0, None, notified=True, quiet_since=9.0)
    watch.drawn(10.0)
    watch.probed(10.0, 5)
    assert watch.verdict(10.004) is None and watch.verdict(10.0001 + QUIET_FACTOR * FRAME_S) == "quiet"
    # Unknown (no earlier settle on the source): the first look half a quiet interval in.
    watch = SettleWatch(DEFAULT, 10.0, None, notified=True)
    assert not watch.wants_probe(10.0) and watch.wants_probe(10.0 + FRAME_S)


def test_a_hitch_early_in_an_animation_does_not_end_it() -> None:
    # Three 60 Hz frames, then the app's timer is 70 ms late (a loaded machine), then more.
    frames = [0.02, 0.037, 0.054, 0.124, 0.141, 0.158]
    events: list[tuple[float, str, Hashable]] = [(0.0, "probe", BASE)]
    for i, at in enumerate(frames):
        events += [(at, "draw", None), (at + 0.002, "probe", i + 1)]
    ended, when, watch = notified(DEFAULT, events)
    assert ended == "quiet" and watch.digest == len(frames)  # not the frame before the hitch
    assert watch.quiet_s >= DEFAULT.animation_quiet_s
    assert when >= frames[-1] + DEFAULT.animation_quiet_s - 0.001


def test_a_slow_look_attributes_the_reaction_to_the_last_burst_before_it() -> None:
    # A sprite redraw at 54 ms (no pixel changed), the app's frame at 100 ms; the look
    # started at 55 ms but grabbed late, after the frame: the reaction is the frame's.
    watch = SettleWatch(DEFAULT, 0.0, BASE, notified=True)
    watch.probed(0.0, BASE)
    watch.drawn(0.054)
    watch.drawn(0.100)
    watch.drawn(0.101)  # the same frame's second request
    watch.probed(0.055, 1)
    assert watch.reacted_at == pytest.approx(0.100)
    assert watch.frames == [pytest.approx(0.100)]
