"""The Wayland wire client against a scripted peer on a real Unix socket: framing, argument
marshalling (strings padded, new ids, fds as SCM_RIGHTS), the registry, round trips,
delete_id reuse and compositor errors (the sway tier runs it against a real compositor)."""

from __future__ import annotations

import array
import os
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskpilot._errors import CaptureError
from deskpilot._wayland._wire import WL_SHM, WL_SHM_POOL, Connection, fixed, socket_path

Message = tuple[int, int, bytes, list[int]]  # object id, opcode, body, fds


def _string(text: str) -> bytes:
    data = text.encode() + b"\0"
    return struct.pack("=I", len(data)) + data + b"\0" * (-len(data) % 4)


def _message(object_id: int, opcode: int, body: bytes) -> bytes:
    return struct.pack("=II", object_id, ((8 + len(body)) << 16) | opcode) + body


class Peer:
    """A scripted compositor: answers get_registry with two globals and sync with done +
    delete_id; records every request; ``extra`` is sent before the next sync's answer."""

    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.received: list[Message] = []
        self.extra = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        buf = b""
        fds: list[int] = []
        with conn:
            while True:
                data, ancdata, _flags, _addr = conn.recvmsg(4096, socket.CMSG_SPACE(16))
                if not data:
                    return
                for _level, _kind, payload in ancdata:
                    got = array.array("i")
                    got.frombytes(payload)
                    fds.extend(got)
                buf += data
                while len(buf) >= 8:
                    object_id, word = struct.unpack_from("=II", buf)
                    size = word >> 16
                    if len(buf) < size:
                        break
                    body, buf = buf[8:size], buf[size:]
                    opcode = word & 0xFFFF
                    # create_pool carries one fd; everything else none.
                    taken = [fds.pop(0)] if (object_id, opcode) == (3, 0) and fds else []
                    self.received.append((object_id, opcode, body, taken))
                    if object_id == 1 and opcode == 1:  # get_registry(new id)
                        (registry,) = struct.unpack("=I", body)
                        conn.sendall(_message(registry, 0, struct.pack("=I", 1) + _string("wl_shm") + struct.pack("=I", 1))
                                     + _message(registry, 0, struct.pack("=I", 2) + _string("zwlr_screencopy_manager_v1")
                                                + struct.pack("=I", 3)))
                    elif object_id == 1 and opcode == 0:  # sync(new id)
                        (callback,) = struct.unpack("=I", body)
                        extra, self.extra = self.extra, b""
                        conn.sendall(extra + _message(callback, 0, struct.pack("=I", 7))
                                     + _message(1, 1, struct.pack("=I", callback)))

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[tuple[Peer, dict[str, str]]]:
    p = Peer(tmp_path / "wayland-test")
    try:
        yield p, {"XDG_RUNTIME_DIR": str(tmp_path), "WAYLAND_DISPLAY": "wayland-test"}
    finally:
        p.close()


def test_socket_path() -> None:
    assert socket_path({"XDG_RUNTIME_DIR": "/run/user/1", "WAYLAND_DISPLAY": "wayland-1"}) == "/run/user/1/wayland-1"
    assert socket_path({"WAYLAND_DISPLAY": "/abs/sock"}) == "/abs/sock"
    assert socket_path({"XDG_RUNTIME_DIR": "/r"}) == "/r/wayland-0"
    with pytest.raises(Exception, match="XDG_RUNTIME_DIR"):
        socket_path({"WAYLAND_DISPLAY": "wayland-1"})
    assert fixed(1.5) == 384 and fixed(-0.25) == -64


def test_the_registry_bind_and_an_fd(peer: tuple[Peer, dict[str, str]]) -> None:
    server, env = peer
    conn = Connection.connect(CaptureError, env)
    try:
        assert {g.interface: (g.name, g.version) for g in conn.globals.values()} == {
            "wl_shm": (1, 1), "zwlr_screencopy_manager_v1": (2, 3)}
        # get_registry(2), sync(3): the callback's id comes back through delete_id for reuse.
        assert server.received[:2] == [(1, 1, struct.pack("=I", 2), []), (1, 0, struct.pack("=I", 3), [])]
        shm = conn.bind(conn.find_global("wl_shm")[0], WL_SHM)
        assert shm.id == 3  # the freed callback id, reused
        fd = os.memfd_create("pool")
        os.ftruncate(fd, 4096)
        try:
            pool = shm.request("create_pool", WL_SHM_POOL, fd, 4096)
            assert pool is not None and pool.id == 4
            conn.roundtrip()
        finally:
            os.close(fd)
        bind = server.received[2]
        assert bind[:2] == (2, 0)  # wl_registry.bind: name, interface, version, new id
        assert bind[2] == struct.pack("=I", 1) + _string("wl_shm") + struct.pack("=II", 1, 3)
        create_pool = server.received[3]
        assert create_pool[:3] == (3, 0, struct.pack("=Ii", 4, 4096))
        (passed,) = create_pool[3]
        assert os.fstat(passed).st_size == 4096  # the memfd itself went across
        os.close(passed)
    finally:
        conn.close()


def test_a_compositor_error_names_the_object(peer: tuple[Peer, dict[str, str]]) -> None:
    server, env = peer
    conn = Connection.connect(CaptureError, env)
    shm = conn.bind(conn.find_global("wl_shm")[0], WL_SHM)
    server.extra = _message(1, 0, struct.pack("=II", shm.id, 2) + _string("invalid stride"))
    with pytest.raises(CaptureError, match=rf"wl_shm@{shm.id} \(code 2\): invalid stride"):
        conn.roundtrip()
    assert not conn.open


def test_no_compositor(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="cannot connect to the Wayland compositor"):
        Connection.connect(CaptureError, {"XDG_RUNTIME_DIR": str(tmp_path), "WAYLAND_DISPLAY": "none"})
