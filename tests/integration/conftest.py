"""Integration fixtures: a real X server (Xvfb) per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest
from apps.harness import TargetApp


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


# --- the Tk target app (tests/integration/apps/target_app.py) -------------------------


@pytest.fixture
def start_target_app(xvfb: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., TargetApp]]:
    """A factory: ``start_target_app(geometry=None, seed=1)`` starts a target app, waits
    for its ``ready`` record and stops it at the end of the test."""
    started: list[TargetApp] = []

    def start(*, geometry: str | None = None, seed: int = 1) -> TargetApp:
        path = tmp_path_factory.mktemp("target_app") / "events.jsonl"
        app = TargetApp(path, geometry=geometry, seed=seed)
        started.append(app)
        return app

    try:
        yield start
    finally:
        for app in started:
            app.close()


@pytest.fixture(scope="module")
def target_app(xvfb: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TargetApp]:
    """One full-screen target app shared by the tests of a module (use ``mark()``/``since``
    to look at a test's own records, ``clear()``/``focus()`` to reset its widgets)."""
    app = TargetApp(tmp_path_factory.mktemp("target_app") / "events.jsonl")
    try:
        yield app
    finally:
        app.close()
