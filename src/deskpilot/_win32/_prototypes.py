"""The prototype tables: one per DLL, each sorted by function name.

Every function deskpilot calls in a system DLL is declared here, once: the GDI capture,
SendInput, DPI awareness, and the kill switch and foreground-window reader of
:mod:`deskpilot.safety`. A row without a check says in a comment why its result has no
failure value (or why a failure is harmless where it is called).

Syntax of a row: ``"Function": Prototype(argtypes, restype, check, error class)``.
``check`` says what failure looks like (see :class:`~deskpilot._win32._library.Check`);
the error class is what the errcheck raises: capture functions raise
:class:`~deskpilot._errors.CaptureError`, input functions
:class:`~deskpilot._errors.InputError`, the rest :class:`~deskpilot._errors.PlatformError`.

Pointer-to-structure parameters are declared ``POINTER(STRUCT)`` so callers may pass the
structure itself (ctypes passes it by reference). ``GetDIBits`` and ``GetObjectW`` take a
``c_void_p`` because they are given differently sized structures; callers pass
``ctypes.byref(...)``.
"""

from __future__ import annotations

import ctypes
from typing import Final

from deskpilot._errors import CaptureError, InputError, PlatformError
from deskpilot._win32._library import Check, Prototype
from deskpilot._win32._structs import (
    BITMAPINFO,
    CURSORINFO,
    ICONINFO,
    INPUT,
    MONITORINFOEXW,
    MSG,
    POINT,
    RECT,
)
from deskpilot._win32._types import (
    BOOL,
    DPI_AWARENESS_CONTEXT,
    DWORD,
    HBITMAP,
    HDC,
    HGDIOBJ,
    HICON,
    HMONITOR,
    HRESULT,
    HWND,
    INT,
    LPARAM,
    LPVOID,
    PROCESS_HANDLE,
    UINT,
    WINFUNCTYPE,
    WPARAM,
)

__all__ = [
    "GDI32_PROTOTYPES",
    "HOOKPROC",
    "KERNEL32_PROTOTYPES",
    "MONITORENUMPROC",
    "SHCORE_PROTOTYPES",
    "USER32_PROTOTYPES",
]

#: BOOL CALLBACK MonitorEnumProc(HMONITOR, HDC, LPRECT, LPARAM)
MONITORENUMPROC = WINFUNCTYPE(BOOL, HMONITOR, HDC, ctypes.POINTER(RECT), LPARAM)
#: LRESULT CALLBACK LowLevelMouseProc(int nCode, WPARAM, LPARAM): a hook procedure.
HOOKPROC = WINFUNCTYPE(LPARAM, INT, WPARAM, LPARAM)

_NONZERO, _SELECTED, _HRESULT, _ALL_SENT, _WAIT = (
    Check.NONZERO,
    Check.SELECTED,
    Check.HRESULT,
    Check.ALL_SENT,
    Check.WAIT,
)

