import subprocess

import pytest

pytestmark = pytest.mark.x11


def test_xvfb_serves_a_1920x1080_screen(xvfb: str) -> None:
    out = subprocess.run(["xdpyinfo", "-display", xvfb], capture_output=True, text=True, check=True)
    assert "1920x1080 pixels" in out.stdout
    assert "XTEST" in out.stdout and "XFIXES" in out.stdout
