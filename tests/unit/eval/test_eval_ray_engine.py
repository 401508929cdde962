"""The Ray engine's pure parts: an attempt's files packed on the node and unpacked into
--out with the record's paths pointing there; the engine's checks before Ray starts."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from deskpilot.eval import Attempt, RayEngine
from deskpilot.eval._engine import SESSION_ENV
from deskpilot.eval._ray import (
    _group_of_run,
    _NodeSessions,
    forwarded_env,
    pack_attempt,
    unpack_attempt,
)


def _session_files(out: Path, stem: str, run: str) -> Path:
    run_dir = out / "runs" / run
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}", encoding="utf-8")
    (run_dir / "report.html").write_text("<html>", encoding="utf-8")
    (run_dir / "screen_0001.png").write_bytes(b"\x89PNG" + bytes(range(256)))
    sessions = out / "sessions"
    sessions.mkdir(exist_ok=True)
    for suffix in ("spec.json", "result.json", "log"):
        (sessions / f"{stem}.{suffix}").write_text(suffix, encoding="utf-8")
    return run_dir


def test_an_attempts_files_travel_to_the_driver_and_its_paths_follow(tmp_path: Path) -> None:
    node, driver = tmp_path / "node" / "out", tmp_path / "driver"
    run_dir = _session_files(node, "click-a2-t1", "click/a2-t1/20260101-000000")
    # Another attempt's files on the same node stay there (and out of this archive).
    _session_files(node, "click-a1-t1", "click/a1-t1/20260101-000001")
    (node / "sessions" / "click-a2-t10.log").write_text("another try", encoding="utf-8")
    data = pack_attempt(node, Attempt("click", 2, 1, 60.0))
    record = {"task": "click", "run_dir": str(run_dir), "report": str(run_dir / "report.html"), "steps": 3,
              "detail": f"not a path of ours: {node}", "other": f"{node}-sibling/file"}
    moved = unpack_attempt(data, driver, record, str(node))
    target = driver.resolve() / "runs" / "click" / "a2-t1" / "20260101-000000"
    assert moved["run_dir"] == str(target) and moved["report"] == str(target / "report.html")
    assert moved["steps"] == 3 and moved["detail"] == record["detail"] and moved["other"] == record["other"]
    assert (target / "screen_0001.png").read_bytes() == (run_dir / "screen_0001.png").read_bytes()
    assert sorted(p.name for p in (driver / "sessions").iterdir()) == [
        "click-a2-t1.log", "click-a2-t1.result.json", "click-a2-t1.spec.json"]
    assert not (driver / "runs" / "click" / "a1-t1").exists()


def test_an_attempt_that_wrote_nothing_packs_an_empty_archive(tmp_path: Path) -> None:
    data = pack_attempt(tmp_path, Attempt("t", 1, 1, 1.0))
    record = unpack_attempt(data, tmp_path / "driver", {"task": "t", "run_dir": None}, str(tmp_path))
    assert record == {"task": "t", "run_dir": None}


def test_an_archive_cannot_write_outside_out(tmp_path: Path) -> None:
    # The driver trusts its actors, but an archive is still unpacked with tarfile's data filter.
    evil = tmp_path / "evil.tar"
    (tmp_path / "payload").write_text("x", encoding="utf-8")
    with tarfile.open(evil, "w") as tar:
        tar.add(tmp_path / "payload", arcname="../escaped")
    with pytest.raises(tarfile.OutsideDestinationError):
        unpack_attempt(evil.read_bytes(), tmp_path / "driver", {}, "/nowhere")
    assert not (tmp_path / "escaped").exists()


def test_the_engine_checks_its_arguments_without_starting_ray() -> None:
    with pytest.raises(ValueError, match="desktops"):
        RayEngine(desktops=0)
    engine = RayEngine("127.0.0.1:1", desktops=3)
    assert engine.name == "ray" and engine.parallel == 3 and engine.startup_s is None


def test_the_agents_settings_travel_from_the_driver_to_the_sessions_on_the_nodes(tmp_path: Path) -> None:
    # An actor's environment is its raylet's: the driver's model settings and API key must be
    # handed over, and nothing else of the driver's (its DISPLAY, PATH, secrets of its own).
    driver = {"LMSTUDIO_API_KEY": "k", "LMSTUDIO_TEMPERATURE": "0", "AGENT_MAX_STEPS": "9",
              "OPENAI_API_KEY": "o", "DISPLAY": ":0", "PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x"}
    sent = forwarded_env(driver)
    assert sent == {"LMSTUDIO_API_KEY": "k", "LMSTUDIO_TEMPERATURE": "0", "AGENT_MAX_STEPS": "9",
                    "OPENAI_API_KEY": "o"}
    sessions = _NodeSessions(tmp_path / "session.pgid")
    sessions.fork_server = False
    sessions.open("run-token", sent)
    try:
        env = sessions._env
        assert env["LMSTUDIO_API_KEY"] == "k" and env[SESSION_ENV] == "run-token" and "DISPLAY" not in env
    finally:
        sessions.close()
    sessions.on_started(4242)
    assert (tmp_path / "session.pgid").read_text(encoding="ascii") == "4242"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_restarted_actor_stops_only_a_group_of_its_own_run() -> None:
    # The group id a dead actor noted may be reused by the time its successor starts.
    env = {**os.environ, SESSION_ENV: "the-run"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env, start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not _group_of_run(proc.pid, "the-run") and time.monotonic() < deadline:
            time.sleep(0.05)  # the child's environ is readable once it has exec'd
        assert _group_of_run(proc.pid, "the-run")
        assert not _group_of_run(proc.pid, "another-run")
        assert not _group_of_run(other.pid, "the-run")
    finally:
        for p in (proc, other):
            p.kill()
            p.wait()
