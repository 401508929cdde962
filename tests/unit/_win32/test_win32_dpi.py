"""The DPI awareness chain against recorded fakes: fallbacks, "already set", total failure."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

import pytest
from win32_fakes import FakeDesktop, FakeDLL

from deskpilot._errors import PlatformError
from deskpilot._win32 import DpiAwareness, ensure_dpi_awareness, set_dpi_awareness
from deskpilot._win32._constants import (
    DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2,
    ERROR_ACCESS_DENIED,
    ERROR_INVALID_PARAMETER,
)

E_ACCESSDENIED_SIGNED = -2147024891  # 0x80070005 as the signed HRESULT ctypes returns
E_INVALIDARG_SIGNED = -2147024809  # 0x80070057
CONTEXT = 0x7788  # an opaque DPI_AWARENESS_CONTEXT handle


def failing(dll: FakeDLL, code: int) -> Callable[..., int]:
    def impl(*args: Any) -> int:
        dll.last_error = code
        return 0

    return impl


def run(desktop: FakeDesktop) -> DpiAwareness:
    libraries = desktop.libraries()
    return set_dpi_awareness(libraries["user32"], libraries["shcore"])


def test_per_monitor_v2_set_first() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = lambda context: 1
    result = run(desktop)
    assert result.level == "per_monitor_v2" and result.method == "SetProcessDpiAwarenessContext"
    assert result.ok and result.per_monitor
    assert [(a.function, a.outcome) for a in result.attempts] == [
        ("SetProcessDpiAwarenessContext", "set")
    ]
    (call,) = desktop.log
    assert call.name == "SetProcessDpiAwarenessContext"
    assert call.args == (DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2,)
    assert ctypes.c_void_p.from_param(call.args[0])  # -4 converts to a pseudo-handle


def test_unsupported_context_falls_back_to_shcore() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = failing(
        desktop.user32, ERROR_INVALID_PARAMETER
    )
    desktop.shcore.impls["SetProcessDpiAwareness"] = lambda value: 0
    result = run(desktop)
    assert result.level == "per_monitor" and result.method == "SetProcessDpiAwareness"
    first, second = result.attempts
    assert (first.outcome, first.error_code) == ("failed", ERROR_INVALID_PARAMETER)
    assert "SetProcessDpiAwarenessContext failed" in first.message
    assert (second.function, second.outcome) == ("SetProcessDpiAwareness", "set")
    assert desktop.calls("SetProcessDpiAwareness")[0].args == (2,)  # PROCESS_PER_MONITOR_DPI_AWARE
    assert "SetProcessDPIAware" not in desktop.names()


@pytest.mark.parametrize(
    ("equal_v2", "awareness", "level"),
    [(1, 2, "per_monitor_v2"), (0, 1, "system"), (0, 2, "per_monitor")],
)
def test_access_denied_means_already_set_and_reads_the_level_back(
    equal_v2: int, awareness: int, level: str
) -> None:
    desktop = FakeDesktop()
    desktop.user32.impls.update(
        SetProcessDpiAwarenessContext=failing(desktop.user32, ERROR_ACCESS_DENIED),
        GetThreadDpiAwarenessContext=lambda: CONTEXT,
        AreDpiAwarenessContextsEqual=lambda a, b: equal_v2 if (a, b) == (CONTEXT, -4) else 0,
        GetAwarenessFromDpiAwarenessContext=lambda context: awareness if context == CONTEXT else -1,
    )
    result = run(desktop)
    assert result.ok and result.method == "SetProcessDpiAwarenessContext"
    assert result.level == level
    assert result.per_monitor is (level != "system")
    (attempt,) = result.attempts
    assert (attempt.outcome, attempt.error_code) == ("already_set", ERROR_ACCESS_DENIED)
    # The chain stops: nothing else tries to change the process's awareness.
    assert "SetProcessDpiAwareness" not in desktop.names()
    assert "SetProcessDPIAware" not in desktop.names()


def test_shcore_access_denied_is_already_set_on_windows_8_1() -> None:
    desktop = FakeDesktop()  # no SetProcessDpiAwarenessContext export at all

    def get_awareness(process: object, out: Any) -> int:
        out._obj.value = 2
        return 0

    desktop.shcore.impls.update(
        SetProcessDpiAwareness=lambda value: E_ACCESSDENIED_SIGNED,
        GetProcessDpiAwareness=get_awareness,
    )
    result = run(desktop)
    assert [(a.function, a.outcome) for a in result.attempts] == [
        ("SetProcessDpiAwarenessContext", "unavailable"),
        ("SetProcessDpiAwareness", "already_set"),
    ]
    assert result.attempts[1].error_code == 0x80070005
    assert result.level == "per_monitor" and result.method == "SetProcessDpiAwareness"


def test_system_aware_as_last_resort() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDPIAware"] = lambda: 1
    desktop.shcore.impls["SetProcessDpiAwareness"] = lambda value: E_INVALIDARG_SIGNED
    result = run(desktop)
    assert result.level == "system" and result.method == "SetProcessDPIAware"
    assert result.ok and not result.per_monitor
    assert [a.outcome for a in result.attempts] == ["unavailable", "failed", "set"]
    assert result.attempts[1].error_code == 0x80070057


def test_every_failure_is_reported() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = failing(
        desktop.user32, ERROR_INVALID_PARAMETER
    )
    desktop.user32.impls["SetProcessDPIAware"] = failing(desktop.user32, 1234)
    user32 = desktop.libraries()["user32"]
    result = set_dpi_awareness(user32, None)  # no shcore.dll (Windows 7)
    assert not result.ok and result.method is None and result.level == "unknown"
    assert [(a.function, a.outcome, a.error_code) for a in result.attempts] == [
        ("SetProcessDpiAwarenessContext", "failed", ERROR_INVALID_PARAMETER),
        ("SetProcessDpiAwareness", "unavailable", None),
        ("SetProcessDPIAware", "failed", 1234),
    ]
    text = result.describe()
    assert "not set" in text and "SetProcessDPIAware: failed" in text and "error 1234" in text
    assert result.as_dict()["attempts"][2] == {
        "function": "SetProcessDPIAware",
        "outcome": "failed",
        "error_code": 1234,
        "message": result.attempts[2].message,
    }


def test_injected_libraries_are_not_cached() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = lambda context: 1
    libraries = desktop.libraries()
    ensure_dpi_awareness(user32=libraries["user32"], shcore=libraries["shcore"])
    ensure_dpi_awareness(user32=libraries["user32"], shcore=libraries["shcore"])
    assert desktop.names() == ["SetProcessDpiAwarenessContext"] * 2


@pytest.mark.skipif(sys.platform == "win32", reason="off-Windows behaviour")
def test_process_wide_call_off_windows_raises() -> None:
    with pytest.raises(PlatformError, match="only on Windows"):
        ensure_dpi_awareness()


def test_wine_chain_reports_the_level_the_os_answers() -> None:
    """Wine 8: no per-monitor-v2 context (error 87), then E_ACCESSDENIED from shcore; the level
    is what GetThreadDpiAwarenessContext says afterwards, and the report names that source."""
    desktop = FakeDesktop()
    desktop.user32.impls.update(
        SetProcessDpiAwarenessContext=failing(desktop.user32, ERROR_INVALID_PARAMETER),
        GetThreadDpiAwarenessContext=lambda: CONTEXT,
        AreDpiAwarenessContextsEqual=lambda a, b: 0,
        GetAwarenessFromDpiAwarenessContext=lambda context: 2,
    )
    desktop.shcore.impls["SetProcessDpiAwareness"] = lambda value: E_ACCESSDENIED_SIGNED
    result = run(desktop)
    assert (result.level, result.method) == ("per_monitor", "SetProcessDpiAwareness")
    assert result.reported_by == "GetThreadDpiAwarenessContext"
    assert "reported by GetThreadDpiAwarenessContext" in result.describe()
    assert result.as_dict()["reported_by"] == "GetThreadDpiAwarenessContext"


def test_a_step_that_succeeds_without_its_level_reports_what_the_os_says() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls.update(
        SetProcessDpiAwarenessContext=lambda context: 1,
        GetThreadDpiAwarenessContext=lambda: CONTEXT,
        AreDpiAwarenessContextsEqual=lambda a, b: 0,
        GetAwarenessFromDpiAwarenessContext=lambda context: 1,  # only system aware
    )
    result = run(desktop)
    assert result.method == "SetProcessDpiAwarenessContext"
    assert result.level == "system" and not result.per_monitor
    assert result.reported_by == "GetThreadDpiAwarenessContext"


def test_without_a_way_to_ask_the_requested_level_is_reported_as_unconfirmed() -> None:
    desktop = FakeDesktop()
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = lambda context: 1
    result = run(desktop)
    assert result.level == "per_monitor_v2" and result.reported_by is None
    assert "not confirmed by the OS" in result.describe()
