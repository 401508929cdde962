"""A minimal in-process Tk target for the real-Windows tests: a known pattern, every event recorded.

In-process on purpose: SendInput events go through the system input thread into this
thread's message queue, and :meth:`WinTarget.pump_until` runs Tk's event loop until the
expected record arrives, so no cross-process timing is involved.

Layout (pixels from the window's client origin; the window is undecorated-free, a normal
top-level kept on top):

* ``pattern``: a :data:`PATTERN_SIZE` image of deterministic noise at (0, 0) (exact pixel
  comparisons: any offset or scaling error changes almost every pixel);
* ``entry``: an Entry below it (Ctrl+A selects all, as in most applications);
* ``pad``: a white Canvas beside the pattern for clicks, drags and the wheel.

:class:`RawKeyTarget` is the other keyboard target: a plain Win32 window (ctypes
``RegisterClassExW`` / ``CreateWindowExW``) whose window procedure records every keyboard
message, pumped by the standard ``PeekMessageW`` / ``TranslateMessage`` /
``DispatchMessageW`` loop. It shows what SendInput delivers to *any* Win32 application,
without a toolkit's own key handling in between (Tk's VK_PACKET re-post, see
docs/wine-deviations.md).

:func:`wine_version` tells the tests whether this "Windows" is Wine, for the checks that
are strict xfails there (each names its Wine deviation).
"""

from __future__ import annotations

import ctypes
import time
import tkinter as tk
from collections.abc import Callable
from ctypes import wintypes
from dataclasses import dataclass
from typing import Any

import numpy as np

PATTERN_SIZE = (160, 120)
PAD_SIZE = (200, 160)


def pattern_rgb(width: int, height: int, seed: int = 11) -> np.ndarray:
    """HxWx3 uint8 deterministic noise."""
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)


class WinTarget:
    def __init__(self, x: int = 60, y: int = 60) -> None:
        self.root = tk.Tk(className="deskpilot-win-target")
        self.root.title("deskpilot windows target")
        self.root.configure(background="#336699")
        self.root.attributes("-topmost", True)
        self.root.geometry(f"{PATTERN_SIZE[0] + PAD_SIZE[0] + 20}x{PAD_SIZE[1] + 60}+{x}+{y}")
        self.records: list[dict[str, Any]] = []

        width, height = PATTERN_SIZE
        self.pattern = pattern_rgb(width, height)
        ppm = b"P6 %d %d 255\n" % (width, height) + self.pattern.tobytes()
        self.image = tk.PhotoImage(master=self.root, data=ppm, format="PPM")
        self.pattern_label = tk.Label(
            self.root, image=self.image, borderwidth=0, highlightthickness=0, padx=0, pady=0
        )
        self.pattern_label.place(x=0, y=0, width=width, height=height)

        self.pad = tk.Canvas(
            self.root, background="#ffffff", highlightthickness=0, borderwidth=0, cursor="arrow"
        )
        self.pad.place(x=width + 20, y=0, width=PAD_SIZE[0], height=PAD_SIZE[1])

        self.entry_var = tk.StringVar(self.root)
        self.entry = tk.Entry(self.root, textvariable=self.entry_var, font=("Segoe UI", 12))
        self.entry.place(x=0, y=height + 10, width=width, height=30)
        for sequence in ("<Control-a>", "<Control-A>"):
            self.entry.bind(sequence, self._select_all)

        self.root.bind_all("<ButtonPress>", lambda e: self._record("press", e), add="+")
        self.root.bind_all("<ButtonRelease>", lambda e: self._record("release", e), add="+")
        self.root.bind_all("<Double-ButtonPress-1>", lambda e: self._record("double", e), add="+")
        self.root.bind_all("<B1-Motion>", lambda e: self._record("drag", e), add="+")
        self.root.bind_all("<MouseWheel>", self._wheel, add="+")
        self.root.bind_all("<KeyPress>", self._key, add="+")

        self.root.update()
        self.root.lift()
        self.root.focus_force()
        self.pump(0.3)  # let the window manager show it (DWM fade-in)

    # -- geometry --------------------------------------------------------------------------
    def rect(self, widget: tk.Misc) -> tuple[int, int, int, int]:
        self.root.update_idletasks()
        return (
            widget.winfo_rootx(),
            widget.winfo_rooty(),
            widget.winfo_width(),
            widget.winfo_height(),
        )

    def center(self, widget: tk.Misc) -> tuple[int, int]:
        x, y, w, h = self.rect(widget)
        return x + w // 2, y + h // 2

    # -- events ----------------------------------------------------------------------------
    def _record(self, kind: str, event: Any) -> None:
        self.records.append(
            {"type": kind, "button": event.num, "x": event.x_root, "y": event.y_root}
        )

    def _wheel(self, event: Any) -> None:
        self.records.append(
            {"type": "wheel", "delta": event.delta, "x": event.x_root, "y": event.y_root}
        )

    def _key(self, event: Any) -> None:
        self.records.append(
            {"type": "key", "keysym": event.keysym, "char": event.char, "state": event.state}
        )

    def _select_all(self, event: Any) -> str:
        self.records.append({"type": "select_all"})
        self.entry.selection_range(0, "end")
        self.entry.icursor("end")
        return "break"

    def text(self) -> str:
        # Tcl 8.6 may hand astral characters over as surrogate pairs: join them.
        return self.entry_var.get().encode("utf-16", "surrogatepass").decode("utf-16")

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == kind]

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.root.update()
            time.sleep(0.005)

    def pump_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.root.update()
            if predicate():
                return True
            time.sleep(0.005)
        self.root.update()
        return predicate()

    def close(self) -> None:
        self.root.destroy()


