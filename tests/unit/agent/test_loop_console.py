"""The terminal output: per-turn lines and the final p50/p95 table (rich, recorded)."""

from __future__ import annotations

from rich.console import Console

from deskpilot.agent._console import ConsoleReporter, format_action


def test_turn_lines_and_summary_table() -> None:
    console = Console(record=True, width=160, force_terminal=False)
    reporter = ConsoleReporter(console)
    reporter.start({"task": "click it", "mode": "single", "toolset": "seed000", "model": "m", "endpoint": "http://e",
                    "run_dir": "runs/x", "max_steps": 10, "screen": {"physical_size": [1920, 1080], "image_size": [1536, 864]},
                    "input": "xtest"})
    reporter.phase(1, "model")
    reporter.turn({"turn": 1, "role": "agent",
                   "tool_call": {"name": "click_element", "arguments": {"label": "OK", "box": [500, 300]}},
                   "result": {"ok": True, "changed": True},
                   "timings": {"model": 812.0, "action": 1.2, "settle": 20.0, "capture": 9.0, "encode": 4.0,
                               "request_build": 0.3, "overhead": 35.5}})
    reporter.turn({"turn": 2, "result": {"ok": False, "error": {"type": "invalid_box", "message": "x"}},
                   "tool_call": {"name": "click_element", "arguments": {"label": "OK", "box": "left"}},
                   "timings": {"model": 5.0, "overhead": 1.0}})
    reporter.turn({"turn": 3, "final": True, "answer": "All done.", "timings": {"model": 3.0}})
    reporter.finish({"outcome": "answered", "steps": 3, "duration_s": 1.5, "answer": "All done.", "run_dir": "runs/x",
                     "screenshots": ["screen_0001.png"], "screenshot_dir": "runs/x",
                     "totals": {"requests": 3, "tool_calls": 2, "tool_errors": 1, "images_sent": 1, "request_bytes": 2e6},
                     "phases": {"model": {"count": 3, "p50_ms": 5.0, "p95_ms": 731.3, "mean_ms": 273.3, "max_ms": 812.0},
                                "overhead": {"count": 2, "p50_ms": 18.25, "p95_ms": 33.8, "mean_ms": 18.25, "max_ms": 35.5}}})
    text = console.export_text()
    assert "task: click it" in text and "run directory: runs/x" in text
    assert "click_element 'OK' [500, 300]" in text and "changed" in text and "overhead 35.5 ms" in text
    assert "✗ invalid_box" in text and "answer: All done." in text
    assert "outcome: answered after 3 steps" in text
    table_lines = [line for line in text.splitlines() if line.startswith("overhead")]
    assert table_lines and "18.2" in table_lines[0] and "33.8" in table_lines[0]
    assert "screenshots: 1 in runs/x" in text


def test_format_action_keeps_lines_short() -> None:
    long = {"tool_call": {"name": "type_text", "arguments": {"text": "x" * 200}}}
    assert len(format_action(long)) < 60
    assert format_action({"observation": {}}) == "observe"


def test_role_labels_are_never_cut() -> None:
    # The role column used to be cut at 8 characters: "stateles", "commande".
    console = Console(record=True, width=160, force_terminal=False)
    reporter = ConsoleReporter(console)
    for turn, role in enumerate(("stateless", "commander", "operator", "planner", "executor"), 1):
        reporter.turn({"turn": turn, "role": role, "final": True, "answer": "ok", "timings": {}})
    lines = console.export_text().splitlines()
    assert [line.split()[1] for line in lines] == ["stateless", "commander", "operator", "planner", "executor"]
    # one column: the action text starts at the same place on every line
    assert len({line.index("ok") for line in lines}) == 1


def test_one_model_line_names_the_builtin_server() -> None:
    console = Console(record=True, width=200, force_terminal=False)
    ConsoleReporter(console, model_label="the built-in test server").start(
        {"task": "t", "mode": "single", "toolset": "seed000", "model": "qwen3-vl-8b-instruct",
         "endpoint": "http://127.0.0.1:1/v1/chat/completions", "run_dir": "r", "screen": {}})
    lines = [line for line in console.export_text().splitlines() if line.startswith("model:")]
    assert lines == ["model: the built-in test server at http://127.0.0.1:1/v1/chat/completions"]
