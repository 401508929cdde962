"""Shared helpers for the imaging tests (no tests here): backend switching, exact references.

Every kernel test takes the ``backend`` fixture, which points ``deskpilot.imaging`` at the
compiled core or at the numpy reference in turn, so identical test bodies run against both.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from deskpilot.imaging import _api, _reference

U8 = npt.NDArray[np.uint8]
CORPUS = Path(__file__).resolve().parents[3] / "benchmarks" / "corpus"
PURE = os.environ.get("DESKPILOT_PURE", "").strip() not in ("", "0")


def native_module() -> ModuleType | None:
    try:
        return importlib.import_module("deskpilot._native.imaging")
    except ModuleNotFoundError:
        return None


class ScalarNative:
    """The compiled core with its AVX2 row kernels switched off for every call."""

    def __init__(self, native: ModuleType) -> None:
        self._native = native
        self.CORE_VERSION = native.CORE_VERSION

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._native, name)

        def scalar(*args: Any) -> Any:
            previous = self._native.set_simd(False)
            try:
                return function(*args)
            finally:
                self._native.set_simd(previous)

        return scalar


def backend_modules() -> dict[str, Any]:
    """Kernels to test: the reference always; the compiled core (SIMD and scalar) unless PURE."""
    modules: dict[str, Any] = {"reference": _reference}
    native = native_module()
    if not PURE and native is not None:
        modules["native"] = native
        modules["native-scalar"] = ScalarNative(native)
    return modules


_NO_NATIVE = pytest.mark.skipif(
    PURE or native_module() is None,
    reason="compiled core not built (run setup.py build_ext --inplace) or DESKPILOT_PURE=1",
)
BACKEND_PARAMS = [
    pytest.param("reference", id="reference"),
    pytest.param("native", id="native", marks=_NO_NATIVE),
    pytest.param("native-scalar", id="native-scalar", marks=_NO_NATIVE),
]


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with deskpilot.imaging backed by one kernel module, then restore."""
    name: str = request.param
    saved = _api._kernels
    _api._kernels = backend_modules()[name]
    try:
        yield name
    finally:
        _api._kernels = saved


def random_image(rng: np.random.Generator, height: int, width: int, channels: int) -> U8:
    return rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)


def ui_like_image(rng: np.random.Generator, height: int, width: int, channels: int) -> U8:
    """Flat areas, thin lines and a little noise: what screenshots look like."""
    img = np.full((height, width, channels), 240, np.uint8)
    img[: max(1, height // 8)] = 40
    img[:, ::7] = 200
    img[height // 2 :: 5, width // 3 :] = rng.integers(0, 256, channels, dtype=np.uint8)
    noise = rng.random((height, width)) < 0.05
    img[noise] = rng.integers(0, 256, size=(int(noise.sum()), channels), dtype=np.uint8)
    return img


def coverage_matrix(src: int, dst: int) -> npt.NDArray[np.float64]:
    """(dst, src) float64 matrix of exact fractional coverage, rows summing to 1."""
    scale = src / dst
    matrix = np.zeros((dst, src))
    for j in range(dst):
        lo, hi = j * scale, (j + 1) * scale
        for i in range(int(np.floor(lo)), min(src, int(np.ceil(hi)))):
            matrix[j, i] = max(0.0, min(hi, i + 1) - max(lo, i)) / scale
    return matrix


def exact_area_average(src: U8, width: int, height: int) -> npt.NDArray[np.float64]:
    """The exact float64 area average of an (H, W, C) image resized to (height, width)."""
    rows = coverage_matrix(src.shape[0], height)
    cols = coverage_matrix(src.shape[1], width)
    # Two matrix products (BLAS), not one einsum over four indices: a 1920x1080 frame
    # takes a second or two instead of hours.
    tall = np.tensordot(rows, src.astype(np.float64), axes=(1, 0))  # (height, W, C)
    result: npt.NDArray[np.float64] = np.tensordot(cols, tall, axes=(1, 1)).transpose(1, 0, 2)
    return result


def corpus_frames() -> list[Path]:
    return sorted(CORPUS.glob("*.png")) if CORPUS.is_dir() else []


def load_bgra(path: Path) -> U8:
    """A corpus PNG as a capture backend delivers it: HxWx4 BGRA, alpha 255."""
    from PIL import Image

    with Image.open(path) as im:
        rgba = np.asarray(im.convert("RGBA"))
    bgra = np.ascontiguousarray(rgba[..., [2, 1, 0, 3]])
    bgra[..., 3] = 255
    return bgra
