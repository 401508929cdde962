"""`deskpilot eval` when sessions fail: an app or Xvfb that dies, a hung session, a killed agent
(each an infrastructure error, retried within a bound, the suite going on), and Ctrl+C
(every session stopped, finished results kept, nothing left running, --resume goes on).

Real parts: the command in a subprocess, real Xvfb displays, the apps, the agent and the
built-in model server; the faults are real processes dying and hanging
(tests/integration/apps/eval_fault_app.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.x11

FAULT_APP = Path(__file__).resolve().parent / "apps" / "eval_fault_app.py"
CHECK = "import json, os, sys; sys.exit(0 if json.load(open(os.environ['DESKPILOT_EVAL_STATE']))['ok'] else 1)"


def _suite(tmp_path: Path, modes: dict[str, str]) -> Path:
    """A suite file: one task per (name, fault mode) on the fault app."""
    lines = ['[suite]\nname = "faults"\n']
    for name, mode in modes.items():
        app = json.dumps([sys.executable, str(FAULT_APP), mode, str(tmp_path / f"{name}.marker")])
        lines.append(f"""
[[task]]
name = "{name}"
instruction = "Wait a moment, then say you are done."
app = {app}
check_command = {json.dumps([sys.executable, "-c", CHECK])}
max_steps = 4
max_seconds = 20
screen = [640, 480]
solution = [{{tool = "wait", args = {{seconds = 0.2}}}}]
""")
    path = tmp_path / "faults.toml"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _env(tag: str) -> dict[str, str]:
    # Every process a session starts inherits this: how the test finds what was left running.
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env["EVAL_TEST_TAG"] = tag
    return env


def _left_running(tag: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"EVAL_TEST_TAG={tag}".encode() in environ.split(b"\0"):
            found.append(f"{entry.name}: {cmdline}")
    return found


def _wait_gone(tag: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := _left_running(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _results(out: Path) -> list[dict[str, object]]:
    data = (out / "results.jsonl").read_bytes()
    assert data.endswith(b"\n"), "results.jsonl ends on a whole line"
    return [json.loads(line) for line in data.splitlines()]


def _eval(*args: str, tag: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskpilot", "eval", *args], capture_output=True, text=True,
                          env=_env(tag), cwd=cwd, timeout=timeout)


def test_infrastructure_errors_are_recorded_retried_and_the_suite_goes_on(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    suite = _suite(tmp_path, {"app-dies": "app_dies", "display-dies": "display_dies",
                              "agent-killed": "kill_agent", "hangs": "hang", "fine": "ok"})
    out = tmp_path / "out"
    proc = _eval(str(suite), "--scripted", "--parallel", "3", "--session-timeout", "12", "--retries", "1",
                 "--out", str(out), tag=tag, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _results(out)
    by_task: dict[str, list[dict[str, object]]] = {}
    for line in lines:
        by_task.setdefault(str(line["task"]), []).append(line)
    expected = {"app-dies": "app_died", "display-dies": "display_died", "agent-killed": "session_killed",
                "hangs": "timeout"}
    for task, kind in expected.items():
        assert len(by_task[task]) == 2, by_task[task]
        first, second = sorted(by_task[task], key=lambda r: int(str(r["try"])))
        # The fault is the infrastructure's, never the model's failure: recorded, not final, retried.
        assert first["error_kind"] == kind, first
        assert first["final"] is False and first["success"] is False
        assert second["error_kind"] is None and second["success"] is True and second["final"] is True, second
    assert [r["success"] for r in by_task["fine"]] == [True]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["attempts"] == 5 and summary["successes"] == 5 and summary["success_rate"] == 1.0
    assert summary["error_kinds"] == {kind: 1 for kind in expected.values()}
    assert summary["infrastructure_errors"] == 4 and summary["unsettled"] == 0
    assert _wait_gone(tag) == []


def test_retries_are_bounded_and_an_unsettled_error_is_no_model_failure(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    suite = _suite(tmp_path, {"always-dies": "app_dies-always", "fine": "ok"})
    out = tmp_path / "out"
    proc = _eval(str(suite), "--scripted", "--parallel", "2", "--retries", "2", "--out", str(out), tag=tag,
                 cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # infrastructure errors left after retries
    dies = [r for r in _results(out) if r["task"] == "always-dies"]
    assert [r["try"] for r in dies] == [1, 2, 3]
    assert [r["final"] for r in dies] == [False, False, True]
    assert all(r["error_kind"] == "app_died" for r in dies)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["per_task"]["always-dies"]["results"] == ["error:app_died"]
    assert summary["unsettled"] == 1 and summary["per_task"]["fine"]["results"] == ["ok"]
    assert "always-dies: error:app_died" in proc.stdout
    assert _wait_gone(tag) == []


def test_ctrl_c_stops_every_session_keeps_results_and_resume_goes_on(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    out = tmp_path / "out"
    tasks = "click-button,checkboxes,type-unicode,menu-command,dialog-confirm,wizard"
    proc = subprocess.Popen([sys.executable, "-m", "deskpilot", "eval", "desktop", "--scripted", "--parallel", "2",
                             "--tasks", tasks, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(tag), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            results = out / "results.jsonl"
            if results.is_file() and results.read_bytes().count(b"\n") >= 1:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        else:
            pytest.fail("no result within 120 s")
        # Sessions are running now (the next ones started as the first ended).
        assert _left_running(tag), "sessions run while the suite runs"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted: every session stopped" in stdout
    assert _wait_gone(tag) == [], "no Xvfb, app or agent left running"
    kept = _results(out)
    assert 1 <= len(kept) < 6 and all(r["final"] and r["success"] for r in kept)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["interrupted"] is True and summary["attempts"] == len(kept)
    # --resume runs only what is missing.
    again = _eval("desktop", "--scripted", "--parallel", "2", "--tasks", tasks, "--out", str(out), "--resume",
                  tag=tag, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    finals = [(r["task"], r["attempt"]) for r in _results(out) if r["final"]]
    assert sorted(finals) == sorted((t, 1) for t in tasks.split(","))
    # Without --resume, a directory with results is refused rather than mixed.
    refused = _eval("desktop", "--scripted", "--tasks", "click-button", "--out", str(out), tag=tag, cwd=tmp_path)
    assert refused.returncode != 0 and "--resume" in refused.stderr
    assert _wait_gone(tag) == []


def test_without_the_fork_server_each_session_is_a_fresh_process_and_faults_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskpilot.eval import LocalEngine, run_eval

    tag = uuid.uuid4().hex
    monkeypatch.setenv("EVAL_TEST_TAG", tag)
    monkeypatch.delenv("DISPLAY", raising=False)
    suite = _suite(tmp_path, {"agent-killed": "kill_agent", "hangs": "hang", "fine": "ok"})
    outcome = run_eval(str(suite), tmp_path / "out", engine=LocalEngine(2, fork_server=False), scripted=True,
                       retries=1, timeout=12)
    lines = _results(tmp_path / "out")
    kinds = {(r["task"], r["try"]): r["error_kind"] for r in lines}
    assert kinds == {("agent-killed", 1): "session_killed", ("agent-killed", 2): None, ("hangs", 1): "timeout",
                     ("hangs", 2): None, ("fine", 1): None}
    assert outcome.summary["successes"] == 3 and not outcome.interrupted
    assert _wait_gone(tag) == []
