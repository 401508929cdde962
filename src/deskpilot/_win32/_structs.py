"""Win32 structures, declared with explicit widths so their layout is Windows' on every OS.

Sizes on Win64 (what the unit tests check; Win32 in parentheses):

=================  ==========  =================================================
structure          size        notes
=================  ==========  =================================================
POINT              8 (8)
RECT               16 (16)
BITMAPINFOHEADER   40 (40)
BITMAPINFO         44 (44)     one RGBQUAD; enough for 32 bpp BI_RGB
MONOBITMAPINFO     48 (48)     BITMAPINFO with the two RGBQUADs a 1 bpp DIB needs
BITMAP             32 (24)     bmBits is a pointer, aligned to 8 on Win64
CURSORINFO         24 (20)
ICONINFO           32 (20)     the two HBITMAPs are aligned to 8 on Win64
MONITORINFOEXW     104 (104)
MSG                48 (28)     wParam/lParam are pointer-sized, aligned to 8 on Win64
MOUSEINPUT         32 (24)     dwExtraInfo is a ULONG_PTR
KEYBDINPUT         24 (16)
HARDWAREINPUT      8 (8)
INPUT              40 (28)     the union starts at offset 8 on Win64, 4 on Win32
=================  ==========  =================================================
"""

from __future__ import annotations

import ctypes

from deskpilot._win32._types import (
    BOOL,
    BYTE,
    DWORD,
    HBITMAP,
    HCURSOR,
    HWND,
    LONG,
    LPARAM,
    LPVOID,
    UINT,
    ULONG_PTR,
    WCHAR16,
    WORD,
    WPARAM,
)

__all__ = [
    "BITMAP",
    "BITMAPINFO",
    "BITMAPINFOHEADER",
    "CCHDEVICENAME",
    "CURSORINFO",
    "HARDWAREINPUT",
    "ICONINFO",
    "INPUT",
    "INPUT_UNION",
    "KEYBDINPUT",
    "MONITORINFOEXW",
    "MONOBITMAPINFO",
    "MOUSEINPUT",
    "MSG",
    "MSLLHOOKSTRUCT",
    "POINT",
    "RECT",
    "RGBQUAD",
]

CCHDEVICENAME = 32


class POINT(ctypes.Structure):
    _fields_ = [("x", LONG), ("y", LONG)]
    x: int
    y: int


class RECT(ctypes.Structure):
    _fields_ = [("left", LONG), ("top", LONG), ("right", LONG), ("bottom", LONG)]
    left: int
    top: int
    right: int
    bottom: int


class RGBQUAD(ctypes.Structure):
    _fields_ = [
        ("rgbBlue", BYTE),
        ("rgbGreen", BYTE),
        ("rgbRed", BYTE),
        ("rgbReserved", BYTE),
    ]
    rgbBlue: int
    rgbGreen: int
    rgbRed: int
    rgbReserved: int


class BITMAPINFOHEADER(ctypes.Structure):
    _fields_ = [
        ("biSize", DWORD),
        ("biWidth", LONG),
        ("biHeight", LONG),  # negative: top-down rows
        ("biPlanes", WORD),
        ("biBitCount", WORD),
        ("biCompression", DWORD),
        ("biSizeImage", DWORD),
        ("biXPelsPerMeter", LONG),
        ("biYPelsPerMeter", LONG),
        ("biClrUsed", DWORD),
        ("biClrImportant", DWORD),
    ]
    biSize: int
    biWidth: int
    biHeight: int
    biPlanes: int
    biBitCount: int
    biCompression: int
    biSizeImage: int
    biXPelsPerMeter: int
    biYPelsPerMeter: int
    biClrUsed: int
    biClrImportant: int


class BITMAPINFO(ctypes.Structure):
    # bmiColors is variable length in C; a 32 bpp BI_RGB DIB uses none, C declares one.
    _fields_ = [("bmiHeader", BITMAPINFOHEADER), ("bmiColors", RGBQUAD * 1)]
    bmiHeader: BITMAPINFOHEADER
    bmiColors: ctypes.Array[RGBQUAD]


class MONOBITMAPINFO(ctypes.Structure):
    # GetDIBits writes the two-entry colour table of a 1 bpp DIB after the header; a
    # one-entry BITMAPINFO would let it write past the end of the structure.
    _fields_ = [("bmiHeader", BITMAPINFOHEADER), ("bmiColors", RGBQUAD * 2)]
    bmiHeader: BITMAPINFOHEADER
    bmiColors: ctypes.Array[RGBQUAD]