def wine_version() -> str | None:
    """Wine's version when this Windows is Wine (ntdll exports ``wine_get_version``), else None."""
    try:
        get_version = ctypes.WinDLL("ntdll").wine_get_version
    except (AttributeError, OSError):
        return None
    get_version.argtypes = []
    get_version.restype = ctypes.c_char_p
    return bytes(get_version()).decode("ascii", "replace")


# -- a plain Win32 window that records keyboard messages -------------------------------------
WM_KEYDOWN, WM_KEYUP, WM_CHAR, WM_DEADCHAR = 0x0100, 0x0101, 0x0102, 0x0103
WM_SYSKEYDOWN, WM_SYSKEYUP, WM_SYSCHAR = 0x0104, 0x0105, 0x0106
KEY_MESSAGES = {
    WM_KEYDOWN: "WM_KEYDOWN",
    WM_KEYUP: "WM_KEYUP",
    WM_CHAR: "WM_CHAR",
    WM_DEADCHAR: "WM_DEADCHAR",
    WM_SYSKEYDOWN: "WM_SYSKEYDOWN",
    WM_SYSKEYUP: "WM_SYSKEYUP",
    WM_SYSCHAR: "WM_SYSCHAR",
}
VK_CONTROL, VK_PACKET = 0x11, 0xE7
_WS_OVERLAPPEDWINDOW, _WS_VISIBLE, _WS_EX_TOPMOST = 0x00CF0000, 0x10000000, 0x00000008
_PM_REMOVE, _IDC_ARROW, _COLOR_WINDOW = 0x0001, 32512, 5

_LRESULT = ctypes.c_ssize_t
_WNDPROC = ctypes.WINFUNCTYPE(
    _LRESULT, wintypes.HWND, wintypes.UINT, wintypes.WPARAM, wintypes.LPARAM
)


