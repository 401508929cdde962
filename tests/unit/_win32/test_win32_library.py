"""The declarative ctypes layer: tables, lazy binding, errchecks and their error details."""

from __future__ import annotations

import ctypes
import sys

import pytest
from win32_fakes import FakeDLL

from deskpilot._errors import CaptureError, InputError, PlatformError
from deskpilot._win32 import PROTOTYPES, Check, Library, Prototype, load_dll
from deskpilot._win32._constants import ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER
from deskpilot._win32._library import describe_args, format_error
from deskpilot._win32._structs import INPUT, RECT


@pytest.mark.parametrize("dll", sorted(PROTOTYPES))
def test_tables_are_sorted_and_well_formed(dll: str) -> None:
    table = PROTOTYPES[dll]  # type: ignore[index]
    assert list(table) == sorted(table), f"{dll} table must stay sorted by function name"
    for name, prototype in table.items():
        assert isinstance(prototype, Prototype), name
        assert isinstance(prototype.argtypes, tuple), name
        for argtype in prototype.argtypes:
            assert hasattr(argtype, "from_param"), (name, argtype)
        assert issubclass(prototype.error, PlatformError)


def test_checked_functions_raise_the_documented_error_class() -> None:
    user32, gdi32 = PROTOTYPES["user32"], PROTOTYPES["gdi32"]
    assert user32["SendInput"].check is Check.ALL_SENT and user32["SendInput"].error is InputError
    assert user32["GetCursorPos"].error is InputError
    for name in ("GetDC", "GetCursorInfo", "GetIconInfo", "EnumDisplayMonitors", "GetMonitorInfoW"):
        assert user32[name].error is CaptureError, name
    for name, prototype in gdi32.items():
        if prototype.check is not Check.NONE:
            assert prototype.error is CaptureError, name
    assert gdi32["SelectObject"].check is Check.SELECTED
    assert PROTOTYPES["shcore"]["SetProcessDpiAwareness"].check is Check.HRESULT
    # Functions whose 0 is a legitimate value must not be checked.
    for name in ("GetSystemMetrics", "MapVirtualKeyW", "GetGuiResources"):
        assert user32[name].check is Check.NONE, name


def _fake(**impls: object) -> tuple[FakeDLL, Library]:
    dll = FakeDLL("user32", [], dict(impls))  # type: ignore[arg-type]
    return dll, Library("user32", PROTOTYPES["user32"], dll=dll, last_error=dll.get_last_error)


def test_binding_is_lazy_and_applies_the_prototype_once() -> None:
    dll, library = _fake(GetSystemMetrics=lambda index: index * 2)
    assert "0 of" in repr(library)
    function = library.GetSystemMetrics
    assert function.argtypes == PROTOTYPES["user32"]["GetSystemMetrics"].argtypes
    assert function.restype is ctypes.c_int32
    assert function.errcheck is None  # Check.NONE
    assert library.GetSystemMetrics is function  # bound once, cached
    assert library.GetSystemMetrics(21) == 42
    assert [call.name for call in dll.log] == ["GetSystemMetrics"]


def test_missing_export_and_undeclared_function() -> None:
    _dll, library = _fake()
    assert library.has("SetProcessDpiAwarenessContext") is False
    with pytest.raises(PlatformError, match="no function SetProcessDpiAwarenessContext") as info:
        library.SetProcessDpiAwarenessContext(-4)
    assert info.value.details == {
        "dll": "user32",
        "function": "SetProcessDpiAwarenessContext",
        "reason": "missing",
    }
    with pytest.raises(AttributeError, match="not in the user32 prototype table"):
        library.MessageBoxW  # noqa: B018
    with pytest.raises(AttributeError):
        library._private  # noqa: B018


def test_nonzero_check_raises_with_details_and_last_error() -> None:
    dll, library = _fake()

    def get_dc(hwnd: object) -> int:
        dll.last_error = ERROR_INVALID_PARAMETER
        return 0

    dll.impls["GetDC"] = get_dc
    with pytest.raises(CaptureError) as info:
        library.GetDC(None)
    error = info.value
    assert isinstance(error, PlatformError) and isinstance(error, OSError)
    assert "GetDC failed" in str(error) and "87" in str(error)
    assert error.details["function"] == "GetDC"
    assert error.details["dll"] == "user32"
    assert error.details["last_error"] == ERROR_INVALID_PARAMETER
    assert error.details["args"] == [None]
    assert error.details["result"] is None  # NULL handle, as ctypes returns it


def test_sendinput_short_count_is_reported_as_uipi() -> None:
    dll, library = _fake()

    def send_input(count: int, array: object, size: int) -> int:
        dll.last_error = ERROR_ACCESS_DENIED
        return 0

    dll.impls["SendInput"] = send_input
    events = (INPUT * 2)()
    with pytest.raises(
        InputError, match="blocked by UIPI: the target window runs elevated"
    ) as info:
        library.SendInput(2, events, ctypes.sizeof(INPUT))
    assert "injected 0 of 2 events" in str(info.value)
    assert info.value.details["last_error"] == ERROR_ACCESS_DENIED
    assert info.value.details["args"] == [2, "INPUT_Array_2", 40]


