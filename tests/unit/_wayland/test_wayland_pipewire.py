"""The SPA pods of the PipeWire binding: the EnumFormat offered (built byte by byte) and
the negotiated Format read back, on the bytes Mutter 43 sent (captured in the Mutter tier);
and when a stream's first frame is asked for again."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import pytest

from deskpilot._wayland._pipewire import (
    SPA_VIDEO_FORMAT_BGRA,
    SPA_VIDEO_FORMAT_BGRX,
    enum_format_pod,
    parse_video_size,
)

# The Format param Mutter 43.8 negotiated for a 1920x1080 virtual monitor (param_changed,
# id 4): every value wrapped in a Choice of kind None.
MUTTER_FORMAT = bytes.fromhex(
    "180100000f0000000300040004000000010000000000000014000000130000000000000000000000040000000300"
    "00000200000000000000020000000000000014000000130000000000000000000000040000000300000001000000"
    "00000000010002000000000014000000130000000000000000000000040000000300000008000000000000000300"
    "02000000000020000000130000000000000000000000080000000a00000080070000380400008007000038040000"
    "040002000000000020000000130000000000000000000000080000000b0000000000000001000000000000000100"
    "0000050002000000000028000000130000000000000000000000080000000b0000003c0000000100000001000000"
    "010000003c00000001000000"
)


def test_the_enum_format_pod_is_what_spa_pod_builder_writes() -> None:
    pod = enum_format_pod()
    assert len(pod) == 224  # measured: spa_pod_builder_add_object writes the same 224 bytes
    size, pod_type = struct.unpack_from("<II", pod)
    assert (size, pod_type) == (216, 15)  # an Object
    assert struct.unpack_from("<II", pod, 8) == (0x40003, 3)  # Format, EnumFormat
    # The format choice: Enum of Ids, BGRx preferred, then BGRx and BGRA.
    assert struct.pack("<III", SPA_VIDEO_FORMAT_BGRX, SPA_VIDEO_FORMAT_BGRX, SPA_VIDEO_FORMAT_BGRA) in pod


def test_mutters_negotiated_format_is_read() -> None:
    assert parse_video_size(MUTTER_FORMAT[: 8 + struct.unpack_from("<I", MUTTER_FORMAT)[0]]) == (
        1920, 1080, SPA_VIDEO_FORMAT_BGRX)


def test_not_a_format_is_none() -> None:
    assert parse_video_size(b"") is None
    assert parse_video_size(struct.pack("<II", 8, 4) + b"\0" * 8) is None  # an Int pod
    # An object without a size property.
    assert parse_video_size(struct.pack("<IIII", 8, 15, 0x40003, 4)) is None


def test_the_cursor_meta_pod_asks_for_spa_meta_cursor() -> None:
    from deskpilot._wayland._pipewire import cursor_meta_pod

    pod = cursor_meta_pod()
    size, pod_type = struct.unpack_from("<II", pod)
    assert pod_type == 15 and len(pod) == 8 + size
    assert struct.unpack_from("<II", pod, 8) == (0x40005, 6)  # ParamMeta, Meta
    # type: Id SPA_META_Cursor (5); size: a Range of ints, 64x64 preferred, 1x1..1024x1024.
    assert struct.unpack_from("<IIIII", pod, 16) == (1, 0, 4, 3, 5)
    ranges = struct.unpack_from("<iii", pod, 16 + 24 + 8 + 8 + 8 + 8)
    assert ranges == (48 + 64 * 64 * 4, 48 + 4, 48 + 1024 * 1024 * 4)


class _Producer:
    """What a PipeWire producer does with each link of a PipeWireStream (the seam under
    ``wait_first_frame``): per link, whether it sends a pixel-less buffer first and whether a
    frame follows, from a thread as PipeWire's would."""

    def __init__(self, links: list[tuple[bool, bool]]) -> None:
        self.links = links
        self.linked = 0

    def stream(self) -> Any:
        from deskpilot._wayland import _pipewire

        stream = object.__new__(_pipewire.PipeWireStream)
        stream.node_id = 39
        stream.error = None
        stream.reconnects = 0
        stream._first_buffer_at = 0.0
        stream._newest = -1
        stream._lock = threading.Lock()
        stream._frame_arrived = threading.Condition(stream._lock)

        def relink() -> None:
            stream.reconnects += 1
            self.link(stream)

        stream._reconnect = relink  # type: ignore[method-assign]
        self.link(stream)
        return stream

    def link(self, stream: Any) -> None:
        with stream._lock:
            stream._first_buffer_at = 0.0
        buffer_first, frame = self.links[min(self.linked, len(self.links) - 1)]
        self.linked += 1

        def produce() -> None:
            time.sleep(0.05)
            with stream._lock:
                if buffer_first:
                    stream._first_buffer_at = time.monotonic()
                if frame:
                    stream._newest = 0
                stream._frame_arrived.notify_all()

        threading.Thread(target=produce, daemon=True).start()


@pytest.fixture
def quick_relink(monkeypatch: pytest.MonkeyPatch) -> None:
    from deskpilot._wayland import _pipewire

    monkeypatch.setattr(_pipewire, "_PIXELS_AFTER_BUFFER", 0.2)


@pytest.mark.usefixtures("quick_relink")
def test_a_first_buffer_without_pixels_gets_the_stream_linked_again() -> None:
    # Mutter 43's lost first paint: a metadata-only buffer, then nothing; the next link paints.
    producer = _Producer([(True, False), (True, True)])
    stream = producer.stream()
    started = time.monotonic()
    stream.wait_first_frame(5.0)
    assert (stream.reconnects, producer.linked) == (1, 2)
    assert 0.2 <= time.monotonic() - started < 2.0


@pytest.mark.usefixtures("quick_relink")
def test_a_stream_whose_first_buffer_is_a_frame_is_not_linked_again() -> None:
    producer = _Producer([(True, True)])
    stream = producer.stream()
    stream.wait_first_frame(5.0)
    time.sleep(0.3)
    assert stream.reconnects == 0


@pytest.mark.usefixtures("quick_relink")
def test_a_stream_that_never_paints_fails_with_how_often_it_was_linked() -> None:
    from deskpilot.errors import CaptureError

    producer = _Producer([(True, False)])
    stream = producer.stream()
    started = time.monotonic()
    with pytest.raises(CaptureError, match=r"no frame from PipeWire node 39 within 1 s \(linked \d+ times\)") as raised:
        stream.wait_first_frame(1.0)
    assert time.monotonic() - started >= 1.0
    # Linked again 0.2 s after each link's buffer while the new link had time to paint (4
    # links when nothing is late), never more.
    linked = raised.value.details["links"]
    assert 2 <= linked == producer.linked == stream.reconnects + 1 <= 4
