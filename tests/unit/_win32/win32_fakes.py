"""Recorded fakes of user32/gdi32/shcore for the Win32 unit tests (any OS).

A :class:`FakeDLL` behaves like a ctypes DLL as far as deskpilot's
:class:`~deskpilot._win32._library.Library` can tell: attribute access returns function
objects that accept ``argtypes``/``restype``/``errcheck`` assignments. Calling one

1. checks the argument count against ``argtypes`` and converts every argument with
   ``argtype.from_param`` (so a wrong type fails here as it would in ctypes),
2. appends ``Call(dll, name, args)`` to a log shared by all fakes of a :class:`FakeDesktop`,
3. runs the scripted implementation,
4. turns a NULL ``c_void_p`` result into ``None`` (as ctypes does) and runs ``errcheck``.

A function without an implementation is missing from the DLL (AttributeError), like an
export an older Windows lacks.

:class:`FakeDesktop` is a tiny GDI/USER emulator behind those fakes: a virtual desktop
image with monitors, DCs, DIB sections with real memory, BitBlt/StretchBlt copying from
the "screen", cursors made of mask/colour bitmaps, SendInput decoding with the pointer
moved the way Windows maps normalized absolute coordinates, and leak accounting (every
created GDI object and DC, and whether it was deleted/released).
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deskpilot._win32 import _constants as c
from deskpilot._win32._library import Library
from deskpilot._win32._structs import (
    BITMAP,
    BITMAPINFOHEADER,
    CURSORINFO,
    ICONINFO,
    INPUT,
    MONITORINFOEXW,
    MONOBITMAPINFO,
    POINT,
    RECT,
)
from deskpilot._win32._system import PROTOTYPES


@dataclass(frozen=True)
class Call:
    dll: str
    name: str
    args: tuple[Any, ...]


class FakeFunction:
    def __init__(self, dll: FakeDLL, name: str, impl: Callable[..., Any]) -> None:
        self.__name__ = name
        self._dll = dll
        self._impl = impl
        self.argtypes: tuple[Any, ...] | None = None
        self.restype: Any = ctypes.c_int
        self.errcheck: Callable[[Any, Any, tuple[Any, ...]], Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.argtypes is not None:
            if len(args) != len(self.argtypes):
                raise TypeError(
                    f"{self.__name__}: {len(args)} arguments, prototype has {len(self.argtypes)}"
                )
            for argtype, arg in zip(self.argtypes, args, strict=True):
                argtype.from_param(arg)  # raises like ctypes on a wrong type
        self._dll.log.append(Call(self._dll.name, self.__name__, args))
        result = self._impl(*args)
        if self.restype is ctypes.c_void_p and not result:
            result = None
        if self.errcheck is not None:
            result = self.errcheck(result, self, args)
        return result


class FakeDLL:
    def __init__(self, name: str, log: list[Call], impls: dict[str, Callable[..., Any]]) -> None:
        self.name = name
        self.log = log
        self.impls = impls
        self.last_error = 0
        self._functions: dict[str, FakeFunction] = {}

    def __getattr__(self, name: str) -> FakeFunction:
        if name.startswith("_") or name not in self.impls:
            raise AttributeError(f"function '{name}' not found")
        function = self._functions.get(name)
        if function is None:
            function = self._functions[name] = FakeFunction(self, name, self.impls[name])
        return function

    def get_last_error(self) -> int:
        return self.last_error

    def library(self) -> Library:
        return Library(self.name, PROTOTYPES[self.name], dll=self, last_error=self.get_last_error)  # type: ignore[index]


def target(arg: Any) -> Any:
    """The object behind a byref()/pointer argument (or the argument itself)."""
    if hasattr(arg, "_obj"):
        return arg._obj
    if isinstance(arg, ctypes._Pointer):
        return arg.contents
    return arg


@dataclass
class FakeBitmap:
    width: int
    height: int
    bits_pixel: int
    pixels: np.ndarray  # HxWx4 uint8 for 32 bpp; HxW 0/1 uint8 for 1 bpp
    memory: Any = None  # the DIB section's ctypes buffer


@dataclass
class FakeCursor:
    hotspot: tuple[int, int]
    mask: np.ndarray  # HxW (colour cursors) or 2HxW (monochrome) of 0/1
    colour: np.ndarray | None  # HxWx4 uint8, None for monochrome cursors
    colour_bits: int = 32


@dataclass
class FakeMonitor:
    handle: int
    rect: tuple[int, int, int, int]  # left, top, right, bottom
    primary: bool
    device: str


@dataclass
class Decoded:
    """One INPUT event read back from the array SendInput received."""

    type: int
    dx: int = 0
    dy: int = 0
    mouse_data: int = 0  # signed
    flags: int = 0
    vk: int = 0
    scan: int = 0


def decode_inputs(count: int, array: Any, size: int) -> list[Decoded]:
    assert size == ctypes.sizeof(INPUT), size
    events = (INPUT * count).from_buffer(array) if not isinstance(array, INPUT) else [array]
    decoded = []
    for event in events:
        if event.type == c.INPUT_MOUSE:
            data = event.mi.mouseData
            decoded.append(
                Decoded(
                    type=event.type,
                    dx=event.mi.dx,
                    dy=event.mi.dy,
                    mouse_data=data - (1 << 32) if data & 0x80000000 else data,
                    flags=event.mi.dwFlags,
                )
            )
        else:
            decoded.append(
                Decoded(
                    type=event.type, flags=event.ki.dwFlags, vk=event.ki.wVk, scan=event.ki.wScan
                )
            )
    return decoded


@dataclass
class FakeDesktop:
    """A scripted Windows desktop behind fake user32/gdi32/shcore DLLs."""

    screen: np.ndarray = field(default_factory=lambda: np.zeros((1, 1, 4), np.uint8))
    origin: tuple[int, int] = (0, 0)  # virtual-desktop coordinates of screen[0, 0]
    monitors: list[FakeMonitor] = field(default_factory=list)
    cursor_flags: int = c.CURSOR_SHOWING
    cursor_handle: int = 0
    cursor_pos: tuple[int, int] = (0, 0)
    cursors: dict[int, FakeCursor] = field(default_factory=dict)
    swap_buttons: bool = False
    sendinput_result: int | None = None  # None: all events inserted

    def __post_init__(self) -> None:
        self.log: list[Call] = []
        self._handles = itertools.count(0x1000, 0x10)
        self.bitmaps: dict[int, FakeBitmap] = {}
        self.dcs: dict[int, str] = {}  # handle -> "screen" | "memory"
        self.selected: dict[int, int] = {}  # memory DC -> bitmap handle
        self.stock: set[int] = set()
        self.created: list[int] = []  # every GDI object/DC handle created, in order
        self.freed: list[int] = []  # deleted objects, deleted/released DCs
        self.inputs: list[list[Decoded]] = []  # one list per SendInput call
        self.stretch_mode = 1  # BLACKONWHITE
        self.user32 = FakeDLL("user32", self.log, self._user32_impls())
        self.gdi32 = FakeDLL("gdi32", self.log, self._gdi32_impls())
        # DPI functions are scripted per test: ``desktop.user32.impls[name] = ...``.
        self.shcore = FakeDLL("shcore", self.log, {})

    # -- helpers -------------------------------------------------------------------------
    def libraries(self) -> dict[str, Library]:
        return {
            "user32": self.user32.library(),
            "gdi32": self.gdi32.library(),
            "shcore": self.shcore.library(),
        }

    def names(self) -> list[str]:
        return [call.name for call in self.log]

    def calls(self, name: str) -> list[Call]:
        return [call for call in self.log if call.name == name]

    def live(self) -> set[int]:
        """Created and not yet freed (stock objects excluded)."""
        return set(self.created) - set(self.freed)

    def _new(self) -> int:
        handle = next(self._handles)
        self.created.append(handle)
        return handle

    def _fail(self, code: int = 0) -> int:
        self.user32.last_error = self.gdi32.last_error = code
        return 0

    def bounds(self) -> tuple[int, int, int, int]:
        height, width = self.screen.shape[:2]
        return self.origin[0], self.origin[1], width, height

    # -- user32 --------------------------------------------------------------------------
    def _user32_impls(self) -> dict[str, Callable[..., Any]]:
        return {
            "EnumDisplayMonitors": self._enum_display_monitors,
            "GetCursorInfo": self._get_cursor_info,
            "GetCursorPos": self._get_cursor_pos,
            "GetDC": self._get_dc,
            "GetIconInfo": self._get_icon_info,
            "GetMonitorInfoW": self._get_monitor_info,
            "GetSystemMetrics": self._get_system_metrics,
            "MapVirtualKeyW": lambda vk, kind: {0x0D: 0x1C, 0x09: 0x0F}.get(vk, (vk * 7) & 0x7F),
            "ReleaseDC": self._release_dc,
            "SendInput": self._send_input,
        }

    def _enum_display_monitors(self, hdc: Any, clip: Any, callback: Any, data: int) -> int:
        for monitor in self.monitors:
            rect = RECT(*monitor.rect)
            if not callback(monitor.handle, None, ctypes.pointer(rect), data):
                break
        return 1

    def _get_monitor_info(self, handle: int, info: MONITORINFOEXW) -> int:
        info = target(info)
        assert info.cbSize == ctypes.sizeof(MONITORINFOEXW)
        for monitor in self.monitors:
            if monitor.handle == handle:
                info.rcMonitor = RECT(*monitor.rect)
                info.rcWork = RECT(*monitor.rect)
                info.dwFlags = c.MONITORINFOF_PRIMARY if monitor.primary else 0
                for i, unit in enumerate(monitor.device.encode("utf-16-le")[::2]):
                    info.szDevice[i] = unit
                return 1
        return self._fail(c.ERROR_INVALID_PARAMETER)

    def _get_system_metrics(self, index: int) -> int:
        left, top, width, height = self.bounds()
        return {
            c.SM_XVIRTUALSCREEN: left,
            c.SM_YVIRTUALSCREEN: top,
            c.SM_CXVIRTUALSCREEN: width,
            c.SM_CYVIRTUALSCREEN: height,
            c.SM_SWAPBUTTON: int(self.swap_buttons),
        }.get(index, 0)

    def _get_dc(self, hwnd: Any) -> int:
        assert hwnd is None, "only the screen DC is used"
        handle = self._new()
        self.dcs[handle] = "screen"
        return handle

    def _release_dc(self, hwnd: Any, hdc: int) -> int:
        if self.dcs.get(hdc) != "screen" or hdc in self.freed:
            return 0
        self.freed.append(hdc)
        return 1

    def _get_cursor_info(self, info: CURSORINFO) -> int:
        info = target(info)
        assert info.cbSize == ctypes.sizeof(CURSORINFO)
        info.flags = self.cursor_flags
        info.hCursor = self.cursor_handle or None
        info.ptScreenPos = POINT(*self.cursor_pos)
        return 1

    def _get_cursor_pos(self, point: POINT) -> int:
        point = target(point)
        point.x, point.y = self.cursor_pos
        return 1

    def _get_icon_info(self, handle: int, info: ICONINFO) -> int:
        info = target(info)
        cursor = self.cursors.get(handle)
        if cursor is None:
            return self._fail(1402)  # ERROR_INVALID_CURSOR_HANDLE
        info.fIcon = 0
        info.xHotspot, info.yHotspot = cursor.hotspot
        mask = self._new()
        self.bitmaps[mask] = FakeBitmap(
            cursor.mask.shape[1], cursor.mask.shape[0], 1, cursor.mask.copy()
        )
        info.hbmMask = mask
        info.hbmColor = None
        if cursor.colour is not None:
            colour = self._new()
            height, width = cursor.colour.shape[:2]
            self.bitmaps[colour] = FakeBitmap(
                width, height, cursor.colour_bits, cursor.colour.copy()
            )
            info.hbmColor = colour
        return 1

    def _send_input(self, count: int, array: Any, size: int) -> int:
        events = decode_inputs(count, array, size)
        self.inputs.append(events)
        left, top, width, height = self.bounds()
        for event in events:
            if event.type == c.INPUT_MOUSE and event.flags & c.MOUSEEVENTF_MOVE:
                assert (
                    event.flags & c.MOUSEEVENTF_ABSOLUTE and event.flags & c.MOUSEEVENTF_VIRTUALDESK
                )
                # How Windows maps normalized absolute coordinates onto the virtual desktop.
                self.cursor_pos = (
                    left + event.dx * width // 65536,
                    top + event.dy * height // 65536,
                )
        if self.sendinput_result is not None:
            self.user32.last_error = c.ERROR_ACCESS_DENIED
            return self.sendinput_result
        return count

    # -- gdi32 ---------------------------------------------------------------------------
    def _gdi32_impls(self) -> dict[str, Callable[..., Any]]:
        return {
            "BitBlt": self._bitblt,
            "CreateCompatibleDC": self._create_compatible_dc,
            "CreateDIBSection": self._create_dib_section,
            "DeleteDC": self._delete_dc,
            "DeleteObject": self._delete_object,
            "GdiFlush": lambda: 1,
            "GetDIBits": self._get_dibits,
            "GetObjectW": self._get_object,
            "SelectObject": self._select_object,
            "SetBrushOrgEx": lambda hdc, x, y, old: 1,
            "SetStretchBltMode": self._set_stretch_blt_mode,
            "StretchBlt": self._stretch_blt,
        }

    def _create_compatible_dc(self, hdc: int) -> int:
        assert self.dcs.get(hdc) == "screen"
        handle = self._new()
        self.dcs[handle] = "memory"
        stock = next(self._handles)  # the 1x1 stock bitmap every new memory DC holds
        self.stock.add(stock)
        self.bitmaps[stock] = FakeBitmap(1, 1, 1, np.zeros((1, 1), np.uint8))
        self.selected[handle] = stock
        return handle

    def _delete_dc(self, hdc: int) -> int:
        if self.dcs.get(hdc) != "memory" or hdc in self.freed:
            return self._fail(c.ERROR_INVALID_PARAMETER)
        self.freed.append(hdc)
        self.selected.pop(hdc, None)
        return 1

    def _create_dib_section(
        self, hdc: int, info: Any, usage: int, bits: Any, section: Any, offset: int
    ) -> int:
        header: BITMAPINFOHEADER = target(info).bmiHeader
        assert header.biSize == 40 and header.biPlanes == 1 and header.biBitCount == 32
        assert header.biHeight < 0, "captures use top-down DIBs"
        assert usage == c.DIB_RGB_COLORS and section is None and offset == 0
        width, height = header.biWidth, -header.biHeight
        memory = (ctypes.c_uint8 * (width * height * 4))()
        pixels = np.frombuffer(memory, dtype=np.uint8).reshape(height, width, 4)
        handle = self._new()
        self.bitmaps[handle] = FakeBitmap(width, height, 32, pixels, memory)
        target(bits).value = ctypes.addressof(memory)
        return handle

    def _select_object(self, hdc: int, obj: int) -> int:
        if self.dcs.get(hdc) != "memory" or obj not in self.bitmaps:
            return 0
        for other_dc, bitmap in self.selected.items():
            if bitmap == obj and other_dc != hdc:
                return 0  # a bitmap can be selected into one DC at a time
        previous = self.selected[hdc]
        self.selected[hdc] = obj
        return previous

    def _delete_object(self, obj: int) -> int:
        if obj not in self.bitmaps or obj in self.freed or obj in self.stock:
            return self._fail(c.ERROR_INVALID_PARAMETER)
        if obj in self.selected.values():
            return 0  # GDI refuses to delete a bitmap selected into a DC
        self.freed.append(obj)
        return 1

    def _screen_region(self, x: int, y: int, width: int, height: int) -> np.ndarray:
        """Screen pixels of a virtual-desktop rectangle (black outside), alpha 0."""
        region = np.zeros((height, width, 4), np.uint8)
        sx, sy = x - self.origin[0], y - self.origin[1]
        sh, sw = self.screen.shape[:2]
        x0, y0, x1, y1 = max(sx, 0), max(sy, 0), min(sx + width, sw), min(sy + height, sh)
        if x1 > x0 and y1 > y0:
            region[y0 - sy : y1 - sy, x0 - sx : x1 - sx] = self.screen[y0:y1, x0:x1]
        region[..., 3] = 0
        return region

    def _bitblt(
        self, dst: int, x: int, y: int, w: int, h: int, src: int, sx: int, sy: int, rop: int
    ) -> int:
        assert self.dcs.get(src) == "screen" and self.dcs.get(dst) == "memory"
        bitmap = self.bitmaps[self.selected[dst]]
        bitmap.pixels[y : y + h, x : x + w] = self._screen_region(sx, sy, w, h)
        return 1

    def _set_stretch_blt_mode(self, hdc: int, mode: int) -> int:
        previous, self.stretch_mode = self.stretch_mode, mode
        return previous

    def _stretch_blt(
        self,
        dst: int,
        x: int,
        y: int,
        w: int,
        h: int,
        src: int,
        sx: int,
        sy: int,
        sw: int,
        sh: int,
        rop: int,
    ) -> int:
        assert self.dcs.get(src) == "screen" and self.dcs.get(dst) == "memory"
        region = self._screen_region(sx, sy, sw, sh)
        rows = (np.arange(h) * sh) // h
        cols = (np.arange(w) * sw) // w
        self.bitmaps[self.selected[dst]].pixels[y : y + h, x : x + w] = region[rows][:, cols]
        return 1

    def _get_object(self, obj: int, size: int, out: Any) -> int:
        bitmap = self.bitmaps.get(obj)
        if bitmap is None or obj in self.freed:
            return 0
        info: BITMAP = target(out)
        assert size == ctypes.sizeof(BITMAP)
        info.bmType = 0
        info.bmWidth, info.bmHeight = bitmap.width, bitmap.height
        info.bmBitsPixel = bitmap.bits_pixel
        info.bmPlanes = 1
        info.bmWidthBytes = (bitmap.width * bitmap.bits_pixel + 15) // 16 * 2
        return ctypes.sizeof(BITMAP)

    def _get_dibits(
        self, hdc: int, obj: int, start: int, lines: int, bits: int, info: Any, usage: int
    ) -> int:
        bitmap = self.bitmaps.get(obj)
        if bitmap is None or obj in self.freed or obj in self.selected.values():
            return 0
        bmi = target(info)
        header: BITMAPINFOHEADER = bmi.bmiHeader
        assert (
            header.biHeight < 0
            and header.biWidth == bitmap.width
            and -header.biHeight == bitmap.height
        )
        assert start == 0 and lines == bitmap.height and usage == c.DIB_RGB_COLORS
        if header.biBitCount == 32:
            assert bitmap.bits_pixel in (24, 32), "colour requested from a mask bitmap"
            data = bitmap.pixels.copy()
            if bitmap.bits_pixel != 32:
                data[..., 3] = 0  # no alpha channel below 32 bpp
            ctypes.memmove(bits, data.tobytes(), data.size)
        elif header.biBitCount == 1:
            assert isinstance(bmi, MONOBITMAPINFO), "a 1 bpp DIB needs room for two RGBQUADs"
            assert bitmap.bits_pixel == 1
            stride = (bitmap.width + 31) // 32 * 4
            packed = np.zeros((bitmap.height, stride), np.uint8)
            row_bytes = np.packbits(bitmap.pixels.astype(np.uint8), axis=1)
            packed[:, : row_bytes.shape[1]] = row_bytes
            ctypes.memmove(bits, packed.tobytes(), packed.size)
            bmi.bmiColors[0].rgbRed = bmi.bmiColors[0].rgbGreen = bmi.bmiColors[0].rgbBlue = 0
            bmi.bmiColors[1].rgbRed = bmi.bmiColors[1].rgbGreen = bmi.bmiColors[1].rgbBlue = 255
        else:  # pragma: no cover - the backend only asks for 1 or 32 bpp
            raise AssertionError(header.biBitCount)
        return lines