def test_sendinput_full_count_passes() -> None:
    _dll, library = _fake(SendInput=lambda count, array, size: count)
    assert library.SendInput(3, (INPUT * 3)(), ctypes.sizeof(INPUT)) == 3


def test_hresult_check() -> None:
    dll = FakeDLL("shcore", [], {"SetProcessDpiAwareness": lambda value: -2147024891})
    library = Library("shcore", PROTOTYPES["shcore"], dll=dll, last_error=dll.get_last_error)
    with pytest.raises(PlatformError, match="HRESULT 0x80070005") as info:
        library.SetProcessDpiAwareness(2)
    assert info.value.details["hresult"] == 0x80070005
    dll.impls["GetProcessDpiAwareness"] = lambda process, out: 0
    assert library.GetProcessDpiAwareness(None, ctypes.byref(ctypes.c_int32())) == 0


def test_wait_check_rejects_wait_failed_only() -> None:
    results = iter([0xFFFFFFFF, 0x102, 0])  # WAIT_FAILED, WAIT_TIMEOUT, WAIT_OBJECT_0
    dll = FakeDLL("user32", [], {"MsgWaitForMultipleObjects": lambda *args: next(results)})
    library = Library("user32", PROTOTYPES["user32"], dll=dll, last_error=dll.get_last_error)
    dll.last_error = 6  # ERROR_INVALID_HANDLE
    with pytest.raises(PlatformError, match="MsgWaitForMultipleObjects failed") as info:
        library.MsgWaitForMultipleObjects(0, None, 0, 10, 0x04FF)
    assert info.value.details["last_error"] == 6
    assert library.MsgWaitForMultipleObjects(0, None, 0, 10, 0x04FF) == 0x102
    assert library.MsgWaitForMultipleObjects(0, None, 0, 10, 0x04FF) == 0


def test_selected_check_rejects_null_and_hgdi_error() -> None:
    results = iter([0, 0xFFFFFFFFFFFFFFFF, 0x1234])
    dll = FakeDLL("gdi32", [], {"SelectObject": lambda dc, obj: next(results)})
    library = Library("gdi32", PROTOTYPES["gdi32"], dll=dll, last_error=dll.get_last_error)
    for _ in range(2):
        with pytest.raises(CaptureError, match="SelectObject failed"):
            library.SelectObject(1, 2)
    assert library.SelectObject(1, 2) == 0x1234


def test_fake_rejects_wrong_argument_types_like_ctypes() -> None:
    _dll, library = _fake(GetSystemMetrics=lambda index: 0, EnumDisplayMonitors=lambda *a: 1)
    with pytest.raises(TypeError):
        library.GetSystemMetrics(1, 2)
    with pytest.raises((TypeError, ctypes.ArgumentError)):
        library.GetSystemMetrics("x")
    with pytest.raises(TypeError):
        library.EnumDisplayMonitors(None, RECT(), lambda *a: 1, 0)  # a bare function is no callback


def test_describe_args_is_json_friendly() -> None:
    rect = RECT()
    assert describe_args((None, 1, "a", ctypes.c_void_p(5), ctypes.byref(rect), rect, 1.5)) == [
        None, 1, "a", 5, "RECT", "RECT", 1.5,
    ]  # fmt: skip


def test_format_error() -> None:
    assert "without setting an error code" in format_error(0)
    if sys.platform == "win32":
        assert "denied" in format_error(ERROR_ACCESS_DENIED).lower()
    else:
        assert format_error(ERROR_ACCESS_DENIED) == "Win32 error 5"


@pytest.mark.skipif(sys.platform == "win32", reason="the off-Windows loader")
def test_loader_off_windows_raises_platform_error() -> None:
    with pytest.raises(PlatformError, match="only on Windows") as info:
        load_dll("user32")
    assert info.value.details["dll"] == "user32"
    library = Library("user32", PROTOTYPES["user32"])
    with pytest.raises(PlatformError, match="only on Windows"):
        library.GetSystemMetrics(0)
    assert library.has("GetSystemMetrics") is False


def test_injected_loader_is_used_once() -> None:
    loads: list[str] = []
    dll = FakeDLL("user32", [], {"GetSystemMetrics": lambda index: 7})

    def loader(name: str) -> FakeDLL:
        loads.append(name)
        return dll

    library = Library("user32", PROTOTYPES["user32"], loader=loader)
    assert library.GetSystemMetrics(0) == 7
    assert library.GetSystemMetrics(1) == 7
    assert loads == ["user32"]
