"""X DAMAGE binding (:mod:`deskpilot._x11._damage`) against a fake libXdamage/libX11, and
the settle that waits on it (:func:`deskpilot.agent._settle.settle_on_damage`) against a
fake source whose descriptor is a real socket pair."""

from __future__ import annotations

import asyncio
import ctypes
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deskpilot._errors import PlatformError
from deskpilot._x11._damage import DAMAGE_FUNCTIONS, REPORT_BOUNDING_BOX, DamageWatcher
from deskpilot._x11._lib import CFUNCTIONS, XEvent
from deskpilot.agent._settle import SettlePolicy, settle_on_damage

EVENT_BASE = 91


class FakeDisplay:
    root = 0x1E7

    def __init__(self) -> None:
        self.closed = False
        self.synced: list[str] = []

    def handle(self) -> int:
        if self.closed:
            raise PlatformError("closed")
        return 0xD15

    def sync(self, call: str) -> None:
        self.synced.append(call)

    def close(self) -> None:
        self.closed = True


class FakeLib:
    """The functions of DAMAGE_FUNCTIONS, recording calls; ``queue`` holds event types,
    or (type, (x, y, w, h)) for damage with its bounding box."""

    def __init__(self, *, extension: bool = True) -> None:
        self.extension = extension
        self.queue: list[int] = []
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def XDamageQueryExtension(self, dpy: int, event_base: Any, error_base: Any) -> int:
        self.calls.append(("XDamageQueryExtension", (dpy,)))
        event_base._obj.value = EVENT_BASE
        return 1 if self.extension else 0

    def XDamageCreate(self, dpy: int, drawable: int, level: int) -> int:
        self.calls.append(("XDamageCreate", (dpy, drawable, level)))
        return 0xDA

    def XConnectionNumber(self, dpy: int) -> int:
        return 42

    def XPending(self, dpy: int) -> int:
        return len(self.queue)

    def XNextEvent(self, dpy: int, event: Any) -> int:
        item = self.queue.pop(0)
        kind, box = item if isinstance(item, tuple) else (item, (0, 0, 10, 10))
        ev = ctypes.cast(event, ctypes.POINTER(XEvent)).contents
        ev.type = kind
        ev.damage.area.x, ev.damage.area.y, ev.damage.area.width, ev.damage.area.height = box
        return 0

    def XDamageSubtract(self, dpy: int, damage: int, repair: int, parts: int) -> None:
        self.calls.append(("XDamageSubtract", (damage, repair, parts)))

    def XFlush(self, dpy: int) -> int:
        self.calls.append(("XFlush", (dpy,)))
        return 1

    def XDamageDestroy(self, dpy: int, damage: int) -> None:
        self.calls.append(("XDamageDestroy", (damage,)))


def test_prototype_table_is_sorted_and_names_its_libraries() -> None:
    assert list(DAMAGE_FUNCTIONS) == sorted(DAMAGE_FUNCTIONS)
    assert {CFUNCTIONS[name][0] for name in DAMAGE_FUNCTIONS} == {"X11", "Xdamage"}
    assert set(DAMAGE_FUNCTIONS) == {n for n in dir(FakeLib) if n.startswith("X")}


def test_watcher_watches_the_root_at_the_bounding_box_level() -> None:
    lib, display = FakeLib(), FakeDisplay()
    watcher = DamageWatcher(display=display, lib=lib)
    assert ("XDamageCreate", (0xD15, FakeDisplay.root, REPORT_BOUNDING_BOX)) in lib.calls
    assert display.synced == ["XDamageCreate"]  # an error there is raised, not left for later
    assert watcher.fileno() == 42


def test_drain_counts_damage_only_and_rearms_once() -> None:
    lib = FakeLib()
    watcher = DamageWatcher(display=FakeDisplay(), lib=lib)
    lib.queue = [
        EVENT_BASE,
        33,
        EVENT_BASE,
        EVENT_BASE + 1,
    ]  # damage, other, damage, another extension's
    lib.calls.clear()
    assert watcher.drain() == 2
    assert lib.queue == []
    assert [c for c, _ in lib.calls] == ["XDamageSubtract", "XFlush"]
    assert lib.calls[0][1] == (0xDA, 0, 0)  # all of the damage, no region kept
    assert watcher.events == 2
    lib.calls.clear()
    assert watcher.drain() == 0 and lib.calls == []  # nothing arrived: no request sent


