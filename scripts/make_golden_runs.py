#!/usr/bin/env python
"""Regenerate the golden runs in tests/golden/ (replayed by tests/unit/replay/test_replay_golden.py).

    .venv/bin/python scripts/make_golden_runs.py            # all of them
    .venv/bin/python scripts/make_golden_runs.py single_seed000 stateless_flat
    .venv/bin/python scripts/make_golden_runs.py --list

Each golden run is a real run of the agent (the real loop, HTTP client, parser, tools,
history and run log) against the scripted local test server on the simulated desktop
(deskpilot.testing._desktop), at a small image size so the repository stays small.
Run this after an *intended* change of behaviour (a prompt, a tool payload, the
geometry, pruning): the replay test fails until the recordings are regenerated, and the
diff of tests/golden/ in the commit shows what changed.

Machine-specific values (the temporary directory, the server port) are replaced in the
JSON files by stable placeholders; nothing else is edited.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
sys.path.insert(0, str(ROOT / "src"))

from deskpilot.agent import load_config, run_agent  # noqa: E402
from deskpilot.agent.modes._registry import discover_modes  # noqa: E402
from deskpilot.testing import ModelServer, RecordedRequest, Reply, ScriptedPolicy, tool_call  # noqa: E402
from deskpilot.testing._desktop import SimulatedDesktop  # noqa: E402

SMALL = {"screen.image_width": 384, "screen.image_height": 216}
TARGET = [500, 412]  # centre of the simulated desktop's target (0..1000 over the full screen)
FIELD = [500, 583]  # centre of its text field


def _thought(text: str) -> str:
    return f"<think>{text}</think>\n"


def single_seed000() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """seed000 tools, JSON answers, think blocks, every box format, errors, pruning."""
    script: list[Any] = [
        Reply(content=_thought("The magenta button is the target.") + "Clicking it.",
              tool_calls=[("click_element", {"label": "target", "box": TARGET})]),
        Reply(content=_thought("The field is below it."),
              tool_calls=[("click_element", {"label": "field", "box": [[340, 560], [660, 610]]})]),
        Reply(content=_thought("Now type."), tool_calls=[("type_text", {"text": "héllo ✓"})]),
        Reply(tool_calls=[("scroll_at_position", {"box": [100, 100, 200, 180], "label": "desktop", "amount": 2})]),
        Reply(content="A bad box on purpose.", tool_calls=[("click_element", {"label": "x", "box": [1, 2, 3]})]),
        Reply(tool_calls=[tool_call("type_text", '{"text": "unterminated')]),
        Reply(content="Two calls at once.",
              tool_calls=[("press_key", {"key": "enter"}), ("type_text", {"text": "ignored"})]),
        Reply(tool_calls=[("observe_screen", {})]),
        Reply(content=_thought("Submitted: the bar is green.") + "Done: typed and submitted."),
    ]
    # Pinned to the seeds' keep-last-N pruning (prune_chunk 1), which this run covers.
    flags = {**SMALL, "agent.max_steps": 12, "history.keep_last_screenshots": 2, "history.keep_last_thinks": 1,
             "history.prune_chunk": 1}
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the target, type héllo ✓ and submit it."


def single_extended_stream() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """extended tools, SSE answers, a monitor at a negative origin, zoom, content-style calls."""
    script: list[Any] = [
        Reply(tool_calls=[("zoom", {"box": [430, 340, 570, 480]})]),
        # After the zoom, coordinates are over the crop: the centre is the target.
        Reply(tool_calls=[("click_element", {"label": "target", "box": [500, 500], "hold": "ctrl"})]),
        Reply(tool_calls=[("double_click", {"label": "field", "box": FIELD})]),
        Reply(content="I will type now.", tool_calls=[("type_text", {"text": "zoomed"})], style="content"),
        Reply(tool_calls=[("drag", {"start": [50, 50], "end": [[150, 150], [250, 250]], "label": "selection"})]),
        Reply(tool_calls=[("scroll", {"box": [800, 200], "direction": "left", "amount": 3})]),
        Reply(tool_calls=[("right_click", {"label": "desktop", "box": [900, 900]})]),
        Reply(tool_calls=[("hold_key", {"key": "shift", "seconds": 0.01})]),
        Reply(tool_calls=[("wait", {"seconds": 0.01})]),
        Reply(tool_calls=[("press_key", {"key": "ctrl+shift+t"})]),
        "All done.",
    ]
    flags = {**SMALL, "agent.toolset": "extended", "model.stream": True, "agent.max_steps": 15}
    desk = SimulatedDesktop(image_size=(384, 216), origin=(-1920, 120))
    return script, flags, desk, "Zoom in, click the target, then type into the field."


def single_seed001() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """seed 001's tools without automatic screenshots: the model asks for them."""
    script: list[Any] = [
        Reply(tool_calls=[("move_mouse", {"x": TARGET[0], "y": TARGET[1]})]),
        Reply(tool_calls=[("click_mouse", {})]),
        Reply(tool_calls=[("take_screenshot", {})]),
        Reply(tool_calls=[("type_text", {"text": "seed"})]),
        Reply(tool_calls=[("scroll_down", {})]),
        Reply(tool_calls=[("take_screenshot", {})]),
        "Finished.",
    ]
    flags = {**SMALL, "agent.toolset": "seed001", "agent.observe_after_action": False, "agent.max_steps": 10}
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the target and type seed."