GDI32_PROTOTYPES: Final[dict[str, Prototype]] = {
    "BitBlt": Prototype(
        (HDC, INT, INT, INT, INT, HDC, INT, INT, DWORD), BOOL, _NONZERO, CaptureError
    ),
    "CreateCompatibleDC": Prototype((HDC,), HDC, _NONZERO, CaptureError),
    # ppvBits receives the address of the pixels; hSection NULL lets GDI allocate them.
    "CreateDIBSection": Prototype(
        (HDC, ctypes.POINTER(BITMAPINFO), UINT, ctypes.POINTER(LPVOID), LPVOID, DWORD),
        HBITMAP,
        _NONZERO,
        CaptureError,
    ),
    "DeleteDC": Prototype((HDC,), BOOL, _NONZERO, CaptureError),
    "DeleteObject": Prototype((HGDIOBJ,), BOOL, _NONZERO, CaptureError),
    # Flushes the thread's GDI batch so the DIB memory holds the BitBlt result. Its FALSE
    # only says some batched call failed, which that call's own check already reported.
    "GdiFlush": Prototype((), BOOL),
    # Returns the number of scan lines copied; 0 is failure.
    "GetDIBits": Prototype(
        (HDC, HBITMAP, UINT, UINT, LPVOID, LPVOID, UINT), INT, _NONZERO, CaptureError
    ),
    # Returns the number of bytes stored; 0 is failure.
    "GetObjectW": Prototype((HGDIOBJ, INT, LPVOID), INT, _NONZERO, CaptureError),
    "SelectObject": Prototype((HDC, HGDIOBJ), HGDIOBJ, _SELECTED, CaptureError),
    "SetBrushOrgEx": Prototype(
        (HDC, INT, INT, ctypes.POINTER(POINT)), BOOL, _NONZERO, CaptureError
    ),
    # Returns the previous mode; 0 is failure.
    "SetStretchBltMode": Prototype((HDC, INT), INT, _NONZERO, CaptureError),
    "StretchBlt": Prototype(
        (HDC, INT, INT, INT, INT, HDC, INT, INT, INT, INT, DWORD), BOOL, _NONZERO, CaptureError
    ),
}

KERNEL32_PROTOTYPES: Final[dict[str, Prototype]] = {
    # A pseudo-handle ((HANDLE)-1) that never needs closing; cannot fail.
    "GetCurrentProcess": Prototype((), PROCESS_HANDLE),
    # Cannot fail.
    "GetCurrentThreadId": Prototype((), DWORD),
    # NULL names the program's own module, which always exists.
    "GetModuleHandleW": Prototype((LPVOID,), LPVOID, _NONZERO, PlatformError),
}

SHCORE_PROTOTYPES: Final[dict[str, Prototype]] = {
    "GetProcessDpiAwareness": Prototype((PROCESS_HANDLE, ctypes.POINTER(INT)), HRESULT, _HRESULT),
    "SetProcessDpiAwareness": Prototype((INT,), HRESULT, _HRESULT),
}