class _WNDCLASSEXW(ctypes.Structure):
    _fields_ = [
        ("cbSize", wintypes.UINT),
        ("style", wintypes.UINT),
        ("lpfnWndProc", _WNDPROC),
        ("cbClsExtra", ctypes.c_int),
        ("cbWndExtra", ctypes.c_int),
        ("hInstance", wintypes.HINSTANCE),
        ("hIcon", wintypes.HICON),
        ("hCursor", wintypes.HANDLE),
        ("hbrBackground", wintypes.HBRUSH),
        ("lpszMenuName", wintypes.LPCWSTR),
        ("lpszClassName", wintypes.LPCWSTR),
        ("hIconSm", wintypes.HICON),
    ]


def _user32() -> Any:
    # A private WinDLL: these argtypes must not touch ctypes.windll or deskpilot's Library.
    user32 = ctypes.WinDLL("user32", use_last_error=True)
    hwnd, uint, wparam, lparam = wintypes.HWND, wintypes.UINT, wintypes.WPARAM, wintypes.LPARAM
    msg_p = ctypes.POINTER(wintypes.MSG)
    for name, argtypes, restype in (
        ("RegisterClassExW", [ctypes.POINTER(_WNDCLASSEXW)], wintypes.ATOM),
        ("UnregisterClassW", [wintypes.LPCWSTR, wintypes.HINSTANCE], wintypes.BOOL),
        (
            "CreateWindowExW",
            [wintypes.DWORD, wintypes.LPCWSTR, wintypes.LPCWSTR, wintypes.DWORD]
            + [ctypes.c_int] * 4
            + [hwnd, wintypes.HMENU, wintypes.HINSTANCE, wintypes.LPVOID],
            hwnd,
        ),
        ("DestroyWindow", [hwnd], wintypes.BOOL),
        ("DefWindowProcW", [hwnd, uint, wparam, lparam], _LRESULT),
        ("PeekMessageW", [msg_p, hwnd, uint, uint, uint], wintypes.BOOL),
        ("TranslateMessage", [msg_p], wintypes.BOOL),
        ("DispatchMessageW", [msg_p], _LRESULT),
        ("LoadCursorW", [wintypes.HINSTANCE, ctypes.c_void_p], wintypes.HANDLE),
        ("GetKeyState", [ctypes.c_int], wintypes.SHORT),
        ("GetAsyncKeyState", [ctypes.c_int], wintypes.SHORT),
        ("GetForegroundWindow", [], hwnd),
        ("GetFocus", [], hwnd),
        ("GetClientRect", [hwnd, ctypes.POINTER(wintypes.RECT)], wintypes.BOOL),
        ("ClientToScreen", [hwnd, ctypes.POINTER(wintypes.POINT)], wintypes.BOOL),
    ):
        function = getattr(user32, name)
        function.argtypes, function.restype = argtypes, restype
    return user32


@dataclass(frozen=True)
class KeyMessage:
    """One keyboard message as the window procedure saw it."""

    msg: int
    wparam: int
    lparam: int  # as the 32-bit value Windows documents for keystroke messages
    ctrl: bool  # GetKeyState(VK_CONTROL) while this message was processed

    @property
    def name(self) -> str:
        return KEY_MESSAGES[self.msg]

    def __repr__(self) -> str:
        ctrl = "+ctrl" if self.ctrl else ""
        return f"{self.name}({self.wparam:#x}, {self.lparam:#010x}){ctrl}"


