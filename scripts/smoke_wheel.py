"""Smoke test of an installed deskpilot wheel: the compiled core imports and computes exactly
what the numpy reference computes on a small frame.

Run by cibuildwheel after each wheel is built (``[tool.cibuildwheel] test-command``) and by
tests/integration/test_install_linux.py against a wheel installed in a fresh venv. It needs
nothing but the wheel and its dependencies: no display, no source tree, no pytest.

    python scripts/smoke_wheel.py            # exit 0: native core present and exact

The same outputs are computed in this process (compiled core) and in a child process with
``DESKPILOT_PURE=1`` (reference kernels), and compared by SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any


def outputs() -> dict[str, Any]:
    """Every kernel family on a small frame with odd sizes (edge columns, partial SIMD blocks)."""
    import numpy as np

    from deskpilot import imaging
    from deskpilot.imaging._overlay import OVERLAY_BACKEND, ActionMark, BoxMark, annotate

    rng = np.random.default_rng(20261125)
    bgra = rng.integers(0, 256, (61, 97, 4), dtype=np.uint8)
    bgra[10:30, 20:50] = (200, 120, 40, 255)  # a flat patch, as in real UI frames
    cursor = rng.integers(0, 256, (16, 12, 4), dtype=np.uint8)

    def digest(data: Any) -> str:
        raw = data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()
        return hashlib.sha256(raw).hexdigest()

    rgb = imaging.prepare(bgra, region=(3, 2, 90, 57), size=(41, 23))
    framed = bgra.copy()
    imaging.composite_cursor(framed, cursor, 90, -4, kind="premultiplied")
    changed = bgra.copy()
    changed[40, 7] ^= 0xFF
    full = imaging.bgra_to_rgb(bgra)
    overlay = full.copy()
    annotate(
        overlay,
        [ActionMark("click", 500, 400), ActionMark("drag", 100, 900, 800, 200)],
        [BoxMark(50, 50, 600, 700, "ok")],
    )
    return {
        "backend": imaging.BACKEND,
        "overlay_backend": OVERLAY_BACKEND,
        "prepare": digest(rgb),
        "bgra_to_rgb": digest(full),
        "composite_cursor": digest(framed),
        "encode_png": digest(imaging.encode_png(rgb, level=1)),
        "encode_png_paeth": digest(imaging.encode_png(full, level=6, filter="paeth")),
        "frame_digest": imaging.frame_digest(bgra),
        "changed_region": list(imaging.changed_region(bgra, changed) or ()),
        "annotate": digest(overlay),
    }


def main() -> int:
    if "--outputs" in sys.argv:
        print(json.dumps(outputs()))
        return 0
    import deskpilot

    native = outputs()
    env = {**os.environ, "DESKPILOT_PURE": "1"}
    child = subprocess.run(
        [sys.executable, __file__, "--outputs"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return 1
    reference = json.loads(child.stdout)
    problems = []
    if (native["backend"], native["overlay_backend"]) != ("native", "native"):
        problems.append(
            f"compiled core not in use: {native['backend']}/{native['overlay_backend']}"
        )
    if (reference["backend"], reference["overlay_backend"]) != ("reference", "reference"):
        problems.append("DESKPILOT_PURE=1 did not select the reference kernels")
    problems += [
        f"{name}: compiled {native[name]!r} != reference {reference[name]!r}"
        for name in native
        if not name.endswith("backend") and native[name] != reference[name]
    ]
    where = os.path.dirname(deskpilot.__file__)
    if problems:
        print(
            f"deskpilot {deskpilot.__version__} at {where}: FAIL",
            *problems,
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    print(
        f"deskpilot {deskpilot.__version__} at {where}: compiled core == reference on {len(native) - 2} outputs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
