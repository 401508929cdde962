"""Builds the compiled core only: native/*.pyx -> deskpilot._native.<name>.

Everything else (metadata, dependencies, packages) lives in pyproject.toml.

Cython directives are set here, not in the .pyx headers, so that a debug build
can switch the safety checks back on without touching the sources:

    DESKPILOT_DEBUG_BUILD=1 pip install -e .   # bounds checks, wraparound, no -O3
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
DEBUG = os.environ.get("DESKPILOT_DEBUG_BUILD", "") not in ("", "0")
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
    compile_args = ["-O3", "-fno-strict-aliasing"] if not DEBUG else ["-O0", "-g"]
    compile_args += ["-Wno-unused-function", "-Wno-unreachable-code"]

extensions = [
    Extension(
        f"deskpilot._native.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[np.get_include(), "native"],
        # The compiled core carries the package version so that a stale build fails loudly
        # at import instead of computing with an outdated kernel.
        define_macros=[
            ("DESKPILOT_CORE_VERSION", f'"{VERSION}"'),
            ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
        ],
        extra_compile_args=compile_args,
    )
    for pyx in sorted((HERE / "native").glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=DEBUG,
        build_dir="build/cython",
        quiet=True,
    )
)
