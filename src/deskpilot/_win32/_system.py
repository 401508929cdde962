"""The process-wide :class:`~deskpilot._win32._library.Library` objects for the system DLLs."""

from __future__ import annotations

import functools
import threading
from typing import Literal

from deskpilot._win32._library import Library, Prototype
from deskpilot._win32._prototypes import (
    GDI32_PROTOTYPES,
    KERNEL32_PROTOTYPES,
    SHCORE_PROTOTYPES,
    USER32_PROTOTYPES,
)

__all__ = ["PROTOTYPES", "DllName", "system_library"]

DllName = Literal["gdi32", "kernel32", "shcore", "user32"]

PROTOTYPES: dict[DllName, dict[str, Prototype]] = {
    "gdi32": GDI32_PROTOTYPES,
    "kernel32": KERNEL32_PROTOTYPES,
    "shcore": SHCORE_PROTOTYPES,
    "user32": USER32_PROTOTYPES,
}

_lock = threading.Lock()


@functools.cache
def _library(name: DllName) -> Library:
    return Library(name, PROTOTYPES[name])


def system_library(name: DllName) -> Library:
    """The shared Library for a system DLL (the DLL itself loads on first use).

    Only the deskpilot backends use these objects, and each is a private ``WinDLL``, so
    declaring prototypes on them never affects other code in the process.
    """
    with _lock:
        return _library(name)
