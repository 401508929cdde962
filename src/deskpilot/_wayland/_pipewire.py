"""PipeWire video frames through ctypes on ``libpipewire-0.3.so.0`` (no GStreamer, no -dev
package): one :class:`PipeWireStream` per screencast node.

The stream runs on PipeWire's own thread loop. Its ``process`` callback copies the newest
frame once into one of three reused BGRA buffers (the one that is neither the newest nor
the one a caller holds), so :meth:`PipeWireStream.latest` hands out a view with no second
copy that stays valid until the next call. Every frame that changed a pixel bumps a counter, stamps a time
and writes to a pipe: Mutter sends a frame only on damage, so the pipe is a change signal
(``fileno()`` / :meth:`PipeWireStream.drain`).

The format offered (an EnumFormat SPA pod: video/raw, BGRx or BGRA, any size and rate) is
built here byte by byte; 224 bytes, the same as ``spa_pod_builder_add_object`` writes.
Struct layouts are x86-64/aarch64 (LP64): pw_buffer 32 bytes, spa_buffer 24, spa_data 40
(data at 24, chunk at 32), spa_chunk 16.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import struct
import threading
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from deskpilot._errors import CaptureError, PlatformError

__all__ = ["PipeWireStream", "cursor_meta_pod", "enum_format_pod", "parse_video_size"]

Pixels = npt.NDArray[np.uint8]

# SPA constants (spa/param/param.h, spa/utils/type.h, spa/param/video/raw.h, format.h).
_SPA_TYPE_ID, _SPA_TYPE_INT, _SPA_TYPE_RECTANGLE, _SPA_TYPE_FRACTION = 3, 4, 10, 11
_SPA_TYPE_OBJECT, _SPA_TYPE_CHOICE = 15, 19
_SPA_TYPE_OBJECT_FORMAT = 0x40003
_SPA_PARAM_ENUM_FORMAT, _SPA_PARAM_FORMAT, _SPA_PARAM_META = 3, 4, 6
_SPA_TYPE_OBJECT_PARAM_META = 0x40005
_SPA_PARAM_META_TYPE, _SPA_PARAM_META_SIZE = 1, 2
_SPA_META_CURSOR = 5
#: sizeof(struct spa_meta_cursor) + sizeof(struct spa_meta_bitmap): 28 + 20 bytes.
_CURSOR_META_HEADER = 28 + 20
_SPA_FORMAT_MEDIA_TYPE, _SPA_FORMAT_MEDIA_SUBTYPE = 1, 2
_SPA_FORMAT_VIDEO_FORMAT, _SPA_FORMAT_VIDEO_SIZE, _SPA_FORMAT_VIDEO_FRAMERATE = 0x20001, 0x20003, 0x20004
_SPA_MEDIA_TYPE_VIDEO, _SPA_MEDIA_SUBTYPE_RAW = 2, 1
_SPA_CHOICE_RANGE, _SPA_CHOICE_ENUM = 1, 3
SPA_VIDEO_FORMAT_BGRX, SPA_VIDEO_FORMAT_BGRA = 8, 12
_PW_DIRECTION_INPUT = 0
_PW_STREAM_FLAG_AUTOCONNECT, _PW_STREAM_FLAG_MAP_BUFFERS = 1 << 0, 1 << 2
_PW_STREAM_STATE_ERROR = -1
#: Seconds a stream may send buffers without pixels before its first frame is asked for
#: again (wait_first_frame); Mutter's first buffer normally is its first frame.
_PIXELS_AFTER_BUFFER = 1.0


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def _pod(pod_type: int, body: bytes) -> bytes:
    """A pod: header (body size, type) + body, padded to 8 bytes."""
    return _pad8(struct.pack("<II", len(body), pod_type) + body)


def _choice(choice: int, child_type: int, child_size: int, values: list[bytes]) -> bytes:
    body = struct.pack("<II", choice, 0) + struct.pack("<II", child_size, child_type) + b"".join(values)
    return _pod(_SPA_TYPE_CHOICE, body)


def _prop(key: int, value: bytes) -> bytes:
    return struct.pack("<II", key, 0) + value


def enum_format_pod() -> bytes:
    """The EnumFormat object: video/raw, format BGRx (preferred) or BGRA, size 1x1..16384x16384
    (default 1920x1080), framerate 0/1..1000/1 (default 60/1)."""
    rect = [struct.pack("<II", *wh) for wh in ((1920, 1080), (1, 1), (16384, 16384))]
    rate = [struct.pack("<II", *nd) for nd in ((60, 1), (0, 1), (1000, 1))]
    formats = [struct.pack("<I", f) for f in (SPA_VIDEO_FORMAT_BGRX, SPA_VIDEO_FORMAT_BGRX, SPA_VIDEO_FORMAT_BGRA)]
    body = (
        struct.pack("<II", _SPA_TYPE_OBJECT_FORMAT, _SPA_PARAM_ENUM_FORMAT)
        + _prop(_SPA_FORMAT_MEDIA_TYPE, _pod(_SPA_TYPE_ID, struct.pack("<I", _SPA_MEDIA_TYPE_VIDEO)))
        + _prop(_SPA_FORMAT_MEDIA_SUBTYPE, _pod(_SPA_TYPE_ID, struct.pack("<I", _SPA_MEDIA_SUBTYPE_RAW)))
        + _prop(_SPA_FORMAT_VIDEO_FORMAT, _choice(_SPA_CHOICE_ENUM, _SPA_TYPE_ID, 4, formats))
        + _prop(_SPA_FORMAT_VIDEO_SIZE, _choice(_SPA_CHOICE_RANGE, _SPA_TYPE_RECTANGLE, 8, rect))
        + _prop(_SPA_FORMAT_VIDEO_FRAMERATE, _choice(_SPA_CHOICE_RANGE, _SPA_TYPE_FRACTION, 8, rate))
    )
    return _pod(_SPA_TYPE_OBJECT, body)


def cursor_meta_pod() -> bytes:
    """The ParamMeta object asking for SPA_META_Cursor (the pointer position, and room for a
    bitmap of up to 1024x1024, 64x64 preferred, as OBS asks Mutter for it)."""
    sizes = [struct.pack("<i", _CURSOR_META_HEADER + w * w * 4) for w in (64, 1, 1024)]
    body = (
        struct.pack("<II", _SPA_TYPE_OBJECT_PARAM_META, _SPA_PARAM_META)
        + _prop(_SPA_PARAM_META_TYPE, _pod(_SPA_TYPE_ID, struct.pack("<I", _SPA_META_CURSOR)))
        + _prop(_SPA_PARAM_META_SIZE, _choice(_SPA_CHOICE_RANGE, _SPA_TYPE_INT, 4, sizes))
    )
    return _pod(_SPA_TYPE_OBJECT, body)


def parse_video_size(pod: bytes) -> tuple[int, int, int] | None:
    """(width, height, video format) of a negotiated Format object, or None when the pod is
    not one. A value wrapped in a Choice (Mutter wraps fixated ones in a Choice of kind None)
    counts as its first value."""
    if len(pod) < 16:
        return None
    size, pod_type = struct.unpack_from("<II", pod, 0)
    if pod_type != _SPA_TYPE_OBJECT:
        return None
    end = min(8 + size, len(pod))
    offset = 16  # header + (object type, id)
    width = height = fmt = -1
    while offset + 16 <= end:
        key, _flags, vsize, vtype = struct.unpack_from("<IIII", pod, offset)
        value = offset + 16
        next_offset = value + vsize + (-vsize % 8)
        if vtype == _SPA_TYPE_CHOICE and vsize >= 16:
            # A fixated value may still be wrapped in a Choice of kind None: its first value.
            _choice_kind, _choice_flags, _child_size, child_type = struct.unpack_from("<IIII", pod, value)
            vtype, value = child_type, value + 16
        if key == _SPA_FORMAT_VIDEO_SIZE and vtype == _SPA_TYPE_RECTANGLE:
            width, height = struct.unpack_from("<II", pod, value)
        elif key == _SPA_FORMAT_VIDEO_FORMAT and vtype == _SPA_TYPE_ID:
            (fmt,) = struct.unpack_from("<I", pod, value)
        offset = next_offset
    if width <= 0 or height <= 0:
        return None
    return width, height, fmt


# -- the library ---------------------------------------------------------------------------

_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_STATE_CHANGED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p)
_PARAM_CHANGED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)
_PROCESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _StreamEvents(ctypes.Structure):
    """struct pw_stream_events, version 2 (a version and 11 callbacks; unused ones NULL)."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("destroy", ctypes.c_void_p),
        ("state_changed", _STATE_CHANGED),
        ("control_info", ctypes.c_void_p),
        ("io_changed", ctypes.c_void_p),
        ("param_changed", _PARAM_CHANGED),
        ("add_buffer", ctypes.c_void_p),
        ("remove_buffer", ctypes.c_void_p),
        ("process", _PROCESS),
        ("drained", ctypes.c_void_p),
        ("command", ctypes.c_void_p),
        ("trigger_done", ctypes.c_void_p),
    ]


