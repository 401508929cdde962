"""Checking a PNG that arrives over the network (``POST /annotated``) before anyone uses it.

The browser's annotated image goes into the run directory and, base64 again, to the
model: a truncated or corrupt file must be refused at the door with a reason, not fail
later inside the model server. :func:`validate_png` checks what a decoder would trip
over: the chunk layout and every CRC, a sane IHDR, a palette where one is needed, and
that the IDAT stream inflates to exactly the pixel rows the header promises, each with a
valid filter byte. Inflating is streamed in bounded pieces, so a small body cannot make
the panel hold a huge decompressed image (a "zip bomb"), and nothing is kept: only the
row boundaries are looked at. No image library is needed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from deskpilot._errors import InvalidPNG

__all__ = ["MAX_PNG_SIDE", "InvalidPNG", "validate_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Larger than any screen; the model image is at most 16384 pixels wide (config bound).
MAX_PNG_SIDE = 16384
# Allowed bit depths per colour type (PNG spec, table 11.1) and channels per pixel.
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
# Adam7 passes: x0, y0, dx, dy.
_ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)
_INFLATE_PIECE = 1 << 20  # bytes of pixel data inflated at a time


def _chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    pos = len(_SIGNATURE)
    end = len(data)
    while pos < end:
        if end - pos < 12:
            raise InvalidPNG(f"truncated chunk header at byte {pos}")
        (length,) = struct.unpack_from(">I", data, pos)
        kind = data[pos + 4 : pos + 8]
        if length > 0x7FFFFFFF or pos + 12 + length > end:
            raise InvalidPNG(
                f"chunk {kind!r} at byte {pos} runs past the end of the data (truncated?)"
            )
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack_from(">I", data, pos + 8 + length)
        if zlib.crc32(body, zlib.crc32(kind)) != crc:
            raise InvalidPNG(f"chunk {kind!r} at byte {pos} has a bad CRC (corrupt data)")
        if not kind.isalpha():
            raise InvalidPNG(f"chunk type {kind!r} at byte {pos} is not four letters")
        yield kind, body
        pos += 12 + length


def _rows(width: int, height: int, bits_per_pixel: int, interlaced: bool) -> list[tuple[int, int]]:
    """``(row_count, bytes_per_row incl. the filter byte)`` for each pass."""
    if not interlaced:
        return [(height, 1 + (width * bits_per_pixel + 7) // 8)]
    passes = []
    for x0, y0, dx, dy in _ADAM7:
        columns = (width - x0 + dx - 1) // dx if width > x0 else 0
        rows = (height - y0 + dy - 1) // dy if height > y0 else 0
        if columns and rows:
            passes.append((rows, 1 + (columns * bits_per_pixel + 7) // 8))
    return passes


def _row_starts(layout: list[tuple[int, int]]) -> Iterator[int]:
    offset = 0
    for rows, stride in layout:
        for _ in range(rows):
            yield offset
            offset += stride


def _check_pixels(idat: list[bytes], layout: list[tuple[int, int]]) -> None:
    expected = sum(rows * stride for rows, stride in layout)
    starts = _row_starts(layout)
    next_start: int | None = next(starts, None)
    inflater = zlib.decompressobj()
    produced = 0

    def take(piece: bytes) -> None:
        nonlocal produced, next_start
        end = produced + len(piece)
        if end > expected:
            raise InvalidPNG(f"more pixel data than the header's {expected} bytes")
        while next_start is not None and next_start < end:
            if piece[next_start - produced] > 4:
                raise InvalidPNG(
                    f"row filter {piece[next_start - produced]} at byte {next_start} is not 0..4"
                )
            next_start = next(starts, None)
        produced = end

    try:
        for block in idat:
            pending = block
            while pending:
                take(inflater.decompress(pending, _INFLATE_PIECE))
                pending = inflater.unconsumed_tail
                if inflater.eof:
                    break
            if inflater.eof:
                break
        while not inflater.eof:
            piece = inflater.decompress(b"", _INFLATE_PIECE)
            if not piece:
                break
            take(piece)
    except zlib.error as exc:
        raise InvalidPNG(f"the image data does not inflate: {exc}") from None
    if not inflater.eof:
        raise InvalidPNG(f"the image data stops early ({produced} of {expected} bytes; truncated?)")
    if produced != expected:
        raise InvalidPNG(f"the image data holds {produced} bytes, the header needs {expected}")


def validate_png(data: bytes, *, expect_size: tuple[int, int] | None = None) -> tuple[int, int]:
    """``(width, height)`` of a complete, well-formed PNG; raises :class:`InvalidPNG`.

    ``expect_size`` refuses another size before any pixel data is inflated."""
    if not data.startswith(_SIGNATURE):
        raise InvalidPNG("not a PNG (no PNG signature)")
    chunks = _chunks(data)
    first = next(chunks, None)
    if first is None or first[0] != b"IHDR" or len(first[1]) != 13:
        raise InvalidPNG("the first chunk is not a 13-byte IHDR")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", first[1]
    )
    if not (0 < width <= MAX_PNG_SIDE and 0 < height <= MAX_PNG_SIDE):
        raise InvalidPNG(f"size {width}x{height} is outside 1..{MAX_PNG_SIDE} pixels a side")
    if depth not in _DEPTHS.get(colour, ()):
        raise InvalidPNG(f"bit depth {depth} with colour type {colour} is not a PNG format")
    if compression != 0 or filtering != 0 or interlace not in (0, 1):
        raise InvalidPNG("unknown compression, filter or interlace method in IHDR")
    if expect_size is not None and (width, height) != tuple(expect_size):
        raise InvalidPNG(
            f"the image is {width}x{height}, the screenshot is {expect_size[0]}x{expect_size[1]}"
        )
    idat: list[bytes] = []
    seen_plte = False
    idat_done = False
    ended = False
    for kind, body in chunks:
        if ended:
            raise InvalidPNG("chunks after IEND")
        if kind == b"IDAT":
            if idat_done:
                raise InvalidPNG("IDAT chunks are not consecutive")
            idat.append(body)
            continue
        if idat:
            idat_done = True
        if kind == b"IEND":
            ended = True
        elif kind == b"PLTE":
            if idat or seen_plte or len(body) % 3 or not 3 <= len(body) <= 768:
                raise InvalidPNG("misplaced or malformed PLTE chunk")
            seen_plte = True
        elif kind == b"IHDR":
            raise InvalidPNG("a second IHDR chunk")
        elif kind[0] & 0x20 == 0:  # critical chunk we do not know: a decoder would refuse it
            raise InvalidPNG(f"unknown critical chunk {kind!r}")
    if not ended:
        raise InvalidPNG("no IEND chunk (truncated?)")
    if not idat:
        raise InvalidPNG("no image data (IDAT)")
    if colour == 3 and not seen_plte:
        raise InvalidPNG("a palette image without a PLTE chunk")
    _check_pixels(idat, _rows(width, height, depth * _CHANNELS[colour], interlace == 1))
    return width, height
