"""deskpilot.imaging: prepare / crop / bgra_to_rgb / downscale, digest and change detection.

The same bodies run against the compiled core and the numpy reference (``backend``
fixture); ``test_backends_agree_*`` additionally require bit-identical results.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_imaging_support import (
    U8,
    backend,
    backend_modules,
    corpus_frames,
    coverage_matrix,
    exact_area_average,
    load_bgra,
    native_module,
    random_image,
    ui_like_image,
)

from deskpilot import imaging
from deskpilot._errors import ImagingError
from deskpilot.geometry import Rect
from deskpilot.imaging import _api
from deskpilot.imaging._backend import check_core_version
from deskpilot.imaging._weights import WEIGHT_ONE, axis_weights

__all__ = ["backend"]  # the fixture is used by name

HYPOTHESIS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SCALES = [1.0, 1.25, 1.5, 2.0, 3.7, 0.8, 0.5]


# -- module surface --------------------------------------------------------------------------


def _isort_key(name: str) -> tuple[int, str]:
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name)


def test_public_names_are_sorted_and_exist() -> None:
    assert list(imaging.__all__) == sorted(imaging.__all__, key=_isort_key)
    for name in imaging.__all__:
        assert hasattr(imaging, name)


def test_cursor_kinds_match_capture_contract() -> None:
    from typing import get_args

    from deskpilot.capture._base import CursorKind

    assert set(get_args(CursorKind)) == set(get_args(imaging.CursorKind))


def test_backend_is_native_when_built() -> None:
    pure = os.environ.get("DESKPILOT_PURE", "").strip() not in ("", "0")
    expected = "native" if native_module() is not None and not pure else "reference"
    assert expected == imaging.BACKEND


def test_pure_env_forces_reference() -> None:
    code = "from deskpilot import imaging; print(imaging.BACKEND)"
    env = dict(os.environ, DESKPILOT_PURE="1")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "reference"


def test_stale_core_fails_loudly() -> None:
    with pytest.raises(ImportError, match=r"stale.*build_ext"):
        check_core_version("0.0.0-old", "0.1.0")
    check_core_version("0.1.0", "0.1.0")


def test_native_core_carries_package_version() -> None:
    native = native_module()
    if native is None:
        pytest.skip("compiled core not built")
    from deskpilot._version import __version__

    assert __version__ == native.CORE_VERSION


# -- weights ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst"), [(5, 4), (1920, 1536), (1080, 864), (7, 2), (3, 7), (1, 5)]
)
def test_axis_weights_are_exact_coverage(src: int, dst: int) -> None:
    w = axis_weights(src, dst)
    assert (w.weights.sum(axis=1) == WEIGHT_ONE).all()
    assert (w.starts >= 0).all() and ((w.starts + w.counts) <= src).all()
    dense = np.zeros((dst, src))
    for j in range(dst):
        for t in range(w.counts[j]):
            dense[j, w.starts[j] + t] = w.weights[j, t] / WEIGHT_ONE
    assert np.abs(dense - coverage_matrix(src, dst)).max() <= 1.0 / WEIGHT_ONE


def test_axis_weights_known_values() -> None:
    # 5 -> 4: each destination pixel covers 1.25 source pixels.
    w = axis_weights(5, 4)
    assert w.starts.tolist() == [0, 1, 2, 3]
    assert [list(map(int, row[:n])) for row, n in zip(w.weights, w.counts, strict=True)] == [
        [13107, 3277],
        [9830, 6554],
        [6554, 9830],
        [3277, 13107],
    ]
    assert w.pair_starts.tolist() == [0, 0, 1, 1]
    assert w.pair_weights.tolist() == [
        [[13107, 3277], [0, 0]],
        [[0, 9830], [6554, 0]],
        [[6554, 9830], [0, 0]],
        [[0, 3277], [13107, 0]],
    ]


@pytest.mark.parametrize(("src", "dst"), [(5, 4), (1920, 1536), (7, 2), (3, 7), (1, 5), (9, 9)])
def test_pair_weights_are_the_same_taps_aligned(src: int, dst: int) -> None:
    w = axis_weights(src, dst)
    assert w.weights.shape[1] % 2 == 0
    for j in range(dst):
        plain = np.zeros(src + 4, np.int64)
        plain[w.starts[j] : w.starts[j] + w.weights.shape[1]] += w.weights[j][
            : src + 4 - w.starts[j]
        ]
        paired = np.zeros(2 * (w.pair_starts[j] + w.pair_weights.shape[1]) + src + 4, np.int64)
        first = 2 * w.pair_starts[j]
        paired[first : first + 2 * w.pair_weights.shape[1]] = w.pair_weights[j].ravel()
        assert np.array_equal(paired[: src + 4], plain)
        assert not paired[src:].any()


# -- prepare / bgra_to_rgb / crop / downscale ---------------------------------------------------


def test_bgra_to_rgb_swaps_and_drops_alpha(backend: str) -> None:
    bgra = np.array([[[1, 2, 3, 4], [10, 20, 30, 40]]], np.uint8)
    assert imaging.bgra_to_rgb(bgra).tolist() == [[[3, 2, 1], [30, 20, 10]]]


def test_prepare_without_size_is_copy_and_swizzle(backend: str) -> None:
    rng = np.random.default_rng(1)
    bgra = random_image(rng, 37, 53, 4)
    rgb = imaging.prepare(bgra)
    assert rgb.flags.c_contiguous and rgb.shape == (37, 53, 3)
    assert np.array_equal(rgb, bgra[..., [2, 1, 0]])


def test_prepare_region_on_strided_view(backend: str) -> None:
    rng = np.random.default_rng(2)
    big = random_image(rng, 120, 200, 4)
    view = big[10:110, 20:180]  # row stride 800 bytes, not contiguous
    rgb = imaging.prepare(view, region=(5, 7, 60, 40), size=(30, 20))
    expected = np.rint(exact_area_average(view[7:47, 5:65, [2, 1, 0]], 30, 20))
    assert np.abs(rgb.astype(int) - expected).max() <= 1


def test_prepare_accepts_rect_and_reuses_out(backend: str) -> None:
    rng = np.random.default_rng(3)
    bgra = random_image(rng, 64, 64, 4)
    out = np.zeros((16, 24, 3), np.uint8)
    result = imaging.prepare(bgra, region=Rect(8, 8, 48, 32), size=(24, 16), out=out)
    assert result is out
    again = imaging.prepare(bgra, region=(8, 8, 48, 32), size=(24, 16))
    assert np.array_equal(out, again)


def test_non_contiguous_inputs_are_copied_not_misread(backend: str) -> None:
    rng = np.random.default_rng(4)
    bgra = random_image(rng, 30, 40, 4)
    fortran = np.asfortranarray(bgra)
    every_other = random_image(rng, 30, 80, 4)[:, ::2]
    reversed_channels = bgra[..., ::-1]
    for arr in (fortran, every_other, reversed_channels):
        assert np.array_equal(imaging.bgra_to_rgb(arr), arr[..., [2, 1, 0]])
        small = imaging.prepare(arr, size=(20, 15))
        assert np.array_equal(small, imaging.prepare(np.ascontiguousarray(arr), size=(20, 15)))


def test_one_pixel_stroke_turns_grey_instead_of_vanishing(backend: str) -> None:
    bgra = np.full((10, 40, 4), 255, np.uint8)
    bgra[:, 13] = (0, 0, 0, 255)  # a 1-px black vertical stroke
    rgb = imaging.prepare(bgra, size=(10, 10))  # 4:1
    column = rgb[0, :, 0]
    assert column.min() < 255 and column.min() >= 255 * 3 // 4 - 1
    assert (column < 255).sum() == 1


@pytest.mark.parametrize("scale", SCALES)
def test_downscale_matches_exact_area_average(backend: str, scale: float) -> None:
    rng = np.random.default_rng(5)
    src = random_image(rng, 111, 157, 3)
    width, height = max(1, round(157 / scale)), max(1, round(111 / scale))
    out = imaging.downscale(src, (width, height))
    expected = exact_area_average(src, width, height)
    assert out.shape == (height, width, 3)
    assert np.abs(out.astype(np.float64) - expected).max() <= 1.0


@given(
    data=st.data(),
    height=st.integers(1, 40),
    width=st.integers(1, 40),
    sx=st.sampled_from(SCALES),
    sy=st.sampled_from(SCALES),
)
@HYPOTHESIS
def test_prepare_random_shapes_and_scales(
    backend: str, data: st.DataObject, height: int, width: int, sx: float, sy: float
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    frame = random_image(rng, height + 4, width + 6, 4)
    x = data.draw(st.integers(0, 6))
    y = data.draw(st.integers(0, 4))
    region = (x, y, width, height)  # may touch every edge of the frame
    size = (max(1, round(width / sx)), max(1, round(height / sy)))
    rgb = imaging.prepare(frame, region=region, size=size)
    expected = exact_area_average(frame[y : y + height, x : x + width, [2, 1, 0]], *size)
    assert rgb.shape == (size[1], size[0], 3)
    assert np.abs(rgb.astype(np.float64) - expected).max() <= 1.0


@given(
    data=st.data(),
    shape=st.sampled_from([(1, 50), (50, 1), (1, 1), (2, 3), (17, 31), (33, 8)]),
    channels=st.sampled_from([1, 2, 3, 4]),
)
@HYPOTHESIS
def test_downscale_degenerate_shapes(
    backend: str, data: st.DataObject, shape: tuple[int, int], channels: int
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    src = random_image(rng, shape[0], shape[1], channels)
    width = data.draw(st.integers(1, 2 * shape[1] + 1))
    height = data.draw(st.integers(1, 2 * shape[0] + 1))
    out = imaging.downscale(src, (width, height))
    assert np.abs(out.astype(np.float64) - exact_area_average(src, width, height)).max() <= 1.0


def test_downscale_grey_2d_and_identity(backend: str) -> None:
    rng = np.random.default_rng(6)
    grey = rng.integers(0, 256, (20, 30), dtype=np.uint8)
    small = imaging.downscale(grey, (15, 10))
    assert small.shape == (10, 15)
    expected = exact_area_average(grey[:, :, None], 15, 10)[:, :, 0]
    assert np.abs(small - expected).max() <= 1.0
    assert np.array_equal(imaging.downscale(grey, (30, 20)), grey)


@pytest.mark.parametrize("size", [(1536, 864), (1919, 1079), (641, 357), (2000, 1100)])
def test_full_frame_matches_exact_average(backend: str, size: tuple[int, int]) -> None:
    # a real screenshot when the corpus is there, else UI-like pixels; odd sizes exercise
    # the SIMD kernels' tails, 2000x1100 enlarges
    frames = corpus_frames()
    if frames:
        frame = load_bgra(frames[0])
    else:
        frame = ui_like_image(np.random.default_rng(11), 1080, 1920, 4)
    rgb = imaging.prepare(frame, size=size)
    expected = exact_area_average(frame[:, :, [2, 1, 0]], *size)
    assert np.abs(rgb.astype(np.float64) - expected).max() <= 1.0


def test_flat_image_stays_exactly_flat(backend: str) -> None:
    for value in (0, 1, 127, 254, 255):
        src = np.full((1080, 37, 4), value, np.uint8)
        for size in ((29, 864), (5, 3), (37, 1080), (74, 2000)):
            assert (imaging.prepare(src, size=size) == value).all()


def test_crop_copy_and_view() -> None:
    img = np.arange(5 * 6 * 3, dtype=np.uint8).reshape(5, 6, 3)
    copied = imaging.crop(img, (1, 2, 3, 2))
    assert copied.flags.c_contiguous and np.array_equal(copied, img[2:4, 1:4])
    view = imaging.crop(img, Rect(0, 0, 6, 5), copy=False)
    assert np.shares_memory(view, img)
    assert imaging.crop(img[:, :, 0], (0, 0, 1, 1)).shape == (1, 1)


# -- bad input --------------------------------------------------------------------------------


BAD_CALLS: list[tuple[str, Any, str]] = [
    ("float frame", lambda: imaging.prepare(np.zeros((4, 4, 4))), "uint8"),  # type: ignore[arg-type]
    ("rgb given as bgra", lambda: imaging.prepare(np.zeros((4, 4, 3), np.uint8)), "HxWx4"),
    ("empty frame", lambda: imaging.prepare(np.zeros((0, 4, 4), np.uint8)), "empty"),
    ("1-d", lambda: imaging.bgra_to_rgb(np.zeros(16, np.uint8)), "HxWx4"),
    ("zero-size region", lambda: imaging.prepare(_frame(), region=(0, 0, 0, 3)), "empty"),
    ("region off frame", lambda: imaging.prepare(_frame(), region=(6, 0, 4, 4)), "not inside"),
    ("negative region", lambda: imaging.prepare(_frame(), region=(-1, 0, 4, 4)), "not inside"),
    ("region of 3", lambda: imaging.prepare(_frame(), region=(0, 0, 4)), "x, y, w, h"),
    ("float region", lambda: imaging.prepare(_frame(), region=(0.5, 0, 4, 4)), "integer"),  # type: ignore[arg-type]
    ("zero size", lambda: imaging.prepare(_frame(), size=(0, 4)), "positive"),
    ("bool size", lambda: imaging.prepare(_frame(), size=(True, 4)), "integer"),
    ("size not pair", lambda: imaging.prepare(_frame(), size=5), "width, height"),  # type: ignore[arg-type]
    (
        "out wrong shape",
        lambda: imaging.prepare(_frame(), out=np.zeros((8, 8, 4), np.uint8)),
        "shape",
    ),
    (
        "out strided",
        lambda: imaging.prepare(_frame(), out=np.zeros((8, 16, 3), np.uint8)[:, ::2]),
        "C-contiguous",
    ),
    ("out aliases", lambda: _aliasing_out(), "overlap"),
    (
        "crop off image",
        lambda: imaging.crop(np.zeros((4, 4), np.uint8), (3, 3, 2, 2)),
        "not inside",
    ),
    ("downscale 5ch", lambda: imaging.downscale(np.zeros((4, 4, 5), np.uint8), (2, 2)), "HxWx"),
    ("digest empty", lambda: imaging.frame_digest(np.zeros((3, 0, 4), np.uint8)), "empty"),
    ("diff shapes", lambda: imaging.changed_region(_frame(), _frame()[:4]), "differ in shape"),
    ("diff dtype", lambda: imaging.changed_region(_frame(), _frame().astype(np.int16)), "uint8"),
]


def _frame() -> U8:
    return np.zeros((8, 8, 4), np.uint8)


def _aliasing_out() -> U8:
    buf = np.zeros((8, 8, 4), np.uint8)
    return imaging.prepare(buf, out=buf.reshape(-1)[: 8 * 8 * 3].reshape(8, 8, 3))


@pytest.mark.parametrize(
    ("call", "message"), [(c, m) for _, c, m in BAD_CALLS], ids=[n for n, _, _ in BAD_CALLS]
)
def test_bad_input_raises_clear_imaging_error(backend: str, call: Any, message: str) -> None:
    with pytest.raises(ImagingError, match=re.escape(message)) as info:
        call()
    assert isinstance(info.value, ValueError)


# -- frame_digest / changed_region --------------------------------------------------------------


def test_digest_equal_for_equal_pixels_and_layouts(backend: str) -> None:
    rng = np.random.default_rng(7)
    big = random_image(rng, 50, 70, 4)
    view = big[3:40, 5:66]
    assert imaging.frame_digest(view) == imaging.frame_digest(view.copy())
    assert imaging.frame_digest(big) != imaging.frame_digest(view)
    grey = big[:, :, 0].copy()
    assert imaging.frame_digest(grey) == imaging.frame_digest(grey[:, :, None])


def test_digest_sees_every_single_byte_change(backend: str) -> None:
    rng = np.random.default_rng(8)
    img = random_image(rng, 9, 13, 4)  # 52-byte rows: whole words plus a padded tail
    base = imaging.frame_digest(img)
    seen = {base}
    for flat_index in range(img.size):
        changed = img.copy()
        changed.reshape(-1)[flat_index] ^= 0x01
        seen.add(imaging.frame_digest(changed))
    assert len(seen) == img.size + 1


def test_digest_depends_on_shape(backend: str) -> None:
    zeros = np.zeros(96, np.uint8)
    shapes = [(4, 8, 3), (8, 4, 3), (2, 12, 4), (96, 1, 1), (1, 96, 1), (6, 16, 1)]
    digests = {imaging.frame_digest(zeros.reshape(s)) for s in shapes}
    assert len(digests) == len(shapes)


def test_changed_region_none_single_and_box(backend: str) -> None:
    rng = np.random.default_rng(9)
    a = random_image(rng, 60, 80, 4)
    assert imaging.changed_region(a, a.copy()) is None
    b = a.copy()
    b[17, 23, 2] ^= 0xFF
    assert imaging.changed_region(a, b) == (23, 17, 1, 1)
    b[40, 5, 3] ^= 1  # alpha counts too
    b[20, 70, 0] ^= 1
    assert imaging.changed_region(a, b) == (5, 17, 66, 24)


def test_changed_region_corners_and_strided(backend: str) -> None:
    rng = np.random.default_rng(10)
    big = random_image(rng, 40, 50, 4)
    a = big[5:35, 7:47]
    b = a.copy()
    b[0, 0, 0] ^= 1
    b[-1, -1, 3] ^= 1
    assert imaging.changed_region(a, b) == (0, 0, 40, 30)
    c = a.copy()
    c[-1, 0, 1] ^= 1
    assert imaging.changed_region(c, a) == (0, 29, 1, 1)


@given(
    data=st.data(),
    height=st.integers(1, 30),
    width=st.integers(1, 30),
    channels=st.sampled_from([1, 3, 4]),
)
@HYPOTHESIS
def test_changed_region_random(
    backend: str, data: st.DataObject, height: int, width: int, channels: int
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = random_image(rng, height, width, channels)
    b = a.copy()
    count = data.draw(st.integers(0, 4))
    points = [(int(rng.integers(height)), int(rng.integers(width))) for _ in range(count)]
    for y, x in points:
        channel = int(rng.integers(channels))
        b[y, x, channel] = a[y, x, channel] ^ 0x80  # from a: repeated points do not cancel
    if not points:
        assert imaging.changed_region(a, b) is None
        return
    ys, xs = [p[0] for p in points], [p[1] for p in points]
    expected = (min(xs), min(ys), max(xs) - min(xs) + 1, max(ys) - min(ys) + 1)
    assert imaging.changed_region(a, b) == expected


# -- the two backends agree bit for bit -------------------------------------------------------


def _with_each_backend(fn: Any) -> list[Any]:
    results = []
    saved = _api._kernels
    try:
        for module in backend_modules().values():
            _api._kernels = module
            results.append(fn())
    finally:
        _api._kernels = saved
    return results


@given(
    data=st.data(),
    height=st.integers(1, 48),
    width=st.integers(1, 48),
    out_w=st.integers(1, 64),
    out_h=st.integers(1, 64),
)
@HYPOTHESIS
def test_backends_agree_on_prepare_and_digest(
    data: st.DataObject, height: int, width: int, out_w: int, out_h: int
) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    frame = ui_like_image(rng, height, width, 4)
    results = _with_each_backend(
        lambda: (
            imaging.prepare(frame, size=(out_w, out_h)).tobytes(),
            imaging.downscale(frame[:, :, :3], (out_w, out_h)).tobytes(),
            imaging.frame_digest(frame),
            imaging.frame_digest(frame[:, :, :3]),
        )
    )
    assert all(r == results[0] for r in results)