class _SpaChunk(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint32), ("size", ctypes.c_uint32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_int32)]


class _SpaData(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("fd", ctypes.c_int64),
                ("mapoffset", ctypes.c_uint32), ("maxsize", ctypes.c_uint32), ("data", ctypes.c_void_p),
                ("chunk", ctypes.POINTER(_SpaChunk))]


class _SpaMeta(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("data", ctypes.c_void_p)]


class _SpaMetaCursor(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("x", ctypes.c_int32),
                ("y", ctypes.c_int32), ("hot_x", ctypes.c_int32), ("hot_y", ctypes.c_int32),
                ("bitmap_offset", ctypes.c_uint32)]


class _SpaBuffer(ctypes.Structure):
    _fields_ = [("n_metas", ctypes.c_uint32), ("n_datas", ctypes.c_uint32), ("metas", ctypes.POINTER(_SpaMeta)),
                ("datas", ctypes.POINTER(_SpaData))]


class _PwBuffer(ctypes.Structure):
    _fields_ = [("buffer", ctypes.POINTER(_SpaBuffer)), ("user_data", ctypes.c_void_p),
                ("size", ctypes.c_uint64), ("requested", ctypes.c_uint64)]


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _library() -> ctypes.CDLL:
    """libpipewire-0.3 with its prototypes, initialised once per process."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        try:
            lib = ctypes.CDLL("libpipewire-0.3.so.0")
        except OSError as exc:
            raise PlatformError(f"libpipewire-0.3 is not installed ({exc}): install libpipewire-0.3-0",
                                library="libpipewire-0.3.so.0") from exc
        vp, u32 = ctypes.c_void_p, ctypes.c_uint32
        protos: dict[str, tuple[Any, list[Any]]] = {
            "pw_init": (None, [vp, vp]),
            "pw_thread_loop_new": (vp, [ctypes.c_char_p, vp]),
            "pw_thread_loop_start": (ctypes.c_int, [vp]),
            "pw_thread_loop_stop": (None, [vp]),
            "pw_thread_loop_destroy": (None, [vp]),
            "pw_thread_loop_lock": (None, [vp]),
            "pw_thread_loop_unlock": (None, [vp]),
            "pw_thread_loop_get_loop": (vp, [vp]),
            "pw_properties_new_string": (vp, [ctypes.c_char_p]),
            "pw_stream_new_simple": (vp, [vp, ctypes.c_char_p, vp, ctypes.POINTER(_StreamEvents), vp]),
            "pw_context_new": (vp, [vp, vp, ctypes.c_size_t]),
            "pw_context_connect_fd": (vp, [vp, ctypes.c_int, vp, ctypes.c_size_t]),
            "pw_context_destroy": (None, [vp]),
            "pw_core_disconnect": (ctypes.c_int, [vp]),
            "pw_stream_new": (vp, [vp, ctypes.c_char_p, vp]),
            "pw_stream_add_listener": (None, [vp, vp, ctypes.POINTER(_StreamEvents), vp]),
            "pw_stream_connect": (ctypes.c_int, [vp, ctypes.c_int, u32, ctypes.c_int, ctypes.POINTER(vp), u32]),
            "pw_stream_disconnect": (ctypes.c_int, [vp]),
            "pw_stream_update_params": (ctypes.c_int, [vp, ctypes.POINTER(vp), u32]),
            "pw_stream_destroy": (None, [vp]),
            "pw_stream_dequeue_buffer": (ctypes.POINTER(_PwBuffer), [vp]),
            "pw_stream_queue_buffer": (ctypes.c_int, [vp, ctypes.POINTER(_PwBuffer)]),
        }
        for name, (restype, argtypes) in protos.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        lib.pw_init(None, None)
        _lib = lib
        return lib


class PipeWireStream:
    """Frames of one PipeWire video node (a Mutter screencast stream), newest kept.

    ``remote_fd``: a connection to PipeWire to use instead of the default daemon (the
    xdg-desktop-portal hands one out); the stream owns it from then on (closed with it).
    Raises :class:`PlatformError` when libpipewire is missing or the stream cannot be created.
    """

    def __init__(self, node_id: int, *, name: str = "deskpilot", cursor: bool = False,
                 remote_fd: int | None = None) -> None:
        self._pw = _library()
        self.node_id = node_id
        #: Ask for the pointer as metadata (the stream recorded with cursor-mode 2).
        self.want_cursor = cursor
        #: The pointer in this stream's frame pixels as the newest metadata said, and when.
        self.cursor: tuple[int, int] | None = None
        self.cursor_at = 0.0
        #: The newest (when, position) metadata updates, oldest first: which came after a
        #: motion this process sent is decided against them (``pointer_position``).
        self.cursor_log: collections.deque[tuple[float, tuple[int, int]]] = collections.deque(maxlen=64)
        self._lock = threading.Lock()
        self._buffers: list[Pixels] = []
        self._newest = -1  # index into _buffers, -1 before the first frame
        self._held = -1  # the buffer a caller holds a view of
        self.size: tuple[int, int] | None = None  # negotiated (width, height)
        self.frames = 0  # frames that changed something
        self.unchanged = 0  # frames equal to the one before (not kept, not signalled)
        self.copy_seconds = 0.0  # spent comparing and copying frames on PipeWire's thread
        self.last_frame_at = 0.0  # time.monotonic() of the newest frame
        self.error: str | None = None
        #: Times the first frame was asked for again by linking anew (wait_first_frame).
        self.reconnects = 0
        self._first_buffer_at = 0.0  # monotonic time of the first buffer since (re)connecting
        self._frame_arrived = threading.Condition(self._lock)
        self._signal_r, self._signal_w = os.pipe()
        os.set_blocking(self._signal_r, False)
        os.set_blocking(self._signal_w, False)
        # The callbacks must outlive the stream: kept on the instance.
        self._events = _StreamEvents()
        self._events.version = 2
        self._events.state_changed = _STATE_CHANGED(self._on_state)
        self._events.param_changed = _PARAM_CHANGED(self._on_param)
        self._events.process = _PROCESS(self._on_process)
        self._loop = self._pw.pw_thread_loop_new(b"deskpilot-pw", None)
        if not self._loop:
            raise PlatformError("pw_thread_loop_new failed", call="pw_thread_loop_new")
        self._stream: int | None = None
        self._context: int | None = None
        self._core: int | None = None
        # struct spa_hook (six pointers) for pw_stream_add_listener; kept as long as the stream.
        self._hook = ctypes.create_string_buffer(64)
        self._closed = False
        try:
            if self._pw.pw_thread_loop_start(self._loop) < 0:
                raise PlatformError("pw_thread_loop_start failed", call="pw_thread_loop_start")
            self._pw.pw_thread_loop_lock(self._loop)
            try:
                props = self._pw.pw_properties_new_string(
                    b"media.type=Video media.category=Capture media.role=Screen")
                loop = self._pw.pw_thread_loop_get_loop(self._loop)
                if remote_fd is None:
                    stream = self._pw.pw_stream_new_simple(loop, name.encode(), props, ctypes.byref(self._events),
                                                           None)
                else:
                    fd, remote_fd = remote_fd, None  # _stream_on_fd owns it from here
                    stream = self._stream_on_fd(loop, fd, name, props)
                if not stream:
                    raise PlatformError("pw_stream_new_simple failed (is PipeWire running?)",
                                        call="pw_stream_new_simple")
                self._stream = stream
                self._connect()
            finally:
                self._pw.pw_thread_loop_unlock(self._loop)
        except BaseException:
            if remote_fd is not None:
                os.close(remote_fd)
            self.close()
            raise

    def _connect(self) -> None:
        """pw_stream_connect to the node (called with the loop locked)."""
        pod = ctypes.create_string_buffer(enum_format_pod())
        params = (ctypes.c_void_p * 1)(ctypes.addressof(pod))
        rc = self._pw.pw_stream_connect(self._stream, _PW_DIRECTION_INPUT, self.node_id,
                                        _PW_STREAM_FLAG_AUTOCONNECT | _PW_STREAM_FLAG_MAP_BUFFERS, params, 1)
        if rc < 0:
            raise PlatformError(f"pw_stream_connect to node {self.node_id} failed ({rc})",
                                call="pw_stream_connect")

    def _reconnect(self) -> None:
        """Link the stream to its node again: the producer sees its consumer go and come back
        (Mutter disables and re-enables the stream, and paints it anew)."""
        self._pw.pw_thread_loop_lock(self._loop)
        try:
            if self._stream is None:
                return
            self._pw.pw_stream_disconnect(self._stream)
            with self._lock:
                self._first_buffer_at = 0.0
            self._connect()
            self.reconnects += 1
        finally:
            self._pw.pw_thread_loop_unlock(self._loop)

    def _stream_on_fd(self, loop: int, remote_fd: int, name: str, props: int) -> int | None:
        """A stream on a core connected through ``remote_fd`` (called with the loop locked;
        the fd is PipeWire's once handed to ``pw_context_connect_fd``, whatever it answers)."""
        self._context = self._pw.pw_context_new(loop, None, 0)
        if not self._context:
            os.close(remote_fd)
            raise PlatformError("pw_context_new failed", call="pw_context_new")
        self._core = self._pw.pw_context_connect_fd(self._context, remote_fd, None, 0)
        if not self._core:
            raise PlatformError("pw_context_connect_fd failed: the portal's PipeWire connection was refused",
                                call="pw_context_connect_fd")
        stream = self._pw.pw_stream_new(self._core, name.encode(), props)
        if stream:
            self._pw.pw_stream_add_listener(stream, ctypes.addressof(self._hook), ctypes.byref(self._events), None)
        return stream  # type: ignore[no-any-return]

    # -- PipeWire's thread ---------------------------------------------------------------

    def _on_state(self, _data: Any, _old: int, state: int, error: bytes | None) -> None:
        if state == _PW_STREAM_STATE_ERROR:
            with self._lock:
                self.error = (error or b"unknown error").decode(errors="replace")
                self._frame_arrived.notify_all()

    def _on_param(self, _data: Any, param_id: int, pod: int | None) -> None:
        if param_id != _SPA_PARAM_FORMAT or not pod:
            return
        (size,) = struct.unpack("<I", ctypes.string_at(pod, 4))
        parsed = parse_video_size(ctypes.string_at(pod, 8 + size))
        if parsed is None:
            return
        width, height, _fmt = parsed
        if self.want_cursor and self._stream is not None:
            # Ask for the pointer as metadata on every buffer (runs on PipeWire's thread,
            # inside the loop: no lock to take).
            meta = ctypes.create_string_buffer(cursor_meta_pod())
            params = (ctypes.c_void_p * 1)(ctypes.addressof(meta))
            self._pw.pw_stream_update_params(self._stream, params, 1)
        with self._lock:
            if self.size != (width, height):
                self.size = (width, height)
                self._buffers = [np.zeros((height, width, 4), np.uint8) for _ in range(3)]
                self._newest = self._held = -1

    def _on_process(self, _data: Any) -> None:
        stream = self._stream
        if stream is None:
            return
        pw_buffer = self._pw.pw_stream_dequeue_buffer(stream)
        if not pw_buffer:
            return
        try:
            if not self._first_buffer_at:
                with self._lock:
                    self._first_buffer_at = time.monotonic()
                    self._frame_arrived.notify_all()
            spa = pw_buffer.contents.buffer.contents
            for i in range(spa.n_metas if spa.metas else 0):
                meta = spa.metas[i]
                if meta.type == _SPA_META_CURSOR and meta.data and meta.size >= 28:
                    cursor = _SpaMetaCursor.from_address(meta.data)
                    # id 0: no pointer update in this buffer (spa_meta_cursor_is_valid).
                    if cursor.id != 0:
                        self.cursor = (int(cursor.x), int(cursor.y))
                        self.cursor_at = time.monotonic()
                        self.cursor_log.append((self.cursor_at, self.cursor))
            if spa.n_datas < 1:
                return
            data = spa.datas[0]
            chunk = data.chunk.contents
            if not data.data or chunk.size == 0 or self.size is None:
                return  # a buffer without pixels (metadata only: the screen did not change)
            width, height = self.size
            stride = chunk.stride or width * 4
            with self._lock:
                target = next(i for i in range(3) if i not in (self._newest, self._held))
                buf = self._buffers[target]
                newest = self._buffers[self._newest] if self._newest >= 0 else None
            started = time.perf_counter()
            source = (ctypes.c_uint8 * (stride * height)).from_address(data.data + chunk.offset)
            rows = np.frombuffer(memoryview(source).cast("B"), np.uint8).reshape(height, stride)
            pixels = rows[:, : width * 4]
            if newest is not None and np.array_equal(newest.reshape(height, width * 4), pixels):
                # Mutter paints the stream on every stage redraw, a move of its (software,
                # hidden from the stream) pointer included: a frame like the last is no change.
                self.unchanged += 1
                self.copy_seconds += time.perf_counter() - started
                return
            np.copyto(buf.reshape(height, width * 4), pixels)
            self.copy_seconds += time.perf_counter() - started
            with self._lock:
                self._newest = target
                self.frames += 1
                self.last_frame_at = time.monotonic()
                self._frame_arrived.notify_all()
        finally:
            self._pw.pw_stream_queue_buffer(stream, pw_buffer)
        # A full pipe means the reader is behind: it will see frames anyway.
        with contextlib.suppress(BlockingIOError):
            os.write(self._signal_w, b"\x01")

    # -- callers -------------------------------------------------------------------------

    def wait_first_frame(self, timeout: float) -> None:
        """Block until a frame has arrived; raises :class:`CaptureError` after ``timeout``.

        Mutter 43 can send a new stream one buffer with only the pointer's metadata and then
        nothing until the screen changes: its first paint of the stream is lost behind that
        buffer (seen 4 in 20 starts with a second monitor and a pointer on it, on a loaded
        machine). A screen that does not change would then never be captured. So a stream
        that sent buffers but no pixels for ``_PIXELS_AFTER_BUFFER`` seconds, or nothing at
        all for half of ``timeout``, is linked to its node again: the producer paints it anew.
        """
        started = time.monotonic()
        deadline = started + timeout
        linked_at = started
        with self._lock:
            while self._newest < 0:
                if self.error:
                    raise CaptureError(f"PipeWire stream of node {self.node_id}: {self.error}",
                                       node=self.node_id)
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    links = self.reconnects + 1
                    raise CaptureError(f"no frame from PipeWire node {self.node_id} within {timeout:g} s "
                                       f"(linked {links} time{'s' if links > 1 else ''})", node=self.node_id,
                                       links=links)
                if self._first_buffer_at:
                    relink_at = self._first_buffer_at + _PIXELS_AFTER_BUFFER
                else:
                    relink_at = linked_at + timeout / 2
                can_relink = left > _PIXELS_AFTER_BUFFER  # time left for the new link's frame
                if can_relink and now >= relink_at:
                    self._lock.release()
                    try:
                        self._reconnect()
                    finally:
                        self._lock.acquire()
                    linked_at = time.monotonic()
                    continue
                self._frame_arrived.wait(min(left, relink_at - now) if can_relink else left)

    def latest(self) -> Pixels:
        """The newest frame (HxWx4 BGRA, alpha undefined for BGRx): a view valid until the next
        call, never written meanwhile."""
        with self._lock:
            if self._newest < 0:
                raise CaptureError(f"no frame from PipeWire node {self.node_id} yet", node=self.node_id)
            self._held = self._newest
            return self._buffers[self._held]

    def fileno(self) -> int:
        """Readable when frames arrived since the last :meth:`drain`."""
        return self._signal_r

    def drain(self) -> int:
        """How many frames arrived since the last drain (0 if none)."""
        count = 0
        while True:
            try:
                chunk = os.read(self._signal_r, 4096)
            except BlockingIOError:
                return count
            if not chunk:
                return count
            count += len(chunk)

    def close(self) -> None:
        """Disconnect and destroy the stream and its thread loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._loop:
            if self._stream is not None:
                self._pw.pw_thread_loop_lock(self._loop)
                stream, self._stream = self._stream, None
                self._pw.pw_stream_disconnect(stream)
                self._pw.pw_stream_destroy(stream)
                self._pw.pw_thread_loop_unlock(self._loop)
            if self._core is not None:
                self._pw.pw_thread_loop_lock(self._loop)
                self._pw.pw_core_disconnect(self._core)
                self._core = None
                self._pw.pw_thread_loop_unlock(self._loop)
            self._pw.pw_thread_loop_stop(self._loop)
            if self._context is not None:
                self._pw.pw_context_destroy(self._context)
                self._context = None
            self._pw.pw_thread_loop_destroy(self._loop)
            self._loop = None
        for fd in (self._signal_r, self._signal_w):
            os.close(fd)