class RawKeyTarget:
    """A top-level Win32 window recording its keyboard messages; see the module docstring."""

    _serial = 0

    def __init__(self, x: int = 80, y: int = 80, width: int = 320, height: int = 200) -> None:
        self.user32 = _user32()
        self.messages: list[KeyMessage] = []
        self._failures: list[BaseException] = []
        self._wndproc = _WNDPROC(self._window_procedure)  # kept alive as long as the window
        self._instance = ctypes.WinDLL("kernel32").GetModuleHandleW(None)
        RawKeyTarget._serial += 1
        self._class_name = f"deskpilot-raw-key-target-{RawKeyTarget._serial}"
        window_class = _WNDCLASSEXW()
        window_class.cbSize = ctypes.sizeof(_WNDCLASSEXW)
        window_class.lpfnWndProc = self._wndproc
        window_class.hInstance = self._instance
        window_class.hCursor = self.user32.LoadCursorW(None, ctypes.c_void_p(_IDC_ARROW))
        window_class.hbrBackground = _COLOR_WINDOW + 1
        window_class.lpszClassName = self._class_name
        if not self.user32.RegisterClassExW(ctypes.byref(window_class)):
            raise ctypes.WinError(ctypes.get_last_error())
        self.hwnd = self.user32.CreateWindowExW(
            _WS_EX_TOPMOST, self._class_name, "deskpilot raw key target",
            _WS_OVERLAPPEDWINDOW | _WS_VISIBLE, x, y, width, height,
            None, None, self._instance, None,
        )  # fmt: skip
        if not self.hwnd:
            error = ctypes.get_last_error()
            self.user32.UnregisterClassW(self._class_name, self._instance)
            raise ctypes.WinError(error)
        self.pump(0.3)  # let the window manager show it

    def _window_procedure(self, hwnd: Any, msg: int, wparam: int, lparam: int) -> int:
        if msg in KEY_MESSAGES:
            # An exception escaping a ctypes callback is printed and lost: keep it for pump().
            try:
                ctrl = bool(self.user32.GetKeyState(VK_CONTROL) & 0x8000)
                self.messages.append(KeyMessage(msg, wparam, lparam & 0xFFFFFFFF, ctrl))
            except BaseException as exc:  # pragma: no cover - defensive
                self._failures.append(exc)
        return int(self.user32.DefWindowProcW(hwnd, msg, wparam, lparam))

    # -- geometry --------------------------------------------------------------------------
    def center(self) -> tuple[int, int]:
        """The client area's centre in screen coordinates."""
        rect = wintypes.RECT()
        self.user32.GetClientRect(self.hwnd, ctypes.byref(rect))
        point = wintypes.POINT(rect.right // 2, rect.bottom // 2)
        self.user32.ClientToScreen(self.hwnd, ctypes.byref(point))
        return int(point.x), int(point.y)

    def has_focus(self) -> bool:
        return bool(
            self.user32.GetForegroundWindow() == self.hwnd and self.user32.GetFocus() == self.hwnd
        )

    # -- what arrived ----------------------------------------------------------------------
    def of(self, *msgs: int) -> list[KeyMessage]:
        return [m for m in self.messages if m.msg in msgs]

    def chars(self) -> str:
        """The WM_CHAR code units as text (a surrogate pair's two messages join)."""
        units = b"".join(m.wparam.to_bytes(2, "little") for m in self.of(WM_CHAR))
        return units.decode("utf-16-le", "surrogatepass")

    def key_down(self, vk: int) -> bool:
        """Whether the system still reports ``vk`` pressed (GetAsyncKeyState)."""
        return bool(self.user32.GetAsyncKeyState(vk) & 0x8000)

    # -- message loop ----------------------------------------------------------------------
    def _pump_once(self) -> None:
        msg = wintypes.MSG()
        while self.user32.PeekMessageW(ctypes.byref(msg), None, 0, 0, _PM_REMOVE):
            # What every Win32 application does: WM_KEYDOWN -> WM_CHAR happens here.
            self.user32.TranslateMessage(ctypes.byref(msg))
            self.user32.DispatchMessageW(ctypes.byref(msg))
        if self._failures:
            raise self._failures.pop(0)

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._pump_once()
            time.sleep(0.005)

    def pump_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump_once()
            if predicate():
                return True
            time.sleep(0.005)
        self._pump_once()
        return predicate()

    def close(self) -> None:
        self.user32.DestroyWindow(self.hwnd)
        self._pump_once()
        self.user32.UnregisterClassW(self._class_name, self._instance)
