"""Capture on Xvfb: exact pixels of a known pattern, the cursor where the pointer is,
and resources that stay flat over thousands of grabs."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest
from apps.harness import TargetApp
from apps.target_app import PATTERN_SIZE, pattern_rgb

from deskpilot import imaging
from deskpilot.capture import Capturer
from deskpilot.geometry import Rect
from deskpilot.input import InputController

pytestmark = pytest.mark.x11


@pytest.fixture(scope="module")
def pointer(target_app: TargetApp) -> Iterator[InputController]:
    with InputController("xtest") as ctl:
        yield ctl


def expected_pattern(app: TargetApp) -> npt.NDArray[np.uint8]:
    w, h = PATTERN_SIZE
    return np.frombuffer(pattern_rgb(w, h, app.seed), dtype=np.uint8).reshape(h, w, 3)


def as_bgra(rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    bgra = np.full((*rgb.shape[:2], 4), 255, dtype=np.uint8)
    bgra[..., :3] = rgb[..., ::-1]
    return bgra


def test_the_screen_is_one_primary_monitor(target_app: TargetApp) -> None:
    with Capturer("mss") as cap:
        monitors = cap.monitors()
        assert [(m.index, m.rect, m.primary) for m in monitors] == [(1, Rect(0, 0, 1920, 1080), True)]
        assert cap.area == Rect(0, 0, 1920, 1080)


def test_a_known_pattern_is_captured_exactly(target_app: TargetApp, pointer: InputController) -> None:
    pointer.move(5, 1075)  # keep the pointer off the pattern
    x, y, w, h = target_app.widgets["pattern"]
    assert (w, h) == PATTERN_SIZE
    expected = expected_pattern(target_app)
    with Capturer("mss", region=(x, y, w, h)) as cap:
        frame = cap.grab()
        assert frame.cursor == (5, 1075)  # read, but nowhere near the region
        assert np.array_equal(frame.rgb, expected)
        # non-integer (2.5x) and mild (1.25x) area-average downscales equal imaging's
        # result on the known pattern: capture adds nothing and loses nothing
        for size in ((192, 108), (384, 216)):
            scaled = cap.grab(size=size)
            assert np.array_equal(scaled.rgb, imaging.prepare(as_bgra(expected), size=size)), size
            assert scaled.area == Rect(x, y, w, h) and scaled.scale == (w / size[0], h / size[1])


def test_downscaled_pattern_matches_opencv_inter_area(target_app: TargetApp, pointer: InputController) -> None:
    cv2 = pytest.importorskip("cv2")  # an independent implementation of area averaging
    pointer.move(5, 1075)
    x, y, w, h = target_app.widgets["pattern"]
    with Capturer("mss", region=(x, y, w, h), cursor=False) as cap:
        frame = cap.grab(size=(192, 108))
    ref = cv2.resize(expected_pattern(target_app), (192, 108), interpolation=cv2.INTER_AREA)
    assert np.abs(frame.rgb.astype(int) - ref.astype(int)).max() <= 1


def test_full_screen_frame_at_1536x864_maps_back_onto_the_pattern(target_app: TargetApp, pointer: InputController) -> None:
    pointer.move(5, 1075)
    x, y, w, h = target_app.widgets["pattern"]
    with Capturer("mss", cursor=False) as cap:
        raw = cap.grab()
        frame = cap.grab(size=(1536, 864))
    assert np.array_equal(raw.rgb[y : y + h, x : x + w], expected_pattern(target_app))
    assert np.array_equal(frame.rgb, imaging.prepare(as_bgra(raw.rgb), size=(1536, 864)))
    # the image pixel at the pattern's centre maps to a physical pixel inside the pattern
    ix, iy = frame.physical_to_image(x + w // 2, y + h // 2)
    px, py = frame.image_to_physical(ix, iy)
    assert abs(px - (x + w // 2)) <= 1 and abs(py - (y + h // 2)) <= 1


def test_the_cursor_appears_in_the_frame_at_the_pointer(target_app: TargetApp, pointer: InputController) -> None:
    px, py = 1700, 800  # plain background
    pointer.move(px, py)
    pointer.sync()
    region = (px - 64, py - 64, 128, 128)
    with Capturer("mss", region=region) as with_cursor, Capturer("mss", region=region, cursor=False) as without:
        shown = with_cursor.grab()
        hidden = without.grab()
        image = with_cursor.backend.cursor()
    assert image is not None and image.kind == "premultiplied"
    assert shown.cursor == (px, py) and image.position == (px, py)
    assert np.all(hidden.rgb == hidden.rgb[0, 0])  # nothing but background without the cursor
    box = imaging.changed_region(shown.rgb, hidden.rgb)
    assert box is not None
    bx, by, bw, bh = box
    # the changed pixels lie inside the cursor image placed with its hotspot on the pointer
    left, top = 64 - image.hotspot[0], 64 - image.hotspot[1]
    ch, cw = image.pixels.shape[:2]
    assert left <= bx and top <= by and bx + bw <= left + cw and by + bh <= top + ch
    assert bw * bh >= 4
    # and the cursor's opaque pixels are exactly what the frame shows there
    opaque = image.pixels[..., 3] == 255
    window = shown.rgb[top : top + ch, left : left + cw]
    assert np.array_equal(window[opaque], image.pixels[..., 2::-1][opaque])


def test_without_xfixes_frames_come_without_the_cursor(
    target_app: TargetApp, pointer: InputController, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskpilot._x11 import library

    # What a server started without +extension XFIXES answers.
    monkeypatch.setattr(library("Xfixes"), "XFixesQueryExtension", lambda *args: 0)
    px, py = 1700, 800  # plain background
    pointer.move(px, py)
    pointer.sync()
    region = (px - 64, py - 64, 128, 128)
    with (
        pytest.warns(RuntimeWarning, match="without the mouse cursor") as caught,
        Capturer("mss", region=region) as cap,
        Capturer("mss", region=region, cursor=False) as plain,
    ):
        frames = [cap.grab() for _ in range(3)]
        expected = plain.grab()
    assert len(caught) == 1
    assert all(frame.cursor is None for frame in frames)
    assert all(np.array_equal(frame.rgb, expected.rgb) for frame in frames)


def test_digest_is_stable_when_idle_and_changes_with_the_screen(target_app: TargetApp, pointer: InputController) -> None:
    target_app.clear()
    target_app.focus("entry")
    x, y, w, h = target_app.widgets["entry"]
    with Capturer("mss", region=(x, y, w, h)) as cap:
        target_app.wait_quiet(0.2)
        first = cap.digest()
        assert cap.digest() == first
        mark = target_app.mark()
        pointer.type_text("digest")
        target_app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "digest", since=mark)
        target_app.wait_quiet(0.2)
        assert cap.digest() != first


def _resources() -> tuple[int, int]:
    fds = len(os.listdir("/proc/self/fd"))
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    return fds, rss_pages * os.sysconf("SC_PAGE_SIZE")


def test_thousands_of_grabs_keep_fds_connections_and_memory_flat(target_app: TargetApp) -> None:
    with Capturer("mss", region=(600, 300, 320, 240)) as cap:
        for _ in range(50):  # warm up allocators and caches
            cap.grab(size=(160, 120)).png()
        gc.collect()
        fds0, rss0 = _resources()
        for i in range(3000):
            frame = cap.grab(size=(160, 120) if i % 2 else None)
            if i % 100 == 0:
                frame.png()
                cap.digest()
        del frame
        gc.collect()
        fds1, rss1 = _resources()
    assert fds1 == fds0
    assert rss1 - rss0 < 16 * 2**20, f"RSS grew by {(rss1 - rss0) / 2**20:.1f} MiB over 3000 grabs"
    # opening and closing capturers (an XCB connection + shm segment and an Xlib
    # connection for the cursor each) leaks nothing either
    fds2, _ = _resources()
    for _ in range(100):
        with Capturer("mss", region=(0, 0, 64, 64)) as cap:
            cap.grab()
    gc.collect()
    assert _resources()[0] == fds2
    # ... and capturers nobody closed give their connections back when collected
    for _ in range(20):
        Capturer("mss", region=(0, 0, 64, 64)).grab()
    gc.collect()
    assert _resources()[0] == fds2
