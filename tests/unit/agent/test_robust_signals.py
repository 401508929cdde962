"""Ctrl+C outside a run's own handlers says when it came (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deskpilot._errors import RunInterrupted
from deskpilot.agent import load_config, run_agent
from deskpilot.agent._session import NullReporter
from deskpilot.cli import main
from deskpilot.testing import ModelServer, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop


class InterruptedWhileFinishing(NullReporter):
    """A Ctrl+C that reaches Python code while the run writes its record (the run's
    handlers are installed then; this is what the default handler would raise)."""

    def finish(self, summary: Any) -> None:
        raise KeyboardInterrupt


def test_keyboard_interrupt_during_clean_up_names_the_step(tmp_path: Path) -> None:
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(["Done."])) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path)},
            env={},
            search_default=False,
        )
        with pytest.raises(
            RunInterrupted, match="interrupted again while writing the run record"
        ) as info:
            run_agent(
                cfg,
                "x",
                screen_factory=lambda: desk,
                hands_factory=lambda: desk,
                handle_signals=False,
                reporter=InterruptedWhileFinishing(),
            )
    assert info.value.details["phase"].startswith("writing the run record")


def test_the_cli_exits_130_with_the_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import deskpilot.commands.run as run_command

    def interrupted(args: Any) -> int:
        raise RunInterrupted(
            "interrupted again while releasing held keys and mouse buttons", reason="SIGINT"
        )

    monkeypatch.setattr(run_command, "handle", interrupted)
    assert main(["run", "x"]) == 130
    assert (
        capsys.readouterr().err.strip()
        == "deskpilot: interrupted again while releasing held keys and mouse buttons"
    )
