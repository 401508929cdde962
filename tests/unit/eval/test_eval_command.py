"""`deskpilot eval`'s own checks: Windows (not offered, said clearly), --list, bad arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deskpilot._errors import ConfigError, PlatformError
from deskpilot.cli import build_parser, main


def _args(*argv: str) -> object:
    return build_parser().parse_args(["eval", *argv])


def test_on_windows_eval_is_not_offered_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from deskpilot.commands.eval import handle
    from deskpilot.eval import run_eval

    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(PlatformError, match="not offered on Windows: each session needs an isolated desktop"):
        handle(_args("desktop", "--scripted", "--out", str(tmp_path / "o")))  # type: ignore[arg-type]
    with pytest.raises(PlatformError, match="not offered on Windows"):
        run_eval("desktop", tmp_path / "o", scripted=True)
    assert not (tmp_path / "o").exists()  # refused before anything started


def test_on_windows_the_list_still_works(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    assert main(["eval", "--list"]) == 0
    assert "desktop" in capsys.readouterr().out


def test_list_shows_a_suites_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "desktop", "--list"]) == 0
    out = capsys.readouterr().out
    assert "menu-cascade" in out and "drag-drop" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["desktop"], "give a model"),
    ([], "name a suite"),
    (["desktop", "--scripted", "--parallel", "0"], "--parallel is at least 1"),
    (["desktop", "--scripted", "--ray-address", "127.0.0.1:6379"], "--ray-address goes with --engine ray"),
    (["desktop", "--scripted", "--shard", "4/4"], "K/N"),
    (["--merge", "shard-0"], "--merge writes into --out"),
])
def test_bad_arguments_are_config_errors(argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from deskpilot.commands.eval import handle

    monkeypatch.delenv("LMSTUDIO_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match=message):
        handle(_args(*argv))  # type: ignore[arg-type]


def test_a_missing_task_is_named(tmp_path: Path) -> None:
    from deskpilot.eval import run_eval

    with pytest.raises(ConfigError, match="no task nope"):
        run_eval("desktop", tmp_path / "o", scripted=True, only=["click-button", "nope"])


def test_the_api_key_goes_to_the_sessions_environment_not_their_spec_files(monkeypatch: pytest.MonkeyPatch) -> None:
    from deskpilot.commands.eval import _flags

    monkeypatch.setenv("LMSTUDIO_API_KEY", "before")  # restored after the test
    flags = _flags(_args("desktop", "--api-key", "sk-secret", "--model", "m", "--set", "agent.max_steps=3"))  # type: ignore[arg-type]
    assert flags == {"model.model": "m", "agent.max_steps": "3"}
    import os

    assert os.environ["LMSTUDIO_API_KEY"] == "sk-secret"
