"""Bounds on what the model asks for (issue 14): type_text's length in single and team mode,
and large arguments not echoed back into the next request.

Real loop, real HTTP client and local test server; the desktop is simulated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from deskpilot.agent import load_config, run_agent
from deskpilot.agent.modes.team import VARIANTS
from deskpilot.testing import ModelServer, RecordedRequest, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

LONG = "x" * 2500  # over the default agent.max_type_chars (2000)
HUGE_ARGUMENT = "y" * 300_000


def run(tmp_path: Path, policy: Any, **flags: Any) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = SimulatedDesktop()
    with ModelServer(policy) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                **flags,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "type",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    return result, srv, desk


def tool_payloads(request: RecordedRequest) -> list[dict[str, Any]]:
    return [orjson.loads(m["content"]) for m in request.messages if m.get("role") == "tool"]


def typed(desk: SimulatedDesktop) -> str:
    return "".join(e.get("text", "") for e in desk.events if e["action"] == "type")


def test_single_mode_refuses_an_over_long_type_text_before_typing(tmp_path: Path) -> None:
    policy = ScriptedPolicy(
        [
            Reply(tool_calls=[("type_text", {"text": LONG})]),
            Reply(tool_calls=[("type_text", {"text": "short"})]),
            Reply(content="Done."),
        ]
    )
    result, srv, desk = run(tmp_path, policy)
    assert result.outcome == "answered"
    (payload,) = tool_payloads(srv.requests[1])
    assert payload["ok"] is False and payload["error"]["type"] == "text_too_long"
    assert (
        "2500 characters" in payload["error"]["message"] and "2000" in payload["error"]["message"]
    )
    assert typed(desk) == "short"


def test_the_cap_is_a_setting(tmp_path: Path) -> None:
    policy = ScriptedPolicy(
        [Reply(tool_calls=[("type_text", {"text": LONG})]), Reply(content="Done.")]
    )
    _, srv, desk = run(tmp_path, policy, **{"agent.max_type_chars": 3000})
    assert tool_payloads(srv.requests[1])[0]["ok"] is True and typed(desk) == LONG


def test_team_mode_refuses_an_over_long_type_text(tmp_path: Path) -> None:
    v = VARIANTS["003"]
    plan = Reply(
        content="PLAN",
        tool_calls=[(v.tool_name("plan"), {"instructions": "type it", "reasoning": "go"})],
    )
    act = Reply(
        content="LAST_ACTION_RESULT: ok\nNEXT_STEP: type",
        tool_calls=[(v.tool_name("type"), {"reasoning": "type it", "text": LONG})],
    )
    policy = ScriptedPolicy([plan, act], on_exhausted="error")
    result, srv, desk = run(
        tmp_path, policy, **{"agent.mode": "team", "team.variant": "003", "agent.max_steps": 3}
    )
    assert typed(desk) == ""
    payloads = [p for r in srv.requests[2:] for p in tool_payloads(r)]
    texts = [orjson.dumps(m).decode() for r in srv.requests[2:] for m in r.messages]
    assert any("text_too_long" in t for t in texts) or any(
        p.get("error", {}).get("type") == "text_too_long" for p in payloads
    ), texts[:3]
    log = (result.run_dir / "execution_log.txt").read_text()
    assert "text_too_long" in log


def test_huge_arguments_are_not_echoed_into_the_next_request(tmp_path: Path) -> None:
    policy = ScriptedPolicy(
        [
            Reply(tool_calls=[("press_key", {"key": HUGE_ARGUMENT})]),
            Reply(tool_calls=[("press_key", {"key": "enter"})]),
            Reply(content="Done."),
        ]
    )
    result, srv, _ = run(tmp_path, policy)
    assert result.outcome == "answered"
    for request in srv.requests[1:]:
        body = orjson.dumps(request.messages)
        assert HUGE_ARGUMENT[:5000].encode() not in body
        for message in request.messages:
            for call in message.get("tool_calls") or []:
                assert len(call["function"]["arguments"]) <= 4000
                orjson.loads(call["function"]["arguments"])  # still JSON for strict chat templates
    # the refusal quotes a bounded excerpt, not the whole argument
    (payload,) = tool_payloads(srv.requests[1])
    assert payload["ok"] is False and len(payload["error"]["message"]) <= 500
