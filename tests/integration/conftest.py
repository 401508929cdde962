"""Integration fixtures: a real X server (Xvfb) per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """Start Xvfb at 1920x1080x24 on a free display number and point DISPLAY at it.

    The display number comes from Xvfb itself (-displayfd), so parallel sessions never
    collide. Yields the DISPLAY string; the server is stopped at the end of the session.
    """
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is not installed: run ./dev setup (apt-get install xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1920x1080x24",
         "-nolisten", "tcp", "-noreset", "+extension", "XFIXES", "+extension", "XTEST"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        number = pipe.readline().strip()
    if not number:
        proc.kill()
        pytest.fail("Xvfb did not start")
    display = f":{number}"
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    try:
        yield display
    finally:
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
