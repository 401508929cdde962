"""Thin, declarative ctypes layer over the Win32 API, importable on every OS.

* :mod:`._types` — scalar types with Windows widths (never ``wintypes.LONG``: 8 bytes on Linux).
* :mod:`._structs` — structures whose sizes/offsets are unit-tested everywhere.
* :mod:`._constants` — flags and codes from the SDK headers.
* :mod:`._prototypes` — one sorted prototype table per DLL (user32, gdi32, shcore, kernel32).
* :mod:`._library` — :class:`Library`: a private ``WinDLL(use_last_error=True)`` whose
  functions are declared from a table on first use, with errchecks raising
  :class:`~deskpilot._errors.PlatformError` subclasses carrying a ``details`` dict.
* :mod:`._user` — the foreground window, cursor, virtual screen, message queue and a
  low-level mouse hook as plain values, for the kill switch and window policy of
  :mod:`deskpilot.safety`.
* :mod:`.dpi` — per-monitor-v2 DPI awareness with reported fallbacks.

deskpilot's only Win32 binding: :mod:`deskpilot.capture._gdi`,
:mod:`deskpilot.input._sendinput` and :mod:`deskpilot.safety` call into it.
"""

from __future__ import annotations

# Imported on first use, one submodule at a time: every OS imports this package (the kill
# switch, the window policy and capture name its types), and loading all of it cost
# ~11 ms of the agent's start-up on Linux, where none of it runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from deskpilot._win32._library import Check, Library, Prototype, load_dll
    from deskpilot._win32._system import PROTOTYPES, DllName, system_library
    from deskpilot._win32._user import (
        ForegroundWindow,
        MouseHook,
        cursor_position,
        drain_messages,
        foreground_window,
        virtual_screen,
    )
    from deskpilot._win32.dpi import (
        DpiAttempt,
        DpiAwareness,
        DpiLevel,
        ensure_dpi_awareness,
        set_dpi_awareness,
    )

_HOME = {
    **dict.fromkeys(("Check", "Library", "Prototype", "load_dll"), "_library"),
    **dict.fromkeys(("PROTOTYPES", "DllName", "system_library"), "_system"),
    **dict.fromkeys(
        ("ForegroundWindow", "MouseHook", "cursor_position", "drain_messages", "foreground_window",
         "virtual_screen"),
        "_user",
    ),
    **dict.fromkeys(("DpiAttempt", "DpiAwareness", "DpiLevel", "ensure_dpi_awareness", "set_dpi_awareness"), "dpi"),
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'deskpilot._win32' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"deskpilot._win32.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "PROTOTYPES",
    "Check",
    "DllName",
    "DpiAttempt",
    "DpiAwareness",
    "DpiLevel",
    "ForegroundWindow",
    "Library",
    "MouseHook",
    "Prototype",
    "cursor_position",
    "drain_messages",
    "ensure_dpi_awareness",
    "foreground_window",
    "load_dll",
    "set_dpi_awareness",
    "system_library",
    "virtual_screen",
]
