import os
import subprocess
from pathlib import Path

import pytest

from deskpilot._errors import PlatformError
from deskpilot.testing._xvfb import xvfb as start_xvfb

pytestmark = pytest.mark.x11


def test_xvfb_serves_a_1920x1080_screen(xvfb: str) -> None:
    out = subprocess.run(["xdpyinfo", "-display", xvfb], capture_output=True, text=True, check=True)
    assert "1920x1080 pixels" in out.stdout
    assert "XTEST" in out.stdout and "XFIXES" in out.stdout


# --- deskpilot.testing._xvfb: the one start-up behind the fixture, the demo and the benchmarks


def test_xvfb_helper_points_display_at_its_server_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":before")
    with start_xvfb((640, 480)) as display:
        assert os.environ["DISPLAY"] == display != ":before"
        out = subprocess.run(["xdpyinfo", "-display", display], capture_output=True, text=True, check=True)
        assert "640x480 pixels" in out.stdout and "XTEST" in out.stdout
    assert os.environ["DISPLAY"] == ":before"
    # stopped with the block
    gone = subprocess.run(["xdpyinfo", "-display", display], capture_output=True, text=True)
    assert gone.returncode != 0


def test_xvfb_helper_can_leave_display_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":before")
    with start_xvfb((320, 200), options=("-nolisten", "tcp"), set_display=False) as display:
        assert os.environ["DISPLAY"] == ":before" and display.startswith(":")


def test_xvfb_helper_without_xvfb_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PlatformError, match="Xvfb is not installed"), start_xvfb():
        pass
