"""``--mask-typed-text`` (``[safety] mask_typed_text``) in every mode: team 002/003 (whose
typing tools are named by their seeds), stateless, and the records and log lines that echo
what was typed (``"Typed: hello"``, the execution log, main.log, the console line)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from deskpilot.agent import iter_turns, load_config, run_agent, validate_run_dir
from deskpilot.agent._console import ConsoleReporter
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.agent.tools._core import TOOLSETS, toolset
from deskpilot.safety import RedactOptions, mask_text, redact
from deskpilot.safety._redact import TypedTexts, typed_texts_in, typing_tool_names
from deskpilot.testing import Fault, ModelServer, RecordedRequest, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
TYPED = "Zebra crossing 42"  # in no prompt, task or file name: only where it was typed
#: Team completions need 100 characters of evidence.
EVIDENCE = (
    "The text field shows the words that were typed, and the green bar at its bottom edge says "
    "the text was submitted."
)


def _team_variants() -> dict[str, Any]:
    from deskpilot.agent.modes.team import VARIANTS

    return VARIANTS


# ---------------------------------------------------------------------- records


def test_golden_team_003_turn_3_masks_the_typed_text_everywhere() -> None:
    """Team 003 types with ``type_text_input``: the model's call (arguments and
    raw_arguments), the executed call, the action and the result string that echoes it."""
    turn = next(
        json.loads(line)
        for line in (GOLDEN / "team_003" / "turns.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["turn"] == 3
    )
    assert turn["tool_call"]["name"] == "type_text_input" and turn["result"]["result"] == "Typed: hello"
    out = redact(turn, mask_typed_text=True)
    assert "hello" not in json.dumps(out)
    masked = mask_text("hello")
    (call,) = out["model"]["tool_calls"]
    assert call["arguments"] == {"reasoning": "type it", "text": masked}
    assert json.loads(call["raw_arguments"]) == {"reasoning": "type it", "text": masked}
    assert out["tool_call"]["arguments"]["text"] == masked
    assert out["result"]["result"] == f"Typed: {masked}" and out["result"]["action"] == "type_text"
    assert out["action"] == {"kind": "type", "text": masked}
    # Everything else is as it was: names, reasoning, screenshots.
    assert out["observation"]["screenshot"] == turn["observation"]["screenshot"]
    assert call["name"] == "type_text_input" and out["model"]["content"] == turn["model"]["content"]
    assert redact(turn)["result"]["result"] == "Typed: hello"  # off by default


def _all_tool_definitions() -> list[tuple[str, dict[str, Any], bool]]:
    """(name, definition, types text?) of every tool of every tool set."""
    out: list[tuple[str, dict[str, Any], bool]] = []
    for name in TOOLSETS:
        for tool in toolset(name).tools.values():
            # qwen's computer_use types its `text` (action=type): a typing tool too.
            out.append((tool.name, tool.schema(), tool.name in ("type_text", "computer_use")))
    for variant in _team_variants().values():
        for spec in (*variant.planner_tools, *variant.executor_tools):
            out.append((spec.name, spec.schema(), spec.kind == "type"))
    return out


def test_typing_tools_are_derived_from_the_tool_definitions() -> None:
    definitions = _all_tool_definitions()
    typing = {name for name, _, types in definitions if types}
    assert {"type_text", "type_text_input"} <= typing  # seeds 000/001/002 and 003
    assert typing_tool_names(d for _, d, _ in definitions) == frozenset(typing)
    # Flat definitions and objects with name/parameters work too.
    variant = _team_variants()["003"]
    assert typing_tool_names(variant.executor_tools) == {"type_text_input"}
    assert typing_tool_names([{"name": "Write_It", "parameters": {"properties": {"text": {"type": "string"}}}}]) == {
        "write_it"
    }


def test_a_call_with_a_text_argument_is_a_typing_call_whatever_its_name() -> None:
    """No tool but a typing tool takes ``text`` (previous test): a record without the
    definitions still recognizes the call, by name-less shape."""
    call = {"id": "c1", "name": "enter_words", "arguments": {"text": "secret memo"},
            "raw_arguments": '{"text": "secret memo"}'}
    openai = {"type": "function", "function": {"name": "enter_words", "arguments": '{"text": "secret memo"}'}}
    out = redact([call, openai], mask_typed_text=True)
    assert "secret memo" not in json.dumps(out)
    assert out[0]["name"] == "enter_words"
    # Named by the run (learned from the definitions), unparsable arguments are hidden whole.
    broken = {"name": "type_text_input", "arguments": None, "raw_arguments": '{"text": "unterm'}
    opts = RedactOptions(mask_typed_text=True, typing_actions=frozenset({"type_text_input"}))
    assert redact(broken, opts)["raw_arguments"] == mask_text('{"text": "unterm')
    # A label is not typed text.
    click = {"name": "click_screen_element", "arguments": {"element_name": "OK", "position": [1, 2]}}
    assert redact(click, mask_typed_text=True) == click


def test_echoes_of_short_texts_are_masked_only_inside_typing_records() -> None:
    record = {
        "tool_call": {"name": "type_text", "arguments": {"text": "42"}},
        "result": {"ok": True, "action": "type_text", "result": "Typed: 42", "note": "x1420"},
        "observation": {"screenshot": "screen_0042.png", "text": "turn 42 of 420"},
    }
    out = redact(record, mask_typed_text=True)
    assert out["result"]["result"] == "Typed: [MASKED:2 chars]"  # a whole word, in the result
    assert out["result"]["note"] == "x1420"  # not part of a word
    assert out["observation"] == record["observation"]  # short: not masked outside
    assert typed_texts_in(record) == {"42"}


def test_typed_texts_remembered_for_later_records_and_lines() -> None:
    typed = TypedTexts()
    opts = RedactOptions(mask_typed_text=True)
    redact({"kind": "type", "text": TYPED}, opts, typed=typed)
    assert typed.texts == (TYPED,)
    later = {"role": "user", "content": f"PREVIOUS_ACTION: typed {TYPED!r}", "screenshot": "screen_0001.png"}
    assert redact(later, opts, typed=typed)["content"] == "PREVIOUS_ACTION: typed '[MASKED:17 chars]'"
    assert typed.mask(f"TOOL x -> Typed: {TYPED} (screen changed)") == "TOOL x -> Typed: [MASKED:17 chars] (screen changed)"
    typed.add("ab", " ")  # short and blank texts are not masked in free text
    assert typed.mask("[07:27:21.036] ab cd") == "[07:27:21.036] ab cd"


# ---------------------------------------------------------------------- team mode, end to end


class _RolePolicy:
    def __init__(self, plan_tool: str, planner: Sequence[Reply], executor: Sequence[Reply]) -> None:
        self.plan_tool = plan_tool
        self.planner, self.executor = list(planner), list(executor)
        self._lock = threading.Lock()

    def respond(self, request: RecordedRequest) -> Reply | Fault:
        with self._lock:
            queue = self.planner if self.plan_tool in request.tool_names else self.executor
            return queue.pop(0) if queue else Fault.http(500, "script exhausted")


def _team_script(variant: Any) -> _RolePolicy:
    v002 = variant.name == "002"
    why = "justification" if v002 else "reasoning"
    label = "label" if v002 else "element_name"
    plan_args = ({"operator_instructions": "Click the field, type the words, submit.", "rationale": "go"} if v002
                 else {"instructions": "Click the field, type the words, submit.", "reasoning": "go"})
    report = "OBJ: x\nDOD: y\nOBS: z\nACT: w" if v002 else "LAST_ACTION_RESULT: ok\nNEXT_STEP: go"

    def act(kind: str, args: dict[str, Any]) -> Reply:
        return Reply(content=report, tool_calls=[(variant.tool_name(kind), {why: "because", **args})])

    executor = [
        act("click", {label: "field", "position": [500, 583]}),
        act("type", {"text": TYPED}),
        act("key", {"key": "enter"}),
        Reply(content=report, tool_calls=[(variant.tool_name("complete"), {"evidence": EVIDENCE})]),
    ]
    planner = [Reply(content="PLAN: go", tool_calls=[(variant.tool_name("plan"), plan_args)])]
    return _RolePolicy(variant.tool_name("plan"), planner, executor)


@pytest.mark.parametrize("name", ["002", "003"])
def test_team_runs_mask_typed_text_in_every_file_and_the_execution_log(tmp_path: Path, name: str) -> None:
    discover_modes()
    variant = _team_variants()[name]
    desk = SimulatedDesktop()
    with ModelServer(_team_script(variant)) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"), "agent.mode": "team",
                   "team.variant": name, "team.review_interval": 50, "safety.mask_typed_text": True},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "put the words into the field and submit them", screen_factory=lambda: desk,
                           hands_factory=lambda: desk, handle_signals=False)
    assert result.outcome == "answered", result.error
    assert desk.submitted == [TYPED]  # typed as given: masking is for the records only
    assert validate_run_dir(result.run_dir) == []
    for path in sorted(result.run_dir.iterdir()):
        if path.suffix in (".txt", ".json", ".jsonl", ".log"):
            assert TYPED not in path.read_text(encoding="utf-8"), path.name
    log = (result.run_dir / "execution_log.txt").read_text(encoding="utf-8")
    assert f"TOOL {variant.tool_name('type')}: args" in log and mask_text(TYPED) in log
    typed_turn = next(t for t in iter_turns(result.run_dir) if t.get("tool_call", {}).get("name") == variant.tool_name("type"))
    assert typed_turn["tool_call"]["arguments"]["text"] == mask_text(TYPED)
    assert typed_turn["model"]["tool_calls"][0]["raw_arguments"].count(mask_text(TYPED)) == 1


def test_without_the_option_team_records_keep_the_typed_text(tmp_path: Path) -> None:
    discover_modes()
    variant = _team_variants()["003"]
    desk = SimulatedDesktop()
    with ModelServer(_team_script(variant)) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"), "agent.mode": "team",
                   "team.variant": "003", "team.review_interval": 50},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "put the words into the field", screen_factory=lambda: desk,
                           hands_factory=lambda: desk, handle_signals=False)
    assert result.outcome == "answered", result.error
    assert f"Typed: {TYPED}" in (result.run_dir / "execution_log.txt").read_text(encoding="utf-8")


# ---------------------------------------------------------------------- stateless mode, end to end


def test_stateless_runs_mask_typed_text_in_records_main_log_and_console(tmp_path: Path) -> None:
    """Stateless actions are not tool calls: the policy check remembers the text, so the
    main.log warning about a refused typing and the console line are masked too."""
    discover_modes()

    def reply(observation: str, *actions: dict[str, Any]) -> str:
        return json.dumps({"observation": observation, "bboxes": [], "actions": list(actions)})

    boot = reply(
        "Start.",
        {"name": "click", "x1": 500, "y1": 583},
        {"name": "type", "text": TYPED},
        {"name": "type", "text": f"{TYPED} again, refused"},
    )
    console = Console(record=True, width=200, force_terminal=False)
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy([reply("All done.", {"name": "done"})])) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"), "agent.mode": "stateless",
                   "agent.max_steps": 3, "stateless.panel": "off", "stateless.action_delay_seconds": 0,
                   "stateless.boot_vlm_output": boot, "safety.mask_typed_text": True,
                   "policy.deny_text": "again"},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "type the words", reporter=ConsoleReporter(console), screen_factory=lambda: desk,
                           hands_factory=lambda: desk, handle_signals=False)
    assert result.outcome == "answered", result.error
    assert desk.text == TYPED
    main_log = (result.run_dir / "main.log").read_text(encoding="utf-8")
    assert "failed" in main_log and "[MASKED:" in main_log  # the refused typing is logged, masked
    for path in sorted(result.run_dir.rglob("*")):
        # run.json keeps the configuration as given: the scripted reply is in it.
        if path.suffix in (".txt", ".json", ".jsonl", ".log") and path.name != "run.json":
            assert TYPED not in path.read_text(encoding="utf-8"), path.name
    shown = console.export_text()
    assert "type '[MASKED:17 chars]'" in shown and TYPED not in shown
    # The model still gets the real feedback: masking is for records, not for the model.
    assert any(TYPED in json.dumps(r.messages) for r in srv.requests)
