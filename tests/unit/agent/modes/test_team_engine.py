"""Team mode end to end on a simulated desktop, against the real local test server.

Real parts: the HTTP client and test server (127.0.0.1), histories, tools, settle, the
run directory and execution log. Simulated: the screen and the hands (the Xvfb test in
tests/integration does the same with real capture and XTest input).

A role-aware policy answers planner requests (those offering the planner's tools) and
executor requests from two scripts, so every test asserts *which role* the engine asked
at each turn: that is the mode-switch state machine, observed from the server.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._session import Session
from deskpilot.agent.modes._registry import ModeSpec, discover_modes, register_mode
from deskpilot.agent.modes.team import MODE, VARIANTS, TeamMode, TeamVariant
from deskpilot.input import DryBackend, InputController
from deskpilot.testing import Fault, ModelServer, RecordedRequest, Reply, tool_call
from deskpilot.testing._desktop import SimulatedDesktop

V002, V003 = VARIANTS["002"], VARIANTS["003"]
TARGET = [500, 412]  # centre of the simulated desktop's target button (0..1000)
FIELD = [500, 583]  # centre of its text field
EVIDENCE = (
    "The target button is green now, the text field below it shows the typed text, and the "
    "green bar at the field's bottom edge says the text was submitted."
)


class RolePolicy:
    """Answers planner and executor requests from separate scripts; records the roles."""

    def __init__(self, variant: TeamVariant, planner: Sequence[Reply | Fault | str], executor: Sequence[Reply | Fault | str]) -> None:
        self.variant = variant
        self.planner = list(planner)
        self.executor = list(executor)
        self.roles: list[str] = []
        self._lock = threading.Lock()

    def respond(self, request: RecordedRequest) -> Reply | Fault | str:
        role = "planner" if self.variant.tool_name("plan") in request.tool_names else "executor"
        with self._lock:
            self.roles.append(role)
            queue = self.planner if role == "planner" else self.executor
            if not queue:
                return Fault.http(500, f"{role} script exhausted at request {request.index}")
            return queue.pop(0)


def plan(variant: TeamVariant, instructions: str = "Click the magenta target, then type and submit.") -> Reply:
    if variant is V002:
        args = {"operator_instructions": instructions, "rationale": "next objective"}
    else:
        args = {"instructions": instructions, "reasoning": "next goal"}
    return Reply(content=f"PLAN: {instructions}", tool_calls=[(variant.tool_name("plan"), args)])


def archive(variant: TeamVariant, turns: list[Any], summary: str = "Opened and clicked around") -> tuple[str, dict[str, Any]]:
    if variant is V002:
        return ("compress_memory", {"compression_summary": summary, "loop_analysis": "none", "archived_turns": turns})
    return ("archive_completed_actions", {"summary": summary, "patterns_detected": "none", "archived_turns": turns})


def act(variant: TeamVariant, kind: str, **values: Any) -> Reply:
    """One executor reply calling the variant's tool for ``kind``."""
    why = "justification" if variant is V002 else "reasoning"
    label = "label" if variant is V002 else "element_name"
    args: dict[str, Any]
    if kind in ("click", "double_click", "right_click"):
        args = {why: "because", label: values.get("label", "target"), "position": values["at"]}
    elif kind == "drag":
        args = {why: "move it", label: "handle", "start": values["start"], "end": values["end"]}
    elif kind == "type":
        args = {why: "type it", "text": values["text"]}
    elif kind == "key":
        args = {why: "press it", "key": values["key"]}
    elif kind in ("scroll_down", "scroll_up"):
        args = {why: "look"}
    elif kind == "progress":
        if variant is V002:
            args = {"objective_id": values.get("goal", "obj-1"), "status": values["status"], "evidence": "visible"}
        else:
            args = {"goal_identifier": values.get("goal", "goal-1"), "completion_status": values["status"], "evidence": "visible"}
    elif kind == "complete":
        args = {"evidence": values["evidence"]}
    else:  # pragma: no cover - test helper misuse
        raise ValueError(kind)
    report = "OBJ: x\nDOD: y\nOBS: z\nACT: w" if variant is V002 else "LAST_ACTION_RESULT: ok\nNEXT_STEP: go"
    return Reply(content=report, tool_calls=[(variant.tool_name(kind), args)])  # type: ignore[arg-type]


class Captured:
    """Registers the team mode with a factory that keeps the instance for inspection."""

    def __init__(self) -> None:
        self.modes: list[TeamMode] = []

        def factory(config: Any) -> TeamMode:
            mode = TeamMode(config)
            self.modes.append(mode)
            return mode

        assert MODE.add_arguments is not None
        discover_modes()  # first, so discovery does not replace the spec registered here
        register_mode(ModeSpec("team", MODE.description, factory, MODE.sections, MODE.add_arguments, MODE.flags))

    @property
    def mode(self) -> TeamMode:
        return self.modes[-1]


def run_team(
    tmp_path: Path,
    policy: Any,
    *,
    variant: TeamVariant = V003,
    flags: dict[str, Any] | None = None,
    desk: SimulatedDesktop | None = None,
    hands: Any = None,
    handle_signals: bool = False,
) -> tuple[Any, ModelServer, SimulatedDesktop, TeamMode]:
    captured = Captured()
    desk = desk or SimulatedDesktop()
    try:
        with ModelServer(policy) as srv:
            cfg = load_config(
                flags={
                    "model.endpoint": srv.endpoint,
                    "run.runs_dir": str(tmp_path / "runs"),
                    "agent.mode": "team",
                    "team.variant": variant.name,
                    **(flags or {}),
                },
                env={},
                search_default=False,
            )
            result = run_agent(cfg, "put hello into the field and submit it", screen_factory=lambda: desk,
                               hands_factory=lambda: hands or desk, handle_signals=handle_signals)
    finally:
        register_mode(MODE)
    return result, srv, desk, captured.mode


