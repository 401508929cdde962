"""The seeds' screenshot-to-PNG path in pure Python (seeds 000-003: ``capture_screenshot_png`` /
``capture_png`` + ``rgb_to_png`` / ``png_pack``), the baseline deskpilot's core replaces.

What the seeds do after GDI has captured and scaled the screen (StretchBlt HALFTONE into a
32-bit DIB section, done by the OS, not by Python):

1. BGRA -> RGB, one pixel at a time in a Python loop (alpha discarded);
2. a filter byte 0 ("none") in front of every scanline;
3. ``zlib.compress(raw, 6)`` over all rows;
4. ``png_pack(tag, data)``: length + tag + data + CRC32 for IHDR, IDAT, IEND.

There is no StretchBlt off Windows, so :func:`capture_png` stands in Pillow's BOX resize
for the GDI scaling step (native code in both cases; it costs ~10 ms of the ~700 ms).
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["bgra_to_rgb", "capture_png", "png_pack", "rgb_to_png"]


def png_pack(tag: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, tag, data, CRC32 over tag + data."""
    chunk = tag + data
    return struct.pack(">I", len(data)) + chunk + struct.pack(">I", 0xFFFFFFFF & zlib.crc32(chunk))


def bgra_to_rgb(bgra: bytes, width: int, height: int) -> bytearray:
    """The seeds' per-pixel conversion loop."""
    rgb = bytearray(width * height * 3)
    j = 0
    for i in range(0, width * height * 4, 4):
        rgb[j] = bgra[i + 2]
        rgb[j + 1] = bgra[i + 1]
        rgb[j + 2] = bgra[i]
        j += 3
    return rgb


def rgb_to_png(rgb: bytes | bytearray, width: int, height: int) -> bytes:
    """Filter byte 0 per scanline, zlib level 6, one IDAT."""
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(rgb[y * stride : (y + 1) * stride]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_pack(b"IHDR", header)
        + png_pack(b"IDAT", zlib.compress(raw, 6))
        + png_pack(b"IEND", b"")
    )


def capture_png(bgra_frame: bytes, width: int, height: int, target: tuple[int, int]) -> bytes:
    """A full-resolution BGRA frame -> PNG at ``target`` the way the seeds build it."""
    from PIL import Image

    frame = Image.frombuffer("RGBA", (width, height), bgra_frame, "raw", "RGBA", 0, 1)
    scaled = frame.resize(target, Image.Resampling.BOX).tobytes()  # GDI StretchBlt stand-in
    return rgb_to_png(bgra_to_rgb(scaled, *target), *target)
