"""The wlroots protocols deskpilot speaks (sway, Hyprland, river...), over :mod:`._wire`.

- ``zwlr_screencopy_manager_v1``: ``capture_output`` -> ``buffer(format, w, h, stride)``
  (``buffer_done`` from version 3) -> ``copy(wl_buffer)`` -> ``flags`` / ``ready`` |
  ``failed``. Frames are XRGB8888 (BGRx in memory) in a wl_shm buffer kept per output and
  reused; ``flags`` bit 0 says the rows are upside down.
- ``zwlr_virtual_pointer_manager_v1``: ``motion_absolute`` in the layout's extent,
  ``button``, ``axis_source(wheel)`` + ``axis_discrete``, ``frame``.
- ``zwp_virtual_keyboard_manager_v1``: one XKB keymap (:mod:`._xkb`) uploaded through a
  memfd, ``key`` (evdev codes) and ``modifiers``, which wlroots does not derive from the
  keys for its clients: the sender says them.

:func:`wlroots_available` says whether a compositor offers all three.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deskpilot._errors import PlatformError
from deskpilot._wayland._wire import (
    SHM_FORMAT_ARGB8888,
    SHM_FORMAT_XRGB8888,
    WL_OUTPUT,
    WL_SEAT,
    WL_SHM,
    ZXDG_OUTPUT_MANAGER_V1,
    ZXDG_OUTPUT_V1,
    Connection,
    Interface,
    Message,
    Proxy,
    ShmBuffer,
)

__all__ = [
    "REQUIRED_GLOBALS",
    "WHEEL_STEP",
    "ZWLR_SCREENCOPY_FRAME_V1",
    "WlrOutput",
    "WlrootsClient",
    "note_pointer",
    "now_ms",
    "pointer_of",
    "wlroots_available",
]

ZWLR_SCREENCOPY_MANAGER_V1 = Interface(
    "zwlr_screencopy_manager_v1", 3,
    (Message("capture_output", "nio"), Message("capture_output_region", "nioiiii"), Message("destroy", "")), ())
ZWLR_SCREENCOPY_FRAME_V1 = Interface(
    "zwlr_screencopy_frame_v1", 3,
    (Message("copy", "o"), Message("destroy", ""), Message("copy_with_damage", "o")),
    (Message("buffer", "uuuu"), Message("flags", "u"), Message("ready", "uuu"), Message("failed", ""),
     Message("damage", "uuuu"), Message("linux_dmabuf", "uuu"), Message("buffer_done", "")))
ZWLR_VIRTUAL_POINTER_MANAGER_V1 = Interface(
    "zwlr_virtual_pointer_manager_v1", 1,
    (Message("create_virtual_pointer", "?on"), Message("destroy", "")), ())
ZWLR_VIRTUAL_POINTER_V1 = Interface(
    "zwlr_virtual_pointer_v1", 1,
    (Message("motion", "uff"), Message("motion_absolute", "uuuuu"), Message("button", "uuu"),
     Message("axis", "uuf"), Message("frame", ""), Message("axis_source", "u"), Message("axis_stop", "uu"),
     Message("axis_discrete", "uufi"), Message("destroy", "")), ())
ZWP_VIRTUAL_KEYBOARD_MANAGER_V1 = Interface(
    "zwp_virtual_keyboard_manager_v1", 1, (Message("create_virtual_keyboard", "on"),), ())
ZWP_VIRTUAL_KEYBOARD_V1 = Interface(
    "zwp_virtual_keyboard_v1", 1,
    (Message("keymap", "uhu"), Message("key", "uuu"), Message("modifiers", "uuuu"), Message("destroy", "")), ())

#: The globals the wlroots backends need (capture, pointer, keyboard).
REQUIRED_GLOBALS: tuple[str, ...] = (
    "zwlr_screencopy_manager_v1",
    "zwlr_virtual_pointer_manager_v1",
    "zwp_virtual_keyboard_manager_v1",
)

_KEYMAP_FORMAT_XKB_V1 = 1
_SCREENCOPY_Y_INVERT = 1
WHEEL_STEP = 15.0  # what libinput reports per wheel notch; clients scale smooth scrolling by it


def wlroots_available(environ: Mapping[str, str] | None = None, timeout: float = 2.0) -> bool:
    """Whether ``$WAYLAND_DISPLAY``'s compositor offers screencopy, the virtual pointer and
    the virtual keyboard (one connection, one round trip; False when none can be reached)."""
    env = os.environ if environ is None else environ
    if not env.get("WAYLAND_DISPLAY"):
        return False
    try:
        conn = Connection.connect(PlatformError, env)
    except PlatformError:
        return False
    try:
        names = {g.interface for g in conn.globals.values()}
        return all(name in names for name in REQUIRED_GLOBALS)
    finally:
        conn.close()


#: Where this process's wlroots input last put each compositor's pointer (physical desktop
#: pixels), by socket path: the compositor tells clients nothing about its pointer, and the
#: capture backend needs to know where it drew it (see :mod:`deskpilot.capture._wlroots`).
_POINTERS: dict[str, tuple[int, int]] = {}


def note_pointer(socket_path: str, position: tuple[int, int]) -> None:
    """Record where the pointer of the compositor at ``socket_path`` was sent."""
    _POINTERS[socket_path] = position


def pointer_of(socket_path: str) -> tuple[int, int] | None:
    """Where this process last sent the pointer of the compositor at ``socket_path`` (None: never)."""
    return _POINTERS.get(socket_path)


def now_ms() -> int:
    """A timestamp for input events (milliseconds, wrapping)."""
    return int(time.monotonic() * 1000) & 0xFFFFFFFF


@dataclass
class WlrOutput:
    """One output: its name, physical mode, logical box (the compositor's layout
    coordinates) and where its physical pixels sit in deskpilot's virtual desktop."""

    proxy: Proxy
    global_name: int
    name: str = ""
    physical: tuple[int, int] = (0, 0)
    logical_position: tuple[int, int] = (0, 0)
    logical_size: tuple[int, int] = (0, 0)
    integer_scale: int = 1
    buffer: ShmBuffer | None = None

    @property
    def scale(self) -> float:
        """Physical pixels per logical pixel (1.25 on a 1.25 output)."""
        if self.logical_size[0] > 0:
            return self.physical[0] / self.logical_size[0]
        return float(self.integer_scale)

    @property
    def origin(self) -> tuple[int, int]:
        """The output's top-left in physical desktop pixels: its layout position times its
        scale (exact for outputs of one scale; mixed scales may leave gaps or overlaps)."""
        return (round(self.logical_position[0] * self.scale), round(self.logical_position[1] * self.scale))


