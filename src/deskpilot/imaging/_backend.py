"""The one place that picks the kernels, for both compiled modules: the compiled core when it
is built and current, else its numpy twin.

deskpilot has two compiled modules, ``deskpilot._native.imaging`` (capture pixels, PNG,
change detection; twin :mod:`deskpilot.imaging._reference`) and ``deskpilot._native.annotate``
(the stateless mode's overlays; twin :mod:`deskpilot.imaging._overlay_reference`).
:func:`load` decides for each, by the same rules:

* ``DESKPILOT_PURE=1`` forces the reference (to compare, or to debug the core);
* a compiled module whose embedded version differs from the package (a stale in-place build
  after a ``git pull``) fails loudly at import instead of computing with an outdated kernel;
* a module that is simply not built (an install without a C compiler: setup.py builds it as
  optional) falls back to its twin with one :class:`~deskpilot.errors.ReferenceKernelsWarning`
  per process, or an ImportError under ``DESKPILOT_REQUIRE_NATIVE=1`` (CI, benchmarks).

``deskpilot.imaging.BACKEND`` and ``deskpilot.imaging.OVERLAY_BACKEND`` tell which is active.

The contract between the two layers is the same for both modules: the Python wrappers
(:mod:`deskpilot.imaging._api`, :mod:`deskpilot.imaging._overlay`) check every argument and
raise :class:`~deskpilot.errors.ImagingError` with the details; the kernels, compiled and
reference alike, trust what they are handed and check nothing.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from deskpilot._errors import ImagingError, ReferenceKernelsWarning
from deskpilot._version import __version__
from deskpilot.imaging import _overlay_reference, _reference
from deskpilot.imaging._weights import AxisWeights

__all__ = [
    "ANNOTATE_MODULE",
    "IMAGING_MODULE",
    "REFERENCE_SLOWDOWN",
    "AnnotateKernels",
    "Backend",
    "Kernels",
    "check_core_version",
    "env_flag",
    "load",
    "load_annotate_kernels",
    "load_kernels",
    "native_unavailable",
    "reference_kernels_message",
    "require_native",
]

U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
Backend = Literal["native", "reference"]

#: The compiled modules (built by setup.py from native/imaging.pyx and native/annotate.pyx)
#: and, for each, its bit-identical numpy twin.
IMAGING_MODULE = "deskpilot._native.imaging"
ANNOTATE_MODULE = "deskpilot._native.annotate"
_REFERENCES: dict[str, ModuleType] = {
    IMAGING_MODULE: _reference,
    ANNOTATE_MODULE: _overlay_reference,
}

#: How much slower a 1920x1080 frame's prepare (crop + BGRA->RGB + downscale to 1536x864)
#: plus PNG encode (level 1) is on the reference kernels than on the compiled core: 180 ms
#: against 5.6 ms on one x86-64 core (a corpus UI frame); quoted in the messages below.
REFERENCE_SLOWDOWN = "about 30x"

_warned: list[str] = []


class Kernels(Protocol):
    """What both ``_reference`` and ``deskpilot._native.imaging`` provide.

    Arguments are checked by :mod:`deskpilot.imaging._api`: uint8, non-empty, packed pixels,
    outputs C-contiguous and of the right shape.
    """

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


class AnnotateKernels(Protocol):
    """What both ``_overlay_reference`` and ``deskpilot._native.annotate`` provide.

    Arguments are checked by :mod:`deskpilot.imaging._overlay`: a writable packed RGB frame,
    C-contiguous tables of the documented dtype and width with finite values, colours
    0..255, alpha_q 0..256, a gradient table of 2..65536 entries, the (95, rows) font.
    """

    CORE_VERSION: str

    def heat_spots(self, frame: U8, spots: F64, lut: U8) -> None: ...

    def box_heat(self, frame: U8, boxes: I32, lut: U8) -> None: ...

    def rects(self, frame: U8, rects: I32) -> None: ...

    def rings(self, frame: U8, rings: F64) -> None: ...

    def lines(self, frame: U8, lines: F64) -> None: ...

    def text(self, frame: U8, runs: I32, codes: bytes, font: U8, cell_width: int) -> None: ...


def check_core_version(
    core_version: str, package_version: str = __version__, *, module: str = IMAGING_MODULE
) -> None:
    """Refuse a compiled module built from another version of the sources."""
    if core_version != package_version:
        raise ImportError(
            f"deskpilot's compiled core {module} is version {core_version!r} but the package is "
            f"{package_version!r}: the extension is stale. Rebuild it with "
            "`python setup.py build_ext --inplace` (or `pip install -e .`), "
            "or set DESKPILOT_PURE=1 to use the numpy reference.",
            name=module,
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
    else one ReferenceKernelsWarning per process (both modules share it)."""
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
        # here <- _import_native <- load <- load_*_kernels <- the importing module's top level
        stacklevel=5,
    )


def _import_native(module: str) -> ModuleType | None:
    """The compiled module if it is built (and current: a stale one raises), else None."""
    try:
        native = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        native_unavailable(module, exc)  # one warning per process, or REQUIRE_NATIVE
        return None
    check_core_version(native.CORE_VERSION, module=module)
    return native


def load(module: str) -> tuple[Backend, ModuleType]:
    """Pick the kernels of one compiled module (:data:`IMAGING_MODULE` or
    :data:`ANNOTATE_MODULE`): the compiled module, or its numpy twin (see the module doc)."""
    reference = _REFERENCES[module]
    if env_flag("DESKPILOT_PURE"):
        return "reference", reference
    native = _import_native(module)
    return ("reference", reference) if native is None else ("native", native)


def require_native(module: str) -> ModuleType:
    """The compiled module asked for by name (tests, benchmarks), even under DESKPILOT_PURE:
    an ImagingError when it is not built or stale, never a silent fallback."""
    try:
        native = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ImagingError(
            f"the compiled core {module} is not built: python setup.py build_ext --inplace",
            module=module,
        ) from None
    try:
        check_core_version(native.CORE_VERSION, module=module)
    except ImportError as exc:
        raise ImagingError(str(exc), module=module) from None
    return native


def load_kernels() -> tuple[Backend, Kernels]:
    """The pixel kernels of :mod:`deskpilot.imaging._api`."""
    backend, kernels = load(IMAGING_MODULE)
    return backend, cast(Kernels, kernels)


def load_annotate_kernels() -> tuple[Backend, AnnotateKernels]:
    """The overlay kernels of :mod:`deskpilot.imaging._overlay`."""
    backend, kernels = load(ANNOTATE_MODULE)
    return backend, cast(AnnotateKernels, kernels)