def check_requests(srv: ModelServer, variant: TeamVariant) -> list[str]:
    """Role of each request, after checking the image rule and each role's settings."""
    assert srv.problems == []
    roles = []
    planner_tools = [s.name for s in variant.planner_tools]
    executor_tools = [s.name for s in variant.executor_tools]
    for request in srv.requests:
        assert request.roles == ["system", "user"]  # stateless: rebuilt every turn
        if request.tool_names == planner_tools:
            roles.append("P")
            assert request.image_count == 0, f"planner request {request.index} carries an image"
            assert isinstance(request.messages[1]["content"], str)
            assert request.body["temperature"] == variant.planner_temperature
            assert request.body["max_tokens"] == variant.planner_max_tokens
        else:
            assert request.tool_names == executor_tools
            roles.append("E")
            assert request.image_count == 1, f"executor request {request.index} has {request.image_count} images"
            parts = request.messages[1]["content"]
            assert [p["type"] for p in parts] == ["text", "image_url"]
            assert request.body["temperature"] == variant.executor_temperature
            assert request.body["max_tokens"] == variant.executor_max_tokens
    return roles


def turns_of(result: Any) -> list[dict[str, Any]]:
    assert validate_run_dir(result.run_dir) == []
    return list(iter_turns(result.run_dir))


def log_text(result: Any) -> str:
    return (result.run_dir / "execution_log.txt").read_text(encoding="utf-8")


def log_turn(result: Any, number: int) -> str:
    """The execution log's section of one turn (its header up to the next section)."""
    text = log_text(result)
    start = text.index(f"==== TURN {number} - ")
    ends = [i for i in (text.find("==== TURN ", start + 1), text.find("==== DEBRIEF ====", start)) if i >= 0]
    return text[start : min(ends)]


# ---------------------------------------------------------------------- every switch and tool


def test_variant_002_every_mode_switch_and_tool(tmp_path: Path) -> None:
    v = V002
    planner = [
        plan(v),  # 1 initial plan
        Reply(content="All good, carry on."),  # 5 scheduled review, no tool: plan kept
        plan(v, "Type hello and press enter."),  # 10 scheduled review
        Reply(content="compress", tool_calls=[archive(v, [2, 3, 4, 6, 99]), (v.tool_name("plan"), {"operator_instructions": "Continue.", "rationale": "r"})]),  # 12 compression
        plan(v, "Next objective."),  # 14 after DONE
        plan(v, "Same objective."),  # 15 scheduled review
        plan(v, "Try the keyboard instead."),  # 17 after BLOCKED
    ]
    executor = [
        act(v, "click", at=TARGET),  # 2
        act(v, "double_click", at=FIELD),  # 3
        act(v, "right_click", at=[100, 100]),  # 4
        act(v, "drag", start=[100, 100], end=[200, 200]),  # 6
        act(v, "type", text="hi"),  # 7
        act(v, "key", key="tab"),  # 8
        act(v, "scroll_down"),  # 9
        act(v, "scroll_up"),  # 11
        act(v, "progress", status="DONE"),  # 13
        act(v, "progress", status="BLOCKED"),  # 16
        act(v, "complete", evidence="done"),  # 18: too short, refused
        act(v, "complete", evidence=EVIDENCE),  # 19
    ]
    policy = RolePolicy(v, planner, executor)
    result, srv, desk, mode = run_team(tmp_path, policy, variant=v)
    assert result.outcome == "answered" and result.answer == EVIDENCE
    assert "".join(check_requests(srv, v)) == "PEEEPEEEEPEPEPPEPEE"
    turns = turns_of(result)
    reasons = {t["turn"]: t["team"]["reasons"] for t in turns if t.get("team", {}).get("team_role") == "planner"}
    assert reasons == {1: ["initial_plan"], 5: ["review_interval"], 10: ["review_interval"], 12: ["compression"],
                       14: ["goal_done"], 15: ["review_interval"], 17: ["goal_blocked"]}
    assert turns[5]["team"]["plan_kept"] is True
    # The desktop received every action, in order, at the mapped physical pixels.
    kinds = [(e["action"], e.get("button"), e.get("count")) for e in desk.events if e["action"] in ("click", "drag", "type", "key", "scroll")]
    assert kinds == [("click", "left", 1), ("click", "left", 2), ("click", "right", 1), ("drag", None, None),
                     ("type", None, None), ("key", None, None), ("scroll", None, None), ("scroll", None, None)]
    assert desk.target.contains(*desk.target_clicks[0])
    scrolls = [e for e in desk.events if e["action"] == "scroll"]
    assert [(e["x"], e["y"], e["dy"]) for e in scrolls] == [(960, 540, 1), (960, 540, -1)]  # one notch at the centre
    # Compression: turn 99 does not exist and is ignored; the others are archived.
    p12 = turns[12]
    assert p12["team"]["calls"][1]["result"]["archived_turns"] == [2, 3, 4, 6]
    assert p12["team"]["calls"][1]["result"]["unknown_turns"] == [99]
    memory = mode.state.memory  # type: ignore[union-attr]
    assert [s.turns for s in memory.all_snapshots] == [(2, 3, 4, 6)]
    assert [r.turn for r in memory.active_history] == [7, 8, 9, 11, 13, 16, 18, 19]
    assert "ACTIVE history has 8 actions" in srv.requests[11].messages[1]["content"]
    assert "Archive_1: Opened and clicked around" in srv.requests[12].messages[1]["content"][0]["text"]
    # The short completion was refused and the run went on.
    assert turns[18]["result"]["error"]["type"] == "insufficient_evidence"
    assert "at least 100" in srv.requests[18].messages[1]["content"][0]["text"]
    assert turns[19]["final"] is True and turns[19]["answer"] == EVIDENCE
    team = result.summary["team"]
    assert (team["planner_turns"], team["executor_turns"], team["refused_completions"], team["archives"]) == (7, 12, 1, 1)
    text = log_text(result)
    for needle in ("EXECUTION LOG START", "==== INITIALIZATION ====", "==== TURN 1 - EVALUATION ====",
                   "==== TURN 2 - EXECUTION ====", "MODE SWITCH: EVALUATION -> EXECUTION",
                   "MODE SWITCH: EXECUTION -> EVALUATION (scheduled review)", "API REQUEST #19 (operator)",
                   "API RESPONSE #1 (commander)", "TOOL click_element", "STATE UPDATE", "SCREENSHOT: screen_",
                   "PLAN KEPT", "completion refused", "==== MISSION COMPLETE ====", "==== DEBRIEF ====",
                   "final_status: answered"):
        assert needle in text, needle
    assert "iVBORw0KGgo" not in text  # images by length only


