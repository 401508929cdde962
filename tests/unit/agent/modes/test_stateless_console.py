"""The terminal line of a stateless turn shows the actions it ran (not "observe")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from deskpilot.agent import load_config, run_agent
from deskpilot.agent._console import ConsoleReporter, format_action
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.testing import ModelServer, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop


def entry(action: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"action": action, "physical": {"kind": action["name"]}, "ok": True, **extra}


def test_format_action_of_a_stateless_turn() -> None:
    record = {
        "turn": 1,
        "role": "stateless",
        "observation": {"screenshot": "turn_0001_annotated.png"},
        "actions": [
            entry({"name": "click", "x1": 500, "y1": 583}),
            entry({"name": "key", "keys": "alt+f4"}, ok=False, error="refused by policy [x]: y"),
            entry({"name": "type", "text": "ok"}),
            entry({"name": "drag", "x1": 1, "y1": 2, "x2": 3, "y2": 4}),
            entry({"name": "scroll", "x1": 5, "y1": 6, "dx": 0, "dy": 3}),
        ],
    }
    assert (
        format_action(record)
        == "click 500,583; key alt+f4 ✗; type 'ok'; drag 1,2>3,4; scroll dy=3 5,6"
    )
    many = {**record, "actions": [entry({"name": "type", "text": "x" * 100})] * 12}
    line = format_action(many)
    assert len(line) <= 100 and line.endswith("more") and line.count("type") < 12
    skipped = {
        **record,
        "actions": [
            entry({"name": "key", "keys": "enter"}, ok=False),
            {"action": {"name": "click", "x1": 1, "y1": 1}, "physical": {}, "skipped": "earlier"},
        ],
    }
    assert format_action(skipped) == "key enter ✗; click 1,1 (skipped)"
    only_physical = {**record, "actions": [{"physical": {"kind": "click", "x": 960, "y": 444}}]}
    assert format_action(only_physical) == "click 960,444"
    assert format_action({**record, "actions": []}) == "no actions"
    final = {**record, "final": True, "answer": "All done.", "actions": record["actions"][:1]}
    assert format_action(final) == "click 500,583 -> answer: All done."
    assert format_action({**final, "actions": []}) == "answer: All done."
    # The tool-call modes are unchanged.
    assert format_action({"observation": {}}) == "observe"


def test_stateless_run_prints_its_actions_and_the_denials(tmp_path: Path) -> None:
    discover_modes()

    def reply(observation: str, *actions: dict[str, Any]) -> str:
        return json.dumps({"observation": observation, "bboxes": [], "actions": list(actions)})

    boot = reply(
        "Start.",
        {"name": "click", "x1": 500, "y1": 583},
        {"name": "key", "keys": "alt+f4"},
        {"name": "type", "text": "ok"},
    )
    console = Console(record=True, width=200, force_terminal=False)
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy([reply("All done.", {"name": "done"})])) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "agent.mode": "stateless",
                "agent.max_steps": 3,
                "stateless.panel": "off",
                "stateless.action_delay_seconds": 0,
                "stateless.capture_scale_percent": 50,
                "stateless.boot_vlm_output": boot,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "type ok",
            reporter=ConsoleReporter(console),
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    assert result.outcome == "answered", result.error
    lines = console.export_text().splitlines()
    turn1 = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "click 500,583; key alt+f4 ✗; type 'ok'" in turn1 and "✗ policy_denied" in turn1
    assert "observe" not in turn1
    turn2 = next(line for line in lines if line.lstrip().startswith("2 "))
    assert "answer: All done." in turn2
