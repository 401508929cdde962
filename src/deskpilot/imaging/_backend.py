"""Picks the kernels: the compiled core when it is built and current, else the numpy reference.

``DESKPILOT_PURE=1`` forces the reference (to compare, or to debug the core). A compiled
core whose embedded version differs from the package (a stale in-place build after a
``git pull``) fails loudly at import instead of computing with an outdated kernel; a core
that is simply not built (an install without a C compiler: setup.py builds it as optional)
falls back to the reference with one :class:`~deskpilot.errors.ReferenceKernelsWarning`,
and ``deskpilot.imaging.BACKEND`` tells which one is active. ``DESKPILOT_REQUIRE_NATIVE=1``
(CI, benchmarks) makes a missing core an ImportError instead.
"""

from __future__ import annotations

import importlib
import os
import warnings
from typing import Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from deskpilot._errors import ReferenceKernelsWarning
from deskpilot._version import __version__
from deskpilot.imaging import _reference
from deskpilot.imaging._weights import AxisWeights

__all__ = [
    "REFERENCE_SLOWDOWN",
    "Kernels",
    "check_core_version",
    "env_flag",
    "load_kernels",
    "native_unavailable",
    "reference_kernels_message",
]

U8 = npt.NDArray[np.uint8]
NATIVE_MODULE = "deskpilot._native.imaging"

#: How much slower a 1920x1080 frame's prepare (crop + BGRA->RGB + downscale to 1536x864)
#: plus PNG encode (level 1) is on the reference kernels than on the compiled core: 180 ms
#: against 5.6 ms on one x86-64 core (a corpus UI frame); quoted in the messages below.
REFERENCE_SLOWDOWN = "about 30x"

_warned: list[str] = []


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


def env_flag(name: str) -> bool:
    """True when the environment variable is set to anything but empty or ``0``."""
    return os.environ.get(name, "").strip() not in ("", "0")


def reference_kernels_message(missing: str) -> str:
    """What runs slower without the compiled core, and how to get it (warning and doctor)."""
    return (
        f"deskpilot's compiled core is not installed ({missing} did not import), so capture "
        "downscaling, BGRA->RGB, cursor compositing, PNG filtering, frame hashing and overlays "
        f"run on the numpy reference kernels: same pixels, {REFERENCE_SLOWDOWN} slower per "
        "frame. For the fast core install a binary wheel (pip install --force-reinstall "
        "--only-binary deskpilot deskpilot), or a C compiler and the Python headers (Linux: "
        "gcc, python3-dev; Windows: Visual Studio Build Tools) and reinstall from source. "
        "DESKPILOT_PURE=1 selects the reference kernels deliberately (no warning); "
        "DESKPILOT_REQUIRE_NATIVE=1 makes a missing core an error."
    )


def native_unavailable(module: str, exc: ModuleNotFoundError) -> None:
    """A compiled module is not installed: an ImportError under DESKPILOT_REQUIRE_NATIVE=1,
    else one ReferenceKernelsWarning per process (imaging and overlays share it)."""
    if env_flag("DESKPILOT_REQUIRE_NATIVE"):
        raise ImportError(
            f"DESKPILOT_REQUIRE_NATIVE=1 but deskpilot's compiled core {module} is not "
            f"installed ({exc}). Build it (./dev setup, or pip install -e . with a C compiler) "
            "or install a binary wheel.",
            name=module,
        ) from exc
    if _warned:
        return
    _warned.append(module)
    warnings.warn(
        ReferenceKernelsWarning(reference_kernels_message(module), missing=module),
        stacklevel=3,
    )


def load_kernels() -> tuple[Literal["native", "reference"], Kernels]:
    if env_flag("DESKPILOT_PURE"):
        return "reference", cast(Kernels, _reference)
    try:
        native = importlib.import_module(NATIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != NATIVE_MODULE:
            raise
        native_unavailable(NATIVE_MODULE, exc)
        return "reference", cast(Kernels, _reference)
    check_core_version(native.CORE_VERSION)
    return "native", cast(Kernels, native)
