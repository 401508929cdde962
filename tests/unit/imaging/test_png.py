"""deskpilot.imaging.encode_png: Pillow decodes every output to exactly the input pixels."""

from __future__ import annotations

import io
import struct
import threading
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from test_imaging_support import (
    U8,
    backend,
    backend_modules,
    corpus_frames,
    load_bgra,
    random_image,
    ui_like_image,
)

from deskpilot import imaging
from deskpilot._errors import ImagingError
from deskpilot.imaging import _api, _png

__all__ = ["backend"]

FILTERS = ["adaptive", "none", "sub", "up", "avg", "paeth"]
MODES = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def decode(png: bytes) -> U8:
    with Image.open(io.BytesIO(png)) as im:
        im.load()
        return np.asarray(im)


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(tag, payload) of every chunk, checking each CRC on the way."""
    assert png[:8] == _png.PNG_SIGNATURE
    found, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        tag, payload = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(tag + payload), f"bad CRC in {tag!r}"
        found.append((tag, payload))
        pos += 12 + length
    assert pos == len(png)
    return found


def filter_types(png: bytes, height: int) -> list[int]:
    idat = b"".join(p for t, p in chunks(png) if t == b"IDAT")
    raw = zlib.decompress(idat)
    stride = len(raw) // height
    return [raw[row * stride] for row in range(height)]


@pytest.mark.parametrize("filter_name", FILTERS)
@pytest.mark.parametrize("level", range(10))
def test_roundtrip_every_filter_and_level(backend: str, filter_name: Any, level: int) -> None:
    rng = np.random.default_rng(level)
    img = ui_like_image(rng, 23, 37, 3)
    png = imaging.encode_png(img, level=level, filter=filter_name)
    assert np.array_equal(decode(png), img)


@pytest.mark.parametrize(("mode", "channels"), MODES.items())
@pytest.mark.parametrize("filter_name", FILTERS)
def test_roundtrip_grey_alpha_and_rgba(
    backend: str, mode: str, channels: int, filter_name: Any
) -> None:
    rng = np.random.default_rng(channels)
    img = random_image(rng, 19, 11, channels)
    png = imaging.encode_png(img, filter=filter_name)
    with Image.open(io.BytesIO(png)) as im:
        assert im.mode == mode
        decoded = np.asarray(im)
    assert np.array_equal(decoded.reshape(img.shape), img)
    if channels == 1:
        assert np.array_equal(decode(imaging.encode_png(img[:, :, 0])), img[:, :, 0])


def test_structure_one_idat_and_valid_crcs(backend: str) -> None:
    img = random_image(np.random.default_rng(0), 64, 80, 3)
    found = chunks(imaging.encode_png(img))
    assert [tag for tag, _ in found] == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">IIBBBBB", found[0][1]) == (80, 64, 8, 2, 0, 0, 0)


@pytest.mark.parametrize(
    ("name", "code"), [("none", 0), ("sub", 1), ("up", 2), ("avg", 3), ("paeth", 4)]
)
def test_forced_filter_is_used_on_every_row(backend: str, name: Any, code: int) -> None:
    img = ui_like_image(np.random.default_rng(1), 12, 9, 3)
    assert filter_types(imaging.encode_png(img, filter=name), 12) == [code] * 12


def test_adaptive_picks_the_min_sum_filter_per_row(backend: str) -> None:
    img = np.zeros((4, 64, 3), np.uint8)
    img[0] = 200  # flat row: 'sub' leaves only the first pixel
    img[1] = 200  # equal to the row above: 'up' gives all zeros
    img[2] = np.arange(64, dtype=np.uint8)[:, None] * 3  # a ramp: 'sub' is constant 3
    img[3] = np.random.default_rng(2).integers(0, 256, (64, 3), dtype=np.uint8)
    types = filter_types(imaging.encode_png(img), 4)
    assert types[:3] == [1, 2, 1]
    # the last row is whatever minimises sum(|signed residual|); check against brute force
    raw = img.reshape(4, -1).astype(np.int16)
    row, above = raw[3], raw[2]
    left = np.concatenate([[0, 0, 0], row[:-3]])
    up_left = np.concatenate([[0, 0, 0], above[:-3]])
    p = left + above - up_left
    pa, pb, pc = abs(p - left), abs(p - above), abs(p - up_left)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, above, up_left))
    residuals = [row, row - left, row - above, row - (left + above) // 2, row - paeth]
    costs = [int(np.minimum(r & 0xFF, 256 - (r & 0xFF)).sum()) for r in residuals]
    assert types[3] == int(np.argmin(costs))


@given(
    data=st.data(),
    height=st.integers(1, 20),
    width=st.integers(1, 20),
    channels=st.sampled_from([1, 2, 3, 4]),
    filter_name=st.sampled_from(FILTERS),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_roundtrip_random_shapes(
    backend: str, data: st.DataObject, height: int, width: int, channels: int, filter_name: Any
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    img = random_image(rng, height, width, channels)
    decoded = decode(imaging.encode_png(img, filter=filter_name))
    assert np.array_equal(decoded.reshape(img.shape), img)


def test_strided_view_encodes_its_own_pixels(backend: str) -> None:
    big = random_image(np.random.default_rng(3), 40, 50, 3)
    view = big[5:30, 7:41]
    assert np.array_equal(decode(imaging.encode_png(view)), view)
    flipped = big[::-1, ::-1]
    assert np.array_equal(decode(imaging.encode_png(flipped)), flipped)


@pytest.mark.parametrize("path", corpus_frames(), ids=lambda p: p.stem)
def test_corpus_frames_roundtrip(backend: str, path: Any) -> None:
    rgb = imaging.prepare(load_bgra(path), size=(1536, 864))
    for filter_name in ("adaptive", "paeth"):
        png = imaging.encode_png(rgb, level=1, filter=filter_name)
        assert np.array_equal(decode(png), rgb)


def test_corpus_ships_with_the_repository() -> None:
    # The corpus lives in benchmarks/corpus so every figure README cites can be reproduced
    # from a clone (it used to sit outside the repository and these tests were skipped).
    assert [p.name for p in corpus_frames()] == [
        "01_word.png",
        "02_files.png",
        "04_code.png",
        "05_webphoto.png",
    ]


def test_backends_produce_identical_bytes() -> None:
    img = ui_like_image(np.random.default_rng(4), 50, 61, 3)
    results = []
    saved = _api._kernels
    try:
        for module in backend_modules().values():
            _api._kernels = module
            results.append([imaging.encode_png(img, filter=f) for f in FILTERS])  # type: ignore[arg-type]
    finally:
        _api._kernels = saved
    assert all(r == results[0] for r in results)


def test_encoding_from_threads_is_correct(backend: str) -> None:
    rng = np.random.default_rng(5)
    images = [ui_like_image(rng, 90, 120, 3) for _ in range(4)]
    expected = [imaging.encode_png(img) for img in images]
    results: dict[int, list[bytes]] = {}

    def work(index: int) -> None:
        results[index] = [imaging.encode_png(img) for img in images for _ in range(3)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for index in range(4):
        assert results[index] == [e for e in expected for _ in range(3)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": 10}, "level must be 0..9"),
        ({"level": -1}, "level must be 0..9"),
        ({"level": 1.0}, "integer"),
        ({"filter": "best"}, "filter must be one of"),
    ],
)
def test_bad_arguments(backend: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ImagingError, match=message):
        imaging.encode_png(np.zeros((2, 2, 3), np.uint8), **kwargs)


@pytest.mark.parametrize(
    "img",
    [np.zeros((2, 2, 5), np.uint8), np.zeros((0, 3, 3), np.uint8), np.zeros((2, 2, 3), np.float32)],
    ids=["5-channels", "empty", "float"],
)
def test_bad_images(backend: str, img: Any) -> None:
    with pytest.raises(ImagingError):
        imaging.encode_png(img)


def test_zlib_fallback_for_high_levels(backend: str) -> None:
    img = ui_like_image(np.random.default_rng(6), 64, 64, 3)
    png = imaging.encode_png(img, level=9)
    idat = b"".join(p for t, p in chunks(png) if t == b"IDAT")
    assert idat[:2] == zlib.compress(b"x", 9)[:2]  # zlib header says "maximum compression"
    assert np.array_equal(decode(png), img)
