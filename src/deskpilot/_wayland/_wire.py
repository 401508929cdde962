"""A minimal Wayland wire-protocol client: framing, marshalling, the registry, shm pools.

The Wayland protocol is messages on a Unix socket: each is the object id (u32), then the
size in bytes (high 16 bits) and the opcode (low 16 bits) of one u32, then the arguments,
each padded to 4 bytes, in host byte order; file descriptors travel beside the bytes as
``SCM_RIGHTS``. The interfaces deskpilot speaks are declared here and in
:mod:`deskpilot._wayland._wlr` as small tables (:class:`Interface`: each request and
event a name and a signature), the way ``wayland-scanner`` would describe them, without
generating code or loading ``libwayland-client``.

Signature letters: ``i`` int, ``u`` uint, ``f`` fixed (24.8), ``s`` string, ``o`` object,
``n`` new_id, ``a`` array, ``h`` fd; ``?`` before ``s`` or ``o`` makes it nullable.
``wl_registry.bind``'s untyped new_id is written out as ``sun`` (interface, version, id),
as on the wire.

One :class:`Connection` is used by one thread at a time (its owner serializes calls).
Errors the compositor reports (``wl_display.error``) raise the connection's error class
with the interface, object and message named.
"""

from __future__ import annotations

import array
import contextlib
import errno
import mmap
import os
import socket
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deskpilot._errors import PlatformError

__all__ = [
    "WL_BUFFER",
    "WL_CALLBACK",
    "WL_DISPLAY",
    "WL_OUTPUT",
    "WL_REGISTRY",
    "WL_SEAT",
    "WL_SHM",
    "WL_SHM_POOL",
    "ZXDG_OUTPUT_MANAGER_V1",
    "ZXDG_OUTPUT_V1",
    "Connection",
    "Interface",
    "Message",
    "Proxy",
    "ShmBuffer",
    "fixed",
    "socket_path",
]


@dataclass(frozen=True, slots=True)
class Message:
    """One request or event: its name and argument signature."""

    name: str
    signature: str


@dataclass(frozen=True, slots=True)
class Interface:
    """A protocol interface: its name, the highest version deskpilot speaks, its requests
    and events in opcode order."""

    name: str
    version: int
    requests: tuple[Message, ...]
    events: tuple[Message, ...]

    def opcode(self, request: str) -> int:
        for opcode, message in enumerate(self.requests):
            if message.name == request:
                return opcode
        raise KeyError(f"{self.name} has no request {request!r}")


def _m(name: str, signature: str = "") -> Message:
    return Message(name, signature)


WL_DISPLAY = Interface("wl_display", 1, (_m("sync", "n"), _m("get_registry", "n")),
                       (_m("error", "ous"), _m("delete_id", "u")))
WL_REGISTRY = Interface("wl_registry", 1, (_m("bind", "usun"),),
                        (_m("global", "usu"), _m("global_remove", "u")))
WL_CALLBACK = Interface("wl_callback", 1, (), (_m("done", "u"),))
WL_SHM = Interface("wl_shm", 1, (_m("create_pool", "nhi"),), (_m("format", "u"),))
WL_SHM_POOL = Interface("wl_shm_pool", 1, (_m("create_buffer", "niiiiu"), _m("destroy"), _m("resize", "i")), ())
WL_BUFFER = Interface("wl_buffer", 1, (_m("destroy"),), (_m("release"),))
WL_OUTPUT = Interface("wl_output", 4, (_m("release"),),
                      (_m("geometry", "iiiiissi"), _m("mode", "uiii"), _m("done"), _m("scale", "i"),
                       _m("name", "s"), _m("description", "s")))
WL_SEAT = Interface("wl_seat", 1, (_m("get_pointer", "n"), _m("get_keyboard", "n"), _m("get_touch", "n")),
                    (_m("capabilities", "u"), _m("name", "s")))
ZXDG_OUTPUT_MANAGER_V1 = Interface("zxdg_output_manager_v1", 2, (_m("destroy"), _m("get_xdg_output", "no")), ())
ZXDG_OUTPUT_V1 = Interface("zxdg_output_v1", 2, (_m("destroy"),),
                           (_m("logical_position", "ii"), _m("logical_size", "ii"), _m("done"),
                            _m("name", "s"), _m("description", "s")))

#: wl_shm formats: ARGB8888 and XRGB8888 are 0 and 1 (every other one is its fourcc).
SHM_FORMAT_ARGB8888 = 0
SHM_FORMAT_XRGB8888 = 1

