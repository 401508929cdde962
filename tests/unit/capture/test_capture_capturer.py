"""The Capturer facade and Frame over a fake backend (the seam), any OS."""

from __future__ import annotations

import base64
import gc
import io
import sys
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from deskpilot import imaging
from deskpilot._errors import CaptureError, ConfigError
from deskpilot.capture import Capturer, CursorImage, Frame, Monitor, make_backend
from deskpilot.capture._mss import xfixes_pixels_to_bgra
from deskpilot.geometry import Rect

PRIMARY = Rect(0, 0, 1920, 1080)
LEFT = Rect(-1280, -200, 1280, 1024)


def desktop_pixels(rect: Rect) -> npt.NDArray[np.uint8]:
    """BGRA whose values are a function of the absolute desktop position."""
    ys, xs = np.mgrid[rect.top : rect.bottom, rect.left : rect.right]
    out = np.empty((rect.height, rect.width, 4), dtype=np.uint8)
    out[..., 0] = xs & 0xFF
    out[..., 1] = ys & 0xFF
    out[..., 2] = (xs * 3 + ys * 7) & 0xFF
    out[..., 3] = 255
    return out


CURSOR = np.zeros((8, 6, 4), dtype=np.uint8)
CURSOR[..., 2] = 200  # premultiplied red, half the pixels opaque
CURSOR[..., 3] = 255
CURSOR[::2, :, :] = 0


class FakeBackend:
    name = "fake"

    def __init__(self, cursor_at: tuple[int, int] | None = (100, 50)) -> None:
        self.cursor_at = cursor_at
        self.grabs: list[Rect] = []
        self.cursor_calls = 0
        self.closed = 0
        self.shift = 0

    def monitors(self) -> list[Monitor]:
        return [Monitor(1, LEFT, False, "left"), Monitor(2, PRIMARY, True, "main")]

    def grab_bgra(self, rect: Rect) -> npt.NDArray[np.uint8]:
        self.grabs.append(rect)
        px = desktop_pixels(rect)
        px[..., 0] += self.shift
        return px

    def cursor(self) -> CursorImage | None:
        self.cursor_calls += 1
        if self.cursor_at is None:
            return None
        return CursorImage(CURSOR, "premultiplied", (2, 3), self.cursor_at, serial=7)

    def close(self) -> None:
        self.closed += 1


class ScalingBackend(FakeBackend):
    def grab_scaled(self, rect: Rect, size: tuple[int, int]) -> npt.NDArray[np.uint8]:
        return imaging.downscale(desktop_pixels(rect), size)


def test_default_monitor_is_the_primary_and_indexes_are_one_based() -> None:
    with Capturer(FakeBackend()) as cap:
        assert cap.monitor.name == "main" and cap.area == PRIMARY
    with Capturer(FakeBackend(), monitor=1) as cap:
        assert cap.area == LEFT
        assert [m.index for m in cap.monitors()] == [1, 2]


def test_region_is_relative_to_the_monitor_even_with_a_negative_origin() -> None:
    with Capturer(FakeBackend(), monitor=1, region=(100, 50, 640, 480)) as cap:
        assert cap.area == Rect(-1180, -150, 640, 480)
        frame = cap.grab()
    assert frame.area == Rect(-1180, -150, 640, 480)
    assert frame.norm_to_physical(0, 0) == (-1180, -150)
    assert frame.norm_to_physical(1000, 1000) == (-1180 + 639, -150 + 479)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"monitor": 3}, "monitor must be 1..2"),
        ({"monitor": 0}, "monitor must be 1..2"),
        ({"monitor": True}, "monitor must be"),
        ({"region": (0, 0, 1921, 10)}, "not inside"),
        ({"region": (-1, 0, 10, 10)}, "not inside"),
        ({"region": (0, 0, 0, 10)}, "not inside"),
        ({"region": (0, 0, 10)}, "region must be"),
        ({"region": (0.5, 0, 10, 10)}, "region must be"),
        ({"scaling": "gdi"}, "needs the gdi backend"),
        ({"scaling": "bicubic"}, "scaling must be"),
    ],
)
def test_bad_configuration_is_refused_and_the_backend_closed(kwargs: dict[str, object], match: str) -> None:
    backend = FakeBackend()
    with pytest.raises(ConfigError, match=match):
        Capturer(backend, **kwargs)  # type: ignore[arg-type]
    assert backend.closed == (0 if "scaling" in kwargs and kwargs["scaling"] == "bicubic" else 1)


