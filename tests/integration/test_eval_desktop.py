"""The `desktop` suite: the README's `deskpilot eval desktop --scripted --parallel 4` passes whole,
and no checker passes on an app nobody touched (a checker that cannot fail scores nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deskpilot.agent import validate_run_dir
from deskpilot.eval import load_suite
from deskpilot.eval._session import AppProcess
from deskpilot.eval._task import run_check

pytestmark = pytest.mark.x11


def test_the_whole_desktop_suite_passes_scripted_with_four_sessions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    proc = subprocess.run([sys.executable, "-m", "deskpilot", "eval", "desktop", "--scripted", "--parallel", "4",
                           "--out", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400)
    suite = load_suite("desktop")
    n = len(suite.tasks)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f"desktop: {n}/{n} succeeded (100%), 0 infrastructure errors" in proc.stdout
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["task"] for r in lines) == sorted(t.name for t in suite.tasks)
    for record in lines:
        assert record["success"] is True and record["outcome"] == "answered" and record["final"] is True, record
        run_dir = Path(record["run_dir"])
        assert validate_run_dir(run_dir) == [], record["task"]
        # The solution went through the agent: one turn per scripted step, and the run's own report.
        solution = suite.task(record["task"]).solution
        if not any(step.until for step in solution):  # a scroll repeats until its target shows
            assert record["steps"] == len(solution) + 1, record
        assert Path(record["report"]).is_file()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["tasks"], summary["attempts"], summary["successes"], summary["success_rate"]) == (n, n, n, 1.0)
    assert summary["parallel"] == 4 and summary["tasks_per_hour"] > 0 and summary["startup_s"]["max"] > 0
    assert summary["peak_rss_kb"]["agent"] > 10_000
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count('<a href="runs/') == n and f"{n}/{n} attempts succeeded" in report
    # Progress lines as results arrive (stderr is not a terminal here: one line per result).
    assert proc.stderr.count(" ok, ") >= n


def test_no_checker_passes_on_the_untouched_app(xvfb: str) -> None:
    """Each task's checker, on the state of its app as it starts: a failure, every one."""
    from concurrent.futures import ThreadPoolExecutor

    from deskpilot.eval import Task

    def verdict(task: Task) -> tuple[str, bool, str]:
        app = AppProcess(task.app)
        try:
            state = app.query("state")
        finally:
            app.close()
        state.pop("type")
        return (task.name, *run_check(task, state))

    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(verdict, load_suite("desktop").tasks))
    assert len(verdicts) == len(load_suite("desktop").tasks)
    assert [f"{name}: {detail}" for name, ok, detail in verdicts if ok] == []
