"""Scenarios: the seeds' numbering, names, free-form tasks and user TOML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskpilot.agent._scenarios import (
    BUILTIN_SCENARIOS,
    DEMO_TEXT,
    all_scenarios,
    load_scenario_file,
    resolve_scenario,
)
from deskpilot.errors import ConfigError


def test_builtins_follow_the_seeds() -> None:
    seed000 = [s for s in BUILTIN_SCENARIOS if s.group == "seed000"]
    seed001 = [s for s in BUILTIN_SCENARIOS if s.group == "seed001"]
    assert [s.index for s in seed000] == [1, 2, 3] and [s.index for s in seed001] == [1, 2, 3, 4]
    assert "Grok" in seed000[0].title and "Start menu" in seed000[1].title and "Notepad++" in seed000[2].title
    assert [s.name for s in seed001] == ["cursor-observation", "center-cursor", "click", "type-text"]
    assert all(s.toolset == "seed001" for s in seed001)
    demo = next(s for s in BUILTIN_SCENARIOS if s.name == "demo")
    assert DEMO_TEXT in demo.task and demo.toolset == "seed000"


def test_resolve_numbers_names_and_free_text() -> None:
    all_ = all_scenarios(env={})
    assert resolve_scenario("2", all_).name == "start-menu"  # python main.py 2 (seed 000)
    assert resolve_scenario("2", all_, toolset="seed001").name == "center-cursor"
    assert resolve_scenario("2", all_, toolset="extended").name == "start-menu"
    assert resolve_scenario("seed001:4", all_).name == "type-text"
    assert resolve_scenario("001:1", all_).name == "cursor-observation"
    assert resolve_scenario("demo", all_).name == "demo"
    free = resolve_scenario("Open the calculator and compute 2+2", all_)
    assert free.group == "task" and free.task == "Open the calculator and compute 2+2"
    with pytest.raises(ConfigError, match="no scenario 9 in seed000; it has: 1 \\(grok"):
        resolve_scenario("9", all_)
    with pytest.raises(ConfigError, match="empty"):
        resolve_scenario("  ", all_)


def test_user_files(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(
        '[[scenario]]\nname = "notes"\ntask = "Write a note."\ntoolset = "extended"\nmax_steps = 20\n'
        '[[scenario]]\nname = "calc"\ntask = "Compute."\n'
    )
    loaded = load_scenario_file(f)
    assert [(s.name, s.index, s.toolset, s.max_steps) for s in loaded] == [
        ("notes", 1, "extended", 20),
        ("calc", 2, None, None),
    ]
    config_data = {"scenario": [{"name": "from-config", "task": "Do it."}]}
    env = {"DESKPILOT_SCENARIOS": str(f)}
    all_ = all_scenarios(config_data=config_data, env=env)
    users = [s for s in all_ if s.group == "user"]
    assert [(s.name, s.index) for s in users] == [("from-config", 1), ("notes", 2), ("calc", 3)]
    assert resolve_scenario("user:3", all_).name == "calc"
    assert resolve_scenario("notes", all_).max_steps == 20


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[scenario]]\ntask = "x"\n', "non-empty string 'name'"),
        ('[[scenario]]\nname = "a"\n', "needs a non-empty string 'task'"),
        ('[[scenario]]\nname = "a"\ntask = "x"\ntoolset = "seed999"\n', "toolset 'seed999'"),
        ('[[scenario]]\nname = "a"\ntask = "x"\nmax_steps = 0\n', "max_steps"),
        ('[[scenario]]\nname = "a"\ntask = "x"\ncolour = "red"\n', "unknown scenario keys"),
        ("title = 'nothing'\n", "no [[scenario]] tables"),
        ("[[scenario]\n", "not valid TOML"),
    ],
)
def test_bad_files_are_explained(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("(", r"\(")):
        load_scenario_file(f)


def test_duplicate_names_refused(tmp_path: Path) -> None:
    f = tmp_path / "dup.toml"
    f.write_text('[[scenario]]\nname = "demo"\ntask = "x"\n')
    with pytest.raises(ConfigError, match="already used"):
        all_scenarios(files=[f], env={})
    with pytest.raises(ConfigError, match="does not exist"):
        all_scenarios(files=[tmp_path / "none.toml"], env={})


def test_scenarios_command_lists_and_shows(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    from deskpilot.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DESKPILOT_SCENARIOS", raising=False)
    assert main(["scenarios", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed][:3] == ["grok-investigation", "start-menu", "notepad-plus-plus"]
    assert main(["scenarios", "2", "--toolset", "seed001", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["name"] == "center-cursor"
    assert main(["scenarios", "seed001:9"]) == 1
    assert "no scenario 9 in seed001" in capsys.readouterr().err
