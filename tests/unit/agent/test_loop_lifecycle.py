"""The run lifecycle (agent/_run.py) and the session's operations for modes (agent/_session.py):
the clean-up order the exit stack declares, a run cancelled from outside, every limit resolved in
one place (agent/_limits.py), the step limit as a value, the run's totals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deskpilot.agent import ModeResult, Session, load_config, run_agent, run_agent_async
from deskpilot.agent._limits import resolve_limits
from deskpilot.agent._scenarios import Scenario
from deskpilot.agent.modes._registry import ModeSpec, register_mode
from deskpilot.agent.modes.team import TeamMode
from deskpilot.safety import SafetyGuard
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop


class _Recorded(SimulatedDesktop):
    """Screen and hands in one, writing what is closed, and when, to a shared list."""

    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    def release_all(self) -> None:
        self.order.append("hands.release_all")
        super().release_all()

    def close(self) -> None:
        # One object is both the screen (closed on the capture thread) and the hands.
        self.order.append("close")


def _config(tmp_path: Path, endpoint: str, **flags: Any) -> Any:
    return load_config(
        flags={"model.endpoint": endpoint, "run.runs_dir": str(tmp_path / "runs"), **flags},
        env={},
        search_default=False,
    )


def test_clean_up_releases_held_input_first_and_disarms_the_kill_switch_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    original = SafetyGuard.close

    def close(self: SafetyGuard) -> None:
        order.append("guard.close")
        original(self)

    monkeypatch.setattr(SafetyGuard, "close", close)
    desk = _Recorded(order)
    with ModelServer(ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})]), "Done."])) as srv:
        result = run_agent(_config(tmp_path, srv.endpoint), "x", screen_factory=lambda: desk,
                           hands_factory=lambda: desk, handle_signals=False)
    assert result.outcome == "answered"
    # Hands: released, then closed (input thread); then the screen (capture thread); the
    # kill switch is disarmed after all of it.
    assert order == ["hands.release_all", "close", "close", "guard.close"]
    # The run files were closed on full lines before the summary was read back.
    assert (result.run_dir / "turns.jsonl").read_bytes().endswith(b"\n")


def test_a_run_cancelled_from_outside_still_releases_the_input(tmp_path: Path) -> None:
    order: list[str] = []
    desk = _Recorded(order)

    async def main(endpoint: str) -> None:
        task = asyncio.ensure_future(
            run_agent_async(_config(tmp_path, endpoint), "x", screen_factory=lambda: desk,
                            hands_factory=lambda: desk, handle_signals=False)
        )
        while not srv.requests:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with ModelServer(ScriptedPolicy([Reply(content="late", delay=30)])) as srv:
        asyncio.run(main(srv.endpoint))
    assert order[:2] == ["hands.release_all", "close"]


# ---------------------------------------------------------------------- limits


def test_limits_resolve_the_step_bound_in_one_order(tmp_path: Path) -> None:
    plain = load_config(env={}, search_default=False)
    explicit = load_config(flags={"agent.max_steps": 7}, env={}, search_default=False)
    scenario = Scenario("s", "look", max_steps=2)
    assert resolve_limits(plain).max_steps == plain.agent.max_steps
    assert resolve_limits(plain, scenario).max_steps == 2
    assert resolve_limits(explicit, scenario).max_steps == 7  # explicit beats the scenario
    # A mode with its own bound (team: the variant's 30 / 50, or an explicit setting) is
    # what the run counts against, scenario or not.
    team = load_config(flags={"agent.mode": "team"}, env={}, search_default=False)
    mode = TeamMode(team)
    assert resolve_limits(team, scenario, mode).max_steps == mode.max_steps != 2
    assert resolve_limits(explicit, None, TeamMode(explicit)).max_steps == 7


def test_limits_wall_time_falls_back_to_the_hard_cap() -> None:
    plain = load_config(env={}, search_default=False)
    limits = resolve_limits(plain)
    assert limits.max_seconds is None and limits.wall_seconds == 3600  # unset: the hard cap
    timed = resolve_limits(load_config(flags={"agent.max_seconds": 12}, env={}, search_default=False))
    assert timed.max_seconds == timed.wall_seconds == 12


# ---------------------------------------------------------------------- the session's operations

#: What the probing mode saw, per run.
SEEN: list[dict[str, Any]] = []


class _Prober:
    """A mode that uses the session's operations directly and asks past its bound when told."""

    def __init__(self, config: Any) -> None:
        self.config = config

    async def run(self, session: Session) -> ModeResult:
        from deskpilot.agent.client._history import History

        seen: dict[str, Any] = {}
        SEEN.append(seen)
        history = History("system")
        history.add_user("hello")
        turn, _ = await session.ask(history, tools=[])
        session.count(tool_calls=2, tool_errors=1)
        with pytest.raises(KeyError, match="no run total named 'tool_call'"):
            session.count(tool_call=1)
        seen["limit"] = session.step_limit()
        seen["shot"] = await session.settle_on(turn, lambda: (1, "frame"))
        seen["on_capture"] = await session.call_on_capture(lambda: "capture thread")
        try:
            await session.ask(history, tools=[])
        except RuntimeError as exc:
            seen["past"] = str(exc)
        return ModeResult("answered", "ok")


register_mode(ModeSpec("probe-session", "uses Session's operations (tests)", _Prober))


def test_session_operations_and_the_step_limit_as_a_value(tmp_path: Path) -> None:
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(["one", "two"])) as srv:
        cfg = _config(tmp_path, srv.endpoint, **{"agent.mode": "probe-session", "agent.max_steps": 1})
        result = run_agent(cfg, "x", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    seen = SEEN[-1]
    assert seen["limit"] == ModeResult("max_steps", "one")
    assert seen["shot"] == "frame" and seen["on_capture"] == "capture thread"
    assert "past max_steps (1)" in seen["past"] and len(srv.requests) == 1
    totals = result.summary["totals"]
    assert totals["requests"] == 1 and totals["tool_calls"] == 2 and totals["tool_errors"] == 1
