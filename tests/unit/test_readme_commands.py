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
        for line in block.splitlines():
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
