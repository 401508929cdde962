"""The coordinate contract (deskpilot.geometry): properties over whole ranges."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deskpilot._errors import GeometryError, InvalidBoxError
from deskpilot.geometry import Box, Mapping, Rect, clamp_norm, crop_rect, parse_box

FULL_HD = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)
# A crop of the primary monitor (seed 004's CAPTURE_CROP) and a second monitor left of
# and above the primary one: its origin is negative.
CROP = Mapping(crop_rect(Rect(0, 0, 1920, 1080), (0.25, 0.1, 0.8, 0.65)), 1024, 576)
LEFT_MONITOR = Mapping(Rect(-1280, -1024, 1280, 1024), 1024, 819)
MAPPINGS = {"full_hd": FULL_HD, "crop": CROP, "left_monitor": LEFT_MONITOR}

norm = st.integers(min_value=0, max_value=1000)


def points_in(area: Rect) -> st.SearchStrategy[tuple[int, int]]:
    return st.tuples(
        st.integers(area.left, area.right - 1), st.integers(area.top, area.bottom - 1)
    )


@pytest.mark.parametrize("name", list(MAPPINGS))
def test_physical_norm_physical_round_trip_within_one_pixel_everywhere(name: str) -> None:
    # Exhaustive on both axes (the axes are independent): every physical pixel.
    m = MAPPINGS[name]
    a = m.area
    for px in range(a.left, a.right):
        nx, _ = m.physical_to_norm(px, a.top)
        back, _ = m.norm_to_physical(nx, 0)
        assert abs(back - px) <= 1, (px, nx, back)
    for py in range(a.top, a.bottom):
        _, ny = m.physical_to_norm(a.left, py)
        _, back = m.norm_to_physical(0, ny)
        assert abs(back - py) <= 1, (py, ny, back)


@pytest.mark.parametrize("name", list(MAPPINGS))
def test_norm_physical_norm_is_exact_when_a_unit_spans_at_least_one_pixel(name: str) -> None:
    m = MAPPINGS[name]
    for n in range(0, 1001):
        px, py = m.norm_to_physical(n, n)
        nx, ny = m.physical_to_norm(px, py)
        # one normalized unit is >= 1 px when the side is >= 1000 px; else pixels are shared
        if m.area.width >= 1000:
            assert abs(nx - n) <= 1
        if m.area.height >= 1000:
            assert abs(ny - n) <= 1
        assert m.area.contains(px, py)


@given(nx=norm, ny=norm)
@example(nx=1000, ny=1000)
@example(nx=0, ny=0)
def test_norm_to_physical_stays_inside_every_area(nx: int, ny: int) -> None:
    for m in MAPPINGS.values():
        assert m.area.contains(*m.norm_to_physical(nx, ny))


@given(a=norm, b=norm)
def test_norm_to_physical_is_monotonic(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    for m in MAPPINGS.values():
        assert m.norm_to_physical(lo, lo)[0] <= m.norm_to_physical(hi, hi)[0]
        assert m.norm_to_physical(lo, lo)[1] <= m.norm_to_physical(hi, hi)[1]


def test_edges_map_onto_the_first_and_last_pixels() -> None:
    assert FULL_HD.norm_to_physical(0, 0) == (0, 0)
    assert FULL_HD.norm_to_physical(1000, 1000) == (1919, 1079)
    assert FULL_HD.norm_to_physical(500, 500) == (960, 540)
    assert LEFT_MONITOR.norm_to_physical(0, 0) == (-1280, -1024)
    assert LEFT_MONITOR.norm_to_physical(1000, 1000) == (-1, -1)
    assert CROP.norm_to_physical(0, 0) == (CROP.area.left, CROP.area.top)
    # out-of-range model values are clamped, not extrapolated
    assert FULL_HD.norm_to_physical(-50, 1500) == (0, 1079)


@given(data=st.data())
def test_image_round_trips(data: st.DataObject) -> None:
    for m in MAPPINGS.values():
        ix = data.draw(st.integers(0, m.image_width - 1))
        iy = data.draw(st.integers(0, m.image_height - 1))
        # image pixel -> physical centre -> image pixel is exact (downscaled images)
        assert m.physical_to_image(*m.image_to_physical(ix, iy)) == (ix, iy)
        px, py = data.draw(points_in(m.area))
        bx, by = m.image_to_physical(*m.physical_to_image(px, py))
        sx, sy = m.scale  # back within less than one image pixel's span: <= 1 px at 1.25x
        assert abs(bx - px) <= math.ceil(sx) - 1 and abs(by - py) <= math.ceil(sy) - 1
        assert m.area.contains(bx, by)


def test_full_hd_image_mapping_scale_and_record() -> None:
    assert FULL_HD.scale == (1.25, 1.25)
    assert FULL_HD.image_to_physical(0, 0) == (0, 0)
    assert FULL_HD.image_to_physical(1535, 863) == (1919, 1079)
    assert LEFT_MONITOR.describe()["origin"] == [-1280, -1024]


@given(
    left=st.integers(-5000, 5000), top=st.integers(-5000, 5000),
    width=st.integers(1, 2000), height=st.integers(1, 2000),
    px=st.floats(0, 1, allow_nan=False), py=st.floats(0, 1, allow_nan=False),
)
def test_round_trip_within_one_pixel_for_any_area_up_to_2000_px(
    left: int, top: int, width: int, height: int, px: float, py: float
) -> None:
    m = Mapping(Rect(left, top, width, height), max(1, width // 2), max(1, height // 2))
    x = left + min(width - 1, int(px * width))
    y = top + min(height - 1, int(py * height))
    bx, by = m.norm_to_physical(*m.physical_to_norm(x, y))
    assert abs(bx - x) <= 1 and abs(by - y) <= 1


@given(
    x1=st.floats(-1, 2, allow_nan=False), y1=st.floats(-1, 2, allow_nan=False),
    x2=st.floats(-1, 2, allow_nan=False), y2=st.floats(-1, 2, allow_nan=False),
)
def test_crop_rect_is_inside_and_never_empty(x1: float, y1: float, x2: float, y2: float) -> None:
    area = Rect(-1920, 0, 1920, 1080)
    r = crop_rect(area, (x1, y1, x2, y2))
    assert area.intersect(r) == r
    assert r.width >= 1 and r.height >= 1


def test_crop_rect_rejects_bad_input() -> None:
    with pytest.raises(GeometryError):
        crop_rect(Rect(0, 0, 10, 10), (0, 0, 1))
    with pytest.raises(GeometryError):
        crop_rect(Rect(0, 0, 10, 10), (0, 0, float("nan"), 1))
    with pytest.raises(GeometryError):
        Rect(0, 0, 0, 10)


# -- boxes ------------------------------------------------------------------------------


@given(x1=st.integers(-500, 1500), y1=st.integers(-500, 1500), x2=st.integers(-500, 1500), y2=st.integers(-500, 1500))
def test_the_three_box_formats_agree_and_are_clamped_and_ordered(x1: int, y1: int, x2: int, y2: int) -> None:
    flat = parse_box([x1, y1, x2, y2])
    assert parse_box([[x1, y1], [x2, y2]]) == flat
    assert parse_box(f"[{x1}, {y1}, {x2}, {y2}]") == flat
    assert parse_box({"x1": x1, "y1": y1, "x2": x2, "y2": y2}) == flat
    c = [clamp_norm(v) for v in (x1, y1, x2, y2)]
    assert flat == Box(min(c[0], c[2]), min(c[1], c[3]), max(c[0], c[2]), max(c[1], c[3]))
    assert 0 <= flat.x1 <= flat.x2 <= 1000 and 0 <= flat.y1 <= flat.y2 <= 1000


@given(x=st.integers(-100, 1100), y=st.integers(-100, 1100))
def test_a_point_is_a_zero_area_box(x: int, y: int) -> None:
    box = parse_box([x, y])
    assert box.is_point and box.center == (clamp_norm(x), clamp_norm(y))
    assert parse_box({"x": x, "y": y}) == box


def test_swapped_corners_and_centre() -> None:
    box = parse_box([[900, 800], [100, 200]])
    assert box == Box(100, 200, 900, 800) and box.center == (500, 500)
    rect = FULL_HD.norm_box_to_physical(box)
    assert rect == Rect(192, 216, 1537, 649)
    assert FULL_HD.area.intersect(rect) == rect


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "missing_box"),
        ([], "missing_box"),
        ("", "missing_box"),
        ({}, "missing_box"),
        ([1, 2, 3], "invalid_box"),
        ([1, 2, 3, 4, 5], "invalid_box"),
        ([[1, 2], [3]], "invalid_box"),
        (["a", 2], "invalid_box"),
        ([True, False], "invalid_box"),
        ([float("nan"), 1], "invalid_box"),
        ([float("inf"), 1, 2, 3], "invalid_box"),
        ("not json", "invalid_box"),
        ({"left": 1}, "invalid_box"),
        (42, "invalid_box"),
    ],
)
def test_invalid_boxes_raise_with_a_kind(value: Any, kind: str) -> None:
    with pytest.raises(InvalidBoxError) as info:
        parse_box(value)
    assert info.value.kind == kind
    assert isinstance(info.value, ValueError)


def test_numpy_integers_are_accepted_and_stored_as_ints() -> None:
    rect = Rect(np.int64(-1920), np.int32(0), np.uint16(1920), np.int64(1080))  # type: ignore[arg-type]
    assert rect == Rect(-1920, 0, 1920, 1080)
    assert all(type(v) is int for v in rect.as_tuple())
    mapping = Mapping(rect, np.int64(1536), np.int64(864))  # type: ignore[arg-type]
    assert orjson.loads(orjson.dumps(mapping.describe()))["image_size"] == [1536, 864]
    assert mapping.norm_to_physical(np.int64(500), np.int32(500)) == mapping.norm_to_physical(500, 500)
    assert parse_box([np.int64(10), np.float32(20.0)]) == Box(10, 20, 10, 20)


@pytest.mark.parametrize("bad", [1.5, np.float64(2.0), "3", True, None])
def test_non_integer_rect_and_image_sizes_raise_a_clear_error(bad: Any) -> None:
    with pytest.raises(GeometryError, match="must be an integer"):
        Rect(0, 0, bad, 10)
    with pytest.raises(GeometryError, match="must be an integer"):
        Mapping(Rect(0, 0, 10, 10), 10, bad)
