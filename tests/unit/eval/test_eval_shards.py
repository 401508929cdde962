"""--shard K/N (a Kubernetes Indexed Job's pod runs one shard) and --merge (the shards'
results joined into one --out)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from deskpilot._errors import ConfigError
from deskpilot.cli import main
from deskpilot.eval import AttemptQueue, load_suite, merge_results, run_eval
from deskpilot.eval._driver import parse_shard, shard_tasks
from deskpilot.eval._results import ResultsLog, summarize


def test_shard_k_of_n_takes_every_nth_task_in_suite_order() -> None:
    tasks = [f"t{i}" for i in range(7)]
    assert shard_tasks(tasks, 0, 3) == ["t0", "t3", "t6"]
    assert shard_tasks(tasks, 2, 3) == ["t2", "t5"]
    assert shard_tasks(tasks, 0, 1) == tasks
    shards = [shard_tasks(tasks, k, 4) for k in range(4)]
    assert sorted(t for shard in shards for t in shard) == sorted(tasks)  # every task in exactly one shard


@pytest.mark.parametrize(("text", "expected"), [("0/4", (0, 4)), ("3/4", (3, 4)), ("0/1", (0, 1))])
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "1", "a/b", "1/2/3", ""])
def test_a_bad_shard_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="K/N"):
        parse_shard(text)


class _RecordingEngine:
    """Runs nothing: answers every attempt as a success at once (the driver's part alone)."""

    name = "recording"
    parallel = 1
    startup_s = None

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, queue: AttemptQueue, spec: Mapping[str, Any], stop: threading.Event) -> None:
        while (attempt := queue.take()) is not None:
            self.ran.append(attempt.task)
            queue.done(attempt, {"task": attempt.task, "attempt": attempt.attempt, "try": attempt.try_,
                                 "success": True, "error_kind": None})


@pytest.mark.skipif(sys.platform == "win32", reason="deskpilot eval is not offered on Windows")
def test_run_eval_runs_only_its_shard_and_says_so(tmp_path: Path) -> None:
    names = [t.name for t in load_suite("desktop").tasks]
    engine = _RecordingEngine()
    outcome = run_eval("desktop", tmp_path / "o", engine=engine, scripted=True, shard=(1, 5))
    assert engine.ran == names[1::5] and outcome.summary["shard"] == "1/5"
    assert list(outcome.summary["per_task"]) == names[1::5]
    # After --tasks: the shard is of the tasks chosen.
    engine = _RecordingEngine()
    run_eval("desktop", tmp_path / "p", engine=engine, scripted=True, only=names[:4], shard=(0, 2))
    assert engine.ran == [names[0], names[2]]
    with pytest.raises(ConfigError, match=r"K must be in 0\.\.N-1"):
        run_eval("desktop", tmp_path / "q", engine=engine, scripted=True, shard=(2, 2))


def _shard(root: Path, name: str, records: list[dict[str, object]], wall: float, order: list[str]) -> Path:
    """A shard's --out as a pod left it: paths under the pod's own directory."""
    out = root / name
    log_dir = out
    log_dir.mkdir(parents=True)
    log = ResultsLog(out)
    pod_out = f"/results/{name}"
    for record in records:
        task = record["task"]
        run = out / "runs" / str(task) / "a1-t1" / "20260101-000000"
        run.mkdir(parents=True)
        (run / "report.html").write_text("<html>", encoding="utf-8")
        (out / "sessions").mkdir(exist_ok=True)
        (out / "sessions" / f"{task}-a1-t1.log").write_text("log", encoding="utf-8")
        log.append({**record, "attempt": 1, "try": 1, "final": True,
                    "run_dir": f"{pod_out}/runs/{task}/a1-t1/20260101-000000",
                    "report": f"{pod_out}/runs/{task}/a1-t1/20260101-000000/report.html"})
    summary = summarize(log.load(), suite="desktop", wall_s=wall, ran=len(records), parallel=2, engine="local",
                        scripted=True, tasks=order)
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return out


def test_merge_joins_the_shards_results_files_and_summary(tmp_path: Path) -> None:
    a = _shard(tmp_path, "shard-0", [{"task": "click-button", "success": True, "error_kind": None},
                                     {"task": "checkboxes", "success": False, "error_kind": None}], 30.0,
               ["click-button", "checkboxes"])
    b = _shard(tmp_path, "shard-1", [{"task": "click-color", "success": True, "error_kind": None}], 20.0,
               ["click-color"])
    out = tmp_path / "all"
    order = [t.name for t in load_suite("desktop").tasks]
    summary = merge_results([a, b], out, tasks=order)
    # The suite's order, not the shards'.
    assert list(summary["per_task"]) == ["click-button", "click-color", "checkboxes"]
    assert summary["attempts"] == 3 and summary["successes"] == 2 and summary["parallel"] == 4
    assert summary["wall_s"] == 30.0  # the shards ran side by side: the longest one
    assert summary["merged"] == [str(a), str(b)]
    lines = ResultsLog(out).load()
    assert [r["task"] for r in lines] == ["click-button", "checkboxes", "click-color"]
    for record in lines:
        assert Path(record["report"]).is_file() and str(record["run_dir"]).startswith(str(out.resolve()))
    assert (out / "sessions" / "click-color-a1-t1.log").is_file()
    report = (out / "report.html").read_text(encoding="utf-8")
    assert 'href="runs/click-color/a1-t1/20260101-000000/report.html"' in report
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["attempts"] == 3
    with pytest.raises(ValueError, match="already holds results"):
        merge_results([a], out)


def test_merge_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _shard(tmp_path, "shard-0", [{"task": "click-button", "success": True, "error_kind": None}], 3.0,
               ["click-button"])
    b = _shard(tmp_path, "shard-1", [{"task": "click-color", "success": False, "error_kind": None}], 4.0,
               ["click-color"])
    assert main(["eval", "desktop", "--merge", str(a), str(b), "--out", str(tmp_path / "all")]) == 1  # one failed
    out = capsys.readouterr().out
    assert "2 shards, 1/2 succeeded (50%)" in out
    assert main(["eval", "--merge", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 1
    assert "no results.jsonl" in capsys.readouterr().err
