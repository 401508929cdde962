"""Integration fixtures: a real X server (Xvfb) per test session."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator

import pytest
from apps.harness import TargetApp

from deskpilot._errors import PlatformError
from deskpilot.testing._xvfb import xvfb as start_xvfb


@pytest.fixture(scope="session")
def xvfb() -> Iterator[str]:
    """Start Xvfb at 1920x1080x24 on a free display number and point DISPLAY at it
    (:func:`deskpilot.testing._xvfb.xvfb`: the number comes from Xvfb itself, so parallel
    sessions never collide). Yields the DISPLAY string; the server is stopped at the end
    of the session."""
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is not installed: run ./dev setup (apt-get install xvfb)")
    # A loaded CI machine can take a while to start it; a hung one still fails the session.
    with contextlib.ExitStack() as stack:
        try:
            display = stack.enter_context(start_xvfb((1920, 1080), timeout=60.0))
        except PlatformError as exc:
            pytest.fail(str(exc))
        yield display


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
