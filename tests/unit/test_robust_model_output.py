"""What a model (or a hostile server) writes never crashes a run (issue 14).

Real parts: the HTTP client, the local test model server, the loop of every mode, the run
directory. Simulated: screen and hands (tests/integration covers Xvfb).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._modes import discover_modes
from deskpilot.agent._simulated import SimulatedDesktop
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

BAD_USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": "lots", "completion_tokens": "many"},
    {"prompt_tokens": [1], "completion_tokens": {"n": 2}},
    {"prompt_tokens": 1e400, "completion_tokens": -3},
    {"prompt_tokens": True, "completion_tokens": "12"},
]


def _run(tmp_path: Path, replies: list[Any], mode: str, **flags: Any) -> Any:
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
        return run_agent(cfg, "look", screen_factory=lambda: desk, hands_factory=lambda: desk,
                         handle_signals=False)


@pytest.mark.parametrize("mode", ["single", "team", "stateless"])
@pytest.mark.parametrize("usage", BAD_USAGES, ids=["text", "containers", "huge_negative", "bool_numeric_text"])
def test_non_numeric_usage_is_ignored_in_every_mode(tmp_path: Path, mode: str, usage: dict[str, Any]) -> None:
    content = json.dumps({"observation": "nothing yet", "bboxes": [], "actions": []}) if mode == "stateless" else "Looking."
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


def test_a_lone_surrogate_posted_to_the_panel_inject_does_not_kill_the_engine(tmp_path: Path) -> None:
    answers: list[int] = []

    def inject() -> None:
        for _ in range(500):
            found = list((tmp_path / "runs").glob("*/stateless.json"))
            if found:
                base = orjson.loads(found[0].read_bytes())["panel"]
                answers.append(httpx.post(f"{base}/inject", json={"vlm_text": LONE}, timeout=5).status_code)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=inject, daemon=True)
    thread.start()
    done = json.dumps({"observation": "ok", "bboxes": [], "actions": [{"name": "done"}]})
    result = _run(tmp_path, [Reply(content=done)], "stateless", **{
        "stateless.boot_enabled": False, "stateless.inject_timeout": 10, "stateless.port": 0,
        "stateless.panel": "auto", "stateless.panel_token": ""})
    thread.join(5)
    assert answers == [202]
    assert result.outcome == "answered", load_summary(result.run_dir).get("error")
    turns = list(iter_turns(result.run_dir))
    assert "half a pair \ufffd here" in json.dumps(turns, ensure_ascii=False)