USER32_PROTOTYPES: Final[dict[str, Prototype]] = {
    # The comparison itself: FALSE means "not equal" (an invalid context compares unequal).
    "AreDpiAwarenessContextsEqual": Prototype((DPI_AWARENESS_CONTEXT, DPI_AWARENESS_CONTEXT), BOOL),
    # The next hook's answer, passed on as is: no failure value.
    "CallNextHookEx": Prototype((LPVOID, INT, WPARAM, LPARAM), LPARAM),
    "EnumDisplayMonitors": Prototype(
        (HDC, ctypes.POINTER(RECT), MONITORENUMPROC, LPARAM), BOOL, _NONZERO, CaptureError
    ),
    # Returns DPI_AWARENESS_INVALID (-1) for an invalid context; no GetLastError.
    "GetAwarenessFromDpiAwarenessContext": Prototype((DPI_AWARENESS_CONTEXT,), INT),
    # Every window has a class, so 0 means failure: the window closed after
    # GetForegroundWindow returned it (ERROR_INVALID_WINDOW_HANDLE).
    "GetClassNameW": Prototype((HWND, LPVOID, INT), INT, _NONZERO, PlatformError),
    "GetCursorInfo": Prototype((ctypes.POINTER(CURSORINFO),), BOOL, _NONZERO, CaptureError),
    "GetCursorPos": Prototype((ctypes.POINTER(POINT),), BOOL, _NONZERO, InputError),
    "GetDC": Prototype((HWND,), HDC, _NONZERO, CaptureError),
    # Windows 10 1803+; NULL means failure (an invalid process handle).
    "GetDpiAwarenessContextForProcess": Prototype(
        (PROCESS_HANDLE,), DPI_AWARENESS_CONTEXT, _NONZERO, PlatformError
    ),
    # NULL is an answer, not a failure: no window is in the foreground while activation
    # moves between windows or the desktop is locked.
    "GetForegroundWindow": Prototype((), HWND),
    # 0 is both "no objects" and failure, so it is not checked.
    "GetGuiResources": Prototype((PROCESS_HANDLE, DWORD), DWORD),
    "GetIconInfo": Prototype((HICON, ctypes.POINTER(ICONINFO)), BOOL, _NONZERO, CaptureError),
    "GetMonitorInfoW": Prototype(
        (HMONITOR, ctypes.POINTER(MONITORINFOEXW)), BOOL, _NONZERO, CaptureError
    ),
    # 0 is a valid value for several metrics (SM_CLEANBOOT, SM_SWAPBUTTON), so no check.
    "GetSystemMetrics": Prototype((INT,), INT),
    # The calling thread's context; cannot fail.
    "GetThreadDpiAwarenessContext": Prototype((), DPI_AWARENESS_CONTEXT),
    # 0 is both "no title" and failure (a window that just closed), and either way the
    # title reads as empty: the failure is caught by the checked GetClassNameW after it.
    "GetWindowTextLengthW": Prototype((HWND,), INT),
    # The number of units copied; 0 is "no title" as above.
    "GetWindowTextW": Prototype((HWND, LPVOID, INT), INT),
    # The thread id; 0 means the window handle is no longer valid.
    "GetWindowThreadProcessId": Prototype(
        (HWND, ctypes.POINTER(DWORD)), DWORD, _NONZERO, PlatformError
    ),
    # Nonzero: system DPI aware. The only question a Vista/7 process can ask.
    "IsProcessDPIAware": Prototype((), BOOL),
    # 0 means "no translation", not failure.
    "MapVirtualKeyW": Prototype((UINT, UINT), UINT),
    # WAIT_OBJECT_0 + n (input arrived), WAIT_TIMEOUT, or WAIT_FAILED.
    "MsgWaitForMultipleObjects": Prototype(
        (DWORD, LPVOID, BOOL, DWORD, DWORD), DWORD, _WAIT, PlatformError
    ),
    # Nonzero: a message was retrieved; 0: the queue is empty. No failure value.
    "PeekMessageW": Prototype((ctypes.POINTER(MSG), HWND, UINT, UINT, UINT), BOOL),
    # ERROR_HOTKEY_ALREADY_REGISTERED: another application owns the combination.
    "RegisterHotKey": Prototype((HWND, INT, UINT, UINT), BOOL, _NONZERO, PlatformError),
    # Returns 1 when released, 0 when not.
    "ReleaseDC": Prototype((HWND, HDC), INT, _NONZERO, CaptureError),
    # Returns how many events were inserted; fewer than given means UIPI (or a locked
    # desktop) blocked them. GetLastError does not reliably say which.
    "SendInput": Prototype((UINT, ctypes.POINTER(INPUT), INT), UINT, _ALL_SENT, InputError),
    "SetProcessDPIAware": Prototype((), BOOL, _NONZERO, PlatformError),
    # ERROR_ACCESS_DENIED: awareness already set (manifest or earlier call);
    # ERROR_INVALID_PARAMETER: this Windows does not know the context (before 10 1703).
    "SetProcessDpiAwarenessContext": Prototype(
        (DPI_AWARENESS_CONTEXT,), BOOL, _NONZERO, PlatformError
    ),
    # The hook handle; NULL is failure.
    "SetWindowsHookExW": Prototype((INT, HOOKPROC, LPVOID, DWORD), LPVOID, _NONZERO, PlatformError),
    # FALSE: the hook is already gone (Windows removes a hook that timed out).
    "UnhookWindowsHookEx": Prototype((LPVOID,), BOOL, _NONZERO, PlatformError),
    # Fails for an id this thread did not register (or from another thread).
    "UnregisterHotKey": Prototype((HWND, INT), BOOL, _NONZERO, PlatformError),
}
