"""Picks the kernels: the compiled core when it is built and current, else the numpy reference.

``DESKPILOT_PURE=1`` forces the reference (to compare, or to debug the core). A compiled
core whose embedded version differs from the package (a stale in-place build after a
``git pull``) fails loudly at import instead of computing with an outdated kernel; a core
that is simply not built (a pure-Python checkout) falls back to the reference, and
``deskpilot.imaging.BACKEND`` tells which one is active.
"""

from __future__ import annotations

import importlib
import os
from typing import Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from deskpilot._version import __version__
from deskpilot.imaging import _reference
from deskpilot.imaging._weights import AxisWeights

__all__ = ["Kernels", "check_core_version", "load_kernels"]

U8 = npt.NDArray[np.uint8]
NATIVE_MODULE = "deskpilot._native.imaging"


class Kernels(Protocol):
    """What both ``_reference`` and ``deskpilot._native.imaging`` provide (arguments pre-checked)."""

    CORE_VERSION: str

    def resample(
        self,
        src: U8,
        out: U8,
        channel_map: npt.NDArray[np.intp],
        xw: AxisWeights,
        yw: AxisWeights,
    ) -> None: ...

    def swizzle(self, src: U8, out: U8, channel_map: npt.NDArray[np.intp]) -> None: ...

    def composite(self, frame: U8, cursor: U8, kind: int) -> None: ...

    def png_filter(self, img: U8, mode: int, out: U8) -> None: ...

    def digest(self, img: U8) -> int: ...

    def change_bounds(self, a: U8, b: U8) -> tuple[int, int, int, int] | None: ...


def check_core_version(core_version: str, package_version: str = __version__) -> None:
    """Refuse a compiled core built from another version of the sources."""
    if core_version != package_version:
        raise ImportError(
            f"deskpilot's compiled imaging core is version {core_version!r} but the package is "
            f"{package_version!r}: the extension is stale. Rebuild it with "
            "`python setup.py build_ext --inplace` (or `pip install -e .`), "
            "or set DESKPILOT_PURE=1 to use the numpy reference.",
            name=NATIVE_MODULE,
        )


def load_kernels() -> tuple[Literal["native", "reference"], Kernels]:
    if os.environ.get("DESKPILOT_PURE", "").strip() not in ("", "0"):
        return "reference", cast(Kernels, _reference)
    try:
        native = importlib.import_module(NATIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != NATIVE_MODULE:
            raise
        return "reference", cast(Kernels, _reference)
    check_core_version(native.CORE_VERSION)
    return "native", cast(Kernels, native)
