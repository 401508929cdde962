"""The MCP server's image sizing and argument checks, without a display: the screen fit
into the size box, the byte cap (strongest PNG level, then smaller images whose mapping
stays exact), and coordinates refused off the image or non-finite."""

from __future__ import annotations

import base64
import io
import math

import numpy as np
import pytest
from PIL import Image

from deskpilot._errors import ArgumentError
from deskpilot.agent import load_config
from deskpilot.agent._screen import Shot
from deskpilot.geometry import Mapping, Rect
from deskpilot.mcp import Desktop, DesktopOptions
from deskpilot.mcp._desktop import SeenFrame, _fit


@pytest.mark.parametrize(
    ("screen", "box", "expected"),
    [
        ((1920, 1080), (1920, 1080), (1920, 1080)),
        ((3840, 2160), (1920, 1080), (1920, 1080)),
        ((1280, 720), (1920, 1080), (1280, 720)),  # never enlarged
        ((1920, 1080), (1000, 1000), (1000, 562)),
        ((2560, 1600), (1920, 1080), (1728, 1080)),
    ],
)
def test_the_screen_is_fit_into_the_size_box(screen: tuple[int, int], box: tuple[int, int], expected: tuple[int, int]) -> None:
    assert _fit(*screen, box) == expected


@pytest.fixture
def desktop() -> Desktop:
    return Desktop(load_config(flags={}, env={}, search_default=False), DesktopOptions())


def noise(width: int, height: int) -> Shot:
    rgb = np.random.default_rng(7).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Shot(rgb, Mapping(Rect(100, 50, width * 2, height * 2), width, height), 0)


def test_an_image_under_the_cap_is_sent_as_it_is(desktop: Desktop) -> None:
    shot = noise(64, 48)
    png, mapping, shrunk = desktop._encode(shot, 1_000_000)
    assert not shrunk and mapping == shot.mapping
    assert Image.open(io.BytesIO(png)).size == (64, 48)


@pytest.mark.parametrize("cap", [40_000, 100_000, 400_000])
def test_an_image_over_the_cap_shrinks_until_it_fits_and_its_mapping_follows(desktop: Desktop, cap: int) -> None:
    shot = noise(640, 360)  # noise does not compress: 691,200 bytes of pixels
    png, mapping, shrunk = desktop._encode(shot, cap)
    assert shrunk
    assert len(base64.b64encode(png)) <= cap
    image = Image.open(io.BytesIO(png))
    assert image.size == (mapping.image_width, mapping.image_height)
    assert image.size[0] < 640 and mapping.area == shot.mapping.area
    # The aspect ratio is kept (within a pixel of rounding).
    assert abs(image.size[0] / image.size[1] - 640 / 360) < 0.02


def test_no_image_fits_a_cap_below_the_smallest_one(desktop: Desktop) -> None:
    with pytest.raises(ArgumentError) as caught:
        desktop._encode(noise(640, 360), 500)
    assert caught.value.kind == "too_large"


def frame(width: int, height: int, image: tuple[int, int]) -> SeenFrame:
    return SeenFrame("f1", Mapping(Rect(0, 0, width, height), *image), ((0, 0, width, height),), 1)


@pytest.mark.parametrize(("ix", "iy"), [(0, 0), (959, 539), (480, 270), (123, 456)])
def test_pixels_map_to_the_documented_physical_pixel(desktop: Desktop, ix: int, iy: int) -> None:
    f = frame(1920, 1080, (960, 540))
    assert desktop.point(f, ix, iy, None) == (math.floor((ix + 0.5) * 2), math.floor((iy + 0.5) * 2))


def test_norm1000_maps_like_the_agents_contract(desktop: Desktop) -> None:
    f = frame(1920, 1080, (960, 540))
    assert desktop.point(f, 500, 500, "norm1000") == f.mapping.norm_to_physical(500, 500) == (960, 540)


@pytest.mark.parametrize(
    ("x", "y", "coordinates", "kind"),
    [
        (960, 10, None, "out_of_range"),
        (-1, 10, None, "out_of_range"),
        (10, 540, None, "out_of_range"),
        (1001, 10, "norm1000", "out_of_range"),
        (math.nan, 10, None, "invalid_args"),
        (10, math.inf, None, "invalid_args"),
    ],
)
def test_coordinates_off_the_image_or_not_finite_are_refused(
    desktop: Desktop, x: float, y: float, coordinates: str | None, kind: str
) -> None:
    with pytest.raises(ArgumentError) as caught:
        desktop.point(frame(1920, 1080, (960, 540)), x, y, coordinates)  # type: ignore[arg-type]
    assert caught.value.kind == kind


def test_unknown_keys_are_refused_by_name() -> None:
    assert Desktop.key_combo("Ctrl+Shift+T") == "ctrl+shift+t"
    with pytest.raises(ArgumentError) as caught:
        Desktop.key_combo("ctrl+nosuchkey")
    assert caught.value.kind == "invalid_key"
