"""What a model (or a hostile server) writes never crashes a run (issue 14).

Real parts: the HTTP client, the local test model server, the loop of every mode, the run
directory. Simulated: screen and hands (tests/integration covers Xvfb).
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from rich.console import Console

from deskpilot._untrusted import terminal_text
from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._console import ConsoleReporter
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.safety._confirm import terminal_prompt
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

BAD_USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": "lots", "completion_tokens": "many"},
    {"prompt_tokens": [1], "completion_tokens": {"n": 2}},
    {"prompt_tokens": 1e400, "completion_tokens": -3},
    {"prompt_tokens": True, "completion_tokens": "12"},
]


def _run(tmp_path: Path, replies: list[Any], mode: str, reporter: Any = None, **flags: Any) -> Any:
    discover_modes()
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(replies, on_exhausted="final")) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "agent.mode": mode,
                "agent.max_steps": 3,
                "stateless.capture_scale_percent": 50,
                "stateless.action_delay_seconds": 0,
                "stateless.panel": "off",
                **flags,
            },
            env={},
            search_default=False,
        )
        return run_agent(
            cfg,
            "look",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
            reporter=reporter,
        )


@pytest.mark.parametrize("mode", ["single", "team", "stateless"])
@pytest.mark.parametrize(
    "usage", BAD_USAGES, ids=["text", "containers", "huge_negative", "bool_numeric_text"]
)
def test_non_numeric_usage_is_ignored_in_every_mode(
    tmp_path: Path, mode: str, usage: dict[str, Any]
) -> None:
    content = (
        json.dumps({"observation": "nothing yet", "bboxes": [], "actions": []})
        if mode == "stateless"
        else "Looking."
    )
    result = _run(tmp_path, [Reply(content=content, usage=usage)], mode)
    assert result.outcome != "error", (result.outcome, load_summary(result.run_dir).get("error"))
    assert validate_run_dir(result.run_dir) == []
    totals = load_summary(result.run_dir)["totals"]
    # "12" is a count a server may send as text; everything else is not a count
    expected = 12 if usage.get("completion_tokens") == "12" else 0
    assert totals["completion_tokens"] >= expected
    assert isinstance(totals["prompt_tokens"], int) and totals["prompt_tokens"] >= 0


LONE = '{"observation": "half a pair \\ud800 here", "bboxes": [{"label": "\\udc00x", "x1": 1, "y1": 2, "x2": 3, "y2": 4}], "actions": []}'


def test_stateless_reply_with_a_lone_surrogate_escape_is_recorded(tmp_path: Path) -> None:
    result = _run(tmp_path, [Reply(content=LONE)], "stateless")
    assert result.outcome != "error", load_summary(result.run_dir).get("error")
    assert validate_run_dir(result.run_dir) == []
    turns = list(iter_turns(result.run_dir))
    written = json.dumps(turns, ensure_ascii=False)
    assert "half a pair \ufffd here" in written


def test_a_lone_surrogate_posted_to_the_panel_inject_does_not_kill_the_engine(
    tmp_path: Path,
) -> None:
    answers: list[int] = []

    def inject() -> None:
        for _ in range(500):
            found = list((tmp_path / "runs").glob("*/stateless.json"))
            if found:
                base = orjson.loads(found[0].read_bytes())["panel"]
                answers.append(
                    httpx.post(f"{base}/inject", json={"vlm_text": LONE}, timeout=5).status_code
                )
                return
            time.sleep(0.02)

    thread = threading.Thread(target=inject, daemon=True)
    thread.start()
    done = json.dumps({"observation": "ok", "bboxes": [], "actions": [{"name": "done"}]})
    result = _run(
        tmp_path,
        [Reply(content=done)],
        "stateless",
        **{
            "stateless.boot_enabled": False,
            "stateless.inject_timeout": 10,
            "stateless.port": 0,
            "stateless.panel": "auto",
            "stateless.panel_token": "off",
        },
    )
    thread.join(5)
    assert answers == [202]
    assert result.outcome == "answered", load_summary(result.run_dir).get("error")
    turns = list(iter_turns(result.run_dir))
    assert "half a pair \ufffd here" in json.dumps(turns, ensure_ascii=False)


# -- model text on the terminal ----------------------------------------------------------------

OSC52 = "\x1b]52;c;" + "ZWNobyBwd25lZA==" + "\x07"
HOSTILE = f"ok{OSC52}\x1b[2J\x1b[31mred\x9b31m\x1b]0;title\x1b\\ \u202eevil\r\x08done"
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)]


def test_terminal_text_leaves_no_control_character() -> None:
    for one_line in (False, True):
        shown = terminal_text(HOSTILE + "\nline\ttab", one_line=one_line)
        assert not any(c in shown for c in CONTROLS), repr(shown)
        assert "\u202e" not in shown and "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in shown
        assert ("\n" in shown) is (not one_line)
    assert terminal_text("Grüße, 世界 🚀") == "Grüße, 世界 🚀"
    assert terminal_text("\ud800") == "\ufffd"


@pytest.mark.parametrize("mode", ["single", "stateless"])
def test_console_prints_no_model_escape_sequence(tmp_path: Path, mode: str) -> None:
    out = io.StringIO()
    reporter = ConsoleReporter(
        Console(file=out, force_terminal=False, color_system=None, width=200), live=False
    )
    if mode == "stateless":
        replies = [
            Reply(
                content=json.dumps(
                    {
                        "observation": HOSTILE,
                        "bboxes": [],
                        "actions": [{"name": "type", "text": HOSTILE}, {"name": "done"}],
                    }
                )
            )
        ]
    else:
        replies = [
            Reply(tool_calls=[("type_text", {"text": HOSTILE})]),
            Reply(content=f"Finished {HOSTILE}"),
        ]
    result = _run(tmp_path, replies, mode, reporter=reporter)
    printed = out.getvalue()
    assert "Finished" in printed or "type" in printed, printed
    assert not any(c in printed for c in CONTROLS), repr(printed)
    assert "\u202e" not in printed
    assert result.outcome != "error"


def test_the_confirm_question_shows_model_text_inert() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"n\n")
    with os.fdopen(read_fd) as pipe:

        class Tty:
            closed = False

            def isatty(self) -> bool:
                return True

            def fileno(self) -> int:
                return pipe.fileno()

            def readline(self) -> str:
                return pipe.readline()

        err = io.StringIO()
        try:
            assert terminal_prompt(f"Type {HOSTILE!s}?", stdin=Tty(), stderr=err, timeout=5) == "n"  # type: ignore[arg-type]
        finally:
            os.close(write_fd)
    assert "Type ok" in err.getvalue()
    assert not any(c in err.getvalue() for c in CONTROLS), repr(err.getvalue())


def test_cli_error_messages_are_printed_inert(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from deskpilot.cli import main

    bad = tmp_path / f"run{OSC52}"
    assert main(["replay", str(bad)]) != 0
    err = capsys.readouterr().err
    assert "run" in err and not any(c in err for c in CONTROLS), repr(err)


def test_log_lines_reaching_the_terminal_are_inert() -> None:
    # Warnings quote model text (a failed stateless action, a refused completion); with no
    # handler configured they reach stderr through logging's last resort.
    import subprocess
    import sys

    child = (
        "import logging, sys\n"
        "from deskpilot import cli\n"
        "cli.main(['scenarios'])\n"
        f"logging.getLogger('deskpilot.stateless').warning('turn 1: type %s failed', {HOSTILE!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True
    )
    assert "turn 1: type ok" in proc.stderr
    assert not any(c in proc.stderr for c in CONTROLS), repr(proc.stderr)
