"""Thin ctypes declarations of the user32/kernel32 calls the safety layer makes on Windows.

Declarative on purpose: one sorted prototype table and the two structures, importable
on every OS (structures and the table are plain data), so the foreground-window reader
and the kill-switch watcher can be tested on Linux against recorded fakes that stand in
for ``user32``/``kernel32``. The DLLs are opened lazily, on Windows only, with private
``WinDLL(..., use_last_error=True)`` handles.

Strings cross the boundary as UTF-16 code-unit buffers (``c_uint16`` arrays) rather than
``c_wchar`` (4 bytes on Linux), so the same decoding runs on both OSes.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from ctypes import Structure
from typing import Any, Final

from deskpilot._errors import PlatformError

__all__ = [
    "CFUNCTIONS",
    "MSG",
    "POINT",
    "kernel32",
    "last_error",
    "user32",
    "utf16_buffer",
    "utf16_text",
]

BOOL = ctypes.c_int32
DWORD = ctypes.c_uint32
UINT = ctypes.c_uint32
INT = ctypes.c_int32
LONG = ctypes.c_int32
HWND = ctypes.c_void_p
WPARAM = ctypes.c_size_t
LPARAM = ctypes.c_ssize_t
LPVOID = ctypes.c_void_p

# winuser.h
WM_HOTKEY: Final = 0x0312
WM_QUIT: Final = 0x0012
PM_REMOVE: Final = 0x0001
QS_ALLINPUT: Final = 0x04FF
WAIT_TIMEOUT: Final = 0x00000102
MOD_ALT: Final = 0x0001
MOD_CONTROL: Final = 0x0002
MOD_SHIFT: Final = 0x0004
MOD_WIN: Final = 0x0008
MOD_NOREPEAT: Final = 0x4000
SM_XVIRTUALSCREEN: Final = 76
SM_YVIRTUALSCREEN: Final = 77
SM_CXVIRTUALSCREEN: Final = 78
SM_CYVIRTUALSCREEN: Final = 79
ERROR_HOTKEY_ALREADY_REGISTERED: Final = 1409


class POINT(Structure):
    _fields_ = (("x", LONG), ("y", LONG))


class MSG(Structure):
    _fields_ = (
        ("hwnd", HWND),
        ("message", UINT),
        ("wParam", WPARAM),
        ("lParam", LPARAM),
        ("time", DWORD),
        ("pt", POINT),
        ("lPrivate", DWORD),
    )


#: Function name -> (dll, argtypes, restype). Sorted by name.
CFUNCTIONS: dict[str, tuple[str, tuple[Any, ...], Any]] = {
    "GetClassNameW": ("user32", (HWND, LPVOID, INT), INT),
    "GetCurrentThreadId": ("kernel32", (), DWORD),
    "GetCursorPos": ("user32", (ctypes.POINTER(POINT),), BOOL),
    "GetForegroundWindow": ("user32", (), HWND),
    "GetSystemMetrics": ("user32", (INT,), INT),
    "GetWindowTextLengthW": ("user32", (HWND,), INT),
    "GetWindowTextW": ("user32", (HWND, LPVOID, INT), INT),
    "GetWindowThreadProcessId": ("user32", (HWND, ctypes.POINTER(DWORD)), DWORD),
    "MsgWaitForMultipleObjects": ("user32", (DWORD, LPVOID, BOOL, DWORD, DWORD), DWORD),
    "PeekMessageW": ("user32", (ctypes.POINTER(MSG), HWND, UINT, UINT, UINT), BOOL),
    "PostThreadMessageW": ("user32", (DWORD, UINT, WPARAM, LPARAM), BOOL),
    "RegisterHotKey": ("user32", (HWND, INT, UINT, UINT), BOOL),
    "UnregisterHotKey": ("user32", (HWND, INT), BOOL),
}

_dlls: dict[str, Any] = {}
_lock = threading.Lock()


def _open(name: str) -> Any:
    with _lock:
        dll = _dlls.get(name)
        if dll is not None:
            return dll
        if sys.platform != "win32":
            raise PlatformError(f"{name}.dll exists only on Windows", dll=name)
        dll = ctypes.WinDLL(name, use_last_error=True)
        for fname, (owner, argtypes, restype) in CFUNCTIONS.items():
            if owner == name:
                func = getattr(dll, fname)
                func.argtypes = argtypes
                func.restype = restype
        _dlls[name] = dll
        return dll


def user32() -> Any:
    """The user32 handle with the prototypes of :data:`CFUNCTIONS` (Windows only)."""
    return _open("user32")


def kernel32() -> Any:
    """The kernel32 handle with the prototypes of :data:`CFUNCTIONS` (Windows only)."""
    return _open("kernel32")


def last_error() -> int:
    if sys.platform == "win32":
        return ctypes.get_last_error()
    return 0


def utf16_buffer(chars: int) -> ctypes.Array[ctypes.c_uint16]:
    """A zeroed buffer of ``chars`` UTF-16 code units (for ...W string out-parameters)."""
    return (ctypes.c_uint16 * max(1, chars))()


def utf16_text(buf: ctypes.Array[ctypes.c_uint16], length: int) -> str:
    """The first ``length`` code units of ``buf`` as a str (surrogate pairs joined)."""
    length = max(0, min(length, len(buf)))
    return bytes(buf)[: 2 * length].decode("utf-16-le", errors="replace")
