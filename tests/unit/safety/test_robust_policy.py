"""Policy gaps (issue 14): alt+f2, launcher sequences, secrets typed in pieces.

Unit checks on the guard, then whole runs (real loop, client, local test server, run
directory; simulated desktop) to see what reaches the hands and the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import load_config, load_summary, run_agent
from deskpilot.safety import ActionRequest, Policy, find_secrets
from deskpilot.safety._guard import SafetyGuard
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

SECRET = "sk-proj-" + "Zq8wEr4tYu1iOp7aSd2fGh5jKl0zXc3v"  # an OpenAI-style key (fake)
PIECES = (SECRET[:14], SECRET[14:28], SECRET[28:])


def test_alt_f2_is_denied_by_default() -> None:
    for combo in ("alt+f2", "Alt+F2", "shift+alt+f2"):
        decision = Policy.default().check(ActionRequest("key", keys=(combo,)))
        assert not decision.allowed and decision.rule == "keys.deny:alt+f2", decision


def allowed(guard: SafetyGuard, **action: Any) -> bool:
    return guard.decide(action).allowed


@pytest.mark.parametrize("launcher", ["win", "super", "alt+f1", "ctrl+escape"])
def test_a_launcher_then_enter_is_denied(launcher: str) -> None:
    guard = SafetyGuard(Policy.default())
    assert allowed(guard, kind="key", key=launcher)
    assert not allowed(guard, kind="type", text="terminal\n")  # name + Enter in one call
    assert allowed(guard, kind="type", text="terminal")  # typing the name alone is fine
    decision = guard.decide({"kind": "key", "key": "enter"})
    assert not decision.allowed and decision.rule == "keys.sequence:launcher", decision


def test_a_dismissed_launcher_no_longer_counts() -> None:
    guard = SafetyGuard(Policy.default())
    assert allowed(guard, kind="key", key="win")
    assert allowed(guard, kind="key", key="escape")
    assert allowed(guard, kind="type", text="hello\n")
    assert allowed(guard, kind="key", key="win")
    assert allowed(guard, kind="click", x=1, y=2)  # the pointer moved on
    assert allowed(guard, kind="key", key="enter")


def test_a_secret_split_across_calls_is_denied_at_the_piece_that_completes_it() -> None:
    guard = SafetyGuard(Policy.default())
    assert (
        Policy.default().check(ActionRequest("type", text=PIECES[1])).allowed
    )  # alone: nothing to see
    assert allowed(guard, kind="type", text=PIECES[0])
    # The second piece already completes a key the detector recognises.
    decision = guard.decide({"kind": "type", "text": PIECES[1]})
    assert not decision.allowed and decision.rule == "text.secret_split:openai_api_key", decision
    assert SECRET not in decision.reason and PIECES[1] not in decision.reason
    assert set(guard.sequence.secret_pieces) >= {PIECES[0], PIECES[1]}
    # Ordinary text typed in pieces stays allowed.
    other = SafetyGuard(Policy.default())
    assert all(
        allowed(other, kind="type", text=t)
        for t in ("Dear Sir, ", "please find ", "the report attached.")
    )


def run(tmp_path: Path, replies: list[Any]) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy([*replies, Reply(content="Done.")])) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg, "x", screen_factory=lambda: desk, hands_factory=lambda: desk, handle_signals=False
        )
    return result, srv, desk


def typed(desk: SimulatedDesktop) -> str:
    return "".join(e.get("text", "") for e in desk.events if e["action"] == "type")


def test_win_then_typing_terminal_and_enter_never_reaches_the_desktop(tmp_path: Path) -> None:
    result, srv, desk = run(
        tmp_path,
        [
            Reply(tool_calls=[("press_key", {"key": "win"})]),
            Reply(tool_calls=[("type_text", {"text": "terminal\n"})]),
        ],
    )
    assert result.outcome == "answered"
    assert "terminal" not in typed(desk)
    (payload,) = [
        orjson.loads(m["content"]) for m in srv.requests[2].messages if m.get("role") == "tool"
    ][-1:]
    assert (
        payload["error"]["type"] == "policy_denied"
        and payload["error"]["rule"] == "keys.sequence:launcher"
    )


def test_a_secret_typed_in_three_pieces_is_caught_and_redacted_everywhere(tmp_path: Path) -> None:
    result, _, desk = run(
        tmp_path, [Reply(tool_calls=[("type_text", {"text": p})]) for p in PIECES]
    )
    assert result.outcome == "answered"
    assert typed(desk).startswith(PIECES[0]) and find_secrets(typed(desk)) == []  # never completed
    denied = load_summary(result.run_dir)["safety"]["denied"]
    assert denied and all(d["rule"] == "text.secret_split:openai_api_key" for d in denied), denied
    for path in result.run_dir.iterdir():
        if path.suffix in (".jsonl", ".json", ".txt", ".log"):
            text = path.read_text(encoding="utf-8")
            for piece in PIECES:
                assert piece not in text, (path.name, piece)
            for line in text.splitlines() if path.suffix == ".jsonl" else ():
                orjson.loads(line)
    assert not list(result.run_dir.glob(".*.tmp"))
