"""GdiBackend call sequences and pixels against the recorded user32/gdi32 fakes."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from win32_fakes import Call, FakeCursor, FakeDesktop, FakeMonitor

from deskpilot._errors import CaptureError, ConfigError
from deskpilot._win32._constants import CAPTUREBLT, CURSOR_SHOWING, HALFTONE, SRCCOPY
from deskpilot.capture._gdi import GdiBackend
from deskpilot.geometry import Rect

ROP = SRCCOPY | CAPTUREBLT
PRIMARY = FakeMonitor(0x51, (0, 0, 800, 600), True, "\\\\.\\DISPLAY1")
# Left of and above the primary monitor: negative virtual-desktop origin.
SECOND = FakeMonitor(0x52, (-400, -120, 0, 180), False, "\\\\.\\DISPLAY2")


def make_desktop(**kwargs: Any) -> FakeDesktop:
    rng = np.random.default_rng(7)
    screen = rng.integers(
        0, 256, size=(720, 1200, 4), dtype=np.uint8
    )  # virtual desktop -400,-120 1200x720
    desktop = FakeDesktop(screen=screen, origin=(-400, -120), monitors=[SECOND, PRIMARY], **kwargs)
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = lambda context: 1
    return desktop


def make_backend(desktop: FakeDesktop, **kwargs: Any) -> GdiBackend:
    libraries = desktop.libraries()
    backend = GdiBackend(
        user32=libraries["user32"], gdi32=libraries["gdi32"], shcore=libraries["shcore"], **kwargs
    )
    return backend


def expected(desktop: FakeDesktop, rect: Rect) -> np.ndarray:
    x, y = rect.left - desktop.origin[0], rect.top - desktop.origin[1]
    region = desktop.screen[y : y + rect.height, x : x + rect.width].copy()
    region[..., 3] = 0
    return region


@pytest.fixture
def desktop() -> FakeDesktop:
    return make_desktop()


def test_dpi_awareness_comes_first_and_nothing_is_allocated_before_use(
    desktop: FakeDesktop,
) -> None:
    backend = make_backend(desktop)
    assert desktop.names() == ["SetProcessDpiAwarenessContext"]
    assert backend.dpi is not None and backend.dpi.level == "per_monitor_v2"
    assert desktop.created == []
    backend.close()
    assert desktop.names() == ["SetProcessDpiAwarenessContext"]


def test_monitors_in_enumeration_order_with_negative_origins(desktop: FakeDesktop) -> None:
    with make_backend(desktop, dpi_awareness=False) as backend:
        monitors = backend.monitors()
    assert [(m.index, m.rect.as_tuple(), m.primary, m.name) for m in monitors] == [
        (1, (-400, -120, 400, 300), False, "\\\\.\\DISPLAY2"),
        (2, (0, 0, 800, 600), True, "\\\\.\\DISPLAY1"),
    ]
    assert desktop.names() == ["EnumDisplayMonitors", "GetMonitorInfoW", "GetMonitorInfoW"]
    assert [call.args[0] for call in desktop.calls("GetMonitorInfoW")] == [0x52, 0x51]
    assert desktop.created == []  # no DC needed to list monitors


def test_no_monitors_is_an_error() -> None:
    desktop = make_desktop()
    desktop.monitors = []
    with (
        make_backend(desktop, dpi_awareness=False) as backend,
        pytest.raises(CaptureError, match="no monitors"),
    ):
        backend.monitors()


def test_first_grab_sequence_and_pixels(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    rect = Rect(10, 20, 64, 48)
    pixels = backend.grab_bgra(rect)
    assert desktop.names() == [
        "GetDC",
        "CreateCompatibleDC",
        "CreateDIBSection",
        "SelectObject",
        "BitBlt",
        "GdiFlush",
    ]
    screen_dc, memory_dc, dib = desktop.created
    assert desktop.log[1].args == (screen_dc,)
    create = desktop.calls("CreateDIBSection")[0]
    assert create.args[0] == memory_dc
    header = create.args[1].bmiHeader
    assert (header.biWidth, header.biHeight, header.biBitCount, header.biPlanes) == (64, -48, 32, 1)
    assert desktop.calls("SelectObject")[0].args == (memory_dc, dib)
    assert desktop.calls("BitBlt")[0].args == (memory_dc, 0, 0, 64, 48, screen_dc, 10, 20, ROP)
    assert pixels.shape == (48, 64, 4) and pixels.dtype == np.uint8
    np.testing.assert_array_equal(pixels, expected(desktop, rect))
    backend.close()


def test_dib_is_reused_while_the_size_is_unchanged(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    first = backend.grab_bgra(Rect(0, 0, 32, 16))
    del desktop.log[:]
    desktop.screen[120:136, 400:432] = 200  # the screen changes under the same rectangle
    second = backend.grab_bgra(Rect(0, 0, 32, 16))
    assert desktop.names() == ["BitBlt", "GdiFlush"]
    # Zero copy: the same memory (the DIB section's), refreshed in place.
    assert second.__array_interface__["data"][0] == first.__array_interface__["data"][0]
    assert (second[..., :3] == 200).all()
    dib = desktop.created[2]
    address = desktop.bitmaps[dib].memory
    assert (
        second.__array_interface__["data"][0]
        == np.frombuffer(address, np.uint8).__array_interface__["data"][0]
    )
    backend.close()


def test_size_change_selects_out_and_deletes_the_old_dib(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    backend.grab_bgra(Rect(0, 0, 32, 16))
    screen_dc, memory_dc, old_dib = desktop.created
    stock = next(iter(desktop.stock))
    del desktop.log[:]
    rect = Rect(-400, -120, 400, 300)  # the second monitor, negative origin
    pixels = backend.grab_bgra(rect)
    new_dib = desktop.created[3]
    assert desktop.log == [
        Call("gdi32", "SelectObject", (memory_dc, stock)),
        Call("gdi32", "DeleteObject", (old_dib,)),
        desktop.log[2],  # CreateDIBSection (structure arguments)
        Call("gdi32", "SelectObject", (memory_dc, new_dib)),
        Call("gdi32", "BitBlt", (memory_dc, 0, 0, 400, 300, screen_dc, -400, -120, ROP)),
        Call("gdi32", "GdiFlush", ()),
    ]
    np.testing.assert_array_equal(pixels, expected(desktop, rect))
    assert desktop.live() == {screen_dc, memory_dc, new_dib}
    backend.close()


def test_close_releases_everything_once(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    backend.grab_bgra(Rect(0, 0, 8, 8))
    screen_dc, memory_dc, dib = desktop.created
    stock = next(iter(desktop.stock))
    del desktop.log[:]
    backend.close()
    assert desktop.log == [
        Call("gdi32", "SelectObject", (memory_dc, stock)),
        Call("gdi32", "DeleteObject", (dib,)),
        Call("gdi32", "DeleteDC", (memory_dc,)),
        Call("user32", "ReleaseDC", (None, screen_dc)),
    ]
    assert desktop.live() == set()
    backend.close()  # idempotent
    assert len(desktop.log) == 4
    with pytest.raises(CaptureError, match="closed"):
        backend.grab_bgra(Rect(0, 0, 8, 8))
    with pytest.raises(CaptureError, match="closed"):
        backend.cursor()


def test_a_backend_nobody_closed_releases_everything_when_collected(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    backend.grab_bgra(Rect(0, 0, 8, 8))
    screen_dc, memory_dc, dib = desktop.created
    stock = next(iter(desktop.stock))
    del desktop.log[:]
    del backend
    gc.collect()
    assert desktop.log == [
        Call("gdi32", "SelectObject", (memory_dc, stock)),
        Call("gdi32", "DeleteObject", (dib,)),
        Call("gdi32", "DeleteDC", (memory_dc,)),
        Call("user32", "ReleaseDC", (None, screen_dc)),
    ]
    assert desktop.live() == set()


def test_close_attempts_every_release_and_reports_the_first_failure(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    backend.grab_bgra(Rect(0, 0, 8, 8))
    desktop.gdi32.impls["DeleteDC"] = lambda dc: 0
    desktop.gdi32._functions.pop("DeleteDC", None)
    with pytest.raises(CaptureError, match="DeleteDC failed"):
        backend.close()
    assert desktop.names()[-1] == "ReleaseDC"  # still released after the failure


def test_screen_dc_released_when_memory_dc_fails(desktop: FakeDesktop) -> None:
    desktop.gdi32.impls["CreateCompatibleDC"] = lambda dc: 0
    backend = make_backend(desktop, dpi_awareness=False)
    with pytest.raises(CaptureError, match="CreateCompatibleDC failed"):
        backend.grab_bgra(Rect(0, 0, 8, 8))
    assert desktop.names() == ["GetDC", "CreateCompatibleDC", "ReleaseDC"]
    assert desktop.live() == set()


def test_gdi_scaling_uses_halftone_once(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, scale_mode="gdi", dpi_awareness=False)
    assert backend.scale_mode == "gdi"
    rect = Rect(0, 0, 800, 600)
    pixels = backend.grab_scaled(rect, (400, 300))
    screen_dc, memory_dc, _ = desktop.created
    assert desktop.names()[2:] == [
        "CreateDIBSection", "SelectObject", "SetStretchBltMode", "SetBrushOrgEx", "StretchBlt", "GdiFlush",
    ]  # fmt: skip
    assert desktop.calls("SetStretchBltMode")[0].args == (memory_dc, HALFTONE)
    assert desktop.calls("SetBrushOrgEx")[0].args == (memory_dc, 0, 0, None)
    assert desktop.calls("StretchBlt")[0].args == (
        memory_dc,
        0,
        0,
        400,
        300,
        screen_dc,
        0,
        0,
        800,
        600,
        ROP,
    )
    assert pixels.shape == (300, 400, 4)
    np.testing.assert_array_equal(pixels, expected(desktop, rect)[::2, ::2])
    del desktop.log[:]
    backend.grab_scaled(rect, (400, 300))
    assert desktop.names() == ["StretchBlt", "GdiFlush"]
    backend.grab_scaled(Rect(0, 0, 400, 300), (400, 300))  # same size: a plain copy
    assert desktop.names()[-2:] == ["BitBlt", "GdiFlush"]
    with pytest.raises(CaptureError, match="positive"):
        backend.grab_scaled(rect, (0, 10))
    backend.close()
    assert desktop.live() == set()


def test_layered_windows_can_be_left_out(desktop: FakeDesktop) -> None:
    with make_backend(desktop, capture_layered=False, dpi_awareness=False) as backend:
        backend.grab_bgra(Rect(0, 0, 4, 4))
    assert desktop.calls("BitBlt")[0].args[-1] == SRCCOPY


def test_bad_options() -> None:
    desktop = make_desktop()
    with pytest.raises(ConfigError, match="scale_mode"):
        make_backend(desktop, scale_mode="bilinear")
    with pytest.raises(ConfigError, match="cursor_cache_size"):
        make_backend(desktop, cursor_cache_size=0)


def test_thousands_of_grabs_keep_resources_stable(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=False)
    sizes = [Rect(0, 0, 16, 16), Rect(0, 0, 16, 16), Rect(5, 5, 24, 8)]
    for index in range(3000):
        backend.grab_bgra(sizes[index % 3])
        assert len(desktop.live()) == 3  # screen DC, memory DC, one DIB
    backend.close()
    assert desktop.live() == set()
    assert desktop.names().count("CreateDIBSection") == 2000  # recreated only on size changes


# -- cursor ---------------------------------------------------------------------------------


def alpha_cursor() -> FakeCursor:
    colour = np.zeros((32, 32, 4), np.uint8)
    colour[4:20, 6:12] = (10, 20, 30, 255)
    colour[20:24, 6:12] = (40, 50, 60, 128)  # a translucent edge
    mask = np.zeros((32, 32), np.uint8)
    return FakeCursor(hotspot=(6, 4), mask=mask, colour=colour)


def masked_cursor(width: int = 20, height: int = 12) -> FakeCursor:
    rng = np.random.default_rng(3)
    colour = rng.integers(0, 256, size=(height, width, 4), dtype=np.uint8)
    colour[..., 3] = 0  # no alpha channel
    mask = rng.integers(0, 2, size=(height, width), dtype=np.uint8)
    return FakeCursor(hotspot=(1, 2), mask=mask, colour=colour)


def mono_cursor(width: int = 33, height: int = 10) -> FakeCursor:
    rng = np.random.default_rng(5)
    mask = rng.integers(0, 2, size=(2 * height, width), dtype=np.uint8)
    return FakeCursor(hotspot=(0, 0), mask=mask, colour=None)


def cursor_desktop(**cursors: FakeCursor) -> FakeDesktop:
    handles = {name: 0x9000 + i for i, name in enumerate(sorted(cursors))}
    desktop = make_desktop(
        cursors={handles[name]: cursor for name, cursor in cursors.items()},
        cursor_pos=(-5, 7),
    )
    desktop.cursor_handle = handles[sorted(cursors)[0]]
    return desktop


def test_hidden_cursor_is_none() -> None:
    desktop = cursor_desktop(a=alpha_cursor())
    desktop.cursor_flags = 0
    with make_backend(desktop, dpi_awareness=False) as backend:
        assert backend.cursor() is None
    assert desktop.names() == ["GetCursorInfo"]
    desktop.cursor_flags, desktop.cursor_handle = CURSOR_SHOWING, 0
    with make_backend(desktop, dpi_awareness=False) as backend:
        assert backend.cursor() is None


def test_alpha_cursor_is_straight_and_its_bitmaps_are_deleted() -> None:
    source = alpha_cursor()
    desktop = cursor_desktop(a=source)
    backend = make_backend(desktop, dpi_awareness=False)
    image = backend.cursor()
    assert image is not None
    assert image.kind == "straight"
    assert image.hotspot == (6, 4) and image.position == (-5, 7) and image.serial == 0x9000
    np.testing.assert_array_equal(image.pixels, source.colour)
    assert not image.pixels.flags.writeable
    names = desktop.names()
    assert names[:3] == ["GetCursorInfo", "GetDC", "CreateCompatibleDC"]
    assert names[3:] == ["GetIconInfo", "GetObjectW", "GetDIBits", "DeleteObject", "DeleteObject"]
    mask, colour = desktop.created[2], desktop.created[3]
    assert [call.args[0] for call in desktop.calls("DeleteObject")] == [colour, mask]
    assert desktop.calls("GetDIBits")[0].args[0] == desktop.created[0]  # read through the screen DC
    backend.close()
    assert desktop.live() == set()


def test_cursor_cached_per_handle() -> None:
    desktop = cursor_desktop(a=alpha_cursor(), b=masked_cursor())
    backend = make_backend(desktop, dpi_awareness=False)
    first = backend.cursor()
    desktop.cursor_pos = (100, 200)
    del desktop.log[:]
    second = backend.cursor()
    assert desktop.names() == ["GetCursorInfo"]  # no bitmap work for a known handle
    assert first is not None and second is not None
    assert second.position == (100, 200) and second.pixels is first.pixels
    desktop.cursor_handle = 0x9001
    third = backend.cursor()
    assert third is not None and third.serial == 0x9001 and third.kind == "masked"
    assert desktop.names().count("GetIconInfo") == 1
    backend.close()


def test_cursor_cache_is_bounded() -> None:
    desktop = cursor_desktop(a=alpha_cursor(), b=masked_cursor(), c=mono_cursor())
    backend = make_backend(desktop, dpi_awareness=False, cursor_cache_size=2)
    for handle in (0x9000, 0x9001, 0x9002, 0x9001, 0x9000):
        desktop.cursor_handle = handle
        backend.cursor()
    # 0x9000 was evicted by 0x9002 and read again; 0x9001 stayed cached.
    reads = [call.args[0] for call in desktop.calls("GetIconInfo")]
    assert reads == [0x9000, 0x9001, 0x9002, 0x9000]
    backend.close()
    assert desktop.live() == set()


@pytest.mark.parametrize("width", [20, 32, 45])
def test_colour_cursor_without_alpha_is_masked(width: int) -> None:
    source = masked_cursor(width=width)
    desktop = cursor_desktop(a=source)
    with make_backend(desktop, dpi_awareness=False) as backend:
        image = backend.cursor()
    assert image is not None and image.kind == "masked"
    assert source.colour is not None
    np.testing.assert_array_equal(image.pixels[..., :3], source.colour[..., :3])
    np.testing.assert_array_equal(image.pixels[..., 3], source.mask * 255)
    assert desktop.names()[3:] == [
        "GetIconInfo", "GetObjectW", "GetDIBits", "GetDIBits", "DeleteObject", "DeleteObject",
        "DeleteDC", "ReleaseDC",  # close()
    ]  # fmt: skip
    assert desktop.live() == set()


def test_24bpp_colour_cursor_is_masked_even_with_stray_alpha_bytes() -> None:
    source = masked_cursor()
    source.colour_bits = 24
    desktop = cursor_desktop(a=source)
    with make_backend(desktop, dpi_awareness=False) as backend:
        image = backend.cursor()
    assert image is not None and image.kind == "masked"


@pytest.mark.parametrize(("width", "height"), [(32, 32), (33, 10), (7, 3)])
def test_monochrome_cursor_planes(width: int, height: int) -> None:
    source = mono_cursor(width, height)
    desktop = cursor_desktop(a=source)
    with make_backend(desktop, dpi_awareness=False) as backend:
        image = backend.cursor()
    assert image is not None and image.kind == "mono"
    assert image.pixels.shape == (height, width, 2)
    np.testing.assert_array_equal(image.pixels[..., 0], source.mask[:height])  # AND
    np.testing.assert_array_equal(image.pixels[..., 1], source.mask[height:])  # XOR
    assert desktop.names()[3:-2] == ["GetIconInfo", "GetObjectW", "GetDIBits", "DeleteObject"]
    assert desktop.live() == set()


def test_cursor_bitmaps_deleted_when_reading_fails() -> None:
    desktop = cursor_desktop(a=masked_cursor())
    desktop.gdi32.impls["GetDIBits"] = lambda *args: 0
    backend = make_backend(desktop, dpi_awareness=False)
    with pytest.raises(CaptureError, match="GetDIBits failed"):
        backend.cursor()
    assert desktop.names()[-2:] == ["DeleteObject", "DeleteObject"]
    backend.close()
    assert desktop.live() == set()


def test_invalid_cursor_handle_is_a_capture_error() -> None:
    desktop = cursor_desktop(a=alpha_cursor())
    desktop.cursor_handle = 0x1234  # not a cursor the fake knows
    with make_backend(desktop, dpi_awareness=False) as backend, pytest.raises(CaptureError) as info:
        backend.cursor()
    assert info.value.details["function"] == "GetIconInfo"
    assert info.value.details["last_error"] == 1402


def test_cursor_reads_and_grabs_do_not_leak() -> None:
    desktop = cursor_desktop(a=alpha_cursor(), b=masked_cursor(), c=mono_cursor())
    backend = make_backend(desktop, dpi_awareness=False, cursor_cache_size=1)
    for index in range(600):
        desktop.cursor_handle = 0x9000 + index % 3
        backend.cursor()
        backend.grab_bgra(Rect(0, 0, 8 + index % 2, 8))
        assert len(desktop.live()) == 3
    backend.close()
    assert desktop.live() == set()
    assert desktop.names().count("GetIconInfo") == 600
