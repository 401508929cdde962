"""Seed 000's screenshot path: capture, scale, BGRA -> RGB per pixel in Python, zlib level 6."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bgra_to_png(bgra: bytes, width: int, height: int, level: int = 6) -> bytes:
    """The seed's manual PNG: a filter byte 0 per row, RGB bytes copied pixel by pixel."""
    raw = bytearray()
    stride = width * 4
    for y in range(height):
        raw.append(0)
        row = y * stride
        for x in range(0, stride, 4):
            i = row + x
            raw.append(bgra[i + 2])
            raw.append(bgra[i + 1])
            raw.append(bgra[i])
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(bytes(raw), level)) + _chunk(b"IEND", b"")


def capture_screenshot_png(target_w: int, target_h: int) -> tuple[bytes, int, int]:
    """(png, screen_w, screen_h) like ``winapi.capture_screenshot_png``: the screen scaled
    to the target size by a native resampler (GDI StretchBlt there, Pillow BOX here)."""
    import mss
    from PIL import Image

    with mss.MSS() as sct:
        monitor = sct.monitors[1]
        shot = sct.grab(monitor)
        screen_w, screen_h = shot.width, shot.height
        image = Image.frombuffer("RGBA", (screen_w, screen_h), shot.bgra, "raw", "RGBA", 0, 1)
    scaled = image.resize((target_w, target_h), Image.BOX)  # still BGRA byte order
    return bgra_to_png(scaled.tobytes(), target_w, target_h), screen_w, screen_h
