"""The Windows layer type-checks as Windows code (``mypy --platform win32``) and as Linux code.

The Win32 modules use names that only exist on Windows (``ctypes.WinDLL``,
``ctypes.get_last_error``, ``ctypes.WINFUNCTYPE``, ``ctypes.FormatError``) behind
``sys.platform == "win32"`` checks; mypy only checks those branches when told the platform
is win32, so this runs it both ways. Other packages' modules are followed silently: only
errors in the files named here fail the test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = [
    "src/deskpilot/_win32",
    "src/deskpilot/capture/_gdi.py",
    "src/deskpilot/input/_sendinput.py",
    "src/deskpilot/input/_win_watchdog.py",
    "src/deskpilot/safety/_killswitch.py",
]


@pytest.mark.parametrize("platform", ["win32", "linux"])
def test_mypy_strict_for_platform(platform: str) -> None:
    pytest.importorskip("mypy")
    command = [
        sys.executable, "-m", "mypy",
        "--platform", platform,
        "--strict",
        "--follow-imports=silent",
        "--no-error-summary",
        # A cache per platform keeps reruns fast; platform changes invalidate a shared one.
        "--cache-dir", str(ROOT / ".mypy_cache" / f"win32-layer-{platform}"),
        *FILES,
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, (
        f"mypy --platform {platform} failed:\n{result.stdout}{result.stderr}"
    )
