"""`./dev` with no command prints its usage, cleanly (no install is started for that)."""

from __future__ import annotations

import subprocess
from pathlib import Path

DEV = Path(__file__).resolve().parents[2] / "dev"


def test_dev_without_a_command_prints_clean_usage() -> None:
    done = subprocess.run(["bash", str(DEV)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "deskpilot's one entry point for newcomers and CI."
    for command in ("./dev demo", "./dev test", "./dev bench", "./dev setup"):
        assert any(line.strip().startswith(command) for line in lines), command
    # only the comment block: no '#' left, no line of the script itself (it printed `set -euo pipefail`)
    assert not any(
        line.startswith("#") or "set -euo" in line or "pipefail" in line for line in lines
    )


def test_dev_with_an_unknown_command_says_so() -> None:
    done = subprocess.run(["bash", str(DEV), "nope"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "unknown command 'nope'" in done.stderr and "./dev demo" in done.stderr


def test_dev_apt_list_has_what_a_stock_debian_needs_to_build_and_render() -> None:
    text = DEV.read_text(encoding="utf-8")
    start = text.index("APT_PACKAGES=(") + len("APT_PACKAGES=(")
    apt = text[start : text.index(")", start)].split()
    assert {"python3-venv", "python3-dev", "gcc", "fonts-noto-cjk"} <= set(apt)
