"""Builds the compiled core only: native/*.pyx -> deskpilot._native.<name>.

Everything else (metadata, dependencies, packages) lives in pyproject.toml.

Cython directives are set here, not in the .pyx headers, so that a debug build
can switch the safety checks back on without touching the sources:

    DESKPILOT_DEBUG_BUILD=1 pip install -e .   # bounds checks, wraparound, no -O3

The compiled core is optional: most Windows users have no C compiler, and a library
meant to be embedded must install without one. When the C build fails (no compiler,
no Python headers) the install still succeeds as a pure package that runs the numpy
reference kernels (bit-identical, slower); this prints one message saying so, and
``deskpilot.imaging`` warns once at import. ``DESKPILOT_REQUIRE_NATIVE=1`` turns the
failure back into a hard error (CI, wheel builds, benchmarks, ./dev setup).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
DEBUG = os.environ.get("DESKPILOT_DEBUG_BUILD", "") not in ("", "0")
REQUIRE_NATIVE = os.environ.get("DESKPILOT_REQUIRE_NATIVE", "").strip() not in ("", "0")
VERSION = re.search(
    r'__version__\s*=\s*"([^"]+)"', (HERE / "src/deskpilot/_version.py").read_text()
).group(1)  # type: ignore[union-attr]

directives = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "nonecheck": DEBUG,
    "embedsignature": True,
    "binding": False,
}

if sys.platform == "win32":
    compile_args = ["/O2"] if not DEBUG else ["/Od", "/Zi"]
else:
    # -g0 overrides the -g in Python's own CFLAGS: debug info would triple the wheel's size
    compile_args = ["-O3", "-g0", "-fno-strict-aliasing"] if not DEBUG else ["-O0", "-g"]
    compile_args += ["-Wno-unused-function", "-Wno-unreachable-code"]


def fallback_message(reason: str) -> str:
    """The one build message of a pure install: what happened, what it costs, how to fix it."""
    return textwrap.dedent(
        f"""
        ======================================================================
        deskpilot: the compiled core (deskpilot._native) was NOT built:
          {reason}
        Installing the pure package instead: capture, resize, PNG filtering and
        overlays run on the numpy reference kernels (same results, slower).
        For the fast core, install a binary wheel, or a C compiler with the
        Python headers (Linux: gcc and python3-dev; Windows: Visual Studio
        Build Tools, "Desktop development with C++"), then reinstall with
          pip install --force-reinstall --no-cache-dir deskpilot
        Set DESKPILOT_REQUIRE_NATIVE=1 to make this failure an error.
        ======================================================================
        """
    )


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed C build into a pure install with one clear message.

    setuptools' own ``Extension(optional=True)`` prints a terse line per extension; this
    stops at the first failure (every extension needs the same toolchain, so the rest
    would fail the same way and bury the message under compiler noise).
    """

    def run(self) -> None:
        self._failure: str | None = None
        super().run()
        if self._failure is not None:
            sys.stderr.write(fallback_message(self._failure))
            sys.stderr.flush()

    def build_extension(self, ext: Extension) -> None:
        if self._failure is not None:
            return
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, DistutilsPlatformError, OSError...
            if REQUIRE_NATIVE:
                raise
            self._failure = f"building {ext.name} failed: {type(exc).__name__}: {exc}"


def native_extensions() -> list[Any]:
    """The cythonized extensions, or none (with the message) when Cython/numpy are missing."""
    try:
        import numpy as np
        from Cython.Build import cythonize
    except ImportError as exc:
        # Only without build isolation (pyproject's build requirements bring both).
        if REQUIRE_NATIVE:
            raise
        sys.stderr.write(fallback_message(f"{exc} (the build needs Cython and numpy)"))
        return []
    sources = sorted((HERE / "native").glob("*.pyx"))
    if not sources and REQUIRE_NATIVE:
        # an sdist that lost its .pyx files would otherwise build a pure wheel without a word
        raise RuntimeError(f"DESKPILOT_REQUIRE_NATIVE=1 but there is no native/*.pyx in {HERE}")
    extensions = [
        Extension(
            f"deskpilot._native.{pyx.stem}",
            [str(pyx.relative_to(HERE))],
            include_dirs=[np.get_include(), "native"],
            depends=[str(h.relative_to(HERE)) for h in sorted((HERE / "native").glob("*.h"))],
            # The compiled core carries the package version so that a stale build fails loudly
            # at import instead of computing with an outdated kernel.
            define_macros=[
                ("DESKPILOT_CORE_VERSION", f'"{VERSION}"'),
                ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
            ],
            extra_compile_args=compile_args,
        )
        for pyx in sources
    ]
    cythonized = cythonize(
        extensions,
        compiler_directives=directives,
        annotate=DEBUG,
        build_dir="build/cython",
        quiet=True,
    )
    for ext in cythonized:
        # Set on cythonize's copies (it drops the flag): an editable install copies the built
        # modules into src/ and must skip, not fail on, one that was not built.
        ext.optional = not REQUIRE_NATIVE
    return list(cythonized)


setup(ext_modules=native_extensions(), cmdclass={"build_ext": OptionalBuildExt})
