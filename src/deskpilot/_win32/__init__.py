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
    # The tables the OS backends declare their calls with (capture/_gdi.py,
    # input/_sendinput.py, the kill switch): every UPPER_CASE name of the SDK's constants,
    # structures and callback types, found by the ``__getattr__`` below.
    from deskpilot._win32._constants import *  # noqa: F403
    from deskpilot._win32._library import Check, Library, Prototype, load_dll
    from deskpilot._win32._prototypes import MONITORENUMPROC as MONITORENUMPROC
    from deskpilot._win32._structs import *  # noqa: F403
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


#: Where an UPPER_CASE name not in ``_HOME`` lives: the SDK's constants, structures and
#: callback types, in this order.
_TABLES = ("_constants", "_structs", "_prototypes")


def __getattr__(name: str) -> object:
    import importlib

    homes = [_HOME[name]] if name in _HOME else list(_TABLES) if name.isupper() and not name.startswith("_") else []
    for home in homes:
        module = importlib.import_module(f"deskpilot._win32.{home}")
        if hasattr(module, name):
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'deskpilot._win32' has no attribute {name!r}")


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
