"""Run files on a disk that fills up, turns read-only or disappears (issue 14).

The disk cases run on a real small tmpfs and a real read-only bind mount (root only:
skipped with the reason otherwise). The run itself is real: the loop, the HTTP client,
the local test model server, the run directory; only the desktop is simulated.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import load_config, run_agent
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.rundir._writer import LineFile, RunLogError
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(
            f"cannot mount here (needs root and mount permission): {proc.stderr.strip() or proc.returncode}"
        )


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def lines_of(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), (
        f"{path.name} ends in a partial line: {data[-80:]!r}"
    )
    return [orjson.loads(line) for line in data.splitlines()]


def leftovers(run_dir: Path) -> list[str]:
    return [p.name for p in run_dir.rglob("*") if p.name.endswith(".tmp")]


def run_typing(
    tmp_path: Path, runs_dir: Path, *, on_request: Any = None, mode: str = "single", **flags: Any
) -> tuple[Any, SimulatedDesktop]:
    discover_modes()
    desk = SimulatedDesktop()

    class Policy(ScriptedPolicy):
        def respond(self, request: Any) -> Any:
            if on_request is not None:
                on_request(self.position + 1)
            return super().respond(request)

    if mode == "stateless":
        text = orjson.dumps(
            {
                "observation": "typing",
                "bboxes": [],
                "actions": [{"name": "type", "text": "hello " * 40}],
            }
        ).decode()
        reply = Reply(content=text)
    else:
        reply = Reply(
            tool_calls=[("type_text", {"text": "hello " * 40})],
            content="Typing the greeting again.",
        )
    with ModelServer(Policy([reply], on_exhausted="repeat")) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(runs_dir),
                "run.quiet": True,
                "agent.mode": mode,
                "agent.max_steps": 400,
                "stateless.panel": "off",
                "stateless.action_delay_seconds": 0,
                "stateless.capture_scale_percent": 50,
                **flags,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "type hello until told to stop",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    return result, desk


# -- the one line writer -----------------------------------------------------------------------


def test_a_failed_append_is_rolled_back_to_the_last_whole_line(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        log = LineFile(disk / "turns.jsonl")
        log.append(b'{"turn": 1}\n')
        with pytest.raises(RunLogError, match="no space left"):
            for _ in range(10_000):
                log.append(b'{"turn": 2, "pad": "' + b"y" * 3000 + b'"}\n')
        data = (disk / "turns.jsonl").read_bytes()
        assert data.endswith(b"}\n") and all(orjson.loads(line) for line in data.splitlines())
        with pytest.raises(RunLogError):  # refused from now on, nothing half-written later
            log.append(b'{"turn": 3}\n')
        assert (disk / "turns.jsonl").read_bytes() == data
        log.close()


def test_appending_to_a_deleted_file_is_a_failure_not_silence(tmp_path: Path) -> None:
    log = LineFile(tmp_path / "exchange.jsonl")
    log.append(b"{}\n")
    (tmp_path / "exchange.jsonl").unlink()
    with pytest.raises(RunLogError, match="deleted"):
        log.append(b"{}\n")
    log.close()


def test_team_execution_log_on_a_full_disk_keeps_whole_lines_and_reports_once(
    tmp_path: Path,
) -> None:
    from deskpilot.agent.modes.team._execlog import ExecutionLog

    failures: list[RunLogError] = []
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        log = ExecutionLog.in_directory(disk, on_failure=failures.append)
        for number in range(200):
            log.api_response(number, "executor", {"content": "z" * 2000})
        log.close()
        assert len(failures) == 1 and "no space left" in str(failures[0])
        data = (disk / "execution_log.txt").read_bytes()
        assert data.endswith(b"\n") and data.count(b"API RESPONSE") == log.lines


# -- whole runs --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["single", "stateless"])
def test_a_full_disk_stops_the_run_cleanly(tmp_path: Path, mode: str) -> None:
    with small_tmpfs(tmp_path / "disk", "320k") as disk:
        result, desk = run_typing(tmp_path, disk / "runs", mode=mode)
        run_dir = result.run_dir
        assert result.outcome == "error"
        assert "no space left" in (result.error or ""), result.error
        summary = orjson.loads((run_dir / "summary.json").read_bytes())
        assert summary["outcome"] == "error" and "no space left" in summary["error"]
        for name in ("turns.jsonl", "exchange.jsonl"):
            lines_of(run_dir / name)
        if mode == "stateless":
            log = (run_dir / "main.log").read_bytes()
            assert log == b"" or log.endswith(b"\n"), log[-200:]
        assert leftovers(run_dir) == []
        assert desk.events[-1]["action"] == "release_all" or any(
            e["action"] == "release_all" for e in desk.events
        ), "input was not released"


def test_a_deleted_run_directory_stops_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"

    def delete(request_number: int) -> None:
        if request_number == 3:
            (run_dir,) = runs.iterdir()
            shutil.rmtree(run_dir)

    result, desk = run_typing(tmp_path, runs, on_request=delete)
    assert result.outcome == "error" and "deleted" in (result.error or ""), result.error
    assert result.steps <= 4
    assert any(e["action"] == "release_all" for e in desk.events)


def test_a_read_only_screenshot_directory_stops_the_run(tmp_path: Path) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()
    _mount("--bind", str(shots), str(shots))
    try:
        _mount("-o", "remount,bind,ro", str(shots))
        result, desk = run_typing(tmp_path, tmp_path / "runs", **{"run.dump_dir": str(shots)})
    finally:
        subprocess.run(["umount", "-l", str(shots)], check=False)
    assert result.outcome == "error" and "read-only" in (result.error or ""), result.error
    summary = orjson.loads((result.run_dir / "summary.json").read_bytes())
    assert summary["outcome"] == "error" and "read-only" in summary["error"]
    lines_of(result.run_dir / "turns.jsonl")
    assert any(e["action"] == "release_all" for e in desk.events)


def test_a_full_disk_stops_a_team_run_cleanly(tmp_path: Path) -> None:
    from deskpilot.agent.modes.team import VARIANTS

    v = VARIANTS["003"]
    plan = Reply(
        content="PLAN",
        tool_calls=[(v.tool_name("plan"), {"instructions": "type hello", "reasoning": "go"})],
    )
    act = Reply(
        content="LAST_ACTION_RESULT: ok\nNEXT_STEP: type",
        tool_calls=[(v.tool_name("type"), {"reasoning": "type it", "text": "hello " * 40})],
    )

    class Roles:
        def respond(self, request: Any) -> Any:
            return plan if v.tool_name("plan") in request.tool_names else act

    discover_modes()
    desk = SimulatedDesktop()
    with small_tmpfs(tmp_path / "disk", "320k") as disk, ModelServer(Roles()) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(disk / "runs"),
                "run.quiet": True,
                "agent.mode": "team",
                "team.variant": "003",
                "agent.max_steps": 400,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "type",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
        assert result.outcome == "error" and "no space left" in (result.error or ""), result.error
        run_dir = result.run_dir
        assert orjson.loads((run_dir / "summary.json").read_bytes())["outcome"] == "error"
        for name in ("turns.jsonl", "exchange.jsonl"):
            lines_of(run_dir / name)
        assert (run_dir / "execution_log.txt").read_bytes().endswith(b"\n")
        assert leftovers(run_dir) == []
        assert any(e["action"] == "release_all" for e in desk.events)
