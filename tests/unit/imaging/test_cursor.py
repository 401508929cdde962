"""deskpilot.imaging.composite_cursor: every cursor kind, hand-built masks, clipping at each edge."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_imaging_support import U8, backend, backend_modules, random_image

from deskpilot import imaging
from deskpilot._errors import ImagingError
from deskpilot.imaging import _api

__all__ = ["backend"]

BLACK, WHITE = (0, 0, 0, 255), (255, 255, 255, 255)


def frame_of(colour: tuple[int, int, int, int], height: int = 8, width: int = 8) -> U8:
    return np.tile(np.array(colour, np.uint8), (height, width, 1))


def i_beam() -> U8:
    """A 3x7 monochrome I-beam the way Windows builds one: AND=1 + XOR=1 (invert) pixels."""
    shape = ["###", ".#.", ".#.", ".#.", ".#.", ".#.", "###"]
    ink = np.array([[c == "#" for c in row] for row in shape], np.uint8)
    return np.stack([np.ones_like(ink), ink], axis=2)  # AND everywhere, XOR on the ink


def test_mono_truth_table(backend: str) -> None:
    frame = np.array([[[10, 100, 200, 255]] * 4], np.uint8)
    cursor = np.array([[[0, 0], [0, 1], [1, 0], [1, 1]]], np.uint8)  # (AND, XOR) per pixel
    imaging.composite_cursor(frame, cursor, 0, 0, kind="mono")
    assert frame[0].tolist() == [
        [0, 0, 0, 255],  # AND 0 XOR 0: black
        [255, 255, 255, 255],  # AND 0 XOR 1: white
        [10, 100, 200, 255],  # AND 1 XOR 0: transparent
        [245, 155, 55, 255],  # AND 1 XOR 1: inverted screen
    ]


@pytest.mark.parametrize(
    ("background", "ink"), [(BLACK, 255), (WHITE, 0), ((30, 30, 40, 255), 225)]
)
def test_mono_i_beam_is_visible_on_dark_and_light(
    backend: str, background: tuple[int, int, int, int], ink: int
) -> None:
    frame = frame_of(background, 12, 12)
    drawn = imaging.composite_cursor(frame, i_beam(), 4, 2, kind="mono")
    assert drawn == (4, 2, 3, 7)
    cursor_area = frame[2:9, 4:7, 0]
    inked = i_beam()[:, :, 1] == 1
    assert (cursor_area[inked] == ink).all()
    assert (cursor_area[~inked] == background[0]).all()
    assert abs(int(ink) - background[0]) > 150  # plainly visible
    untouched = np.ones((12, 12), bool)
    untouched[2:9, 4:7] = False
    assert (frame[untouched] == np.array(background, np.uint8)).all()


def test_masked_replace_and_xor(backend: str) -> None:
    frame = np.array([[[10, 100, 200, 255], [10, 100, 200, 255], [1, 2, 3, 255]]], np.uint8)
    cursor = np.array([[[50, 60, 70, 0], [0xFF, 0x0F, 0x00, 0xFF], [0, 0, 0, 0xFF]]], np.uint8)
    imaging.composite_cursor(frame, cursor, 0, 0, kind="masked")
    assert frame[0].tolist() == [
        [50, 60, 70, 255],  # AND 0: colour replaces the screen (frame alpha kept)
        [10 ^ 0xFF, 100 ^ 0x0F, 200, 255],  # AND 1: colour XORed into the screen
        [1, 2, 3, 255],  # AND 1 with black: transparent
    ]


def test_premultiplied_alpha(backend: str) -> None:
    frame = np.array([[[200, 100, 0, 255]] * 3], np.uint8)
    cursor = np.array([[[0, 0, 0, 0], [255, 255, 255, 255], [64, 0, 128, 128]]], np.uint8)
    imaging.composite_cursor(frame, cursor, 0, 0, kind="premultiplied")
    # out = c + round(dst * (255 - a) / 255); 127/255 of the screen survives at a=128
    assert frame[0].tolist() == [
        [200, 100, 0, 255],
        [255, 255, 255, 255],
        [64 + round(200 * 127 / 255), round(100 * 127 / 255), 128, 255],
    ]


def test_premultiplied_saturates_bad_colour(backend: str) -> None:
    frame = frame_of(WHITE, 1, 1)
    cursor = np.array([[[255, 255, 255, 10]]], np.uint8)  # colour > alpha: not premultiplied
    imaging.composite_cursor(frame, cursor, 0, 0, kind="premultiplied")
    assert frame[0, 0].tolist() == [255, 255, 255, 255]


def test_straight_alpha(backend: str) -> None:
    frame = np.array([[[200, 100, 0, 255]] * 3], np.uint8)
    cursor = np.array([[[9, 9, 9, 0], [10, 20, 30, 255], [0, 0, 255, 64]]], np.uint8)
    imaging.composite_cursor(frame, cursor, 0, 0, kind="straight")
    blend = [
        round((c * 64 + d * 191) / 255) for c, d in zip((0, 0, 255), (200, 100, 0), strict=True)
    ]
    assert frame[0].tolist() == [[200, 100, 0, 255], [10, 20, 30, 255], [*blend, 255]]


def test_alpha_kinds_over_transparent_frame_compose_alpha(backend: str) -> None:
    frame = np.zeros((1, 2, 4), np.uint8)
    cursor = np.array([[[10, 10, 10, 100], [0, 0, 0, 0]]], np.uint8)
    imaging.composite_cursor(frame, cursor, 0, 0, kind="straight")
    assert frame[0, 0, 3] == 100 and frame[0, 1, 3] == 0


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (-2, -3, (0, 0, 3, 4)),  # top-left corner, partly off
        (6, 5, (6, 5, 2, 3)),  # bottom-right corner, partly off
        (-4, 2, (0, 2, 1, 6)),  # off the left edge except one column, clipped below
        (3, -6, (3, 0, 5, 1)),  # off the top except one row
        (-5, 0, None),  # entirely off the left
        (8, 0, None),  # entirely off the right
        (0, 8, None),  # entirely below
        (0, -7, None),  # entirely above
        (-100, -100, None),
    ],
)
def test_clipping_at_every_edge(
    backend: str, x: int, y: int, expected: tuple[int, int, int, int] | None
) -> None:
    cursor = np.zeros((7, 5, 4), np.uint8)
    cursor[..., 1] = np.arange(35, dtype=np.uint8).reshape(7, 5) + 1  # distinct green values
    cursor[..., 3] = 255  # opaque
    frame = frame_of(BLACK)
    assert imaging.composite_cursor(frame, cursor, x, y, kind="premultiplied") == expected
    reference = frame_of(BLACK)
    for cy in range(7):
        for cx in range(5):
            if 0 <= y + cy < 8 and 0 <= x + cx < 8:
                reference[y + cy, x + cx] = cursor[cy, cx]
    assert np.array_equal(frame, reference)


def test_cursor_bigger_than_frame(backend: str) -> None:
    frame = frame_of(BLACK, 3, 2)
    cursor = np.zeros((10, 10, 2), np.uint8)  # AND 0 + XOR 1 below: white
    cursor[..., 1] = 1
    assert imaging.composite_cursor(frame, cursor, -4, -4, kind="mono") == (0, 0, 2, 3)
    assert (frame[..., :3] == 255).all()


def test_strided_frame_view_is_modified_in_place(backend: str) -> None:
    big = frame_of(BLACK, 20, 20)
    view = big[5:15, 5:15]
    cursor = np.ones((2, 2, 2), np.uint8)  # invert
    imaging.composite_cursor(view, cursor, 9, 9, kind="mono")
    assert big[14, 14].tolist() == [255, 255, 255, 255]
    assert (big[..., 0] == 255).sum() == 1


@given(
    data=st.data(),
    kind=st.sampled_from(["premultiplied", "straight", "masked", "mono"]),
    ch=st.integers(1, 12),
    cw=st.integers(1, 12),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_backends_agree(data: st.DataObject, kind: Any, ch: int, cw: int) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    frame = random_image(rng, 10, 9, 4)
    cursor = random_image(rng, ch, cw, 2 if kind == "mono" else 4)
    if kind in ("mono", "masked"):
        cursor[..., -1 if kind == "masked" else 0] &= 0x01
    x, y = data.draw(st.integers(-14, 12)), data.draw(st.integers(-14, 12))
    results = []
    saved = _api._kernels
    try:
        for module in backend_modules().values():
            _api._kernels = module
            out = frame.copy()
            drawn = imaging.composite_cursor(out, cursor, x, y, kind=kind)
            results.append((drawn, out.tobytes()))
    finally:
        _api._kernels = saved
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK),
                np.zeros((2, 2, 4), np.uint8),
                0,
                0,
                kind="color",  # type: ignore[arg-type]
            ),
            "kind must be one of",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK), np.zeros((2, 2, 4), np.uint8), 0, 0, kind="mono"
            ),
            "HxWx2",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK), np.zeros((2, 2, 2), np.uint8), 0, 0, kind="straight"
            ),
            "HxWx4",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK)[:, :, :3], np.zeros((2, 2, 4), np.uint8), 0, 0, kind="straight"
            ),
            "HxWx4",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK)[:, ::2], np.zeros((2, 2, 4), np.uint8), 0, 0, kind="straight"
            ),
            "packed pixels",
        ),
        (
            lambda: imaging.composite_cursor(
                _read_only(), np.zeros((2, 2, 4), np.uint8), 0, 0, kind="straight"
            ),
            "read-only",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK),
                np.zeros((2, 2, 4), np.uint8),
                0.5,  # type: ignore[arg-type]
                0,
                kind="straight",
            ),
            "integer",
        ),
        (
            lambda: imaging.composite_cursor(
                frame_of(BLACK), np.zeros((0, 2, 4), np.uint8), 0, 0, kind="straight"
            ),
            "empty",
        ),
        (
            lambda: imaging.composite_cursor(
                b"\x00" * 16,  # type: ignore[arg-type]
                np.zeros((2, 2, 4), np.uint8),
                0,
                0,
                kind="straight",
            ),
            "numpy array",
        ),
    ],
    ids=[
        "kind",
        "mono-shape",
        "alpha-shape",
        "rgb-frame",
        "strided-pixels",
        "read-only",
        "float-x",
        "empty",
        "bytes",
    ],
)
def test_bad_input(backend: str, call: Any, message: str) -> None:
    with pytest.raises(ImagingError, match=message):
        call()


def _read_only() -> U8:
    frame = frame_of(BLACK)
    frame.flags.writeable = False
    return frame
