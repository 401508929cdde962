"""Thin, declarative ctypes layer over the Win32 API, importable on every OS.

* :mod:`._types` — scalar types with Windows widths (never ``wintypes.LONG``: 8 bytes on Linux).
* :mod:`._structs` — structures whose sizes/offsets are unit-tested everywhere.
* :mod:`._constants` — flags and codes from the SDK headers.
* :mod:`._prototypes` — one sorted prototype table per DLL (user32, gdi32, shcore, kernel32).
* :mod:`._library` — :class:`Library`: a private ``WinDLL(use_last_error=True)`` whose
  functions are declared from a table on first use, with errchecks raising
  :class:`~deskpilot._errors.PlatformError` subclasses carrying a ``details`` dict.
* :mod:`.dpi` — per-monitor-v2 DPI awareness with reported fallbacks.

Only :mod:`deskpilot.capture._gdi` and :mod:`deskpilot.input._sendinput` call into it.
"""

from __future__ import annotations

from deskpilot._win32._library import Check, Library, Prototype, load_dll
from deskpilot._win32._system import PROTOTYPES, DllName, system_library
from deskpilot._win32.dpi import (
    DpiAttempt,
    DpiAwareness,
    DpiLevel,
    ensure_dpi_awareness,
    set_dpi_awareness,
)

__all__ = [
    "PROTOTYPES",
    "Check",
    "DllName",
    "DpiAttempt",
    "DpiAwareness",
    "DpiLevel",
    "Library",
    "Prototype",
    "ensure_dpi_awareness",
    "load_dll",
    "set_dpi_awareness",
    "system_library",
]