def test_unknown_and_foreign_backends() -> None:
    with pytest.raises(ConfigError, match="unknown capture backend"):
        make_backend("dxgi")
    if sys.platform != "win32":
        with pytest.raises(CaptureError, match="needs Windows"):
            make_backend("gdi")


def test_native_grab_is_the_area_in_rgb_with_the_cursor() -> None:
    backend = FakeBackend(cursor_at=(100, 50))
    with Capturer(backend, region=(90, 40, 64, 48)) as cap:
        frame = cap.grab()
    expected = desktop_pixels(Rect(90, 40, 64, 48))
    imaging.composite_cursor(expected, CURSOR, 100 - 2 - 90, 50 - 3 - 40, kind="premultiplied")
    assert np.array_equal(frame.rgb, expected[..., 2::-1])
    assert frame.cursor == (100, 50) and frame.size == (64, 48) and frame.scale == (1.0, 1.0)
    assert backend.grabs == [Rect(90, 40, 64, 48)]
    assert set(frame.timings) == {"capture", "cursor", "prepare"}


def test_cursor_is_composited_before_the_downscale() -> None:
    backend = FakeBackend(cursor_at=(960, 540))
    with Capturer(backend) as cap:
        frame = cap.grab(size=(1536, 864))
    source = desktop_pixels(PRIMARY)
    imaging.composite_cursor(source, CURSOR, 958, 537, kind="premultiplied")
    assert np.array_equal(frame.rgb, imaging.prepare(source, size=(1536, 864)))
    assert frame.size == (1536, 864) and frame.scale == (1.25, 1.25)
    assert frame.describe()["image_size"] == [1536, 864]


def test_cursor_off_or_elsewhere_leaves_pixels_alone() -> None:
    plain = imaging.prepare(desktop_pixels(Rect(0, 0, 100, 100)))
    backend = FakeBackend(cursor_at=(500, 500))
    with Capturer(backend, region=(0, 0, 100, 100)) as cap:
        assert np.array_equal(cap.grab().rgb, plain)
    backend = FakeBackend()
    with Capturer(backend, region=(0, 0, 100, 100), cursor=False) as cap:
        frame = cap.grab()
    assert np.array_equal(frame.rgb, plain) and frame.cursor is None and backend.cursor_calls == 0


def test_cursor_partly_outside_the_area_is_clipped() -> None:
    backend = FakeBackend(cursor_at=(1, 1))  # top-left at (-1, -2)
    with Capturer(backend, region=(0, 0, 20, 20)) as cap:
        frame = cap.grab()
    expected = desktop_pixels(Rect(0, 0, 20, 20))
    imaging.composite_cursor(expected, CURSOR, -1, -2, kind="premultiplied")
    assert np.array_equal(frame.rgb, expected[..., 2::-1])


def test_gdi_scaling_uses_the_backends_stretch() -> None:
    backend = ScalingBackend(cursor_at=None)
    with Capturer(backend, scaling="gdi") as cap:
        frame = cap.grab(size=(960, 540))
        native = cap.grab()
    assert np.array_equal(frame.rgb, imaging.downscale(desktop_pixels(PRIMARY), (960, 540))[..., 2::-1])
    assert native.size == (1920, 1080)


def test_output_buffers_are_reused_once_no_frame_holds_them() -> None:
    with Capturer(FakeBackend(), region=(0, 0, 64, 32)) as cap:
        first = cap.grab()
        first_ptr = first.rgb.ctypes.data
        second = cap.grab()
        assert second.rgb.ctypes.data != first_ptr  # `first` is alive: never overwritten
        assert np.array_equal(first.rgb, second.rgb)
        del first
        gc.collect()
        third = cap.grab()
        assert third.rgb.ctypes.data == first_ptr  # released: reused, no new allocation
        view = third.rgb[:10]
        del third
        fourth = cap.grab()
        assert fourth.rgb.ctypes.data != view.ctypes.data  # a view still pins the buffer


def test_concurrent_grabs_never_share_a_live_buffer() -> None:
    import threading

    frames: list[Frame] = []
    with Capturer(FakeBackend(cursor_at=None), region=(0, 0, 64, 48)) as cap:

        def worker() -> None:
            for _ in range(50):
                frames.append(cap.grab(size=(32, 24)))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len({f.rgb.ctypes.data for f in frames}) == len(frames)  # all alive: all distinct
    expected = imaging.prepare(desktop_pixels(Rect(0, 0, 64, 48)), size=(32, 24))
    assert all(np.array_equal(f.rgb, expected) for f in frames)


def test_png_is_cached_and_decodes_to_the_pixels() -> None:
    from PIL import Image

    with Capturer(FakeBackend(), region=(0, 0, 120, 80)) as cap:
        frame = cap.grab(size=(60, 40))
    png = frame.png()
    assert frame.png() is png and frame.png(level=6) is not png
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), frame.rgb)
    url = frame.data_url()
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png


