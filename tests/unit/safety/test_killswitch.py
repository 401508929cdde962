"""Kill switch and run budget logic against a scripted watch backend."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from deskpilot._errors import PlatformError, RunInterrupted, UnknownKeyError
from deskpilot.geometry import Rect
from deskpilot.safety import KillSwitch, RunBudget, Trip
from deskpilot.safety._killswitch import _corners, hotkey_parts

POLL = 0.005


class FakeBackend:
    """A desktop whose pointer and hotkey the test sets; records what was armed."""

    def __init__(self, pointer: tuple[int, int] = (960, 540), *, refuse: set[str] | None = None) -> None:
        self.position = pointer
        self.hotkey_pressed = threading.Event()
        self.armed: list[str] = []
        self.refuse = refuse or set()
        self.closed = False
        self.polls = 0
        self.thread: threading.Thread | None = None

    def bounds(self) -> Rect:
        return Rect(0, 0, 1920, 1080)

    def pointer(self) -> tuple[int, int]:
        self.thread = threading.current_thread()
        return self.position

    def motions(self) -> list[tuple[int, int]] | None:
        return None  # sampled: the watcher reads pointer() once per poll

    def arm_hotkey(self, combo: str) -> None:
        if combo in self.refuse:
            raise PlatformError(f"cannot grab hotkey {combo!r}: another application already grabbed it")
        self.armed.append(combo)

    def wait(self, timeout: float) -> bool:
        self.polls += 1
        if self.hotkey_pressed.wait(timeout):
            self.hotkey_pressed.clear()
            return True
        return False

    def close(self) -> None:
        self.closed = True


class MotionBackend(FakeBackend):
    """A desktop that reports every pointer motion as an event, as RECORD does."""

    def __init__(self, pointer: tuple[int, int] = (960, 540)) -> None:
        super().__init__(pointer)
        self.queue: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def move(self, *points: tuple[int, int]) -> None:
        with self.lock:
            self.queue.extend(points)
            self.position = points[-1]

    def motions(self) -> list[tuple[int, int]] | None:
        with self.lock:
            out, self.queue = self.queue, []
        return out


def wait_until(predicate: object, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.002)
    return False


def make(backend: FakeBackend, **kwargs: object) -> KillSwitch:
    return KillSwitch(backend=lambda: backend, poll_interval=POLL, **kwargs)  # type: ignore[arg-type]


def test_corner_trips_and_calls_back_once() -> None:
    backend = FakeBackend()
    trips: list[Trip] = []
    with make(backend, on_trip=trips.append) as switch:
        assert not switch.tripped
        assert switch.status["corner"].startswith("armed: top-left (0,0)")
        assert switch.status["hotkey"] == "armed: ctrl+alt+q"
        backend.position = (1919, 0)
        assert wait_until(lambda: switch.tripped)
        switch.trip("again")  # sticky: the first reason stays
    assert [t.source for t in trips] == ["corner"]
    assert switch.trip_info is not None and "top-right" in switch.trip_info.reason
    assert switch.trip_info.detail == {"x": 1919, "y": 0}
    assert backend.closed and not switch.running
    assert backend.thread is not threading.main_thread()  # polled on the watcher thread


@pytest.mark.parametrize(("pos", "margin", "trips"), [((2, 1077), 2, True), ((3, 1079), 2, False), ((0, 1079), 0, True)])
def test_corner_margin(pos: tuple[int, int], margin: int, trips: bool) -> None:
    backend = FakeBackend()
    with make(backend, corner_margin=margin, hotkeys=()) as switch:
        backend.position = pos
        wait_until(lambda: switch.tripped or backend.polls > 5)
        time.sleep(5 * POLL)
        assert switch.tripped is trips


def test_hotkey_trips() -> None:
    backend = FakeBackend()
    with make(backend, hotkeys=("pause", "ctrl+alt+q")) as switch:
        assert backend.armed == ["pause", "ctrl+alt+q"]
        backend.hotkey_pressed.set()
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "hotkey"


def test_a_hotkey_that_cannot_be_grabbed_is_reported_and_the_rest_still_works() -> None:
    backend = FakeBackend(refuse={"ctrl+alt+q"})
    with make(backend, hotkeys=("ctrl+alt+q", "pause")) as switch:
        assert "armed: pause" in switch.status["hotkey"]
        assert "unavailable: cannot grab hotkey 'ctrl+alt+q'" in switch.status["hotkey"]
        backend.position = (0, 0)
        assert wait_until(lambda: switch.tripped)


def test_agent_moves_into_a_corner_do_not_trip_but_the_user_returning_does() -> None:
    backend = FakeBackend()
    with make(backend, hotkeys=()) as switch:
        switch.note_pointer(0, 0)
        # the watcher may poll before the agent's move lands: the note must survive that
        time.sleep(5 * POLL)
        backend.position = (0, 0)
        time.sleep(10 * POLL)
        assert not switch.tripped
        backend.position = (1, 1)  # still the agent's spot within the tolerance
        time.sleep(5 * POLL)
        assert not switch.tripped
        backend.position = (400, 300)  # the user takes the mouse ...
        assert wait_until(lambda: backend.polls > 30)
        backend.position = (0, 0)  # ... and slams it into the corner
        assert wait_until(lambda: switch.tripped)


def test_a_user_corner_gesture_elsewhere_trips_even_with_an_agent_note() -> None:
    backend = FakeBackend()
    with make(backend, hotkeys=()) as switch:
        switch.note_pointer(0, 0)
        backend.position = (1919, 1079)
        assert wait_until(lambda: switch.tripped)


def test_a_pointer_starting_in_a_corner_arms_only_after_leaving() -> None:
    backend = FakeBackend(pointer=(0, 0))
    with make(backend, hotkeys=()) as switch:
        assert "starts in a corner" in switch.status["corner"]
        time.sleep(10 * POLL)
        assert not switch.tripped
        backend.position = (100, 100)
        time.sleep(5 * POLL)
        backend.position = (0, 0)
        assert wait_until(lambda: switch.tripped)


def test_corner_off() -> None:
    backend = FakeBackend()
    with make(backend, corner=False, hotkeys=()) as switch:
        backend.position = (0, 0)
        time.sleep(10 * POLL)
        assert not switch.tripped and switch.status["corner"] == "off" and switch.status["hotkey"] == "off"


def test_no_desktop_degrades_to_programmatic_and_budget() -> None:
    def no_display() -> FakeBackend:
        raise PlatformError("no desktop to watch (DISPLAY is not set)")

    switch = KillSwitch(backend=no_display, poll_interval=POLL)
    with switch:
        assert switch.status["corner"].startswith("unavailable: no desktop")
        assert switch.running
        switch.trip("stop please", source="signal", signal="SIGTERM")
        assert wait_until(lambda: not switch.running or switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.as_dict() == {
        "source": "signal", "reason": "stop please", "signal": "SIGTERM"}
    with pytest.raises(RunInterrupted) as info:
        switch.check()
    assert info.value.details["reason"] == "signal"


def test_the_wall_clock_budget_trips_the_switch() -> None:
    budget = RunBudget(max_steps=100, max_seconds=0.05)
    backend = FakeBackend()
    with make(backend, budget=budget) as switch:
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "max_seconds"
    assert "time limit" in switch.trip_info.reason


def test_async_wait_wakes_on_a_trip_from_another_thread() -> None:
    backend = FakeBackend()

    async def main() -> Trip:
        with make(backend, hotkeys=()) as switch:
            waiter = asyncio.create_task(switch.wait())
            await asyncio.sleep(0.01)
            assert not waiter.done()
            backend.position = (0, 1079)
            trip = await asyncio.wait_for(waiter, 2)
            assert await switch.wait() is trip  # already tripped: returns at once
            return trip

    assert asyncio.run(main()).source == "corner"


def test_check_passes_until_tripped_and_callbacks_added_late_run_at_once() -> None:
    switch = KillSwitch(backend=FakeBackend, poll_interval=POLL)
    switch.check()
    seen: list[str] = []
    switch.add_callback(lambda t: seen.append("early"))
    assert switch.trip("now") is True and switch.trip("later") is False
    switch.add_callback(lambda t: seen.append("late:" + t.reason))
    assert seen == ["early", "late:now"]
    assert switch.wait_blocking(0) is switch.trip_info


def test_a_failing_callback_does_not_block_the_others() -> None:
    seen: list[str] = []

    def broken(trip: Trip) -> None:
        raise RuntimeError("boom")

    switch = KillSwitch(backend=FakeBackend, on_trip=broken)
    switch.add_callback(lambda t: seen.append(t.source))
    switch.trip()
    assert seen == ["programmatic"]


def test_bad_arguments() -> None:
    with pytest.raises(UnknownKeyError):
        KillSwitch(hotkeys=("ctrl+alt",))  # no non-modifier key
    with pytest.raises(UnknownKeyError):
        KillSwitch(hotkeys=("ctrl+nosuchkey",))
    with pytest.raises(ValueError):
        KillSwitch(corner_margin=-1)
    with pytest.raises(ValueError):
        KillSwitch(poll_interval=0)


def test_hotkey_parts() -> None:
    mods, key = hotkey_parts("Ctrl+Alt+Q")
    assert [m.name for m in mods] == ["ctrl", "alt"] and key.name == "q"
    assert hotkey_parts("pause")[0] == []


def test_corners_of_a_multi_monitor_desktop() -> None:
    # two monitors: 1920x1080 at the origin, 1280x1024 to its right, top-aligned
    areas = [Rect(0, 0, 1920, 1080), Rect(1920, 0, 1280, 1024)]
    names = {n: (x, y) for n, x, y in _corners(areas)}
    # the bounding box's bottom-right (3199, 1079) is off-screen and dropped
    assert names == {"top-left": (0, 0), "top-right": (3199, 0), "bottom-left": (0, 1079)}
    # a monitor to the left of the primary (negative origin)
    assert ("top-left", -1920, 0) in _corners([Rect(-1920, 0, 1920, 1080), Rect(0, 0, 1920, 1080)])


def test_monitors_given_to_the_switch_define_the_corners() -> None:
    backend = FakeBackend()
    with make(backend, hotkeys=(), monitors=[Rect(0, 0, 1920, 1080), Rect(1920, 0, 1280, 1024)]) as switch:
        backend.position = (1919, 0)  # where the monitors meet: not a corner
        time.sleep(10 * POLL)
        assert not switch.tripped
        backend.position = (3199, 0)
        assert wait_until(lambda: switch.tripped)


# ------------------------------------------------------------------- the run budget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_counts_steps() -> None:
    budget = RunBudget(max_steps=2, clock=Clock())
    assert budget.exhausted() is None
    assert budget.step() == 1 and budget.exhausted() is None
    assert budget.step() == 2
    spent = budget.exhausted()
    assert spent is not None and spent.limit == "max_steps" and "2 steps" in spent.message


def test_budget_wall_clock_and_hard_cap() -> None:
    clock = Clock()
    budget = RunBudget(max_steps=10, max_seconds=30, clock=clock).start()
    clock.now += 29.5
    assert budget.exhausted() is None and budget.remaining_seconds() == pytest.approx(0.5)
    clock.now += 1
    spent = budget.exhausted()
    assert spent is not None and spent.limit == "max_seconds" and budget.remaining_seconds() == 0
    # "no wall limit" still gets the hard cap: no run is unbounded
    capped = RunBudget(max_steps=10, max_seconds=0, clock=clock)
    assert capped.limit_seconds == 3600
    assert capped.as_dict() == {"max_steps": 10, "max_seconds": 3600.0, "steps": 0, "elapsed_s": 0.0}


@pytest.mark.parametrize("kwargs", [{"max_steps": 0}, {"max_steps": True}, {"max_steps": 1, "hard_cap_seconds": 0}])
def test_budget_rejects_unbounded_or_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RunBudget(**kwargs)  # type: ignore[arg-type]


def test_a_corner_touched_between_two_samples_trips_when_motion_is_an_event() -> None:
    # The user touches the corner and the agent's next move takes the pointer away
    # before the watcher looks: a sample sees (500, 500), the events see the corner.
    backend = MotionBackend()
    with make(backend) as switch:
        assert switch.status["corner"].endswith("every motion")
        switch.note_pointer(500, 500)
        backend.move((1919, 0), (500, 500))
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and switch.trip_info.source == "corner"
    assert switch.trip_info.detail == {"x": 1919, "y": 0}


def test_the_agents_own_motion_into_a_corner_is_not_the_gesture() -> None:
    backend = MotionBackend()
    with make(backend) as switch:
        switch.note_pointer(0, 0, via=[(1919, 1079)])
        backend.move((1919, 1079), (900, 500), (0, 0))  # a drag from a corner into another
        time.sleep(20 * POLL)
        assert not switch.tripped
        backend.move((10, 10), (0, 0))  # the pointer left the agent's spot: the user's now
        assert wait_until(lambda: switch.tripped)
    assert switch.trip_info is not None and "top-left" in switch.trip_info.reason


def test_a_sampled_corner_says_so() -> None:
    with make(FakeBackend()) as switch:
        assert switch.status["corner"].endswith(f"sampled every {POLL:g} s")


def test_on_wayland_the_watcher_says_what_stops_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from deskpilot.safety._killswitch import default_watch_backend

    if sys.platform == "win32":
        pytest.skip("Windows has its own watcher")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-9")
    with pytest.raises(PlatformError, match=r"not watched on Wayland.*Ctrl\+C, SIGTERM and the budgets"):
        default_watch_backend()
    switch = KillSwitch(hotkeys=("ctrl+alt+q",), corner=True, poll_interval=0.01).start()
    try:
        assert "not watched on Wayland" in switch.status["corner"]
        assert "not watched on Wayland" in switch.status["hotkey"]
    finally:
        switch.stop()