@pytest.mark.parametrize("stream", [False, True])
def test_variant_003_every_mode_switch_and_tool(tmp_path: Path, stream: bool) -> None:
    v = V003
    planner = [
        plan(v),  # 1
        "Looks fine.",  # 7 scheduled review: no tool, plan kept
        plan(v, "Type x."),  # 14 scheduled review
        Reply(tool_calls=[archive(v, [2, 3, 4, 5, 6, 99]), (v.tool_name("plan"), {"instructions": "Go on.", "reasoning": "r"})]),  # 16
        plan(v, "Goal 2."),  # 18 after DONE
        plan(v, "Another way."),  # 20 after BLOCKED
        plan(v, "Still that."),  # 21 scheduled review
    ]
    executor = [
        act(v, "click", at=TARGET),  # 2
        act(v, "double_click", at=FIELD),  # 3
        act(v, "right_click", at=[100, 100]),  # 4
        act(v, "drag", start=[100, 100], end=[300, 300]),  # 5
        act(v, "type", text="hello"),  # 6
        act(v, "key", key="tab"),  # 8
        act(v, "scroll_down"),  # 9
        act(v, "scroll_up"),  # 10
        act(v, "key", key="escape"),  # 11
        act(v, "click", at=TARGET),  # 12
        act(v, "scroll_down"),  # 13
        act(v, "type", text="x"),  # 15
        act(v, "progress", status="done"),  # 17
        act(v, "progress", status="BLOCKED"),  # 19
        act(v, "complete", evidence="  " + "too short " * 9 + "  "),  # 22: 89 chars after stripping
        act(v, "complete", evidence=EVIDENCE),  # 23
    ]
    result, srv, desk, mode = run_team(tmp_path, RolePolicy(v, planner, executor), variant=v, flags={"model.stream": stream})
    assert result.outcome == "answered" and result.answer == EVIDENCE
    assert all(r.stream is stream for r in srv.requests)
    assert "".join(check_requests(srv, v)) == "PEEEEEPEEEEEEPEPEPEPPEE"
    turns = turns_of(result)
    reasons = {t["turn"]: t["team"]["reasons"] for t in turns if t.get("team", {}).get("team_role") == "planner"}
    assert reasons == {1: ["initial_plan"], 7: ["review_interval"], 14: ["review_interval"], 16: ["compression"],
                       18: ["goal_done"], 20: ["goal_blocked"], 21: ["review_interval"]}
    memory = mode.state.memory  # type: ignore[union-attr]
    assert [s.turns for s in memory.all_snapshots] == [(2, 3, 4, 5, 6)]
    assert desk.submitted == [] and desk.text == "hellox"
    assert turns[22]["result"]["error"]["type"] == "insufficient_evidence"
    assert "==== TURN 7 - PLANNING ====" in log_text(result)
    assert "MODE SWITCH: EXECUTION -> PLANNING (ACTIVE history reached the compression threshold)" in log_text(result)


# ---------------------------------------------------------------------- bad output


def test_planner_without_a_tool_is_asked_again_then_the_run_stops(tmp_path: Path) -> None:
    v = V003
    policy = RolePolicy(v, ["I think we should click.", Reply(tool_calls=[("click_screen_element", {})]), "hmm"], [])
    result, srv, desk, _ = run_team(tmp_path, policy, variant=v)
    assert result.outcome == "no_plan" and "gave no plan in 3 attempts" in result.answer
    assert "".join(check_requests(srv, v)) == "PPP"
    assert "you MUST call update_execution_plan" in srv.requests[1].messages[1]["content"]
    assert "'click_screen_element' is an executor tool" in srv.requests[2].messages[1]["content"]
    turns = turns_of(result)
    assert turns[2]["extra_calls"][0]["result"]["error"]["type"] == "unknown_tool"
    assert [e["action"] for e in desk.events] == ["release_all"]  # only the cleanup
    assert "no usable plan" in log_text(result)