_HEADER = struct.Struct("=II")
_U32 = struct.Struct("=I")
_I32 = struct.Struct("=i")
_MAX_FDS = 28  # libwayland's own limit per message batch


def fixed(value: float) -> int:
    """A number as wl_fixed (signed 24.8)."""
    return round(value * 256.0)


def socket_path(environ: Mapping[str, str] | None = None) -> str:
    """The compositor's socket: ``$WAYLAND_DISPLAY`` (absolute, or under ``$XDG_RUNTIME_DIR``)."""
    env = os.environ if environ is None else environ
    name = env.get("WAYLAND_DISPLAY", "") or "wayland-0"
    if name.startswith("/"):
        return name
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if not runtime:
        raise PlatformError("XDG_RUNTIME_DIR is not set: cannot find the Wayland socket", wayland_display=name)
    return os.path.join(runtime, name)


def _pad(n: int) -> int:
    return (n + 3) & ~3


@dataclass(eq=False)
class Proxy:
    """A client-side object: its id, interface and version; ``handler(event, args)`` receives
    its events (None: they are dropped)."""

    connection: Connection = field(repr=False)
    id: int
    interface: Interface = field(repr=False)
    version: int
    handler: Callable[[str, list[Any]], None] | None = field(default=None, repr=False)
    alive: bool = True

    def request(self, name: str, *args: Any) -> Proxy | None:
        """Send a request; returns the object a ``n`` argument created (its interface passed
        as that argument: ``(interface, version)`` or an :class:`Interface`)."""
        return self.connection.send(self, name, args)

    def destroy(self, request: str | None = "destroy") -> None:
        """Send the destructor request (if any) and stop dispatching this object's events."""
        if self.alive and request is not None and self.connection.open:
            self.connection.send(self, request, ())
        self.alive = False


@dataclass(frozen=True, slots=True)
class Global:
    """A registry global: its name (number), interface and advertised version."""

    name: int
    interface: str
    version: int


@dataclass
class ShmBuffer:
    """One wl_buffer in a memfd-backed wl_shm pool, and the mapping of its bytes."""

    buffer: Proxy
    pool: Proxy
    memory: mmap.mmap
    width: int
    height: int
    stride: int
    format: int
    fd: int
    released: bool = True

    def destroy(self) -> None:
        self.buffer.destroy()
        self.pool.destroy()
        with contextlib.suppress(BufferError):  # a frame still views it: the mapping goes with that view
            self.memory.close()
        os.close(self.fd)


