"""Make the process per-monitor-v2 DPI aware before any capture or input, and say how.

Why: a DPI-unaware process on a 125 % display sees a 1536x864 "logical" screen; GDI
then captures a scaled picture and SendInput/GetCursorPos use scaled coordinates, so
clicks miss. Per-monitor-v2 awareness makes capture and input use the same physical
pixels on every monitor.

The chain, first success wins:

1. ``SetProcessDpiAwarenessContext(DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2)``
   (user32, Windows 10 1703+).
2. ``SetProcessDpiAwareness(PROCESS_PER_MONITOR_DPI_AWARE)`` (shcore, Windows 8.1+).
3. ``SetProcessDPIAware()`` (user32, Vista+): system-aware only.

Awareness can be set once per process. When something already set it (an application
manifest, an embedding host, an earlier call), step 1 fails with ``ERROR_ACCESS_DENIED``
and step 2 with ``E_ACCESSDENIED``: that is recognised as "already set", the current
level is read back (``GetThreadDpiAwarenessContext``/``GetProcessDpiAwareness``) and
reported. Every attempt, failed or not, is kept in the returned :class:`DpiAwareness`, so
a failure is visible (``deskpilot doctor``, run logs) rather than swallowed.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

from deskpilot._errors import PlatformError
from deskpilot._win32._constants import (
    DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2,
    E_ACCESSDENIED,
    ERROR_ACCESS_DENIED,
    PROCESS_PER_MONITOR_DPI_AWARE,
)
from deskpilot._win32._library import Library
from deskpilot._win32._system import system_library

__all__ = ["DpiAttempt", "DpiAwareness", "DpiLevel", "ensure_dpi_awareness", "set_dpi_awareness"]

log = logging.getLogger("deskpilot.win32")

DpiLevel = Literal["unaware", "system", "per_monitor", "per_monitor_v2", "unknown"]
Outcome = Literal["set", "already_set", "unavailable", "failed"]

_LEVELS: dict[int, DpiLevel] = {0: "unaware", 1: "system", 2: "per_monitor"}


@dataclass(frozen=True, slots=True)
class DpiAttempt:
    """One step of the chain: which function, what happened, and the error if any."""

    function: str
    outcome: Outcome
    error_code: int | None = None  # GetLastError value, or the HRESULT (unsigned)
    message: str = ""


@dataclass(frozen=True, slots=True)
class DpiAwareness:
    """What the process's DPI awareness is now and how it got there."""

    level: DpiLevel
    method: str | None  # the function that set it, or found it already set; None: all failed
    attempts: tuple[DpiAttempt, ...]
    #: The function the OS answered ``level`` through, after the chain. None: the OS could
    #: not be asked, and ``level`` is what the succeeding step requested.
    reported_by: str | None = None

    @property
    def ok(self) -> bool:
        """True when some step set awareness or found it already set."""
        return self.method is not None

    @property
    def per_monitor(self) -> bool:
        """True when capture and input use physical pixels on every monitor."""
        return self.level in ("per_monitor", "per_monitor_v2")

    def describe(self) -> str:
        """One line for logs and ``deskpilot doctor``."""
        steps = "; ".join(
            f"{a.function}: {a.outcome}" + (f" ({a.message})" if a.message else "")
            for a in self.attempts
        )
        head = f"DPI awareness {self.level}" + (
            f" via {self.method}" if self.method else " (not set)"
        )
        source = f"reported by {self.reported_by}" if self.reported_by else "not confirmed by the OS"
        return f"{head}, {source} [{steps}]"

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "method": self.method,
            "reported_by": self.reported_by,
            "attempts": [
                {
                    "function": a.function,
                    "outcome": a.outcome,
                    "error_code": a.error_code,
                    "message": a.message,
                }
                for a in self.attempts
            ],
        }


