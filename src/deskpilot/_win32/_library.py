"""DLL handles with a declarative prototype table applied lazily, and error checking.

The python-mss habit: each :class:`Library` owns a *private* ``WinDLL(...,
use_last_error=True)`` (so our argtypes never clash with another package's settings on
the shared ``ctypes.windll``), and every function it exposes gets its ``argtypes``,
``restype`` and ``errcheck`` from one sorted table (:mod:`deskpilot._win32._prototypes`).
A function is looked up and declared the first time it is used, so a function that an
older Windows lacks only fails where it is called (:meth:`Library.has` checks first).

Off Windows the loader raises :class:`~deskpilot._errors.PlatformError`; tests inject a
recorded fake DLL object instead (``Library(..., dll=fake, last_error=fake.last_error)``).
The fake receives the same ``argtypes``/``restype``/``errcheck`` assignments a ctypes
function does, so the error checks below run in the tests exactly as on Windows.
"""

from __future__ import annotations

import ctypes
import enum
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deskpilot._errors import PlatformError
from deskpilot._win32._constants import HGDI_ERROR, HGDI_ERROR_32, WAIT_FAILED

__all__ = [
    "Check",
    "Library",
    "Prototype",
    "describe_args",
    "format_error",
    "load_dll",
]

Loader = Callable[[str], Any]
ErrCheck = Callable[[Any, Any, tuple[Any, ...]], Any]


class Check(enum.Enum):
    """How a function reports failure (what its ``errcheck`` tests)."""

    NONE = "none"  # no failure value (GetSystemMetrics, MapVirtualKeyW, ...)
    NONZERO = "nonzero"  # 0 / FALSE / NULL means failure; GetLastError says why
    SELECTED = "selected"  # SelectObject: NULL or HGDI_ERROR
    HRESULT = "hresult"  # negative HRESULT means failure (the code is the result)
    ALL_SENT = "all_sent"  # SendInput: must return the number of events given
    WAIT = "wait"  # the wait functions: WAIT_FAILED (0xFFFFFFFF); GetLastError says why


@dataclass(frozen=True, slots=True)
class Prototype:
    """One row of a prototype table."""

    argtypes: tuple[Any, ...]
    restype: Any
    check: Check = Check.NONE
    error: type[PlatformError] = PlatformError


def format_error(code: int) -> str:
    """The system message for a Win32 error code (or a neutral text off Windows)."""
    if code == 0:
        return "the function failed without setting an error code"
    if sys.platform == "win32":
        return ctypes.FormatError(code).strip()
    return f"Win32 error {code}"


def _system_last_error() -> int:
    if sys.platform == "win32":
        return ctypes.get_last_error()
    return 0


def describe_args(args: tuple[Any, ...]) -> list[Any]:
    """Arguments reduced to JSON-friendly values for an error's ``details``."""
    described: list[Any] = []
    for arg in args:
        if arg is None or isinstance(arg, (bool, int, float, str)):
            described.append(arg)
        elif isinstance(arg, ctypes._SimpleCData):
            described.append(arg.value)
        else:
            obj = getattr(arg, "_obj", arg)  # byref() wraps the object it points to
            described.append(type(obj).__name__)
    return described


def load_dll(name: str) -> Any:
    """A private ``WinDLL`` with ``use_last_error=True``; PlatformError off Windows."""
    if sys.platform == "win32":
        try:
            return ctypes.WinDLL(name, use_last_error=True)
        except OSError as exc:
            raise PlatformError(f"cannot load {name}.dll: {exc}", dll=name) from exc
    raise PlatformError(
        f"{name}.dll exists only on Windows (this is {sys.platform!r})",
        dll=name,
        platform=sys.platform,
    )


def _failed(check: Check, result: Any, args: tuple[Any, ...]) -> bool:
    if check is Check.NONZERO:
        return not result
    if check is Check.SELECTED:
        return not result or result in (HGDI_ERROR, HGDI_ERROR_32, -1)
    if check is Check.HRESULT:
        return int(result) < 0
    if check is Check.ALL_SENT:
        return int(result) != int(args[0])
    if check is Check.WAIT:
        return int(result) == WAIT_FAILED
    return False


class Library:
    """A Windows DLL whose functions are declared from a prototype table on first use."""

    def __init__(
        self,
        name: str,
        prototypes: Mapping[str, Prototype],
        *,
        dll: Any = None,
        loader: Loader | None = None,
        last_error: Callable[[], int] | None = None,
    ) -> None:
        self.name = name
        self._prototypes = prototypes
        self._dll = dll
        self._loader = loader or load_dll
        self._last_error = last_error or _system_last_error
        self._bound: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<Library {self.name} ({len(self._bound)} of {len(self._prototypes)} bound)>"

    def __getattr__(self, attr: str) -> Any:
        # Only reached for names that are not regular attributes: the DLL's functions.
        if attr.startswith("_"):
            raise AttributeError(attr)
        return self.function(attr)

    @property
    def dll(self) -> Any:
        """The DLL object, loaded on first use."""
        if self._dll is None:
            self._dll = self._loader(self.name)
        return self._dll

    def function(self, name: str) -> Any:
        """The declared function ``name`` (PlatformError if the DLL does not export it)."""
        bound = self._bound.get(name)
        if bound is not None:
            return bound
        prototype = self._prototypes.get(name)
        if prototype is None:
            raise AttributeError(f"{name} is not in the {self.name} prototype table")
        try:
            func = getattr(self.dll, name)
        except AttributeError as exc:
            raise PlatformError(
                f"{self.name}.dll has no function {name} (this Windows version is too old for it)",
                dll=self.name,
                function=name,
                reason="missing",
            ) from exc
        func.argtypes = prototype.argtypes
        func.restype = prototype.restype
        if prototype.check is not Check.NONE:
            func.errcheck = self._errcheck(name, prototype)
        self._bound[name] = func
        return func

    def has(self, name: str) -> bool:
        """Whether ``name`` can be called: False if the DLL does not load or lacks it."""
        try:
            self.function(name)
        except PlatformError:
            return False
        return True

    def _errcheck(self, name: str, prototype: Prototype) -> ErrCheck:
        check, error = prototype.check, prototype.error

        def errcheck(result: Any, func: Any, args: tuple[Any, ...]) -> Any:
            if not _failed(check, result, args):
                return result
            raise self._error(name, check, error, result, args)

        return errcheck

    def _error(
        self,
        name: str,
        check: Check,
        error: type[PlatformError],
        result: Any,
        args: tuple[Any, ...],
    ) -> PlatformError:
        details: dict[str, Any] = {
            "dll": self.name,
            "function": name,
            "args": describe_args(args),
            "result": result,
        }
        if check is Check.HRESULT:
            hresult = int(result) & 0xFFFFFFFF
            details["hresult"] = hresult
            return error(f"{name} failed: HRESULT 0x{hresult:08X}", **details)
        code = self._last_error()
        details["last_error"] = code
        message = format_error(code)
        details["message"] = message
        if check is Check.ALL_SENT:
            return error(
                f"{name} injected {result} of {args[0]} events: blocked by UIPI: the target "
                "window runs elevated (or the secure desktop / a locked session is active); "
                f"GetLastError: {message}",
                **details,
            )
        return error(f"{name} failed: {message} (error {code})", **details)