def test_digest_tracks_pixel_changes() -> None:
    backend = FakeBackend()
    with Capturer(backend, region=(0, 0, 50, 50)) as cap:
        a, b = cap.digest(), cap.digest()
        backend.shift = 1
        c = cap.digest()
    assert a == b != c
    assert backend.cursor_calls == 0  # the cursor does not make a still screen look busy


def test_close_is_idempotent_and_final() -> None:
    backend = FakeBackend()
    cap = Capturer(backend)
    cap.close()
    cap.close()
    assert backend.closed == 1
    with pytest.raises(CaptureError, match="closed"):
        cap.grab()


@pytest.mark.parametrize("size", [(0, 10), (10,), "1536x864", (1.5, 2), (True, 2)])
def test_bad_sizes(size: object) -> None:
    with Capturer(FakeBackend()) as cap, pytest.raises(ConfigError, match="size"):
        cap.grab(size=size)  # type: ignore[arg-type]


def test_numpy_integer_sizes_are_sizes() -> None:
    with Capturer(FakeBackend()) as cap:
        a = cap.grab(size=(np.int64(64), np.int32(48)))
        b = cap.grab(size=np.array([64, 48]))  # type: ignore[arg-type]
    assert a.size == b.size == (64, 48)
    assert type(a.size[0]) is int and a.describe()["image_size"] == [64, 48]


@pytest.mark.parametrize("size", [(np.float64(64.0), 48), np.array([64.5, 48.0]), (np.int64(0), 48)])
def test_numpy_non_integers_and_zero_are_refused(size: object) -> None:
    with Capturer(FakeBackend()) as cap, pytest.raises(ConfigError, match="positive integers"):
        cap.grab(size=size)  # type: ignore[arg-type]


def test_frame_rejects_non_rgb_arrays() -> None:
    with pytest.raises(ValueError):
        Frame(np.zeros((4, 4, 4), np.uint8), Rect(0, 0, 4, 4))


def test_xfixes_pixels_become_bgra() -> None:
    argb = np.array([0xFF102030, 0x80402010, 0x00000000, 0x7F7F7F7F], dtype=np.uint64)
    bgra = xfixes_pixels_to_bgra(argb, 2, 2)
    assert bgra.shape == (2, 2, 4)
    assert bgra[0, 0].tolist() == [0x30, 0x20, 0x10, 0xFF]
    assert bgra[0, 1].tolist() == [0x10, 0x20, 0x40, 0x80]
    assert bgra[1, 1].tolist() == [0x7F] * 4
    # 32-bit unsigned long builds give the same result
    assert np.array_equal(xfixes_pixels_to_bgra(argb.astype(np.uint32), 2, 2), bgra)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mss reads the cursor on X11 only")
def test_mss_without_xfixes_warns_once_and_grabs_without_the_cursor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mss

    from deskpilot import _x11

    screen = Rect(0, 0, 64, 48)

    class FakeMss:
        # mss lists the whole virtual desktop first, then each monitor
        monitors: ClassVar[list[dict[str, int]]] = [
            {},
            {"left": 0, "top": 0, "width": 64, "height": 48},
        ]

        def grab(self, region: dict[str, int]) -> SimpleNamespace:
            rect = Rect(region["left"], region["top"], region["width"], region["height"])
            raw = bytearray(desktop_pixels(rect).tobytes())
            return SimpleNamespace(size=(rect.width, rect.height), raw=raw)

        def close(self) -> None:
            pass

    opened: list[NoXFixesDisplay] = []

    class NoXFixesDisplay:
        ptr = 1

        def __init__(self, error: type[Exception], name: str | None = None) -> None:
            self.closed = False
            opened.append(self)

        def close(self) -> None:
            self.closed = True

    class NoXFixes:
        def XFixesQueryExtension(self, display: int, event_base: object, error_base: object) -> int:
            return 0  # what a server started without +extension XFIXES answers

    monkeypatch.setattr(mss, "MSS", FakeMss)
    monkeypatch.setattr(_x11, "XDisplay", NoXFixesDisplay)
    monkeypatch.setattr(_x11, "library", lambda short: NoXFixes())
    warning = "without the mouse cursor: the X server has no XFIXES extension"
    with (
        pytest.warns(RuntimeWarning, match=warning) as caught,
        Capturer("mss") as cap,  # cursor=True is the default
    ):
        frames = [cap.grab() for _ in range(3)]
    assert len(caught) == 1
    assert all(frame.cursor is None for frame in frames)
    assert np.array_equal(frames[-1].rgb, desktop_pixels(screen)[..., 2::-1])
    assert len(opened) == 1 and opened[0].closed  # tried once, its connection given back


