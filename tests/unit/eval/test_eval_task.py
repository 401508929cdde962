"""The task format: box references, TOML suite files, the desktop suite's shape."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deskpilot._errors import ConfigError
from deskpilot.eval import SUITES, Step, Task, load_suite
from deskpilot.eval._task import resolve_args, run_check


def test_a_reference_is_the_centre_of_what_the_layout_shows_in_0_to_1000() -> None:
    layout = {"ok": [100, 200, 50, 21], "row:Item 5": [0, 0, 1280, 800]}
    args = resolve_args({"label": "OK", "box": "@ok", "end": "@row:Item 5|1,0"}, layout, (1280, 800))
    # centre pixel (124.5, 210) -> (124.5 + 0.5) * 1000 / 1280, (210 + 0.5) * 1000 / 800
    assert args == {"label": "OK", "box": [98, 263], "end": [1000, 1]}
    with pytest.raises(KeyError, match="cancel"):
        resolve_args({"box": "@cancel"}, layout, (1280, 800))


def test_a_plain_string_is_left_alone() -> None:
    assert resolve_args({"text": "user@example.org", "key": "ctrl+a"}, {}, (100, 100)) == {
        "text": "user@example.org", "key": "ctrl+a"}


def test_the_desktop_suite_has_twenty_tasks_covering_the_kinds_of_input() -> None:
    suite = load_suite("desktop")
    names = [t.name for t in suite.tasks]
    assert len(names) >= 20 and len(set(names)) == len(names)
    tags = {tag for t in suite.tasks for tag in t.tags}
    assert {"click", "double-click", "right-click", "drag", "scroll", "unicode", "shortcut", "menu", "dialog",
            "multi-step"} <= tags
    for task in suite.tasks:
        assert task.solution and task.check is not None and task.instruction, task.name
        assert task.max_steps > len(task.solution)
        assert task.app[:3] == (sys.executable, "-m", "deskpilot.eval._tkapp")
    assert "desktop" in SUITES


def test_an_unknown_suite_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no suite 'nope'"):
        load_suite("nope")


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_a_suite_file_is_tasks_with_app_checker_and_solution(tmp_path: Path) -> None:
    path = _write(tmp_path, """
[suite]
name = "mine"
description = "two tasks"

[[task]]
name = "one"
instruction = "Click OK."
app = ["./app.py", "--big"]
check_command = "test -n \\"$DESKPILOT_EVAL_STATE\\""
solution = [{tool = "click_element", args = {label = "OK", box = "@ok"}},
            {tool = "scroll", args = {box = "@list"}, until = "row:x", repeat = 3}]
max_steps = 5
screen = [800, 600]

[[task]]
name = "two"
instruction = "Type."
app = "xterm"
check = "json:loads"
""")
    suite = load_suite(str(path))
    assert suite.name == "mine" and suite.ref == str(path.resolve())
    one, two = suite.tasks
    assert one.app == (str(tmp_path / "app.py"), "--big") and one.screen == (800, 600) and one.max_steps == 5
    assert one.check_command == ("sh", "-c", 'test -n "$DESKPILOT_EVAL_STATE"')
    assert one.solution == (Step("click_element", {"label": "OK", "box": "@ok"}),
                            Step("scroll", {"box": "@list"}, until="row:x", repeat=3))
    assert two.app == ("xterm",) and two.check == "json:loads" and two.solution == ()
    # The command checker gets the state in a file named by DESKPILOT_EVAL_STATE.
    assert run_check(one, {"x": 1}) == (True, "")


@pytest.mark.parametrize(("body", "message"), [
    ('name = "a"\ninstruction = "i"\napp = "x"\ncheck = "m:f"\nwhat = 1', "unknown keys \\['what'\\]"),
    ('name = "a"\ninstruction = "i"\ncheck = "m:f"', "'app' is required"),
    ('name = "a"\ninstruction = "i"\napp = "x"', "give one of 'check'"),
    ('name = "a"\ninstruction = "i"\napp = "x"\ncheck = "m:f"\nsolution = [{click = 1}]', "a solution step"),
])
def test_a_bad_suite_file_says_what_is_wrong(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_suite(str(_write(tmp_path, "[[task]]\n" + body + "\n")))


def test_python_checkers_give_a_verdict_and_what_they_saw() -> None:
    task = Task("t", "i", ("x",), check=lambda s: (s["n"] == 2, f"n={s['n']}"))
    assert task.verdict({"n": 2}) == (True, "n=2") and task.verdict({"n": 1}) == (False, "n=1")
    assert Task("t", "i", ("x",), check=lambda s: bool(s)).verdict({}) == (False, "")
    with pytest.raises(ConfigError, match="cannot load the checker"):
        Task("t", "i", ("x",), check="deskpilot:no_such_thing").verdict({})


def test_a_checker_module_next_to_the_suite_file_imports_by_name(tmp_path: Path) -> None:
    (tmp_path / "eval_unit_checks_7f3a.py").write_text("def done(state):\n    return state['n'] > 1, 'n'\n",
                                                        encoding="utf-8")
    suite = load_suite(str(_write(tmp_path, '[[task]]\nname = "a"\ninstruction = "i"\napp = "x"\n'
                                            'check = "eval_unit_checks_7f3a:done"\n')))
    assert suite.tasks[0].verdict({"n": 2}) == (True, "n") and suite.tasks[0].verdict({"n": 0})[0] is False


def test_a_dollar_name_is_a_text_the_app_read() -> None:
    assert resolve_args({"text": "$user", "box": "@f"}, {"f": [0, 0, 10, 10]}, (10, 10), {"user": "ana"}) == {
        "text": "ana", "box": [500, 500]}
    with pytest.raises(KeyError, match="password"):
        resolve_args({"text": "$password"}, {}, (10, 10), {"user": "ana"})
    assert resolve_args({"text": "$"}, {}, (10, 10)) == {"text": "$"}  # a lone dollar is text


def test_the_miniwob_suite_names_its_ci_subset_and_what_it_needs() -> None:
    from deskpilot.eval._miniwob import CI_TASKS, SOLVERS

    suite = load_suite("miniwob")
    assert [t.name for t in suite.tasks] == list(SOLVERS) and set(CI_TASKS) <= set(SOLVERS)
    assert all(t.solution and t.screen == (640, 480) for t in suite.tasks)


def test_an_unavailable_suite_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from deskpilot.eval import Suite, run_eval

    suite = Suite("x", (Task("t", "i", ("x",), check="json:loads"),), ref="x", unavailable="the x suite needs y")
    with pytest.raises(ConfigError, match="the x suite needs y"):
        run_eval(suite, tmp_path / "o")
    assert not (tmp_path / "o").exists()