def single_qwen() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """qwen tool set: Qwen3-VL's computer_use (0..999 grid), native and <tool_call> text, SSE, terminate."""
    def use(style: str = "native", **args: Any) -> Reply:
        return Reply(tool_calls=[("computer_use", args)], style=style)

    script: list[Any] = [
        use(action="left_click", coordinate=TARGET),
        use("content", action="type", text="qwen"),
        use(action="key", keys=["enter"]),
        use(action="scroll", coordinate=[500, 200], pixels=-2),
        use(action="mouse_move", coordinate=[999, 0]),
        use(action="terminate", status="success"),
    ]
    flags = {**SMALL, "agent.toolset": "qwen", "model.stream": True, "agent.max_steps": 10}
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the target, type qwen and submit."


def single_uitars() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """uitars tool set: UI-TARS-1.5 text actions (absolute pixels on the smart-resized 392x224 image)."""
    script: list[Any] = [
        "Thought: The magenta target is in the middle of the screen.\nAction: click(start_box='(196,92)')",
        "Thought: Type into the focused field and submit.\nAction: type(content='tars\\n')",
        "Thought: Scroll a little.\nAction: scroll(point='<point>196 50</point>', direction='down')",
        "Thought: The text was submitted.\nAction: finished(content='Typed tars and submitted it.')",
    ]
    flags = {**SMALL, "agent.toolset": "uitars", "agent.max_steps": 8}
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the target, type tars and submit."


class _RolePolicy:
    """Team mode: planner requests (offering the plan tool) and executor requests from two scripts."""

    def __init__(self, plan_tool: str, planner: list[Any], executor: list[Any]) -> None:
        self.plan_tool, self.planner, self.executor = plan_tool, planner, executor

    def respond(self, request: RecordedRequest) -> Any:
        queue = self.planner if self.plan_tool in request.tool_names else self.executor
        return queue.pop(0)


def team_003() -> tuple[Any, dict[str, Any], SimulatedDesktop, str]:
    """team mode, variant 003: a planner turn without an image, executor turns with one."""
    planner = [
        Reply(content="PLAN: click the target, then type and submit.",
              tool_calls=[("update_execution_plan", {"instructions": "Click the magenta target, type hello, press enter.",
                                                    "reasoning": "first goal"})]),
    ]
    evidence = ("The target button turned green, the field shows the typed text and the green bar at its "
                "bottom edge says the text was submitted.")
    executor = [
        Reply(content="LAST_ACTION_RESULT: none\nNEXT_STEP: click",
              tool_calls=[("click_screen_element", {"reasoning": "the target", "element_name": "target", "position": TARGET})]),
        Reply(content="LAST_ACTION_RESULT: clicked\nNEXT_STEP: type",
              tool_calls=[("type_text_input", {"reasoning": "type it", "text": "hello"})]),
        Reply(content="LAST_ACTION_RESULT: typed\nNEXT_STEP: enter",
              tool_calls=[("press_keyboard_key", {"reasoning": "submit", "key": "enter"})]),
        Reply(content="LAST_ACTION_RESULT: submitted", tool_calls=[("report_mission_complete", {"evidence": evidence})]),
    ]
    flags = {**SMALL, "agent.mode": "team", "team.variant": "003", "agent.max_steps": 10}
    return _RolePolicy("update_execution_plan", planner, executor), flags, SimulatedDesktop(image_size=(384, 216)), \
        "Put hello into the field and submit it."


def _stateless(observation: str, *actions: dict[str, Any], bboxes: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"observation": observation, "bboxes": bboxes or [], "actions": list(actions)})


def _stateless_flags(layout: str, **extra: Any) -> dict[str, Any]:
    return {
        "agent.mode": "stateless",
        "agent.max_steps": 6,
        "stateless.panel": "off",
        "stateless.log_layout": layout,
        "stateless.log_to_file": False,
        "stateless.action_delay_seconds": 0,
        "stateless.drag_step_delay": 0,
        **extra,
    }