class UnreadableCursorBackend(FakeBackend):
    """GetIconInfo's "Invalid cursor handle" (error 1402), met under Wine after a click."""

    def __init__(self, fail_times: int) -> None:
        super().__init__()
        self.fail_times = fail_times

    def cursor(self) -> CursorImage | None:
        if self.fail_times > 0:
            self.fail_times -= 1
            raise CaptureError("GetIconInfo failed: Invalid cursor handle. (error 1402)", code=1402)
        return super().cursor()


def test_a_cursor_that_cannot_be_read_costs_the_cursor_not_the_frame() -> None:
    backend = UnreadableCursorBackend(fail_times=2)
    with Capturer(backend, monitor=2) as cap:
        plain = desktop_pixels(PRIMARY)[..., [2, 1, 0]]
        with pytest.warns(RuntimeWarning, match="without the mouse cursor: GetIconInfo failed"):
            first = cap.grab()
        assert first.cursor is None
        assert np.array_equal(first.rgb, plain)  # the whole frame, no cursor drawn
        assert cap.cursor_problem is not None and "error 1402" in cap.cursor_problem
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once: the second failure is only counted
            second = cap.grab()
        assert second.cursor is None and cap.cursor_failures == 2
        third = cap.grab()  # the cursor is readable again: drawn again
        assert third.cursor == (100, 50)
        assert not np.array_equal(third.rgb, plain)
        assert cap.read_cursor() is not None


def test_probe_pixels_make_the_frame_grab_would_make_without_a_second_grab() -> None:
    backend = FakeBackend(cursor_at=(100, 50))
    with Capturer(backend, region=(80, 30, 96, 64)) as cap:
        digest, bgra, cursor = cap.probe()
        assert digest == cap.digest()  # the digest of the raw pixels, no cursor in it
        grabs = len(backend.grabs)
        frame = cap.frame_from(bgra, cursor, size=(48, 32))
        assert len(backend.grabs) == grabs  # no grab: the probe's pixels were used
        expected = cap.grab(size=(48, 32))
    assert np.array_equal(frame.rgb, expected.rgb)
    assert frame.cursor == expected.cursor == (100, 50) and frame.mapping == expected.mapping
    with Capturer(FakeBackend(), region=(0, 0, 10, 10)) as cap, pytest.raises(CaptureError, match="not the 10x10"):
        cap.frame_from(desktop_pixels(Rect(0, 0, 12, 10)), None)


def test_screen_grab_probed_uses_the_probe_and_keys_shots_without_digesting_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deskpilot.agent._screen import CapturerScreen

    backend = FakeBackend(cursor_at=(100, 50))
    monkeypatch.setattr("deskpilot.capture._capturer.make_backend", lambda name, cursor=True: backend)
    screen = CapturerScreen(size=(96, 54), cursor=True)
    try:
        digests = []
        real = imaging.frame_digest

        def counting(pixels: npt.NDArray[np.uint8]) -> int:
            digests.append(pixels.shape)
            return int(real(pixels))

        monkeypatch.setattr(imaging, "frame_digest", counting)

        def keyed() -> tuple[int, object]:
            digests.clear()
            probe = screen.probe()
            grabs = len(backend.grabs)
            shot = screen.grab_probed(pixel_digest=False)
            assert len(backend.grabs) == grabs and len(digests) == 1  # one grab, one digest pass
            assert not shot.pixel_digest
            return shot.digest, (probe, shot.rgb.copy())

        first, (probe, pixels) = keyed()
        assert probe[1] == (100, 50)
        again, _ = keyed()
        assert again == first  # same screen, same key
        backend.cursor_at = (120, 60)  # only the pointer moved: a different image, a different key
        moved, _ = keyed()
        assert moved != first
        backend.shift = 1
        assert keyed()[0] not in (first, moved)
        # By default the shot is keyed by its pixels, as a fresh grab is.
        backend.cursor_at, backend.shift = (100, 50), 0
        screen.probe()
        shot = screen.grab_probed()
        fresh = screen.grab()
        assert shot.pixel_digest and shot.digest == fresh.digest == real(fresh.rgb)
        assert np.array_equal(shot.rgb, pixels)
        # Used once: a second grab_probed grabs afresh.
        screen.probe()
        screen.grab_probed()
        before = len(backend.grabs)
        screen.grab_probed()
        assert len(backend.grabs) == before + 1
    finally:
        screen.close()
