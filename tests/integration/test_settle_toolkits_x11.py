"""The settled screenshot after each action in a real Tk app and a real GTK 3 app is what
the app shows once it is done: a click that changes a label, typing into an entry, and a
click the app answers 120 ms later (nothing drawn before). An action without effect ends
at the first-reaction bound and says so.

The apps (tests/integration/apps/settle_tk_app.py, settle_gtk_app.py; GTK through the
system python3 with python3-gi) run full screen on the test's Xvfb; input is real XTest,
the runs full agent runs with the scripted model server and default settle settings
(:mod:`_settle_check`). Only pixels and record fields are asserted, never times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _settle_check import SIGNALS, Step, mismatch, norm, run_steps

from deskpilot.input import InputController

pytestmark = pytest.mark.x11


@pytest.fixture(params=SIGNALS)
def signal(request: pytest.FixtureRequest) -> str:
    """Every test runs on both settle drivers: X11 DAMAGE and probe polling."""
    return str(request.param)

APPS = Path(__file__).with_name("apps")
SYSTEM_PYTHON = "/usr/bin/python3"


class ToolkitApp:
    """A running settle app: its widgets' boxes (root coordinates) and its event lines."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        ready: dict[str, Any] = json.loads(line or "{}")
        if ready.get("type") != "ready":
            self.close()
            raise RuntimeError(f"{command[-1]} did not start: {line!r}")
        self.widgets: dict[str, list[int]] = ready["widgets"]

    def point(self, name: str) -> list[int]:
        x, y, w, h = self.widgets[name]
        return norm(x + w // 2, y + h // 2)

    def click(self, name: str, changes: bool = True) -> Step:
        return Step("click_element", {"label": name, "box": self.point(name)}, changes=changes)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=5)


def _gtk_available() -> str | None:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing"
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk"],
        capture_output=True, text=True, check=False,
    )
    return None if probe.returncode == 0 else "python3-gi / gir1.2-gtk-3.0 are not installed (./dev setup)"


@pytest.fixture(scope="module", params=["tk", "gtk"])
def app(request: pytest.FixtureRequest, xvfb: str) -> Iterator[ToolkitApp]:
    if request.param == "gtk":
        missing = _gtk_available()
        if missing:
            pytest.fail(missing)
        command = [SYSTEM_PYTHON, str(APPS / "settle_gtk_app.py")]
    else:
        command = [sys.executable, str(APPS / "settle_tk_app.py")]
    with InputController("xtest") as hands:
        where = hands.position()
    started = ToolkitApp(command)
    try:
        yield started
    finally:
        started.close()
        with InputController("xtest") as hands:  # later modules look at pixels where we leave it
            hands.move(*where)


def test_a_click_that_changes_a_label(app: ToolkitApp, tmp_path: Path, signal: str) -> None:
    checks = run_steps(tmp_path, signal=signal, steps=[app.click("button"), app.click("button")])
    problems = [m for m in map(mismatch, checks) if m]
    assert not problems, "\n".join(problems)


def test_typing_into_an_entry(app: ToolkitApp, tmp_path: Path, signal: str) -> None:
    checks = run_steps(tmp_path, signal=signal, steps=[app.click("entry"), Step("type_text", {"text": "Grüße settle"})])
    # the click may only move the caret (no change when the entry had focus already)
    problems = [m for m in map(mismatch, checks[1:]) if m]
    assert not problems, "\n".join(problems)


def test_an_app_that_draws_late(app: ToolkitApp, tmp_path: Path, signal: str) -> None:
    """The click itself draws nothing; the app's drawing comes 120 ms later."""
    checks = run_steps(tmp_path, signal=signal, steps=[app.click("late"), app.click("late")])
    problems = [m for m in map(mismatch, checks) if m]
    assert not problems, "\n".join(problems)
    assert all(c.record["result"]["changed"] is True for c in checks)


def test_an_action_without_effect_ends_at_the_first_reaction_bound(app: ToolkitApp, tmp_path: Path, signal: str) -> None:
    [check] = run_steps(tmp_path, signal=signal, steps=[app.click("blank", changes=False)], cursor=True)
    assert check.record["result"]["changed"] is False or check.record["result"].get("pointer_moved_only") is True, str(check.record["result"])
    assert check.settle.get("ended") == "no_reaction", str(check.settle)
    assert "first_reaction_ms" not in check.settle, str(check.settle)
    assert mismatch(check) is None


def test_gtk_app_prerequisites_are_in_dev_setup() -> None:
    """CI's fresh machine installs what the GTK app needs (./dev's APT_PACKAGES)."""
    dev = (Path(__file__).resolve().parents[2] / "dev").read_text()
    assert "python3-gi" in dev and "gir1.2-gtk-3.0" in dev