def stateless_flat() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """stateless mode (seed 004), flat layout: several actions per turn, boxes, a drag."""
    boot = _stateless("I start by clicking the target.", {"name": "click", "x1": TARGET[0], "y1": TARGET[1]})
    script = [
        _stateless("Target is green. Now the field.", {"name": "click", "x1": FIELD[0], "y1": FIELD[1]},
                   {"name": "type", "text": "héllo"}, {"name": "key", "keys": "enter"},
                   bboxes=[{"x1": 340, "y1": 550, "x2": 660, "y2": 620, "label": "field"}]),
        _stateless("Let me also try a drag and a scroll.",
                   {"name": "drag", "x1": 100, "y1": 100, "x2": 300, "y2": 200},
                   {"name": "scroll", "x1": 800, "y1": 300, "dy": 2},
                   {"name": "double_click", "x1": 900, "y1": 900}),
        _stateless("Submitted, all done.", {"name": "done"}),
    ]
    flags = _stateless_flags("flat", **{"stateless.capture_width": 384, "stateless.capture_height": 216,
                                        "stateless.boot_vlm_output": boot})
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the button, type héllo and submit."


def stateless_turn_dirs_crop() -> tuple[list[Any], dict[str, Any], SimulatedDesktop, str]:
    """stateless mode, turn_dirs layout, a crop sandbox (working area 100..900)."""
    boot = _stateless("Clicking the target inside the crop.", {"name": "click", "x1": 500, "y1": 390})
    script = [
        _stateless("Now a right click and a move.", {"name": "right_click", "x1": 10, "y1": 10},
                   {"name": "move", "x1": 990, "y1": 990}),
        _stateless("Done.", {"name": "done"}),
    ]
    flags = _stateless_flags("turn_dirs", **{"stateless.capture_crop": "100,100,900,900",
                                             "stateless.capture_scale_percent": 25,
                                             "stateless.boot_vlm_output": boot})
    return script, flags, SimulatedDesktop(image_size=(384, 216)), "Click the target inside the working area."


GOLDEN_RUNS: dict[str, Callable[[], tuple[Any, dict[str, Any], SimulatedDesktop, str]]] = {
    "single_seed000": single_seed000,
    "single_extended_stream": single_extended_stream,
    "single_seed001": single_seed001,
    "single_qwen": single_qwen,
    "single_uitars": single_uitars,
    "team_003": team_003,
    "stateless_flat": stateless_flat,
    "stateless_turn_dirs_crop": stateless_turn_dirs_crop,
}

_VOLATILE_ENDPOINT = re.compile(r"http://127\.0\.0\.1:\d+/")


def _scrub(run_dir: Path, tmp: Path) -> None:
    """Replace the temporary path and the server port in every text file of a run."""
    for path in run_dir.rglob("*"):
        if not path.is_file() or path.suffix not in (".json", ".jsonl", ".txt", ".log"):
            continue
        text = path.read_text(encoding="utf-8")
        text = text.replace(str(tmp), "<tmp>")
        text = _VOLATILE_ENDPOINT.sub("http://127.0.0.1:0/", text)
        path.write_text(text, encoding="utf-8")


def make(name: str, out: Path = GOLDEN) -> Path:
    """Record one golden run into ``out/name`` (replacing it); returns its directory."""
    discover_modes()
    policy, flags, desk, task = GOLDEN_RUNS[name]()
    if isinstance(policy, list):
        policy = ScriptedPolicy(policy)
    with tempfile.TemporaryDirectory(prefix="deskpilot-golden-") as tmp:
        with ModelServer(policy) as server:
            config = load_config(
                flags={"model.endpoint": server.endpoint, "run.runs_dir": tmp, "run.quiet": True,
                       "run.lmstudio_logs": "off", **flags},
                env={},
                search_default=False,
            )
            result = run_agent(config, task, screen_factory=lambda: desk, hands_factory=lambda: desk,
                               handle_signals=False, run_name=name)
            if server.problems:
                raise SystemExit(f"{name}: the test server saw invalid requests: {server.problems}")
        if result.outcome != "answered":
            raise SystemExit(f"{name}: the run ended {result.outcome}: {result.error}")
        _scrub(result.run_dir, Path(tmp))
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(result.run_dir, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="golden runs to regenerate (default: all)")
    parser.add_argument("--list", action="store_true", help="list the golden runs and exit")
    parser.add_argument("--out", type=Path, default=GOLDEN, help="where to write them (default tests/golden)")
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in GOLDEN_RUNS.items():
            print(f"{name:28} {(fn.__doc__ or '').strip()}")
        return 0
    unknown = [n for n in args.names if n not in GOLDEN_RUNS]
    if unknown:
        parser.error(f"unknown golden runs {unknown}; known: {', '.join(GOLDEN_RUNS)}")
    for name in args.names or list(GOLDEN_RUNS):
        target = make(name, args.out)
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"{name}: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target} ({size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