class BITMAP(ctypes.Structure):
    _fields_ = [
        ("bmType", LONG),
        ("bmWidth", LONG),
        ("bmHeight", LONG),
        ("bmWidthBytes", LONG),
        ("bmPlanes", WORD),
        ("bmBitsPixel", WORD),
        ("bmBits", LPVOID),
    ]
    bmType: int
    bmWidth: int
    bmHeight: int
    bmWidthBytes: int
    bmPlanes: int
    bmBitsPixel: int
    bmBits: int | None


class CURSORINFO(ctypes.Structure):
    _fields_ = [
        ("cbSize", DWORD),
        ("flags", DWORD),
        ("hCursor", HCURSOR),
        ("ptScreenPos", POINT),
    ]
    cbSize: int
    flags: int
    hCursor: int | None
    ptScreenPos: POINT


class ICONINFO(ctypes.Structure):
    _fields_ = [
        ("fIcon", BOOL),
        ("xHotspot", DWORD),
        ("yHotspot", DWORD),
        ("hbmMask", HBITMAP),
        ("hbmColor", HBITMAP),
    ]
    fIcon: int
    xHotspot: int
    yHotspot: int
    hbmMask: int | None
    hbmColor: int | None


class MONITORINFOEXW(ctypes.Structure):
    _fields_ = [
        ("cbSize", DWORD),
        ("rcMonitor", RECT),
        ("rcWork", RECT),
        ("dwFlags", DWORD),
        ("szDevice", WCHAR16 * CCHDEVICENAME),
    ]
    cbSize: int
    rcMonitor: RECT
    rcWork: RECT
    dwFlags: int
    szDevice: ctypes.Array[ctypes.c_uint16]

    def device_name(self) -> str:
        """``szDevice`` decoded (UTF-16, up to the first NUL), e.g. ``\\\\.\\DISPLAY1``."""
        units = bytes(memoryview(self.szDevice).cast("B"))
        return units.decode("utf-16-le", errors="replace").split("\0", 1)[0]


class MOUSEINPUT(ctypes.Structure):
    _fields_ = [
        ("dx", LONG),
        ("dy", LONG),
        ("mouseData", DWORD),  # wheel delta: a signed value stored in a DWORD
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    ]
    dx: int
    dy: int
    mouseData: int
    dwFlags: int
    time: int
    dwExtraInfo: int


class KEYBDINPUT(ctypes.Structure):
    _fields_ = [
        ("wVk", WORD),
        ("wScan", WORD),  # scan code, or the UTF-16 code unit with KEYEVENTF_UNICODE
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    ]
    wVk: int
    wScan: int
    dwFlags: int
    time: int
    dwExtraInfo: int


class HARDWAREINPUT(ctypes.Structure):
    _fields_ = [("uMsg", DWORD), ("wParamL", WORD), ("wParamH", WORD)]
    uMsg: int
    wParamL: int
    wParamH: int


class INPUT_UNION(ctypes.Union):
    # The union's size is its largest member (MOUSEINPUT); its alignment is that of
    # ULONG_PTR, which is what puts it at offset 8 on Win64 and makes INPUT 40 bytes.
    _fields_ = [("mi", MOUSEINPUT), ("ki", KEYBDINPUT), ("hi", HARDWAREINPUT)]
    mi: MOUSEINPUT
    ki: KEYBDINPUT
    hi: HARDWAREINPUT


class INPUT(ctypes.Structure):
    _anonymous_ = ("u",)
    _fields_ = [("type", DWORD), ("u", INPUT_UNION)]
    type: int
    u: INPUT_UNION
    mi: MOUSEINPUT
    ki: KEYBDINPUT
    hi: HARDWAREINPUT


class MSG(ctypes.Structure):
    """A thread message queue entry (PeekMessageW); WM_HOTKEY carries the id in wParam."""

    _fields_ = [
        ("hwnd", HWND),
        ("message", UINT),
        ("wParam", WPARAM),
        ("lParam", LPARAM),
        ("time", DWORD),
        ("pt", POINT),
        # (lPrivate exists only in the _MAC build of winuser.h.)
    ]
    hwnd: int | None
    message: int
    wParam: int
    lParam: int
    time: int
    pt: POINT


class MSLLHOOKSTRUCT(ctypes.Structure):
    """What a low-level mouse hook (WH_MOUSE_LL) is given: ``pt`` in per-monitor-aware
    screen coordinates (physical pixels in a per-monitor-aware process)."""

    _fields_ = [
        ("pt", POINT),
        ("mouseData", DWORD),
        ("flags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    ]
    pt: POINT
    mouseData: int
    flags: int
    time: int
    dwExtraInfo: int