def test_planner_recovers_after_one_answer_without_a_tool(tmp_path: Path) -> None:
    v = V002
    policy = RolePolicy(v, ["no tools today", plan(v)], [act(v, "complete", evidence=EVIDENCE)])
    result, srv, _, _ = run_team(tmp_path, policy, variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PPE"


def test_executor_without_a_tool_or_with_several(tmp_path: Path) -> None:
    v = V003
    click = act(v, "click", at=TARGET).tool_calls[0]
    two = Reply(content="two", tool_calls=[click, tool_call("press_keyboard_key", {"key": "enter"})])
    executor = ["I see the screen.", two, act(v, "complete", evidence=EVIDENCE)]
    result, srv, desk, mode = run_team(tmp_path, RolePolicy(v, [plan(v)], executor), variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEE"
    turns = turns_of(result)
    assert turns[2]["result"]["error"]["type"] == "no_tool_call"
    assert "Your last answer had no tool call" in srv.requests[2].messages[1]["content"][0]["text"]
    assert turns[3]["extra_calls"][0]["result"]["error"]["type"] == "too_many_tool_calls"
    assert [e["action"] for e in desk.events if e["action"] in ("click", "key")] == ["click"]  # enter not run
    assert "only the first (click_screen_element) ran" in srv.requests[3].messages[1]["content"][0]["text"]
    records = mode.state.memory.history  # type: ignore[union-attr]
    assert [(r.tool, r.ok) for r in records] == [("(no tool call)", False), ("click_screen_element", True), ("report_mission_complete", True)]
    # The execution log records both, each turn ending with its STATE UPDATE.
    no_tool, several = log_turn(result, 2), log_turn(result, 3)
    assert "WARNING: the executor answered without a tool call" in no_tool
    assert "TOOL <none>: args null -> ERROR no_tool_call: the answer had no tool call" in no_tool
    assert 'STATE UPDATE: {"turn":2,"mode":"EXECUTION","active_history":1,' in no_tool
    assert ('TOOL press_keyboard_key: args {"key":"enter"} -> REFUSED too_many_tool_calls: only ONE tool call '
            "per turn is allowed; press_keyboard_key was not run (2 calls were sent, the first one ran)") in several
    assert "TOOL click_screen_element: args " in several and "-> Clicked: target (screen changed)" in several
    assert 'STATE UPDATE: {"turn":3,"mode":"EXECUTION","active_history":2,' in several


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (("update_execution_plan", {"instructions": "x"}), "unknown_tool", "is a planner tool"),
        (("open_browser", {}), "unknown_tool", "unknown tool 'open_browser'"),
        (tool_call("click_screen_element", '{"element_name": "x", "position": [1,'), "invalid_json", "not valid JSON"),
        (("click_screen_element", {"position": [1, 2]}), "missing_label", "element_name is required"),
        (("click_screen_element", {"element_name": "x", "position": [1, 2, 3]}), "invalid_box", "2 or 4 numbers"),
        (("press_keyboard_key", {"key": "ctrl+entr"}), "invalid_key", "unknown key"),
        (("type_text_input", {"text": ""}), "empty_text", "text is required"),
    ],
)
def test_executor_bad_calls_get_seed_error_payloads_and_the_run_goes_on(tmp_path: Path, call: Any, kind: str, message: str) -> None:
    v = V003
    executor = [Reply(tool_calls=[call]), act(v, "complete", evidence=EVIDENCE)]
    result, srv, desk, _mode = run_team(tmp_path, RolePolicy(v, [plan(v)], executor), variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEE"
    error = turns_of(result)[2]["result"]["error"]
    assert error["type"] == kind and message in error["message"]
    assert not [e for e in desk.events if e["action"] != "release_all"]  # nothing was pressed
    assert f"ERROR {kind}" in srv.requests[2].messages[1]["content"][0]["text"]  # the executor is told
    assert f"ERROR {kind}" in log_text(result)


@pytest.mark.parametrize(
    ("v", "call", "kind", "message"),
    [
        (V003, tool_call("update_execution_plan", '{"instructions": "click the'), "invalid_json", "not valid JSON"),
        (V003, tool_call("update_execution_plan", '["click the target"]'), "invalid_args", ""),
        (V003, ("update_execution_plan", {"reasoning": "no instructions given"}), "invalid_args", "instructions is required"),
        (V003, ("update_execution_plan", {"instructions": "   ", "reasoning": "r"}), "invalid_args", "instructions is required"),
        (V003, ("update_execution_plan", {"instructions": ["click", "type"]}), "invalid_args", "instructions must be a string"),
        (V002, ("spawn_operator", {"rationale": "no instructions given"}), "invalid_args", "operator_instructions is required"),
        (V002, tool_call("spawn_operator", "{operator_instructions: click}"), "invalid_json", "not valid JSON"),
    ],
)
def test_planner_malformed_plan_arguments_are_refused_and_it_is_asked_again(tmp_path: Path, v: TeamVariant, call: Any, kind: str, message: str) -> None:
    """No plan yet: the refused call is logged, the planner is told why and asked again."""
    policy = RolePolicy(v, [Reply(content="plan", tool_calls=[call]), plan(v)], [act(v, "complete", evidence=EVIDENCE)])
    result, srv, _, mode = run_team(tmp_path, policy, variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PPE"
    turns = turns_of(result)
    error = turns[1]["extra_calls"][0]["result"]["error"]
    assert error["type"] == kind and message in error["message"]
    assert turns[1]["team"]["no_plan"] == 1 and "tool_call" not in turns[1]
    again = srv.requests[1].messages[1]["content"]
    assert f"was refused ({kind})" in again and f"you MUST call {v.tool_name('plan')}" in again
    assert f"answer had no valid {v.tool_name('plan')} call" in again and "did not call" not in again
    text = log_text(result)
    assert f"TOOL {v.tool_name('plan')}: args " in text and f"REFUSED {kind}: " in text
    assert "no usable plan" in text and "answered without a tool call" not in text
    assert mode.stats["bad_outputs"] == 1 and mode.state.execution_instructions == "Click the magenta target, then type and submit."  # type: ignore[union-attr]


def test_planner_malformed_plan_in_a_review_keeps_the_current_instructions(tmp_path: Path) -> None:
    v = V003
    bad = Reply(content="new plan", tool_calls=[tool_call("update_execution_plan", '{"instructions": ')])
    executor = [act(v, "key", key="a"), act(v, "complete", evidence=EVIDENCE)]
    result, srv, _, mode = run_team(tmp_path, RolePolicy(v, [plan(v, "Press a."), bad], executor), variant=v,
                                    flags={"team.review_interval": 3})
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEPE"
    turns = turns_of(result)
    assert turns[3]["extra_calls"][0]["result"]["error"]["type"] == "invalid_json"
    assert turns[3]["team"]["plan_kept"] is True
    assert "INSTRUCTIONS FROM THE PLANNER:\nPress a." in srv.requests[3].messages[1]["content"][0]["text"]
    text = log_text(result)
    assert "REFUSED invalid_json" in text and "PLAN KEPT" in text
    assert mode.state.execution_instructions == "Press a."  # type: ignore[union-attr]


@pytest.mark.parametrize("v", [V002, V003], ids=["002", "003"])
@pytest.mark.parametrize("turns_value", [["first", "second"], "all of them", {"from": 2}, [True]])
def test_archive_with_non_numeric_turns_is_refused_and_the_engine_archives(tmp_path: Path, v: TeamVariant, turns_value: Any) -> None:
    """The planner's archive call is refused (its plan in the same answer is used) and the
    engine archives on its behalf, so the next turn is the executor's."""
    review = Reply(tool_calls=[archive(v, turns_value), plan(v).tool_calls[0]])
    executor = [act(v, "key", key=k) for k in "ab"] + [act(v, "complete", evidence=EVIDENCE)]
    result, srv, _, mode = run_team(tmp_path, RolePolicy(v, [plan(v), review], executor), variant=v,
                                    flags={"team.compression_threshold": 2, "team.review_interval": 50})
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEPE"
    turns = turns_of(result)
    error = turns[4]["extra_calls"][0]["result"]["error"]
    assert error["type"] == "invalid_args" and "archived_turns" in error["message"]
    assert turns[4]["tool_call"]["name"] == v.tool_name("plan") and turns[4]["team"]["auto_archive"] == [2]
    text = log_text(result)
    assert f"TOOL {v.tool_name('archive')}: args " in text and "REFUSED invalid_args: archived_turns" in text
    assert "did not archive enough" in text
    assert [s.turns for s in mode.state.memory.all_snapshots] == [(2,)]  # type: ignore[union-attr]


def test_two_plan_calls_in_one_answer_use_the_first(tmp_path: Path) -> None:
    v = V003
    two = Reply(content="plans", tool_calls=[plan(v, "First.").tool_calls[0], plan(v, "Second.").tool_calls[0]])  # type: ignore[list-item]
    result, srv, _, mode = run_team(tmp_path, RolePolicy(v, [two], [act(v, "complete", evidence=EVIDENCE)]), variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PE"
    turns = turns_of(result)
    assert turns[1]["tool_call"]["arguments"]["instructions"] == "First."
    assert turns[1]["extra_calls"][0]["result"]["error"]["type"] == "too_many_tool_calls"
    assert "INSTRUCTIONS FROM THE PLANNER:\nFirst." in srv.requests[1].messages[1]["content"][0]["text"]
    assert "REFUSED too_many_tool_calls: only one update_execution_plan call per answer is used" in log_text(result)
    assert mode.state.execution_instructions == "First." and mode.stats["bad_outputs"] == 1  # type: ignore[union-attr]


def test_archive_of_turns_that_do_not_exist_falls_back_to_automatic_archiving(tmp_path: Path) -> None:
    v = V003
    planner = [plan(v), Reply(tool_calls=[archive(v, [40, 41]), (v.tool_name("plan"), {"instructions": "go", "reasoning": "r"})])]
    executor = [act(v, "key", key=k) for k in ("a", "b", "c", "d")] + [act(v, "complete", evidence=EVIDENCE)]
    result, srv, _, mode = run_team(
        tmp_path, RolePolicy(v, planner, executor), variant=v,
        flags={"team.compression_threshold": 4, "team.review_interval": 50},
    )
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEEEPE"
    turns = turns_of(result)
    call = turns[6]["team"]["calls"][1]
    assert call["result"]["error"]["type"] == "unknown_turns" and "[40, 41]" in call["result"]["error"]["message"]
    assert turns[6]["team"]["auto_archive"] == [2]  # the oldest turn, keeping the newest three
    memory = mode.state.memory  # type: ignore[union-attr]
    assert len(memory.all_snapshots) == 1 and "archived automatically" in memory.all_snapshots[0].summary
    assert "did not archive enough" in log_text(result)
    assert result.summary["team"]["auto_archives"] == 1


def planner_turn_states(result: Any) -> list[dict[str, Any]]:
    """The STATE UPDATE the execution log wrote at the end of each planner turn."""
    states, planning = [], False
    for line in log_text(result).splitlines():
        if "==== TURN " in line:
            planning = line.rstrip(" =").endswith("PLANNING")
        elif planning and "STATE UPDATE: " in line:
            states.append(orjson.loads(line.split("STATE UPDATE: ", 1)[1]))
    return states


@pytest.mark.parametrize(
    ("threshold", "roles", "archived"),
    [
        (1, "PEPEPEPEPE", [(2,), (4,), (6,), (8,)]),  # every action goes straight to the archive
        (2, "PEEPEPEPE", [(2,), (3,), (5,)]),  # the newest action stays active
        (3, "PEEEPEPE", [(2,), (3,)]),  # the newest two stay active
    ],
)
def test_low_compression_threshold_cannot_stall_the_run(tmp_path: Path, threshold: int, roles: str, archived: list[tuple[int, ...]]) -> None:
    """A planner that never archives: the engine archives on its behalf, always down to
    *below* the threshold, so the next turn is the executor's (not another compression
    review, turn after turn, until max steps)."""
    v = V003
    executor = [act(v, "key", key=k) for k in "abcd"] + [act(v, "complete", evidence=EVIDENCE)]
    result, srv, _, mode = run_team(
        tmp_path, RolePolicy(v, [plan(v)] * 10, executor), variant=v,
        flags={"team.compression_threshold": threshold, "team.review_interval": 50},
    )
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == roles
    turns = turns_of(result)
    reviews = [t for t in turns if t.get("team", {}).get("team_role") == "planner"][1:]
    assert all(t["team"]["reasons"] == ["compression"] for t in reviews)
    assert [tuple(t["team"]["auto_archive"]) for t in reviews] == archived
    memory = mode.state.memory  # type: ignore[union-attr]
    assert [s.turns for s in memory.all_snapshots] == archived
    assert all(s["active_history"] < threshold for s in planner_turn_states(result)[1:])
    assert result.summary["team"]["auto_archives"] == len(archived)


@pytest.mark.parametrize("planner_archives", [False, True], ids=["planner-archives-nothing", "planner-archives-too-little"])
def test_auto_archive_counts_a_loop_recovery_record_in_its_turn(tmp_path: Path, planner_archives: bool) -> None:
    """The recovery record shares turn 3 with the action that looped: three active records
    in two turns. Keeping turns (not records) would leave the memory at the threshold."""
    v = V003
    review = Reply(tool_calls=[archive(v, [2]), (v.tool_name("plan"), {"instructions": "go", "reasoning": "r"})]) if planner_archives else plan(v)
    executor = [act(v, "key", key="tab")] * 2 + [act(v, "complete", evidence=EVIDENCE)]
    threshold = 2 if planner_archives else 3
    result, srv, _, mode = run_team(
        tmp_path, RolePolicy(v, [plan(v), review], executor), variant=v,
        flags={"team.compression_threshold": threshold, "team.review_interval": 50,
               "team.loop_recovery": True, "team.loop_repeats": 2},
    )
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEPE"
    turns = turns_of(result)
    assert turns[3]["team"]["recovery"]["performed"]
    assert turns[4]["team"]["reasons"] == ["loop_detected", "compression"]
    memory = mode.state.memory  # type: ignore[union-attr]
    if planner_archives:
        # The planner archived turn 2; turn 3's two records still reach threshold 2.
        assert turns[4]["team"]["calls"][1]["result"]["archived_turns"] == [2]
        assert turns[4]["team"]["auto_archive"] == [3]
        assert [s.turns for s in memory.all_snapshots] == [(2,), (3,)]
    else:
        assert turns[4]["team"]["auto_archive"] == [2]  # turn 3's two records stay
    assert planner_turn_states(result)[1]["active_history"] < threshold
    assert "did not archive enough" in log_text(result)


def test_repeated_action_is_a_loop_the_planner_reviews(tmp_path: Path) -> None:
    v = V003
    same = [act(v, "scroll_down") for _ in range(3)]
    planner = [plan(v), plan(v, "Stop scrolling; press enter.")]
    result, srv, desk, _ = run_team(tmp_path, RolePolicy(v, planner, [*same, act(v, "complete", evidence=EVIDENCE)]), variant=v)
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEEPE"
    turns = turns_of(result)
    assert turns[4]["team"]["loop_detected"].startswith("scroll_down")
    assert turns[5]["team"]["reasons"] == ["loop_detected"]
    assert "is looping" in srv.requests[4].messages[1]["content"]
    assert "recovery" not in turns[4]["team"]  # recovery is off by default
    assert not [e for e in desk.events if e["action"] == "key"]
    looped = log_turn(result, 4)
    assert "WARNING: LOOP DETECTED: 3 identical actions without visible effect (scroll_down" in looped
    assert '"needs_review":true' in looped and "LOOP RECOVERY" not in log_text(result)
    assert "MODE SWITCH: EXECUTION -> PLANNING (the executor repeated the same action without visible effect)" in log_turn(result, 5)


def test_loop_recovery_runs_the_seed_sequence_with_a_cooldown(tmp_path: Path) -> None:
    v = V003
    same = act(v, "key", key="tab")
    executor = [same] * 6 + [act(v, "complete", evidence=EVIDENCE)]
    planner = [plan(v)] * 4
    result, srv, desk, _mode = run_team(
        tmp_path, RolePolicy(v, planner, executor), variant=v, flags={"team.loop_recovery": True, "team.loop_repeats": 2}
    )
    assert result.outcome == "answered"
    # loops (2 repeats) at turns 3, 6 and 9; turn 7 is also a scheduled review
    assert "".join(check_requests(srv, v)) == "PEEPEEPEEPE"
    turns = turns_of(result)
    loops = [t for t in turns if t.get("team", {}).get("loop_detected")]
    assert len(loops) == 3
    first, second, third = (t["team"]["recovery"] for t in loops)
    assert [a["kind"] for a in first["performed"]] == ["key", "move", "move", "click", "key"]
    assert second == "cooldown"  # within 3 turns of the first
    assert isinstance(third, dict) and third["performed"]
    clicks = [e for e in desk.events if e["action"] == "click" and (e["x"], e["y"]) == (20, 1060)]
    assert len(clicks) == 2
    keys = [e["key"] for e in desk.events if e["action"] == "key"]
    assert keys.count("escape") == 2 and keys.count("ctrl+escape") == 2
    assert "LOOP RECOVERY SKIPPED" in log_text(result) and "LOOP RECOVERY:" in log_text(result)
    assert result.summary["team"]["recoveries"] == 2


SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # an OpenAI-style key (fake)


@pytest.mark.parametrize("v", [V002, V003], ids=["002", "003"])
def test_executor_actions_go_through_the_runs_safety_policy(tmp_path: Path, v: TeamVariant) -> None:
    """Team mode uses the loop's tools, so the default SafetyGuard checks every executor
    action: denied ones reach the executor as policy_denied errors and never the desktop."""
    executor = [
        act(v, "click", at=FIELD),
        act(v, "key", key="alt+f4"),
        act(v, "type", text=f"token {SECRET}"),
        act(v, "type", text="hello"),
        act(v, "complete", evidence=EVIDENCE),
    ]
    result, srv, desk, _ = run_team(tmp_path, RolePolicy(v, [plan(v)], executor), variant=v,
                                    flags={"team.review_interval": 50})
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEEEE"
    turns = turns_of(result)
    denied_key, denied_text = turns[3]["result"], turns[4]["result"]
    assert denied_key["error"]["type"] == "policy_denied" and denied_key["error"]["rule"] == "keys.deny:alt+f4"
    assert denied_text["error"]["type"] == "policy_denied"
    assert denied_text["error"]["rule"] == "text.secret:openai_api_key"
    assert "ERROR policy_denied" in srv.requests[3].messages[1]["content"][0]["text"]  # the executor is told
    assert not [e for e in desk.events if e["action"] == "key"]
    assert [e["text"] for e in desk.events if e["action"] == "type"] == ["hello"]
    safety = load_summary(result.run_dir)["safety"]
    assert safety["decisions"]["denied"] == 2 and safety["decisions"]["checked"] == 4
    # The secret is in none of the run's files, the seeds' execution log included.
    for path in result.run_dir.iterdir():
        if path.suffix in (".txt", ".json", ".jsonl"):
            assert SECRET not in path.read_text(encoding="utf-8"), path.name
    assert "[REDACTED:openai_api_key]" in log_text(result)


def test_loop_recovery_steps_are_checked_by_the_policy(tmp_path: Path) -> None:
    v = V003
    executor = [act(v, "key", key="tab")] * 3 + [act(v, "complete", evidence=EVIDENCE)]
    result, _, desk, _ = run_team(
        tmp_path, RolePolicy(v, [plan(v)] * 3, executor), variant=v,
        flags={"team.loop_recovery": True, "team.loop_repeats": 2, "policy.deny_keys": "ctrl+escape"},
    )
    assert result.outcome == "answered"
    recovery = next(t["team"]["recovery"] for t in turns_of(result) if t.get("team", {}).get("recovery"))
    assert [a["key"] for a in recovery["denied"]] == ["ctrl+escape"]
    assert [a["kind"] for a in recovery["performed"]] == ["key", "move", "move", "click"]
    assert "ctrl+escape" not in [e["key"] for e in desk.events if e["action"] == "key"]


def test_max_steps_ends_the_run_with_a_debrief(tmp_path: Path) -> None:
    v = V003
    executor = [act(v, "key", key=k) for k in "abcdefgh"]
    result, srv, _, _ = run_team(tmp_path, RolePolicy(v, [plan(v)], executor), variant=v, flags={"agent.max_steps": 4})
    assert result.outcome == "max_steps" and len(srv.requests) == 4
    assert result.summary["max_steps"] == 4 and result.summary["team"]["turns"] == 4
    assert "final_status: max_steps" in log_text(result)


def test_variant_max_steps_default_is_used(tmp_path: Path) -> None:
    v = V002
    executor = [act(v, "key", key=k) for k in "abcdefghijklmnopqrstuvwxyz0123"]
    planner = [plan(v)] * 30
    result, srv, _, _ = run_team(tmp_path, RolePolicy(v, planner, executor), variant=v, flags={"team.loop_repeats": 0})
    assert result.outcome == "max_steps" and len(srv.requests) == 30 and result.summary["max_steps"] == 30


def test_model_errors_end_the_run_with_an_error_debrief(tmp_path: Path) -> None:
    v = V003
    policy = RolePolicy(v, [plan(v)], [Fault.http(400, "model does not support images")])
    result, _, _, _ = run_team(tmp_path, policy, variant=v, flags={"model.retries": 0})
    assert result.outcome == "error" and "does not support images" in (result.error or "")
    text = log_text(result)
    assert "final_status: error" in text and "API ERROR" in text
    assert load_summary(result.run_dir)["outcome"] == "error"


def test_turn_delay_option_pauses_after_each_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    original = Session.pause

    async def spy(self: Session, turn: Any, seconds: float) -> None:
        pauses.append(seconds)
        await original(self, turn, 0.0)

    monkeypatch.setattr(Session, "pause", spy)
    v = V003
    policy = RolePolicy(v, [plan(v)], [act(v, "key", key="a"), act(v, "complete", evidence=EVIDENCE)])
    run_team(tmp_path, policy, variant=v, flags={"team.turn_delay": 1.5})
    assert pauses == [1.5, 1.5]  # planner turn, key turn (a completion ends the run at once)
    pauses.clear()
    run_team(tmp_path, RolePolicy(v, [plan(v)], [act(v, "complete", evidence=EVIDENCE)]), variant=v)
    assert pauses == [0.0]  # adaptive settle by default: no turn delay


def test_request_log_lines_are_json_with_redacted_images(tmp_path: Path) -> None:
    v = V003
    result, _, _, _ = run_team(tmp_path, RolePolicy(v, [plan(v)], [act(v, "complete", evidence=EVIDENCE)]), variant=v)
    line = next(x for x in log_text(result).splitlines() if "API REQUEST #2 (executor): " in x)
    request = orjson.loads(line.split("API REQUEST #2 (executor): ", 1)[1])
    assert request["temperature"] == 0.5 and request["max_tokens"] == 1400
    image = request["messages"][1]["content"][1]["image_url"]
    assert image.startswith("data:image/png;base64,<") and "base64 chars: screen_" in image
    assert request["messages"][0]["content"].startswith("<executor system prompt")


def test_real_input_controller_with_the_dry_backend(tmp_path: Path) -> None:
    """The same tools through the real InputController facade (dry backend records)."""
    v = V002
    backend = DryBackend()
    executor = [
        act(v, "click", at=TARGET),
        act(v, "drag", start=[100, 100], end=[200, 200]),
        act(v, "key", key="ctrl+s"),
        act(v, "scroll_up"),
        act(v, "complete", evidence=EVIDENCE),
    ]
    result, srv, _, _ = run_team(tmp_path, RolePolicy(v, [plan(v), plan(v)], executor), variant=v,
                                 hands=InputController(backend))
    assert result.outcome == "answered" and "".join(check_requests(srv, v)) == "PEEEPEE"
    downs = [(a.get("x"), a.get("y")) for a in backend.actions if a["action"] == "button" and a["down"]]
    assert downs == [(960, 444), (192, 108)]  # the click, then the drag's press at its start
    drag_end = next(a for a in reversed(backend.actions) if a["action"] == "button" and not a["down"])
    assert (drag_end["x"], drag_end["y"]) == (384, 216)
    keys = [a["key"] for a in backend.actions if a["action"] == "key" and a["down"]]
    assert keys == ["ctrl", "s"]
    wheel = [a for a in backend.actions if a["action"] == "wheel"]
    assert [(w["x"], w["y"]) for w in wheel] == [(960, 540)] and wheel[0]["vertical"] != 0


def test_sigint_during_the_planners_wait_stops_with_a_debrief(tmp_path: Path) -> None:
    v = V003
    policy = RolePolicy(v, [plan(v), Reply(content="late", delay=30)], [act(v, "progress", status="DONE")])
    sent: list[float] = []

    def watch() -> None:
        deadline = time.monotonic() + 20
        while len(policy.roles) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result, _, desk, _ = run_team(tmp_path, policy, variant=v, handle_signals=True)
    watcher.join()
    assert result.outcome == "interrupted" and "SIGINT" in (result.error or "")
    assert desk.events[-1]["action"] == "release_all"
    assert turns_of(result)[-1]["ended_by"] == "interrupted"
    assert "final_status: interrupted" in log_text(result)


def test_executor_calls_are_translated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's tool reads the arguments (into the variant's dataclass, which the
    memory keeps); the engine does not parse the call a second time."""
    import deskpilot.agent.modes.team._engine as engine

    v = V003
    parsed_by_engine: list[str] = []
    real = engine.parse_call

    def counting(call: Any, specs: Any, **kw: Any) -> Any:
        if call.name in VARIANTS[v.name].specs("executor"):
            parsed_by_engine.append(call.name)
        return real(call, specs, **kw)

    monkeypatch.setattr(engine, "parse_call", counting)
    executor = [act(v, "click", at=TARGET), act(v, "type", text="hello"), act(v, "complete", evidence=EVIDENCE)]
    result, _srv, desk, mode = run_team(tmp_path, RolePolicy(v, [plan(v)], executor), variant=v)
    assert result.outcome == "answered"
    assert parsed_by_engine == []
    memory = mode.state.memory  # type: ignore[union-attr]
    kinds = [type(record.args).__name__ for record in memory.history]
    assert kinds[:2] == ["PointerArgs", "TextArgs"]
    assert desk.text == "hello"
