"""Win32 constants used by the GDI capture, SendInput, DPI and kill-switch code (values from the SDK headers)."""

from __future__ import annotations

from typing import Final

# --- GDI (wingdi.h) ----------------------------------------------------------------
BI_RGB: Final = 0
DIB_RGB_COLORS: Final = 0
SRCCOPY: Final = 0x00CC0020
# Include layered (WS_EX_LAYERED) windows in BitBlt from the screen.
CAPTUREBLT: Final = 0x40000000
# SetStretchBltMode: area-averaging resampling; needs SetBrushOrgEx afterwards.
HALFTONE: Final = 4
# SelectObject's failure value for regions; NULL for every other object type.
HGDI_ERROR: Final = 0xFFFFFFFFFFFFFFFF  # (HGDIOBJ)-1 as an unsigned 64-bit pointer value
HGDI_ERROR_32: Final = 0xFFFFFFFF  # the same on 32-bit Windows

# --- monitors and metrics (winuser.h) ------------------------------------------------
MONITORINFOF_PRIMARY: Final = 0x00000001
SM_SWAPBUTTON: Final = 23
SM_XVIRTUALSCREEN: Final = 76
SM_YVIRTUALSCREEN: Final = 77
SM_CXVIRTUALSCREEN: Final = 78
SM_CYVIRTUALSCREEN: Final = 79

# --- cursor --------------------------------------------------------------------------
CURSOR_SHOWING: Final = 0x00000001
CURSOR_SUPPRESSED: Final = 0x00000002  # touch/pen input: the system does not draw it

# --- SendInput -----------------------------------------------------------------------
INPUT_MOUSE: Final = 0
INPUT_KEYBOARD: Final = 1
INPUT_HARDWARE: Final = 2

MOUSEEVENTF_MOVE: Final = 0x0001
MOUSEEVENTF_LEFTDOWN: Final = 0x0002
MOUSEEVENTF_LEFTUP: Final = 0x0004
MOUSEEVENTF_RIGHTDOWN: Final = 0x0008
MOUSEEVENTF_RIGHTUP: Final = 0x0010
MOUSEEVENTF_MIDDLEDOWN: Final = 0x0020
MOUSEEVENTF_MIDDLEUP: Final = 0x0040
MOUSEEVENTF_XDOWN: Final = 0x0080
MOUSEEVENTF_XUP: Final = 0x0100
MOUSEEVENTF_WHEEL: Final = 0x0800
MOUSEEVENTF_HWHEEL: Final = 0x1000
MOUSEEVENTF_MOVE_NOCOALESCE: Final = 0x2000
MOUSEEVENTF_VIRTUALDESK: Final = 0x4000
MOUSEEVENTF_ABSOLUTE: Final = 0x8000

KEYEVENTF_EXTENDEDKEY: Final = 0x0001
KEYEVENTF_KEYUP: Final = 0x0002
KEYEVENTF_UNICODE: Final = 0x0004
KEYEVENTF_SCANCODE: Final = 0x0008

WHEEL_DELTA: Final = 120
MAPVK_VK_TO_VSC: Final = 0

VK_TAB: Final = 0x09
VK_RETURN: Final = 0x0D

# --- DPI awareness (windef.h, shellscalingapi.h) ------------------------------------
# DPI_AWARENESS_CONTEXT values are pseudo-handles: small negative integers.
DPI_AWARENESS_CONTEXT_UNAWARE: Final = -1
DPI_AWARENESS_CONTEXT_SYSTEM_AWARE: Final = -2
DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE: Final = -3
DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2: Final = -4
DPI_AWARENESS_CONTEXT_UNAWARE_GDISCALED: Final = -5

# DPI_AWARENESS (GetAwarenessFromDpiAwarenessContext) and PROCESS_DPI_AWARENESS
# (Get/SetProcessDpiAwareness) share these values.
DPI_AWARENESS_INVALID: Final = -1
PROCESS_DPI_UNAWARE: Final = 0
PROCESS_SYSTEM_DPI_AWARE: Final = 1
PROCESS_PER_MONITOR_DPI_AWARE: Final = 2

# --- hotkeys and the thread message queue (winuser.h, winbase.h) ---------------------
MOD_ALT: Final = 0x0001
MOD_CONTROL: Final = 0x0002
MOD_SHIFT: Final = 0x0004
MOD_WIN: Final = 0x0008
MOD_NOREPEAT: Final = 0x4000
WM_HOTKEY: Final = 0x0312
WM_MOUSEMOVE: Final = 0x0200
WH_MOUSE_LL: Final = 14
HC_ACTION: Final = 0
PM_REMOVE: Final = 0x0001
QS_ALLINPUT: Final = 0x04FF
WAIT_TIMEOUT: Final = 0x00000102
WAIT_FAILED: Final = 0xFFFFFFFF

# --- error codes (winerror.h) -------------------------------------------------------
ERROR_SUCCESS: Final = 0
ERROR_ACCESS_DENIED: Final = 5
ERROR_INVALID_PARAMETER: Final = 87
ERROR_HOTKEY_ALREADY_REGISTERED: Final = 1409
S_OK: Final = 0
E_ACCESSDENIED: Final = 0x80070005
E_INVALIDARG: Final = 0x80070057

# --- GetGuiResources ------------------------------------------------------------------
GR_GDIOBJECTS: Final = 0
GR_USEROBJECTS: Final = 1