@dataclass
class _ScreencopyFrame:
    info: list[int] = field(default_factory=list)  # format, width, height, stride
    buffer_done: bool = False
    flags: int = 0
    ready: bool = False
    failed: bool = False

    def handle(self, event: str, args: list[Any]) -> None:
        if event == "buffer" and not self.info:
            self.info = list(args)
        elif event == "buffer_done":
            self.buffer_done = True
        elif event == "flags":
            self.flags = args[0]
        elif event == "ready":
            self.ready = True
        elif event == "failed":
            self.failed = True


class WlrootsClient:
    """One connection to a wlroots compositor with what capture and input need bound.

    ``error``: the error class of this client's failures (capture or input).
    ``need``: which of ``"screencopy"``, ``"pointer"``, ``"keyboard"`` must be offered.
    """

    def __init__(self, error: type[PlatformError], need: tuple[str, ...],
                 environ: Mapping[str, str] | None = None) -> None:
        self.error = error
        self.outputs: list[WlrOutput] = []  # before anything can fail: close() reads it
        self.conn = Connection.connect(error, environ)
        try:
            self._bind(need)
        except BaseException:
            self.conn.close()
            raise

    def _global(self, interface: Interface, why: str) -> Proxy:
        found = self.conn.find_global(interface.name)
        if not found:
            offered = ", ".join(sorted({g.interface for g in self.conn.globals.values()}))
            raise self.error(f"the Wayland compositor at {self.conn.path} does not offer {interface.name} ({why}); "
                             "the wlroots backend needs a wlroots compositor (sway, Hyprland, river...). "
                             f"It offers: {offered}", interface=interface.name)
        return self.conn.bind(found[0], interface)

    def _bind_outputs(self) -> None:
        """Bind the wl_output globals not bound yet (and their xdg_output); forget removed ones."""
        bound = {o.global_name for o in self.outputs}
        for output in [o for o in self.outputs if o.global_name not in self.conn.globals]:
            self.outputs.remove(output)
            output.proxy.alive = False
        for found in self.conn.find_global("wl_output"):
            if found.name in bound:
                continue
            proxy = self.conn.bind(found, WL_OUTPUT)
            output = WlrOutput(proxy, found.name)
            proxy.handler = self._output_handler(output)
            self.outputs.append(output)
            if self._xdg_manager is not None:
                xdg_output = self._xdg_manager.request("get_xdg_output", ZXDG_OUTPUT_V1, proxy)
                assert xdg_output is not None
                xdg_output.handler = self._xdg_handler(output)

    def refresh_outputs(self) -> list[WlrOutput]:
        """The outputs as they are now (one round trip: mode, scale and layout changes and
        added or removed outputs)."""
        self.conn.roundtrip()
        if {o.global_name for o in self.outputs} != {g.name for g in self.conn.find_global("wl_output")}:
            self._bind_outputs()
            self.conn.roundtrip()
        return self.outputs

    def _bind(self, need: tuple[str, ...]) -> None:
        conn = self.conn
        xdg = conn.find_global("zxdg_output_manager_v1")
        self._xdg_manager = conn.bind(xdg[0], ZXDG_OUTPUT_MANAGER_V1) if xdg else None
        self._bind_outputs()
        self.screencopy: Proxy | None = None
        self.shm: Proxy | None = None
        if "screencopy" in need:
            self.screencopy = self._global(ZWLR_SCREENCOPY_MANAGER_V1, "screen capture")
            self.shm = self._global(WL_SHM, "shared-memory buffers")
        self.seat: Proxy | None = None
        if "pointer" in need or "keyboard" in need:
            self.seat = self._global(WL_SEAT, "a seat for the virtual devices")
        self.pointer_manager: Proxy | None = None
        if "pointer" in need:
            self.pointer_manager = self._global(ZWLR_VIRTUAL_POINTER_MANAGER_V1, "pointer input")
        self.keyboard_manager: Proxy | None = None
        if "keyboard" in need:
            self.keyboard_manager = self._global(ZWP_VIRTUAL_KEYBOARD_MANAGER_V1, "keyboard input")
        conn.roundtrip()  # the outputs' geometry, mode, scale and logical boxes
        if not self.outputs:
            raise self.error(f"the Wayland compositor at {conn.path} has no outputs")

    @staticmethod
    def _output_handler(output: WlrOutput) -> Any:
        def handle(event: str, args: list[Any]) -> None:
            if event == "mode" and args[0] & 1:  # WL_OUTPUT_MODE_CURRENT
                output.physical = (args[1], args[2])
            elif event == "scale":
                output.integer_scale = args[0]
            elif event == "name":
                output.name = args[0]
            elif event == "geometry" and output.logical_size == (0, 0):
                output.logical_position = (args[0], args[1])
        return handle

    @staticmethod
    def _xdg_handler(output: WlrOutput) -> Any:
        def handle(event: str, args: list[Any]) -> None:
            if event == "logical_position":
                output.logical_position = (args[0], args[1])
            elif event == "logical_size":
                output.logical_size = (args[0], args[1])
            elif event == "name" and not output.name:
                output.name = args[0]
        return handle

    # -- capture -------------------------------------------------------------------

    def capture(self, output: WlrOutput, *, overlay_cursor: bool = False, timeout: float = 5.0) -> tuple[ShmBuffer, bool]:
        """Copy the output's next frame into its reused shm buffer; (buffer, y_inverted)."""
        assert self.screencopy is not None and self.shm is not None
        state = _ScreencopyFrame()
        frame = self.screencopy.request("capture_output", ZWLR_SCREENCOPY_FRAME_V1, int(overlay_cursor),
                                        output.proxy)
        assert frame is not None
        frame.handler = state.handle
        try:
            v3 = frame.version >= 3
            self.conn.wait(lambda: state.failed or (state.buffer_done if v3 else bool(state.info)), timeout,
                           "zwlr_screencopy_frame_v1.buffer")
            if state.failed or not state.info:
                raise self.error(f"screencopy of output {output.name or output.global_name} failed before a buffer "
                                 "was offered", interface="zwlr_screencopy_frame_v1", output=output.name)
            fmt, width, height, stride = state.info
            if fmt not in (SHM_FORMAT_XRGB8888, SHM_FORMAT_ARGB8888):
                raise self.error(f"screencopy offers shm format {fmt:#x}, not XRGB8888/ARGB8888",
                                 interface="zwlr_screencopy_frame_v1", format=fmt)
            buffer = output.buffer
            if buffer is None or (buffer.width, buffer.height, buffer.stride, buffer.format) != (width, height,
                                                                                                 stride, fmt):
                if buffer is not None:
                    buffer.destroy()
                buffer = output.buffer = None
                buffer = output.buffer = self.conn.shm_buffer(self.shm, width, height, stride, fmt)
            frame.request("copy", buffer.buffer)
            self.conn.wait(lambda: state.ready or state.failed, timeout, "zwlr_screencopy_frame_v1.copy")
            if state.failed:
                raise self.error(f"screencopy of output {output.name or output.global_name} failed",
                                 interface="zwlr_screencopy_frame_v1", output=output.name)
            return buffer, bool(state.flags & _SCREENCOPY_Y_INVERT)
        finally:
            if self.conn.open:
                frame.destroy()

    # -- input ---------------------------------------------------------------------

    def create_pointer(self) -> Proxy:
        assert self.pointer_manager is not None
        pointer = self.pointer_manager.request("create_virtual_pointer", self.seat, ZWLR_VIRTUAL_POINTER_V1)
        assert pointer is not None
        return pointer

    def create_keyboard(self) -> Proxy:
        assert self.keyboard_manager is not None
        keyboard = self.keyboard_manager.request("create_virtual_keyboard", self.seat, ZWP_VIRTUAL_KEYBOARD_V1)
        assert keyboard is not None
        return keyboard

    def upload_keymap(self, keyboard: Proxy, text: str) -> None:
        """Send an XKB keymap (text, NUL-terminated, in a memfd)."""
        data = text.encode() + b"\0"
        fd = os.memfd_create("deskpilot-keymap", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            keyboard.request("keymap", _KEYMAP_FORMAT_XKB_V1, fd, len(data))
        finally:
            os.close(fd)  # the compositor has its own copy of the descriptor once sent

    def layout_box(self) -> tuple[int, int, int, int]:
        """The bounding box of every output in layout (logical) coordinates: x, y, w, h."""
        boxes = [(o.logical_position, o.logical_size if o.logical_size != (0, 0) else
                  (round(o.physical[0] / o.integer_scale), round(o.physical[1] / o.integer_scale)))
                 for o in self.outputs]
        left = min(p[0] for p, _ in boxes)
        top = min(p[1] for p, _ in boxes)
        right = max(p[0] + s[0] for p, s in boxes)
        bottom = max(p[1] + s[1] for p, s in boxes)
        return left, top, right - left, bottom - top

    def close(self) -> None:
        for output in self.outputs:
            if output.buffer is not None:
                if self.conn.open:
                    output.buffer.destroy()
                else:
                    output.buffer.memory.close()
                    os.close(output.buffer.fd)
                output.buffer = None
        self.conn.close()
