"""`deskpilot run`'s stderr line for every ending but an answer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import deskpilot.commands.run as run_command
from deskpilot.cli import main

OSC52 = "\x1b]52;c;ZXZpbA==\x07"


@pytest.fixture(autouse=True)
def _a_visible_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """No display here: `run`'s start-up screen check (tests/unit/capture/
    test_capture_visibility.py, tests/integration/test_xwayland.py) answers "visible"."""
    monkeypatch.setattr("deskpilot.capture.check_screen_visible", lambda **_: None)


def fake_run(outcome: str, error: str | None) -> Any:
    def run_agent(config: Any, scenario: Any, *, reporter: Any, allow_xwayland: bool = False) -> Any:
        summary = {"outcome": outcome, "error": error}
        return SimpleNamespace(outcome=outcome, error=error, summary=summary, run_dir=Path("runs/x"))

    return run_agent


@pytest.mark.parametrize(
    ("outcome", "error", "code", "said"),
    [
        ("error", "RunLogError: cannot write 'run.json': no space left on the device", 1, "no space left on the device"),
        ("max_steps", None, 3, "reached the step limit (--max-steps)"),
        ("no_action", None, 5, "the model's reply had nothing to act on"),
        ("interrupted", "stopped by SIGTERM", 130, "stopped by SIGTERM"),
    ],
)
def test_every_ending_but_an_answer_says_why_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    outcome: str, error: str | None, code: int, said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("deskpilot.agent.run_agent", fake_run(outcome, error))
    assert main(["run", "--quiet", "a task"]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"deskpilot: run ended {outcome} (exit {code}): {said if error is None else error}; run directory: {Path('runs/x')}\n"


def test_an_answer_prints_nothing_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("deskpilot.agent.run_agent", fake_run("answered", None))
    assert main(["run", "--quiet", "a task"]) == 0
    assert capsys.readouterr().err == ""


def test_the_reason_reaches_the_terminal_inert(capsys: pytest.CaptureFixture[str]) -> None:
    run_command._say_why("error", 1, f"the server said {OSC52}\nbye", "runs/x")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1, repr(err)
