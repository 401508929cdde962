"""Team mode, pure logic: memory, mode switches, context, settings, loop guard, logs, task prompt."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import pytest

from deskpilot._errors import ActionDeniedError, ConfigError
from deskpilot.actions import Action
from deskpilot.agent import load_config
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.modes._registry import register_mode
from deskpilot.agent.modes.team import (
    MODE,
    VARIANTS,
    AgentMemory,
    Coordinate,
    ExecutionLog,
    LoopDetector,
    MemoryEntry,
    PointerArgs,
    TeamSettings,
    TeamState,
    action_signature,
    ask_for_task,
    parse_call,
    recovery_actions,
    resolve_params,
    run_recovery,
)
from deskpilot.agent.modes.team._memory import clip
from deskpilot.agent.tools._core import ToolContext
from deskpilot.geometry import Mapping, Rect
from deskpilot.input import DryBackend, InputController

V002, V003 = VARIANTS["002"], VARIANTS["003"]


def record(turn: int, tool: str = "click_screen_element", result: str = "Clicked: OK", response: str = "") -> MemoryEntry:
    return MemoryEntry(turn, tool, None, result, f"screen_{turn:04d}.png", response)


# ---------------------------------------------------------------------- memory


def test_memory_compression_archives_without_deleting() -> None:
    memory = AgentMemory(compression_threshold=3)
    for turn in (2, 3, 4):
        memory.add_action(record(turn))
    assert memory.needs_compression
    result = memory.apply_compression("opened the app", "none", [2, 3, 99, 3])
    assert result.ok and result.archived_turns == (2, 3) and result.unknown_turns == (99,)
    assert [r.turn for r in memory.active_history] == [4]
    assert [r.turn for r in memory.history] == [2, 3, 4] and memory.history[0].archived
    assert memory.all_snapshots[0].archived_count == 2 and memory.all_snapshots[0].turns == (2, 3)
    assert not memory.needs_compression
    again = memory.apply_compression("x", "y", [2, 50])
    assert not again.ok and again.already_archived == (2,) and again.unknown_turns == (50,)
    assert len(memory.all_snapshots) == 1
    assert "ignored turns that do not exist: [50]" in again.describe()


def test_memory_context_truncates_and_shows_the_last_8_active_actions() -> None:
    memory = AgentMemory(compression_threshold=50)
    for turn in range(1, 12):
        memory.add_action(record(turn, result="R" * 100, response=f"resp{turn} " + "x" * 200))
    memory.apply_compression("S" * 300, "P" * 300, [1])
    text = memory.get_context_for_llm()
    assert text.startswith("COMPLETED_WORK:\n  Archive_1: " + "S" * 180 + "...\n    Patterns: " + "P" * 120 + "...\n")
    assert "RECENT_ACTIONS (count=10):" in text
    shown = [line for line in text.splitlines() if line.startswith("  Turn_")]
    assert [s.split(":")[0] for s in shown] == [f"  Turn_{t}" for t in range(4, 12)]
    assert shown[0] == "  Turn_4: click_screen_element -> " + "R" * 60 + "..."
    response = next(line for line in text.splitlines() if line.startswith("    Response:"))
    assert response == "    Response: " + clip("resp4 " + "x" * 200, 140) and len(clip("a" * 141, 140)) == 143
    empty = AgentMemory().get_context_for_llm()
    assert empty == "COMPLETED_WORK:\n  (none)\n\nRECENT_ACTIONS (count=0):\n  (none)"


def test_memory_recovery_cooldown_and_auto_compression() -> None:
    memory = AgentMemory(compression_threshold=4, recovery_cooldown=3)
    assert memory.should_recover(1)
    memory.mark_recovery(5)
    assert [memory.should_recover(t) for t in (6, 8, 9)] == [False, False, True]
    for turn in (2, 3, 4, 5, 6):
        memory.add_action(MemoryEntry(turn, "press_key", None, "ERROR x" if turn == 3 else "ok", "", "", ok=turn != 3))
    auto = memory.auto_compress(keep=2)
    assert auto is not None and auto.archived_turns == (2, 3, 4)
    assert "archived automatically" in auto.snapshot.summary and "1 failed" in auto.snapshot.patterns  # type: ignore[union-attr]
    assert memory.auto_compress(keep=2) is None
    assert memory.get_last_action_for_validation().turn == 6  # type: ignore[union-attr]


@pytest.mark.parametrize(("keep", "archived", "active"), [(0, (2, 3, 4), []), (1, (2, 3, 4), []), (2, (2, 3), [4, 4]), (3, (2,), [3, 4, 4])])
def test_auto_compression_counts_records_not_turns(keep: int, archived: tuple[int, ...], active: list[int]) -> None:
    """A loop-recovery record shares its action's turn: turn 4 holds two records, kept or
    archived together, and never more than ``keep`` records stay active."""
    memory = AgentMemory(compression_threshold=3)
    for turn in (2, 3, 4):
        memory.add_action(record(turn))
    memory.add_action(MemoryEntry(4, "loop_recovery", None, "performed: key escape", "", ""))
    auto = memory.auto_compress(keep=keep)
    assert auto is not None and auto.archived_turns == archived
    assert [r.turn for r in memory.active_history] == active and len(active) <= keep
    assert memory.auto_compress(keep=keep) is None  # nothing more to do


# ---------------------------------------------------------------------- state machine


def state_for(variant: Any, threshold: int | None = None) -> TeamState:
    memory = AgentMemory(threshold or variant.compression_threshold)
    return TeamState("write a note", variant, variant.review_interval, memory)


def test_turn_one_plans_then_instructions_switch_to_execution() -> None:
    state = state_for(V003)
    assert state.begin_turn(1).role == "planner" and state.mode_name == "PLANNING"
    switch = state.set_plan("click Save", "the plan text")
    assert switch.role == "executor" and switch.switched and state.mode_name == "EXECUTION"
    assert state.begin_turn(2) == type(switch)("executor")
    assert state.plan == "the plan text"


@pytest.mark.parametrize(("variant", "interval"), [(V002, 5), (V003, 7)])
def test_review_every_interval_turns(variant: Any, interval: int) -> None:
    state = state_for(variant)
    state.begin_turn(1)
    state.set_plan("do", "")
    roles = []
    for turn in range(2, 3 * interval + 1):
        switch = state.begin_turn(turn)
        roles.append(switch.role)
        if switch.role == "planner":
            assert switch.reasons == ("review_interval",)
            state.keep_plan()
    planner_turns = [t for t, r in zip(range(2, 3 * interval + 1), roles, strict=True) if r == "planner"]
    assert planner_turns == [interval, 2 * interval, 3 * interval]


@pytest.mark.parametrize(("status", "cause"), [("DONE", "goal_done"), ("BLOCKED", "goal_blocked")])
def test_done_or_blocked_sends_the_next_turn_to_the_planner(status: str, cause: str) -> None:
    state = state_for(V003)
    state.begin_turn(1)
    state.set_plan("do", "")
    assert state.begin_turn(2).role == "executor"
    state.request_review(cause)
    switch = state.begin_turn(3)
    assert switch.role == "planner" and switch.reasons == (cause,)
    assert not state.needs_review and "goal" in state.planner_context()


@pytest.mark.parametrize(("variant", "threshold"), [(V002, 8), (V003, 12)])
def test_compression_threshold_sends_the_turn_to_the_planner(variant: Any, threshold: int) -> None:
    state = state_for(variant)
    state.begin_turn(1)
    state.set_plan("do", "")
    turn = 1
    while len(state.memory.active_history) < threshold:
        turn += 1
        if turn % variant.review_interval == 0:
            turn += 1  # skip review turns so only the threshold can trigger
        assert state.begin_turn(turn).role == "executor"
        state.memory.add_action(record(turn))
    switch = state.begin_turn(turn + 1 if (turn + 1) % variant.review_interval else turn + 2)
    assert switch.role == "planner" and "compression" in switch.reasons
    text = state.planner_context()
    assert f"ACTIVE history has {threshold} actions" in text and variant.tool_name("archive") in text


def test_keep_plan_without_instructions_stays_planning() -> None:
    state = state_for(V002)
    state.begin_turn(1)
    assert state.keep_plan() is None and state.mode == "planner" and state.planner_failures == 1
    assert state.begin_turn(2).role == "planner"
    assert "no usable plan yet" in state.planner_context()
    state.set_plan("x", "")
    assert state.planner_failures == 0
    state.begin_turn(3)
    state.begin_turn(5)  # interval
    assert state.keep_plan() is not None and state.mode == "executor"


def test_context_assembly_matches_the_seed_format() -> None:
    state = state_for(V003)
    state.begin_turn(1)
    state.set_plan("short", "P" * 450)
    state.begin_turn(2)
    state.memory.add_action(
        MemoryEntry(2, "click_screen_element", PointerArgs("to open it", "File menu", Coordinate(40, 20)), "Clicked: File menu", "s.png", "LAST_ACTION_RESULT: ok")
    )
    state.begin_turn(3)
    context = state.get_context()
    assert context.startswith(
        "TASK: write a note\n\nCURRENT_PLAN:\n" + "P" * 400 + "...\n\nOPERATING_MODE: EXECUTION\n\nCURRENT_TURN: 3\n\nCOMPLETED_WORK:"
    )
    executor = state.executor_context()
    assert "INSTRUCTIONS FROM THE PLANNER:\nshort" in executor
    assert "Tool: click_screen_element\nAction: 'File menu' at (40, 20)\nReasoning: to open it" in executor
    assert "LAST_ACTION_RESULT / CURRENT_GOAL" in executor
    state.note("executor", "NOTE-1")
    assert "NOTE-1" in state.executor_context() and "NOTE-1" not in state.executor_context()  # one-off
    s2 = state_for(V002)
    s2.begin_turn(1)
    s2.set_plan("x", "P" * 600)
    assert "P" * 500 + "..." in s2.get_context() and "OPERATING_MODE: EXECUTION" in s2.get_context()
    assert "PREVIOUS_ACTION:\nNo previous action" in s2.executor_context() and "SITREP" in s2.executor_context()


# ---------------------------------------------------------------------- settings


def config(**flags: Any) -> Any:
    register_mode(MODE)
    return load_config(flags=flags, env={}, search_default=False)


def test_params_take_the_variant_defaults() -> None:
    p = resolve_params(config(**{"team.variant": "commander"}))
    assert (p.variant.name, p.review_interval, p.compression_threshold, p.max_steps) == ("002", 5, 8, 30)
    assert (p.planner_temperature, p.planner_max_tokens, p.executor_temperature, p.executor_max_tokens) == (0.35, 1200, 0.5, 1024)
    assert p.turn_delay == 0.0 and p.loop_recovery is False and p.min_evidence == 100
    p = resolve_params(config())
    assert (p.variant.name, p.review_interval, p.compression_threshold, p.max_steps) == ("003", 7, 12, 50)
    assert (p.planner_max_tokens, p.executor_max_tokens) == (1800, 1400)


def test_params_overrides_and_seed_delays() -> None:
    p = resolve_params(config(**{"agent.max_steps": 12, "model.temperature": 0.2, "model.max_tokens": 600, "agent.settle": "fixed"}))
    assert (p.max_steps, p.executor_temperature, p.executor_max_tokens, p.turn_delay) == (12, 0.2, 600, 1.5)
    p = resolve_params(config(**{"team.max_steps": 9, "agent.max_steps": 12, "team.review_interval": 3,
                                 "team.compression_threshold": 4, "team.planner_temperature": 0.0,
                                 "team.turn_delay": 0.25, "team.loop_recovery": "on"}))
    assert (p.max_steps, p.review_interval, p.compression_threshold, p.planner_temperature, p.turn_delay, p.loop_recovery) == (
        9, 3, 4, 0.0, 0.25, True,
    )
    env = load_config(env={"TEAM_VARIANT": "002", "TEAM_LOOP_RECOVERY": "1"}, search_default=False)
    assert resolve_params(env).variant.name == "002" and resolve_params(env).loop_recovery
    with pytest.raises(ConfigError, match="unknown team variant"):
        resolve_params(config(**{"team.variant": "005"}))
    with pytest.raises(ConfigError, match="below the minimum"):
        config(**{"team.review_interval": -1})
    assert resolve_params(load_config(env={}, search_default=False), TeamSettings(variant="2")).variant.name == "002"


def test_mode_flags_map_to_team_settings() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    assert MODE.add_arguments is not None and MODE.flags is not None
    MODE.add_arguments(parser)
    args = parser.parse_args(["--variant", "planner", "--review-interval", "4", "--no-loop-recovery", "--turn-delay", "1.5"])
    flags = MODE.flags(args)
    assert flags == {"team.variant": "planner", "team.review_interval": 4, "team.compression_threshold": None,
                     "team.turn_delay": 1.5, "team.loop_recovery": False}
    p = resolve_params(config(**{k: v for k, v in flags.items() if v is not None}))
    assert (p.variant.name, p.review_interval, p.turn_delay, p.loop_recovery) == ("003", 4, 1.5, False)


# ---------------------------------------------------------------------- loop guard and recovery


def parsed(name: str, args: dict[str, Any]) -> Any:
    call = ToolCall("c", name, args, "{}")
    return call, parse_call(call, V003.specs("executor"))


def test_signature_ignores_reasoning_and_detector_needs_unchanged_repeats() -> None:
    a = action_signature(*parsed("click_screen_element", {"reasoning": "one", "element_name": "OK", "position": [5, 5]}))
    b = action_signature(*parsed("click_screen_element", {"reasoning": "two", "element_name": "OK!", "position": [5, 5]}))
    c = action_signature(*parsed("click_screen_element", {"reasoning": "one", "element_name": "OK", "position": [6, 5]}))
    assert a == b != c
    assert action_signature(None, None) == "<no tool call>"
    assert action_signature(ToolCall("c", "x", None, "{bad"), None) == "x|invalid|{bad"
    detector = LoopDetector(3)
    assert [detector.note(a, False) for _ in range(3)] == [False, False, True]
    assert [detector.note(a, False), detector.note(a, True), detector.note(a, False), detector.note(c, False)] == [False] * 4
    assert not LoopDetector(0).note(a, False)


def ctx_for(backend: DryBackend, *, policy: Any = None) -> ToolContext:
    hands = InputController(backend)
    return ToolContext(hands=hands, mapping=Mapping(Rect(0, 0, 1920, 1080), 768, 432), policy=policy)


def test_recovery_runs_the_seed_sequence_on_the_input_thread() -> None:
    backend = DryBackend()
    ctx = ctx_for(backend)
    assert recovery_actions(ctx)[2] == {"kind": "move", "x": 20, "y": 1060}
    report = asyncio.run(run_recovery(ctx))
    ctx.close()
    assert report.error is None and len(report.performed) == 5
    keys = [a["key"] for a in backend.actions if a["action"] == "key" and a["down"]]
    assert keys == ["escape", "ctrl", "escape"]
    moves = [(a["x"], a["y"]) for a in backend.actions if a["action"] == "move"]
    assert (960, 540) in moves and moves[-1] == (20, 1060)
    clicks = [a for a in backend.actions if a["action"] == "button"]
    assert [(c["x"], c["y"], c["down"]) for c in clicks] == [(20, 1060, True), (20, 1060, False)]
    assert "key escape, move (960, 540), move (20, 1060), click (20, 1060), key ctrl+escape" in report.describe()


def test_recovery_respects_the_policy() -> None:
    def deny_clicks(action: Action) -> None:
        if action.kind == "click":
            raise ActionDeniedError("no clicks", rule="test")

    backend = DryBackend()
    ctx = ctx_for(backend, policy=deny_clicks)
    report = asyncio.run(run_recovery(ctx))
    ctx.close()
    assert [a["kind"] for a in report.denied] == ["click"] and len(report.performed) == 4
    assert not [a for a in backend.actions if a["action"] == "button"]
    assert "refused by policy: click (20, 1060)" in report.describe()


# ---------------------------------------------------------------------- execution log and task prompt


def test_execution_log_is_append_only_and_flushed_per_write(tmp_path: Path) -> None:
    log = ExecutionLog.in_directory(tmp_path)
    log.start()
    log.initialization({"variant": "003", "review_interval": 7})
    log.turn(1, "PLANNING")
    n = log.api_request("planner", {"messages": [{"role": "user", "content": "hi"}]})
    assert (tmp_path / "execution_log.txt").read_text().count("API REQUEST #1 (planner)") == 1  # on disk already
    log.api_response(n, "planner", {"content": "ok"})
    log.mode_switch("PLANNING", "EXECUTION", "instructions received")
    log.tool("click", {"a": 1}, "Clicked: x\nsecond line")
    log.state(turn=1, active_history=0)
    log.debrief({"final_status": "answered"}, completed=True)
    log.close()
    log.event("late", "ignored")  # after close: no error, no write
    second = ExecutionLog.in_directory(tmp_path)
    second.start()
    second.close()
    text = (tmp_path / "execution_log.txt").read_text()
    for needle in ("EXECUTION LOG START", "==== INITIALIZATION ====", "==== TURN 1 - PLANNING ====",
                   "API RESPONSE #1 (planner)", "MODE SWITCH: PLANNING -> EXECUTION", "TOOL click",
                   "\n    second line", "STATE UPDATE", "==== MISSION COMPLETE ====", "==== DEBRIEF ===="):
        assert needle in text
    assert text.count("EXECUTION LOG START") == 2 and "late" not in text


class FakeTTY(io.StringIO):
    def __init__(self, text: str, tty: bool = True) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_task_prompt_reads_a_line_or_fails_clearly() -> None:
    out = io.StringIO()
    assert ask_for_task(stdin=FakeTTY("  open the editor \n"), stdout=out) == "open the editor"
    assert out.getvalue() == "Task: "
    with pytest.raises(ConfigError, match="input ended before a task was typed"):
        ask_for_task(stdin=FakeTTY(""), stdout=io.StringIO())
    with pytest.raises(ConfigError, match="empty line"):
        ask_for_task(stdin=FakeTTY("\n"), stdout=io.StringIO())
    with pytest.raises(ConfigError, match=r"not a terminal.*deskpilot run --mode team"):
        ask_for_task(stdin=FakeTTY("task\n", tty=False), stdout=io.StringIO())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize(("typed", "expected"), [(b"open the editor\n", "TASK='open the editor'"), (b"\x04", "input ended")])
def test_task_prompt_on_a_real_terminal(typed: bytes, expected: str) -> None:
    import pty
    import sys
    import time

    code = (
        "from deskpilot.agent.modes.team import ask_for_task\n"
        "from deskpilot.errors import ConfigError\n"
        "try:\n    print('TASK=' + repr(ask_for_task()))\n"
        "except ConfigError as exc:\n    print('ERROR', exc)\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, [sys.executable, "-c", code])
    out, sent = b"", False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
        if b"Task: " in out and not sent:
            os.write(fd, typed)
            sent = True
    os.waitpid(pid, 0)
    os.close(fd)
    assert expected in out.decode("utf-8", "replace")


def test_unset_team_settings_are_none_and_the_old_0_and_minus_1_still_mean_unset(tmp_path: Path) -> None:
    default = config()
    team = default.section(TeamSettings)
    unset = ("review_interval", "compression_threshold", "max_steps", "planner_temperature",
             "planner_max_tokens", "executor_temperature", "executor_max_tokens", "turn_delay")
    assert all(getattr(team, key) is None for key in unset)
    assert default.as_dict()["team"]["planner_temperature"] is None  # run.json records null
    old = {"team.review_interval": 0, "team.max_steps": 0, "team.planner_temperature": -1.0,
           "team.executor_max_tokens": 0, "team.turn_delay": -1.0}
    assert resolve_params(config(**old)) == resolve_params(default)
    file = tmp_path / "deskpilot.toml"
    file.write_text("[team]\nplanner_temperature = -1\nmax_steps = 0\n")
    from_file = load_config(env={"TEAM_TURN_DELAY": "-1", "TEAM_EXECUTOR_TEMPERATURE": ""}, path=file, search_default=False)
    assert resolve_params(from_file) == resolve_params(default)
    assert from_file.sources["team.planner_temperature"].startswith("config file")  # given, as unset
    # A value between the old sentinel and the new minimum is an error, not "unset".
    with pytest.raises(ConfigError, match="below the minimum"):
        config(**{"team.planner_temperature": -0.5})
    with pytest.raises(ConfigError, match="below the minimum"):
        config(**{"team.turn_delay": -2.0})
