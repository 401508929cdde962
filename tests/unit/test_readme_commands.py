"""Every `deskpilot ...` and `./dev demo ...` line in README's shell blocks parses with
today's CLI (flags and names, e.g. the user-facing tool-set and variant names, exist)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from deskpilot.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def commands() -> list[list[str]]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        # A line ending in a backslash continues on the next: one command, as the shell reads it.
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == [".venv/bin/deskpilot"]:
                words[0] = "deskpilot"
            if words[:2] == ["./dev", "demo"]:
                words = ["deskpilot", *words[1:]]
            if words[:1] == ["deskpilot"]:
                out.append(words[1:])
    return out


def test_readme_names_commands() -> None:
    found = {argv[0] for argv in commands() if argv}
    assert {"demo", "run", "panel", "shot", "testserver", "replay", "report", "doctor"} <= found


@pytest.mark.parametrize("argv", commands(), ids=lambda a: " ".join(a)[:60])
def test_readme_command_parses(argv: list[str]) -> None:
    if argv == ["--help"]:
        return
    build_parser().parse_args(argv)  # argparse exits (SystemExit 2) on an unknown flag or value


def test_top_level_help_defines_the_seed_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for line in (
        "seed 000  single mode, tool set element",
        "seed 002  team mode, variant commander/operator",
        "seed 004  stateless mode",
        "deskpilot demo --all",
    ):
        assert line in out


def test_scenario_lists_answer_to_the_tool_set_names() -> None:
    from deskpilot.agent._scenarios import all_scenarios, resolve_scenario

    scenarios = all_scenarios()
    assert resolve_scenario("pointer:3", scenarios) == resolve_scenario("seed001:3", scenarios)
    assert resolve_scenario("element:2", scenarios) == resolve_scenario("seed000:2", scenarios)
