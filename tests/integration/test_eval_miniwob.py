"""The `miniwob` suite: MiniWoB++ pages from the miniwob package in a real Chromium window on each
session's display, scored by the page's own reward. CI runs a subset (CI_TASKS); the whole
suite is `deskpilot eval miniwob --scripted`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deskpilot.eval import load_suite
from deskpilot.eval._miniwob import CI_TASKS
from deskpilot.eval._session import AppProcess
from deskpilot.eval._task import run_check

pytestmark = [pytest.mark.x11, pytest.mark.browser]


def test_a_subset_of_miniwob_passes_scripted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "eval", "miniwob", "--scripted", "--parallel", "2",
                           "--tasks", ",".join(CI_TASKS), "--out", str(out)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=280)
    n = len(CI_TASKS)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f"miniwob: {n}/{n} succeeded (100%), 0 infrastructure errors" in proc.stdout
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for record in lines:
        # Success is the page's own reward, read after the agent ran through its real input path.
        assert record["success"] is True and record["detail"].startswith("reward 1"), record
        assert record["steps"] == len(load_suite("miniwob").task(record["task"]).solution) + 1


def test_the_reward_is_no_success_before_anyone_acts(xvfb: str) -> None:
    task = load_suite("miniwob").task("click-button")
    app = AppProcess(task.app)
    try:
        state = app.query("state")
        layout = app.query("layout")
    finally:
        app.close()
    state.pop("type")
    assert state["done"] is False and run_check(task, state)[0] is False
    # The solver found the button the query names, on screen in root pixels.
    x, y, w, h = layout["widgets"]["target"]
    assert 0 <= x < 640 and 0 <= y < 480 and w > 10 and h > 10