def _current_level(user32: Library, shcore: Library | None) -> tuple[DpiLevel, str | None]:
    """The awareness in effect, as the OS reports it, and which function reported it
    (None when no function could say: then the level is "unknown")."""
    try:
        if user32.has("GetThreadDpiAwarenessContext"):
            context = user32.GetThreadDpiAwarenessContext()
            if user32.has("AreDpiAwarenessContextsEqual") and user32.AreDpiAwarenessContextsEqual(
                context, DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2
            ):
                return "per_monitor_v2", "GetThreadDpiAwarenessContext"
            if user32.has("GetAwarenessFromDpiAwarenessContext"):
                level = _LEVELS.get(int(user32.GetAwarenessFromDpiAwarenessContext(context)), "unknown")
                return level, "GetThreadDpiAwarenessContext"
        if shcore is not None and shcore.has("GetProcessDpiAwareness"):
            value = ctypes.c_int32(-1)
            shcore.GetProcessDpiAwareness(None, ctypes.byref(value))
            return _LEVELS.get(value.value, "unknown"), "GetProcessDpiAwareness"
        if user32.has("IsProcessDPIAware"):
            # Vista/7: only "system aware or not" can be asked.
            aware = bool(user32.IsProcessDPIAware())
            return ("system" if aware else "unaware"), "IsProcessDPIAware"
    except PlatformError as exc:
        log.debug("reading the DPI awareness back failed: %s", exc)
    return "unknown", None


def _attempt_failed(function: str, exc: PlatformError) -> tuple[DpiAttempt, bool]:
    """Turn an error into an attempt; the flag says it means "already set"."""
    code = exc.details.get("hresult", exc.details.get("last_error"))
    already = code in (ERROR_ACCESS_DENIED, E_ACCESSDENIED)
    message = "already set for this process" if already else str(exc)
    return DpiAttempt(function, "already_set" if already else "failed", code, message), already


def set_dpi_awareness(user32: Library, shcore: Library | None = None) -> DpiAwareness:
    """Run the chain once with the given libraries (no caching; see the module docstring)."""
    # user32 must load (PlatformError off Windows); a missing shcore.dll (Windows 7) or
    # a missing export only makes its step "unavailable".
    _ = user32.dll
    attempts: list[DpiAttempt] = []
    steps: list[tuple[str, Library | None, tuple[int, ...], DpiLevel]] = [
        (
            "SetProcessDpiAwarenessContext",
            user32,
            (DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2,),
            "per_monitor_v2",
        ),
        ("SetProcessDpiAwareness", shcore, (PROCESS_PER_MONITOR_DPI_AWARE,), "per_monitor"),
        ("SetProcessDPIAware", user32, (), "system"),
    ]
    method: str | None = None
    requested: DpiLevel = "unknown"
    for function, library, args, level in steps:
        if library is None or not library.has(function):
            where = library.name if library is not None else "shcore"
            attempts.append(
                DpiAttempt(
                    function, "unavailable", None, f"not available in {where}.dll on this Windows"
                )
            )
            continue
        try:
            library.function(function)(*args)
        except PlatformError as exc:
            attempt, already = _attempt_failed(function, exc)
            attempts.append(attempt)
            if already:
                method = function
                break
            continue
        attempts.append(DpiAttempt(function, "set"))
        method, requested = function, level
        break
    # Whatever the chain concluded, the level reported is the one the OS says the process
    # has: a step can "succeed" without the level it asked for (a compatibility shim, an
    # emulator without per-monitor-v2), and "already set" says nothing about which level.
    current, reported_by = _current_level(user32, shcore)
    if reported_by is None:
        current = requested
    return DpiAwareness(current, method, tuple(attempts), reported_by)


_lock = threading.Lock()


@functools.cache
def _process_awareness() -> DpiAwareness:
    shcore: Library | None = system_library("shcore")
    result = set_dpi_awareness(system_library("user32"), shcore)
    if not result.per_monitor:
        log.warning("%s: coordinates on scaled displays may be off", result.describe())
    else:
        log.debug("%s", result.describe())
    return result


def ensure_dpi_awareness(
    *, user32: Library | None = None, shcore: Library | None = None
) -> DpiAwareness:
    """Set per-monitor-v2 awareness once per process and return how it went.

    With no arguments the system DLLs are used and the result is cached (awareness is
    process-wide and can only be set once). Injected libraries (tests, fakes) run the
    chain every time. Off Windows, without injected libraries, PlatformError is raised.
    """
    if user32 is not None:
        return set_dpi_awareness(user32, shcore)
    with _lock:
        return _process_awareness()