def test_only_drawing_that_meets_the_working_area_counts() -> None:
    from deskpilot.geometry import Rect

    lib = FakeLib()
    watcher = DamageWatcher(
        Rect(1920, 0, 1280, 1024), display=FakeDisplay(), lib=lib
    )  # the right monitor
    lib.queue = [(EVENT_BASE, (100, 100, 640, 360))]  # a video on the left monitor
    lib.calls.clear()
    assert watcher.drain() == 0 and watcher.last_damage == 0.0
    assert [c for c, _ in lib.calls] == ["XDamageSubtract", "XFlush"]  # emptied all the same
    lib.queue = [
        (EVENT_BASE, (1900, 500, 30, 20)),
        (EVENT_BASE, (0, 0, 1919, 1080)),
    ]  # across the edge; beside
    assert watcher.drain() == 1 and watcher.last_damage > 0


def test_missing_extension_is_a_platform_error_and_closes_the_connection() -> None:
    display = FakeDisplay()
    with pytest.raises(PlatformError, match="no DAMAGE extension"):
        DamageWatcher(display=display, lib=FakeLib(extension=False))
    assert display.closed


def test_close_destroys_the_damage_object_once() -> None:
    lib, display = FakeLib(), FakeDisplay()
    with DamageWatcher(display=display, lib=lib) as watcher:
        pass
    watcher.close()
    assert [c for c, _ in lib.calls].count("XDamageDestroy") == 1
    assert display.closed and watcher.closed
    with pytest.raises(PlatformError, match="closed"):
        watcher.drain()


# --- settle_on_damage ---------------------------------------------------------------


