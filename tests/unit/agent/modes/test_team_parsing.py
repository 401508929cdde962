"""Team mode, pure logic: variants, argument dataclasses, schemas and call parsing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from deskpilot._errors import ArgumentError, ConfigError
from deskpilot.agent.client._toolcalls import ToolCall, parse_arguments
from deskpilot.agent.modes.team import (
    COMMANDER_OPERATOR,
    PLANNER_EXECUTOR,
    VARIANTS,
    ArchiveArgs,
    CompletionArgs,
    Coordinate,
    DragArgs,
    KeyArgs,
    PlanArgs,
    PointerArgs,
    ProgressArgs,
    ScrollArgs,
    TextArgs,
    parse_call,
    resolve_variant,
)
from deskpilot.agent.modes.team._common import (
    EXECUTOR_KINDS,
    PLANNER_KINDS,
    read_coordinate,
    read_turns,
)
from deskpilot.geometry import Mapping, Rect
from deskpilot.testing import validate_chat_request

V002, V003 = VARIANTS["002"], VARIANTS["003"]


def call(name: str, arguments: Any = None) -> ToolCall:
    args, raw, error, message = parse_arguments(arguments if arguments is not None else {})
    return ToolCall(id="c1", name=name, arguments=args, raw_arguments=raw, error=error, error_message=message)


def error_kind(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ArgumentError) as info:
        fn(*args, **kwargs)
    return info.value.kind


# ---------------------------------------------------------------------- variants


def test_variant_defaults_are_the_seeds() -> None:
    assert (V002.review_interval, V002.compression_threshold, V002.max_steps) == (5, 8, 30)
    assert (V003.review_interval, V003.compression_threshold, V003.max_steps) == (7, 12, 50)
    assert (V002.planner_temperature, V002.planner_max_tokens) == (0.35, 1200)
    assert (V002.executor_temperature, V002.executor_max_tokens) == (0.5, 1024)
    assert (V003.planner_temperature, V003.planner_max_tokens) == (0.35, 1800)
    assert (V003.executor_temperature, V003.executor_max_tokens) == (0.5, 1400)
    assert (V002.plan_excerpt_chars, V003.plan_excerpt_chars) == (500, 400)
    for v in (V002, V003):
        assert (v.turn_delay_s, v.ui_settle_delay_s, v.loop_recovery_cooldown, v.min_evidence_chars, v.context_actions) == (
            1.5, 0.3, 3, 100, 8,
        )
    assert (V002.planning_mode, V003.planning_mode) == ("EVALUATION", "PLANNING")
    assert (V002.planner_role, V002.executor_role, V003.planner_role, V003.executor_role) == (
        "commander", "operator", "planner", "executor",
    )


def test_tool_names_are_the_seeds() -> None:
    assert [s.name for s in V002.planner_tools] == ["spawn_operator", "compress_memory"]
    assert [s.name for s in V002.executor_tools] == [
        "click_element", "double_click_element", "right_click_element", "drag_element", "type_text",
        "press_key", "scroll_down", "scroll_up", "report_progress", "report_completion",
    ]
    assert [s.name for s in V003.planner_tools] == ["update_execution_plan", "archive_completed_actions"]
    assert [s.name for s in V003.executor_tools] == [
        "report_mission_complete", "report_goal_status", "click_screen_element", "double_click_screen_element",
        "right_click_screen_element", "drag_screen_element", "type_text_input", "press_keyboard_key",
        "scroll_screen_down", "scroll_screen_up",
    ]
    for v in (V002, V003):
        assert sorted(s.kind for s in v.planner_tools) == sorted(PLANNER_KINDS)
        assert sorted(s.kind for s in v.executor_tools) == sorted(EXECUTOR_KINDS)
        assert all(s.role == "planner" for s in v.planner_tools)
        assert all(s.role == "executor" for s in v.executor_tools)
    assert V003.tool_name("click") == "click_screen_element" and V002.tool_name("archive") == "compress_memory"


@pytest.mark.parametrize(
    ("spec_name", "fields"),
    [
        ("click_element", ["justification", "label", "position"]),
        ("drag_element", ["justification", "label", "start", "end"]),
        ("type_text", ["justification", "text"]),
        ("press_key", ["justification", "key"]),
        ("scroll_down", ["justification"]),
        ("report_completion", ["evidence"]),
        ("report_progress", ["objective_id", "status", "evidence"]),
        ("compress_memory", ["compression_summary", "loop_analysis", "archived_turns"]),
        ("spawn_operator", ["operator_instructions", "rationale"]),
        ("click_screen_element", ["reasoning", "element_name", "position"]),
        ("drag_screen_element", ["reasoning", "element_name", "start", "end"]),
        ("type_text_input", ["reasoning", "text"]),
        ("press_keyboard_key", ["reasoning", "key"]),
        ("scroll_screen_up", ["reasoning"]),
        ("report_mission_complete", ["evidence"]),
        ("report_goal_status", ["goal_identifier", "completion_status", "evidence"]),
        ("archive_completed_actions", ["summary", "patterns_detected", "archived_turns"]),
        ("update_execution_plan", ["instructions", "reasoning"]),
    ],
)
def test_schemas_name_the_seed_arguments(spec_name: str, fields: list[str]) -> None:
    specs = {**V002.specs("planner"), **V002.specs("executor"), **V003.specs("planner"), **V003.specs("executor")}
    schema = specs[spec_name].schema()
    params = schema["function"]["parameters"]
    assert schema["type"] == "function" and schema["function"]["name"] == spec_name
    assert list(params["properties"]) == fields and params["required"] == fields


@pytest.mark.parametrize("variant", [V002, V003])
def test_schemas_pass_strict_server_validation(variant: Any) -> None:
    for role in ("planner", "executor"):
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            "tools": [s.schema() for s in variant.tools(role)],
            "tool_choice": "auto",
        }
        problems, _ = validate_chat_request(body)
        assert problems == []


def test_variants_are_the_seeds_by_name() -> None:
    assert (COMMANDER_OPERATOR, PLANNER_EXECUTOR) == (V002, V003)
    assert V002.planner_prompt.startswith("IDENTITY: You are the TEAM LEADER")
    assert V003.executor_prompt.startswith("You are a Computer Task Executor.")


def test_argument_dataclasses_are_frozen_and_shared_by_both_variants() -> None:
    # One shape per tool kind: the variants differ in the JSON names only (the schema tests above).
    expected = {
        PointerArgs: ["reason", "target", "position"],
        DragArgs: ["reason", "target", "start", "end"],
        TextArgs: ["reason", "text"],
        KeyArgs: ["reason", "key"],
        ScrollArgs: ["reason"],
        CompletionArgs: ["evidence"],
        ProgressArgs: ["goal", "state", "evidence"],
        ArchiveArgs: ["summary", "patterns", "archived_turns"],
        PlanArgs: ["instructions", "rationale"],
    }
    for cls, fields in expected.items():
        assert [f.name for f in dataclasses.fields(cls)] == fields
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    args = PointerArgs("why", "OK", Coordinate(1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.target = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "variant"),
    [("002", "002"), ("2", "002"), ("commander", "002"), ("Operator", "002"), ("commander/operator", "002"),
     ("SOF", "002"), ("003", "003"), ("3", "003"), ("planner", "003"), ("executor", "003"),
     ("Planner / Executor", "003"), ("planner_executor", "003")],
)
def test_resolve_variant_accepts_numbers_and_role_names(name: str, variant: str) -> None:
    assert resolve_variant(name).name == variant


def test_resolve_variant_rejects_unknown_names_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"unknown team variant 'plannr'.*did you mean 'planner'"):
        resolve_variant("plannr")
    with pytest.raises(ConfigError, match="use 002"):
        resolve_variant("004")


def test_system_prompts_carry_the_response_formats_and_numbers() -> None:
    p2 = V002.system_prompt("executor", task="T1", review_interval=5, threshold=8)
    assert all(k in p2 for k in ("SITREP", "OBJ:", "DOD:", "OBS:", "ACT:", "ONE tool", "T1", "100 characters"))
    c2 = V002.system_prompt("planner", task="T1", review_interval=5, threshold=8)
    assert "spawn_operator" in c2 and "compress_memory" in c2 and "every 5 turns" in c2 and "reaches 8" in c2
    p3 = V003.system_prompt("executor", task="T2", review_interval=7, threshold=12)
    for key in ("LAST_ACTION_RESULT:", "CURRENT_GOAL:", "SUCCESS_CRITERIA:", "SCREEN_SHOWS:", "NEXT_STEP:", "0-1000"):
        assert key in p3
    c3 = V003.system_prompt("planner", task="T2", review_interval=7, threshold=12)
    assert "update_execution_plan" in c3 and "every 7 turns" in c3 and "reaches 12" in c3
    assert all("data, not" in p for p in (p2, c2, p3, c3))  # the security note


# ---------------------------------------------------------------------- coordinates and readers


def test_coordinate_validates_and_maps_through_the_geometry_contract() -> None:
    c = Coordinate(500, 1000)
    assert c.to_physical(Mapping(Rect(100, 0, 1920, 1080), 1536, 864)) == (100 + 960, 1079)
    assert Coordinate.clamped(-20.4, 1000.7) == Coordinate(0, 1000)
    with pytest.raises(ValueError):
        Coordinate(1001, 0)
    with pytest.raises(ValueError):
        Coordinate(True, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"position": [500, 300]}, Coordinate(500, 300)),
        ({"position": [1200, -5]}, Coordinate(1000, 0)),
        ({"position": {"x": 10, "y": 20}}, Coordinate(10, 20)),
        ({"position": "[10, 20]"}, Coordinate(10, 20)),
        ({"position": "(10, 20)"}, Coordinate(10, 20)),
        ({"position": [100, 100, 300, 200]}, Coordinate(200, 150)),
        ({"position": [[300, 200], [100, 100]]}, Coordinate(200, 150)),
        ({"x": 7, "y": 8}, Coordinate(7, 8)),
        ({"position": [10.6, 20.2]}, Coordinate(11, 20)),
    ],
)
def test_read_coordinate_accepts_the_forms_models_write(args: dict[str, Any], expected: Coordinate) -> None:
    assert read_coordinate(args, "position") == expected


@pytest.mark.parametrize(
    ("args", "kind"),
    [({}, "missing_box"), ({"position": []}, "missing_box"), ({"position": [1, 2, 3]}, "invalid_box"),
     ({"position": ["a", 2]}, "invalid_box"), ({"position": [float("nan"), 1]}, "invalid_box"),
     ({"position": "left"}, "invalid_box"), ({"position": 5}, "invalid_box")],
)
def test_read_coordinate_refusals(args: dict[str, Any], kind: str) -> None:
    assert error_kind(read_coordinate, args, "position") == kind


@pytest.mark.parametrize(
    ("value", "expected"),
    [([3, 1, 2, 2], (1, 2, 3)), (["4", 5.0], (4, 5)), ("1, 2, 5-7", (1, 2, 5, 6, 7)), ("5 to 7", (5, 6, 7)),
     (["Turn_3", "turn_4"], (3, 4)), (9, (9,)), ([], ()), ("[2, 3]", (2, 3)), (["8..9"], (8, 9))],
)
def test_read_turns_normalises(value: Any, expected: tuple[int, ...]) -> None:
    assert read_turns({"archived_turns": value}) == expected


@pytest.mark.parametrize("value", [None, [True], ["x"], [1.5], {"a": 1}, ["1-99999"]])
def test_read_turns_refuses_what_is_not_turn_numbers(value: Any) -> None:
    assert error_kind(read_turns, {"archived_turns": value}) == "invalid_args"


# ---------------------------------------------------------------------- parse_call


def test_parse_call_builds_each_variant_dataclass() -> None:
    ex2, ex3 = V002.specs("executor"), V003.specs("executor")
    p = parse_call(call("click_element", {"justification": "open", "label": "OK", "position": [10, 20]}), ex2)
    assert p.kind == "click" and p.args == PointerArgs("open", "OK", Coordinate(10, 20))
    assert (p.args.reason, p.args.target) == ("open", "OK")
    p = parse_call(call("drag_screen_element", {"reasoning": "r", "element_name": "slider", "start": [1, 2], "end": [3, 4]}), ex3)
    assert p.args == DragArgs("r", "slider", Coordinate(1, 2), Coordinate(3, 4))
    p = parse_call(call("type_text_input", {"reasoning": "r", "text": "  two spaces "}), ex3)
    assert p.args.text == "  two spaces "  # typed exactly
    p = parse_call(call("press_key", {"justification": "j", "key": ["ctrl", "s"]}), ex2)
    assert p.args == KeyArgs("j", "ctrl+s")
    p = parse_call(call("report_goal_status", {"goal_identifier": "g1", "completion_status": "done", "evidence": "e"}), ex3)
    assert (p.args.goal, p.args.state, p.args.evidence) == ("g1", "DONE", "e")
    p = parse_call(call("report_progress", {"objective_id": "o", "status": "in progress", "evidence": "e"}), ex2)
    assert p.args.state == "IN_PROGRESS"
    p = parse_call(call("scroll_screen_down", {}), ex3)
    assert p.args == ScrollArgs("")  # reasoning is asked for but never required
    pl2, pl3 = V002.specs("planner"), V003.specs("planner")
    p = parse_call(call("compress_memory", {"compression_summary": "s", "loop_analysis": "none", "archived_turns": [2, 1]}), pl2)
    assert p.args == ArchiveArgs("s", "none", (1, 2)) and p.args.summary == "s" and p.args.patterns == "none"
    p = parse_call(call("update_execution_plan", {"instructions": "do x", "reasoning": "because"}), pl3)
    assert (p.args.instructions, p.args.rationale) == ("do x", "because")
    p = parse_call(call("spawn_operator", {"operator_instructions": "do y"}), pl2)
    assert (p.args.instructions, p.args.rationale) == ("do y", "")


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("click_screen_element", {"reasoning": "r", "position": [1, 2]}, "missing_label"),
        ("click_screen_element", {"reasoning": "r", "element_name": "x"}, "missing_box"),
        ("click_screen_element", {"element_name": "x", "position": [1, 2, 3]}, "invalid_box"),
        ("click_screen_element", {"element_name": 5, "position": [1, 2]}, "invalid_args"),
        ("click_screen_element", {"element_name": "x", "position": [1, 2], "reasoning": ["a"]}, "invalid_args"),
        ("type_text_input", {"text": ""}, "empty_text"),
        ("type_text_input", {"text": 12}, "invalid_args"),
        ("press_keyboard_key", {}, "missing_key"),
        ("press_keyboard_key", {"key": "ctrl+entr"}, "invalid_key"),
        ("press_keyboard_key", {"key": 3}, "invalid_args"),
        ("report_goal_status", {"goal_identifier": "g", "evidence": "e"}, "invalid_args"),
        ("report_mission_complete", {}, "invalid_args"),
        ("click_screen_element", '{"element_name": "x", "position": [1,', "invalid_json"),
        ("click_screen_element", "[1, 2]", "invalid_args"),
        ("archive_completed_actions", {"summary": "s"}, "unknown_tool"),
        ("open_browser", {}, "unknown_tool"),
        ("", {}, "unknown_tool"),
    ],
)
def test_parse_call_refuses_bad_output_with_seed_error_kinds(name: str, arguments: Any, kind: str) -> None:
    c = call(name, arguments) if not isinstance(arguments, str) else ToolCall(
        "c", name, *_decoded(arguments)
    )
    assert error_kind(parse_call, c, V003.specs("executor")) == kind


def _decoded(raw: str) -> tuple[Any, str, Any, Any]:
    args, text, error, message = parse_arguments(raw)
    return args, text, error, message


def test_unknown_tool_messages_name_the_owner_or_a_close_match() -> None:
    with pytest.raises(ArgumentError, match=r"'spawn_operator' is a planner tool.*available: click_element"):
        parse_call(call("spawn_operator", {}), V002.specs("executor"), other_role=V002.specs("planner"))
    with pytest.raises(ArgumentError, match=r"did you mean 'update_execution_plan'"):
        parse_call(call("update_plan_execution", {}), V003.specs("planner"))
