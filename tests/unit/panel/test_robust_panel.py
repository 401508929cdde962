"""The panel has a token by default (issue 14): generated per start, printed in the link,
off only by an explicit choice. Real panel server, real HTTP, real stateless engine."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from deskpilot.agent import load_config, run_agent
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.agent.modes.stateless import add_arguments, flags
from deskpilot.testing import ModelServer, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

DONE = json.dumps({"observation": "done", "bboxes": [], "actions": [{"name": "done"}]})


def start_and_poke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], **stateless: Any
) -> dict[str, Any]:
    """A stateless run waiting for POST /inject; a client finds the panel from what was
    printed (the link) or, without a token, from stateless.json, and injects."""
    seen: dict[str, Any] = {"err": ""}
    runs = tmp_path / "runs"

    def client() -> None:
        for _ in range(500):
            seen["err"] += capsys.readouterr().err
            if "panel at " in seen["err"] and list(runs.glob("*/stateless.json")):
                break
            time.sleep(0.02)
        else:
            return
        words = seen["err"].split()
        link = next((w for w in words if "?token=" in w), None)
        if link:
            base, _, token = link.partition("/?token=")
            seen["token"] = token
        else:
            base = json.loads(next(runs.glob("*/stateless.json")).read_text())["panel"]
        seen["state_without"] = httpx.get(f"{base}/state", timeout=5).status_code
        seen["inject_without"] = httpx.post(
            f"{base}/inject", json={"vlm_text": DONE}, timeout=5
        ).status_code
        if "token" in seen and seen["inject_without"] != 202:
            headers = {"authorization": f"Bearer {seen['token']}"}
            seen["inject"] = httpx.post(
                f"{base}/inject", json={"vlm_text": DONE}, headers=headers, timeout=5
            ).status_code

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    discover_modes()
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy([])) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(runs),
                "run.quiet": True,
                "agent.mode": "stateless",
                "stateless.boot_enabled": False,
                "stateless.inject_timeout": 10,
                "stateless.port": 0,
                "stateless.panel": "auto",
                "stateless.action_delay_seconds": 0,
                **{f"stateless.{k}": v for k, v in stateless.items()},
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg, "", screen_factory=lambda: desk, hands_factory=lambda: desk, handle_signals=False
        )
    thread.join(5)
    seen["outcome"] = result.outcome
    return seen


def test_a_token_is_generated_per_start_and_printed_in_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = start_and_poke(tmp_path / "a", capsys)  # no token setting at all: the default
    second = start_and_poke(tmp_path / "b", capsys)
    for seen in (first, second):
        assert seen["state_without"] == 401 and seen["inject_without"] == 401, seen
        assert seen.get("inject") == 202 and seen["outcome"] == "answered", seen
        assert len(seen["token"]) >= 32
    assert first["token"] != second["token"]


def test_no_token_only_by_an_explicit_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert flags(parser.parse_args([]))["stateless.panel_token"] is None  # default: generate
    chosen = flags(parser.parse_args(["--no-panel-token"]))["stateless.panel_token"]
    assert chosen == "off"
    seen = start_and_poke(tmp_path, capsys, panel_token=chosen)
    assert (
        "token" not in seen and seen["inject_without"] == 202 and seen["outcome"] == "answered"
    ), seen
    assert "WITHOUT a token (--no-panel-token)" in seen["err"]
