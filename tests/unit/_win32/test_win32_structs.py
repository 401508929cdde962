"""Win32 structure sizes and field offsets against the documented Windows layouts.

Win64 is what the declarations give on any 64-bit Python (pointer-sized fields are 8
bytes, LONG/DWORD are declared with explicit 4-byte types). The Win32 layout is checked
by rebuilding every structure with pointer-sized fields retargeted to 4-byte integers,
which is exactly what changes on 32-bit Windows.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from deskpilot._win32 import _structs as s
from deskpilot._win32 import _types as t

pytestmark = pytest.mark.skipif(
    ctypes.sizeof(ctypes.c_void_p) != 8, reason="the Win64 table needs a 64-bit Python"
)

# name: (size, {field: offset}) from the C declarations in the Windows SDK headers.
WIN64: dict[str, tuple[int, dict[str, int]]] = {
    "POINT": (8, {"x": 0, "y": 4}),
    "RECT": (16, {"left": 0, "top": 4, "right": 8, "bottom": 12}),
    "RGBQUAD": (4, {"rgbBlue": 0, "rgbGreen": 1, "rgbRed": 2, "rgbReserved": 3}),
    "BITMAPINFOHEADER": (
        40,
        {
            "biSize": 0,
            "biWidth": 4,
            "biHeight": 8,
            "biPlanes": 12,
            "biBitCount": 14,
            "biCompression": 16,
            "biSizeImage": 20,
            "biXPelsPerMeter": 24,
            "biYPelsPerMeter": 28,
            "biClrUsed": 32,
            "biClrImportant": 36,
        },
    ),
    "BITMAPINFO": (44, {"bmiHeader": 0, "bmiColors": 40}),
    "MONOBITMAPINFO": (48, {"bmiHeader": 0, "bmiColors": 40}),
    "BITMAP": (
        32,
        {
            "bmType": 0,
            "bmWidth": 4,
            "bmHeight": 8,
            "bmWidthBytes": 12,
            "bmPlanes": 16,
            "bmBitsPixel": 18,
            "bmBits": 24,
        },
    ),
    "CURSORINFO": (24, {"cbSize": 0, "flags": 4, "hCursor": 8, "ptScreenPos": 16}),
    "ICONINFO": (32, {"fIcon": 0, "xHotspot": 4, "yHotspot": 8, "hbmMask": 16, "hbmColor": 24}),
    "MONITORINFOEXW": (
        104,
        {"cbSize": 0, "rcMonitor": 4, "rcWork": 20, "dwFlags": 36, "szDevice": 40},
    ),
    "MOUSEINPUT": (
        32,
        {"dx": 0, "dy": 4, "mouseData": 8, "dwFlags": 12, "time": 16, "dwExtraInfo": 24},
    ),
    "KEYBDINPUT": (24, {"wVk": 0, "wScan": 2, "dwFlags": 4, "time": 8, "dwExtraInfo": 16}),
    "HARDWAREINPUT": (8, {"uMsg": 0, "wParamL": 4, "wParamH": 6}),
    "INPUT_UNION": (32, {"mi": 0, "ki": 0, "hi": 0}),
    "INPUT": (40, {"type": 0, "u": 8}),
    "MSG": (48, {"hwnd": 0, "message": 8, "wParam": 16, "lParam": 24, "time": 32, "pt": 36}),
    "MSLLHOOKSTRUCT": (32, {"pt": 0, "mouseData": 8, "flags": 12, "time": 16, "dwExtraInfo": 24}),
}

# Only what differs on 32-bit Windows (4-byte pointers, 4-byte alignment).
WIN32: dict[str, tuple[int, dict[str, int]]] = {
    "BITMAP": (24, {"bmPlanes": 16, "bmBitsPixel": 18, "bmBits": 20}),
    "CURSORINFO": (20, {"flags": 4, "hCursor": 8, "ptScreenPos": 12}),
    "ICONINFO": (20, {"yHotspot": 8, "hbmMask": 12, "hbmColor": 16}),
    "MONITORINFOEXW": (104, {"szDevice": 40}),
    "MOUSEINPUT": (24, {"time": 16, "dwExtraInfo": 20}),
    "KEYBDINPUT": (16, {"time": 8, "dwExtraInfo": 12}),
    "INPUT_UNION": (24, {"mi": 0, "ki": 0}),
    "INPUT": (28, {"type": 0, "u": 4}),
    "MSG": (28, {"message": 4, "wParam": 8, "lParam": 12, "time": 16, "pt": 20}),
    "MSLLHOOKSTRUCT": (24, {"time": 16, "dwExtraInfo": 20}),
}

_POINTER_SIZED = {
    ctypes.c_void_p: ctypes.c_uint32,
    ctypes.c_size_t: ctypes.c_uint32,
    ctypes.c_ssize_t: ctypes.c_int32,
}


def as_win32(kind: Any, cache: dict[Any, Any] | None = None) -> Any:
    """The same declaration with 4-byte pointers (structures and arrays rebuilt)."""
    cache = {} if cache is None else cache
    if kind in _POINTER_SIZED:
        return _POINTER_SIZED[kind]
    if isinstance(kind, type) and issubclass(kind, ctypes.Array):
        return as_win32(kind._type_, cache) * kind._length_
    if isinstance(kind, type) and issubclass(kind, (ctypes.Structure, ctypes.Union)):
        if kind not in cache:
            namespace: dict[str, Any] = {
                "_fields_": [(name, as_win32(sub, cache)) for name, sub in kind._fields_]
            }
            if hasattr(kind, "_anonymous_"):
                namespace["_anonymous_"] = kind._anonymous_
            cache[kind] = type(kind.__name__ + "32", (kind.__base__,), namespace)
        return cache[kind]
    return kind


@pytest.mark.parametrize("name", sorted(WIN64))
def test_win64_layout(name: str) -> None:
    struct = getattr(s, name)
    size, offsets = WIN64[name]
    assert ctypes.sizeof(struct) == size
    assert {field: getattr(struct, field).offset for field in offsets} == offsets
    # Every field is listed: no field was added or reordered unnoticed.
    assert [field for field, _ in struct._fields_] == list(offsets)


@pytest.mark.parametrize("name", sorted(WIN32))
def test_win32_layout(name: str) -> None:
    struct = as_win32(getattr(s, name))
    size, offsets = WIN32[name]
    assert ctypes.sizeof(struct) == size
    assert {field: getattr(struct, field).offset for field in offsets} == offsets


def test_structures_without_pointers_are_identical_on_win32() -> None:
    for name in sorted(set(WIN64) - set(WIN32)):
        struct = getattr(s, name)
        assert ctypes.sizeof(as_win32(struct)) == ctypes.sizeof(struct), name


def test_input_array_stride_and_alignment() -> None:
    # SendInput walks the array with cbSize as the stride: it must equal sizeof(INPUT).
    assert ctypes.alignment(s.INPUT) == 8
    assert ctypes.sizeof(s.INPUT * 3) == 120
    assert ctypes.sizeof(as_win32(s.INPUT) * 3) == 84


def test_fixed_width_scalars() -> None:
    # c_long would be 8 bytes on Linux: these must be 4 (Windows LLP64) everywhere.
    for scalar in (t.BOOL, t.DWORD, t.INT, t.LONG, t.UINT, t.HRESULT):
        assert ctypes.sizeof(scalar) == 4, scalar
    assert ctypes.sizeof(t.WORD) == ctypes.sizeof(t.WCHAR16) == 2
    assert ctypes.sizeof(t.BYTE) == 1
    for pointer_sized in (t.HDC, t.HBITMAP, t.HCURSOR, t.LPVOID, t.ULONG_PTR, t.LPARAM):
        assert ctypes.sizeof(pointer_sized) == ctypes.sizeof(ctypes.c_void_p)
    assert t.LONG(-1).value == -1 and t.DWORD(-1).value == 0xFFFFFFFF


def test_anonymous_union_members_reach_the_same_memory() -> None:
    event = s.INPUT()
    event.type = 1
    event.ki.wVk = 0x41
    event.ki.dwFlags = 2
    assert event.u.ki.wVk == 0x41
    raw = bytes(event)
    assert len(raw) == 40
    assert int.from_bytes(raw[0:4], "little") == 1
    assert int.from_bytes(raw[8:10], "little") == 0x41  # wVk at union offset 8
    assert int.from_bytes(raw[12:16], "little") == 2  # dwFlags at 8 + 4


def test_mouse_data_holds_negative_wheel_delta_as_dword() -> None:
    event = s.INPUT()
    event.mi.mouseData = -120 & 0xFFFFFFFF
    assert bytes(event)[16:20] == (-120).to_bytes(4, "little", signed=True)


def test_monitor_device_name_decoding() -> None:
    info = s.MONITORINFOEXW()
    for index, unit in enumerate("\\\\.\\DISPLAY2".encode("utf-16-le")[::2]):
        info.szDevice[index] = unit
    assert info.device_name() == "\\\\.\\DISPLAY2"
    assert s.MONITORINFOEXW().device_name() == ""