class SocketSource:
    """Drawing notifications over a socket pair: ``draw()`` writes one byte."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.drains = 0
        self.fail = False

    def fileno(self) -> int:
        return self.reader.fileno()

    def drain(self) -> int:
        self.drains += 1
        if self.fail:
            raise PlatformError("connection lost")
        try:
            return len(self.reader.recv(4096))
        except BlockingIOError:
            return 0

    def draw(self) -> None:
        self.writer.send(b"d")

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


@pytest.fixture
def source() -> Iterator[SocketSource]:
    src = SocketSource()
    yield src
    src.close()


class Screen:
    """Probes return the number of drawings done so far (the screen "content")."""

    def __init__(self, source: SocketSource, drawings_at: list[float] | None = None) -> None:
        self.source = source
        self.drawn = 0
        self.probes: list[float] = []
        self.start = time.perf_counter()
        self.drawings_at = drawings_at or []

    async def probe(self) -> tuple[int, str]:
        self.probes.append(time.perf_counter() - self.start)
        await asyncio.sleep(0.002)  # a grab takes time
        return self.drawn, f"frame{len(self.probes)}:{self.drawn}"

    async def app(self) -> None:
        """An app that draws at the given offsets (seconds after start)."""
        for at in self.drawings_at:
            await asyncio.sleep(max(0.0, at - (time.perf_counter() - self.start)))
            self.drawn += 1
            self.source.draw()


def settle_with(
    source: SocketSource, policy: SettlePolicy, drawings_at: list[float] | None = None
) -> Any:
    async def main() -> Any:
        screen = Screen(source, drawings_at)
        app = asyncio.ensure_future(screen.app())
        result = await settle_on_damage(screen.probe, policy, source)
        await app
        return result, screen

    return asyncio.run(main())


def test_static_screen_takes_one_probe_and_waits_the_quiet_interval(source: SocketSource) -> None:
    result, _ = settle_with(source, SettlePolicy("adaptive", max_s=1.0, poll_s=0.02))
    assert result.stable and result.polls == 1 and result.damage == 0
    assert result.payload == "frame1:0"
    assert result.waited_s >= 0.02  # the quiet interval passed with nothing drawn


def test_drawing_after_a_probe_started_makes_it_look_again(source: SocketSource) -> None:
    # The first probe starts half a quiet interval in (15 ms); the second drawing comes after.
    result, screen = settle_with(
        source, SettlePolicy("adaptive", max_s=2.0, poll_s=0.03), [0.005, 0.025]
    )
    assert result.stable and result.damage == 2
    assert result.payload.endswith(":2")  # the image shows both drawings: taken after the last
    assert result.polls >= 2
    assert screen.probes[-1] >= 0.025  # the probe used started after the last drawing


def test_a_change_nobody_reported_early_on_is_still_seen(source: SocketSource) -> None:
    async def main() -> Any:
        screen = Screen(source)

        async def silent_app() -> None:  # draws at 5 ms without a notification
            await asyncio.sleep(0.005)
            screen.drawn += 1

        app = asyncio.ensure_future(silent_app())
        result = await settle_on_damage(
            screen.probe, SettlePolicy("adaptive", max_s=1.0, poll_s=0.04), source
        )
        await app
        return result

    result = asyncio.run(main())
    assert result.stable and result.damage == 0 and result.payload.endswith(":1")


def test_drawing_reported_before_the_settle_is_not_waited_for(source: SocketSource) -> None:
    source.draw()  # drawn during the action: the screen is already as it will be
    result, _ = settle_with(source, SettlePolicy("adaptive", max_s=1.0, poll_s=0.01))
    assert result.stable and result.polls == 1 and result.ended == "quiet"
    assert result.damage == 1  # counted, as the frame the settle started with


def test_a_screen_that_keeps_drawing_is_bounded_by_max(source: SocketSource) -> None:
    drawings = [i * 0.004 for i in range(1, 60)]  # every 4 ms for 0.24 s, quiet interval 10 ms
    result, _ = settle_with(source, SettlePolicy("adaptive", max_s=0.08, poll_s=0.01), drawings)
    assert not result.stable
    assert result.damage and result.damage > 3
    assert result.waited_s < 0.24  # ended by the bound, not by the drawing stopping


def test_min_is_respected(source: SocketSource) -> None:
    result, _ = settle_with(source, SettlePolicy("adaptive", min_s=0.05, max_s=1.0, poll_s=0.005))
    assert result.stable and result.waited_s >= 0.05


def test_a_failing_source_falls_back_to_polling(source: SocketSource) -> None:
    source.fail = False
    calls = {"n": 0}

    def failing_drain() -> int:
        calls["n"] += 1
        if calls["n"] > 1:  # the first drain (before waiting) works, the next one fails
            raise PlatformError("connection lost")
        return 0

    source.drain = failing_drain  # type: ignore[method-assign]
    result, _ = settle_with(source, SettlePolicy("adaptive", max_s=1.0, poll_s=0.05), [0.005])
    assert result.damage is None  # settled by polling: the caller stops using the source
    assert result.stable and result.payload.endswith(":1")


def test_other_modes_do_not_use_the_source(source: SocketSource) -> None:
    source.fail = True
    result, _ = settle_with(source, SettlePolicy("none"))
    assert result.polls == 1 and result.damage is None and source.drains == 0


# --- after an input: the first reaction, then quiet (issue 20) ------------------------


class SpriteScreen(Screen):
    """As :class:`Screen`, and ``sprite_at``: notifications that change no pixel (the
    pointer's sprite redrawn as it moves to the click point)."""

    def __init__(self, source: SocketSource, drawings_at: list[float], sprite_at: list[float]) -> None:
        super().__init__(source, drawings_at)
        self.sprite_at = sprite_at

    async def sprite(self) -> None:
        for at in self.sprite_at:
            await asyncio.sleep(max(0.0, at - (time.perf_counter() - self.start)))
            self.source.draw()


def after_input(
    source: SocketSource, policy: SettlePolicy, drawings_at: list[float], sprite_at: list[float] | None = None
) -> Any:
    async def main() -> Any:
        screen = SpriteScreen(source, drawings_at, sprite_at or [])
        tasks = [asyncio.ensure_future(screen.app()), asyncio.ensure_future(screen.sprite())]
        result = await settle_on_damage(screen.probe, policy, source, baseline=0)
        for task in tasks:
            task.cancel()
        return result, screen

    return asyncio.run(main())


def test_a_late_first_reaction_is_waited_for_on_damage(source: SocketSource) -> None:
    result, _ = after_input(source, SettlePolicy(), [0.15])
    assert result.ended == "quiet" and result.stable
    assert result.payload.endswith(":1")  # the reaction, not the frame before the input
    assert result.first_reaction_s is not None and result.first_reaction_s >= 0.14
    assert result.frames == 1 and result.damage == 1


def test_pointer_sprite_damage_alone_is_no_reaction(source: SocketSource) -> None:
    policy = SettlePolicy(first_reaction_s=0.12)
    result, screen = after_input(source, policy, [], sprite_at=[0.0, 0.01])
    assert result.ended == "no_reaction" and result.stable
    assert result.payload.endswith(":0") and result.first_reaction_s is None
    assert result.waited_s >= 0.12  # the bound, not the sprite's drawing
    assert screen.probes[-1] >= 0.12 - 0.002  # a last look at the bound
    assert result.as_dict()["ended"] == "no_reaction" and result.as_dict()["damage"] == 2


def test_a_60hz_animation_is_waited_out_on_damage(source: SocketSource) -> None:
    frames = [0.02 + i / 60 for i in range(25)]  # 400 ms of frames
    result, _ = after_input(source, SettlePolicy(), frames)
    assert result.ended == "quiet" and result.stable
    assert result.payload.endswith(f":{len(frames)}")  # the last frame
    assert result.frames is not None and result.frames >= 10
    assert result.waited_s >= frames[-1]


def test_endless_drawing_ends_at_max_on_damage(source: SocketSource) -> None:
    frames = [0.01 + i / 60 for i in range(200)]
    result, _ = after_input(source, SettlePolicy(max_s=0.3), frames)
    assert result.ended == "max" and not result.stable
    assert result.as_dict()["stable"] is False
    assert result.waited_s < 1.0  # bounded (generously: it ended long before the drawing did)