@dataclass
class Connection:
    """One connection to a Wayland compositor (see the module docstring).

    ``error``: the deskpilot error class raised for protocol and socket failures
    (:class:`~deskpilot.CaptureError` for capture, :class:`~deskpilot.InputError` for input).
    """

    error: type[PlatformError] = PlatformError
    path: str = ""
    globals: dict[int, Global] = field(default_factory=dict)
    _sock: socket.socket | None = None
    _objects: dict[int, Proxy] = field(default_factory=dict)
    _free_ids: list[int] = field(default_factory=list)
    _next_id: int = 2
    _inbuf: bytearray = field(default_factory=bytearray)
    _fds: deque[int] = field(default_factory=deque)
    _outbuf: bytearray = field(default_factory=bytearray)
    _outfds: list[int] = field(default_factory=list)
    _salvaging: bool = False

    @classmethod
    def connect(cls, error: type[PlatformError] = PlatformError,
                environ: Mapping[str, str] | None = None) -> Connection:
        """Connect to the compositor and read its registry (one round trip)."""
        path = socket_path(environ)
        conn = cls(error=error, path=path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise error(f"cannot connect to the Wayland compositor at {path}: {exc.strerror or exc}",
                        socket=path) from exc
        conn._sock = sock
        conn.display = Proxy(conn, 1, WL_DISPLAY, 1, conn._on_display)
        conn._objects[1] = conn.display
        conn.registry = conn.display.request("get_registry", WL_REGISTRY)  # type: ignore[assignment]
        assert conn.registry is not None
        conn.registry.handler = conn._on_registry
        try:
            conn.roundtrip()
        except BaseException:
            conn.close()
            raise
        return conn

    display: Proxy = field(init=False)
    registry: Proxy = field(init=False)

    @property
    def open(self) -> bool:
        return self._sock is not None

    def fileno(self) -> int:
        if self._sock is None:
            raise self.error("the Wayland connection is closed", socket=self.path)
        return self._sock.fileno()

    # -- objects -------------------------------------------------------------------

    def _new_id(self) -> int:
        if self._free_ids:
            return self._free_ids.pop()
        new = self._next_id
        self._next_id += 1
        return new

    def find_global(self, interface: str) -> list[Global]:
        """The globals of one interface, in the order the compositor announced them."""
        return [g for g in self.globals.values() if g.interface == interface]

    def bind(self, found: Global, interface: Interface, version: int | None = None,
             handler: Callable[[str, list[Any]], None] | None = None) -> Proxy:
        """Bind a global at ``min(version or the interface's version, advertised)``."""
        want = min(version or interface.version, interface.version, found.version)
        proxy = self.registry.request("bind", found.name, (interface, want))
        assert proxy is not None
        proxy.handler = handler
        return proxy

    # -- sending -------------------------------------------------------------------

    def send(self, proxy: Proxy, name: str, args: tuple[Any, ...]) -> Proxy | None:
        """Marshal one request into the output buffer, then flush."""
        if self._sock is None:
            raise self.error(f"{proxy.interface.name}.{name}: the Wayland connection is closed", socket=self.path)
        opcode = proxy.interface.opcode(name)
        signature = proxy.interface.requests[opcode].signature.replace("?", "")
        if len(signature) != len(args) and not (name == "bind" and len(args) == 2):
            raise TypeError(f"{proxy.interface.name}.{name} takes {len(signature)} arguments, got {len(args)}")
        body = bytearray()
        created: Proxy | None = None
        fds: list[int] = []
        values = list(args)
        if name == "bind" and proxy.interface is WL_REGISTRY:
            # bind(name, (interface, version)) -> the untyped new_id on the wire: s u n.
            global_name, (interface, version) = values
            values = [global_name, interface.name, version, (interface, version)]
        for letter, value in zip(signature, values, strict=True):
            if letter == "i":
                body += _I32.pack(int(value))
            elif letter in "u":
                body += _U32.pack(int(value))
            elif letter == "f":
                body += _I32.pack(fixed(float(value)))
            elif letter == "s":
                if value is None:
                    body += _U32.pack(0)
                else:
                    data = str(value).encode() + b"\0"
                    body += _U32.pack(len(data)) + data + b"\0" * (_pad(len(data)) - len(data))
            elif letter == "o":
                body += _U32.pack(0 if value is None else value.id)
            elif letter == "n":
                interface, version = value if isinstance(value, tuple) else (value, value.version)
                new = self._new_id()
                created = Proxy(self, new, interface, version)
                self._objects[new] = created
                body += _U32.pack(new)
            elif letter == "a":
                data = bytes(value)
                body += _U32.pack(len(data)) + data + b"\0" * (_pad(len(data)) - len(data))
            elif letter == "h":
                fds.append(int(value))
            else:  # pragma: no cover - the tables are written here
                raise ValueError(f"bad signature letter {letter!r}")
        size = _HEADER.size + len(body)
        self._outbuf += _HEADER.pack(proxy.id, (size << 16) | opcode) + body
        self._outfds += fds
        self.flush()
        return created

    def flush(self) -> None:
        """Write the output buffer (and its fds) to the socket."""
        sock = self._sock
        if sock is None or not self._outbuf:
            return
        try:
            while self._outbuf:
                ancillary = []
                if self._outfds:
                    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                  array.array("i", self._outfds[:_MAX_FDS]).tobytes())]
                sent = sock.sendmsg([bytes(self._outbuf)], ancillary)
                del self._outfds[:_MAX_FDS]
                del self._outbuf[:sent]
        except OSError as exc:
            self._lost(exc)

    # -- receiving -----------------------------------------------------------------

    def _lost(self, exc: OSError | None) -> None:
        if self._sock is not None and not self._salvaging and exc is not None:
            # A write failed: the compositor may have said why before closing (wl_display.error
            # is sent, then the socket closed). Reading what is left raises that error.
            self._salvaging = True
            while self.read_events(0):
                pass
        reason = f": {exc.strerror or exc}" if exc is not None else ""
        self.close()
        raise self.error(f"the Wayland compositor closed the connection{reason}", socket=self.path)

    def read_events(self, timeout: float | None = None) -> bool:
        """Read what the socket has (waiting up to ``timeout`` s, None: forever) and dispatch
        every complete message; False when nothing came within the timeout."""
        sock = self._sock
        if sock is None:
            raise self.error("the Wayland connection is closed", socket=self.path)
        sock.settimeout(timeout)
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(65536, socket.CMSG_SPACE(_MAX_FDS * 4))
        except (TimeoutError, BlockingIOError):
            return False
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EINTR):
                return False
            self._lost(exc)
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self._fds.extend(fds)
        if not data:
            self._lost(None)
        self._inbuf += data
        self._dispatch()
        return True

    def _dispatch(self) -> None:
        buf = self._inbuf
        offset = 0
        while len(buf) - offset >= _HEADER.size:
            object_id, word = _HEADER.unpack_from(buf, offset)
            size, opcode = word >> 16, word & 0xFFFF
            if size < _HEADER.size:
                raise self.error(f"malformed Wayland message (size {size})", socket=self.path)
            if len(buf) - offset < size:
                break
            body = bytes(buf[offset + _HEADER.size: offset + size])
            offset += size
            proxy = self._objects.get(object_id)
            if proxy is None or opcode >= len(proxy.interface.events):
                continue  # an event for an object already destroyed (or newer than our table)
            message = proxy.interface.events[opcode]
            args = self._unmarshal(message.signature.replace("?", ""), body)
            if proxy.alive and proxy.handler is not None:
                proxy.handler(message.name, args)
        del buf[:offset]

    def _unmarshal(self, signature: str, body: bytes) -> list[Any]:
        args: list[Any] = []
        pos = 0
        for letter in signature:
            if letter == "h":
                args.append(self._fds.popleft() if self._fds else -1)
                continue
            (word,) = _U32.unpack_from(body, pos)
            pos += 4
            if letter == "i":
                args.append(_I32.unpack(_U32.pack(word))[0])
            elif letter in "uon":
                args.append(word)
            elif letter == "f":
                args.append(_I32.unpack(_U32.pack(word))[0] / 256.0)
            elif letter == "s":
                args.append(None if word == 0 else body[pos: pos + word - 1].decode(errors="replace"))
                pos += _pad(word)
            elif letter == "a":
                args.append(body[pos: pos + word])
                pos += _pad(word)
        return args

    def _on_display(self, event: str, args: list[Any]) -> None:
        if event == "delete_id":
            (gone,) = args
            proxy = self._objects.pop(gone, None)
            if proxy is not None:
                proxy.alive = False
            self._free_ids.append(gone)
            return
        if event == "error":
            object_id, code, message = args
            proxy = self._objects.get(object_id)
            interface = proxy.interface.name if proxy is not None else "unknown"
            self.close()
            raise self.error(f"the Wayland compositor reported an error on {interface}@{object_id} "
                             f"(code {code}): {message}", interface=interface, object=object_id, code=code)

    def _on_registry(self, event: str, args: list[Any]) -> None:
        if event == "global":
            name, interface, version = args
            self.globals[name] = Global(name, interface, version)
        elif event == "global_remove":
            self.globals.pop(args[0], None)

    def roundtrip(self, timeout: float = 10.0) -> None:
        """Send wl_display.sync and dispatch events until its callback is done: every
        request sent before has been processed by the compositor."""
        done: list[bool] = []
        callback = self.display.request("sync", WL_CALLBACK)
        assert callback is not None
        callback.handler = lambda _event, _args: done.append(True)
        self.wait(lambda: bool(done), timeout, "wl_display.sync")

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Dispatch events until ``condition()`` holds; raise after ``timeout`` seconds."""
        import time

        deadline = time.monotonic() + timeout
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.error(f"the Wayland compositor did not answer {what} within {timeout:g} s",
                                 socket=self.path)
            self.read_events(left)

    # -- shared memory -------------------------------------------------------------

    def shm_buffer(self, shm: Proxy, width: int, height: int, stride: int, fmt: int) -> ShmBuffer:
        """A wl_buffer of ``height`` rows of ``stride`` bytes in a new memfd pool."""
        size = stride * height
        fd = os.memfd_create("deskpilot-wl-shm", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            memory = mmap.mmap(fd, size)
        except OSError:
            os.close(fd)
            raise
        pool = shm.request("create_pool", WL_SHM_POOL, fd, size)
        assert pool is not None
        buffer = pool.request("create_buffer", WL_BUFFER, 0, width, height, stride, fmt)
        assert buffer is not None
        return ShmBuffer(buffer, pool, memory, width, height, stride, fmt, fd)

    def close(self) -> None:
        """Close the socket (every object of this client dies with it). Idempotent."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        while self._fds:
            os.close(self._fds.popleft())
