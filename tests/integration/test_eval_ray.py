"""`deskpilot eval --engine ray` on a real multi-node Ray cluster started on this machine.

One cluster for the module (Ray's start-up is slow on two cores): a head node without
desktops and two worker nodes, each a real raylet process with ``{"deskpilot_desktop": 2}``.
The command runs in a subprocess and connects with ``--ray-address``; its sessions run as
actors on the worker nodes (real Xvfb displays, the apps, the agent, the built-in model
server). Checked: the desktop suite (a subset: six tasks) passes with results of the local
engine's shape, spread over both nodes; a Ray actor killed mid-attempt is an
infrastructure error, retried, and the suite goes on; Ctrl+C leaves no Xvfb or app running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.x11

FAULT_APP = Path(__file__).resolve().parent / "apps" / "eval_fault_app.py"
CHECK = "import json, os, sys; sys.exit(0 if json.load(open(os.environ['DESKPILOT_EVAL_STATE']))['ok'] else 1)"
TASKS = "click-button,click-color,checkboxes,radio-choice,type-unicode,menu-command"
#: Inherited by the cluster's raylets, so by every actor and session: how the tests find
#: what a session left running (with the sessions' own DESKPILOT_EVAL_RUN).
TAG = uuid.uuid4().hex


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    from ray.cluster_utils import Cluster

    os.environ["EVAL_TEST_TAG"] = TAG
    store = 80 * 1024 * 1024
    ray_cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"deskpilot_desktop": 0}, "object_store_memory": store,
        "include_dashboard": False})
    try:
        for _ in range(2):
            ray_cluster.add_node(num_cpus=1, resources={"deskpilot_desktop": 2}, object_store_memory=store)
        ray_cluster.wait_for_nodes()
        yield str(ray_cluster.address)
    finally:
        ray_cluster.shutdown()
        os.environ.pop("EVAL_TEST_TAG", None)


def _worker_nodes(address: str) -> set[str]:
    code = (f"import json, ray; ray.init(address={address!r}, logging_level='ERROR', log_to_driver=False); "
            "print(json.dumps([n['NodeID'] for n in ray.nodes() if n['Alive'] "
            "and n['Resources'].get('deskpilot_desktop')]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _left_running() -> list[str]:
    """Sessions' processes (agent, Xvfb, app) of this module's cluster still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"EVAL_TEST_TAG={TAG}".encode() in environ and any(v.startswith(b"DESKPILOT_EVAL_RUN=") for v in environ):
            found.append(f"{entry.name}: {cmdline}")
    return found


def _displays_running() -> int:
    return sum(1 for line in _left_running() if line.split(": ", 1)[1].split(" ", 1)[0].endswith("Xvfb"))


def _wait_gone(timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := _left_running()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def _eval(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "RAY_ADDRESS")}
    return subprocess.run([sys.executable, "-m", "deskpilot", "eval", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_the_desktop_suite_passes_on_actors_spread_over_the_nodes_as_the_local_engine_runs_it(
    cluster: str, tmp_path: Path
) -> None:
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"
    proc = _eval("desktop", "--scripted", "--engine", "ray", "--ray-address", cluster, "--tasks", TASKS,
                 "--out", str(ray_out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6/6 succeeded" in proc.stdout and "(ray)" in proc.stdout
    local = _eval("desktop", "--scripted", "--parallel", "2", "--tasks", TASKS, "--out", str(local_out),
                  cwd=tmp_path)
    assert local.returncode == 0, local.stdout + local.stderr
    ray_lines, local_lines = _results(ray_out), _results(local_out)
    # Results equal in shape: the same keys (plus where each ran) and the same success per task.
    assert {r["task"]: r["success"] for r in ray_lines} == {r["task"]: r["success"] for r in local_lines}
    assert all(r["success"] and r["final"] and r["error_kind"] is None for r in ray_lines)
    local_keys = set().union(*(r.keys() for r in local_lines))
    assert set().union(*(r.keys() for r in ray_lines)) == local_keys | {"node", "host"}
    # Spread: every attempt ran on a worker node (the head has no desktop), and both hosted some.
    workers = _worker_nodes(cluster)
    nodes = {r["node"] for r in ray_lines}
    assert len(workers) == 2 and nodes == workers, (nodes, workers)
    # The files came back from the nodes: --out looks as the local engine's does.
    for record in ray_lines:
        run_dir = Path(record["run_dir"])
        assert run_dir.is_relative_to(ray_out) and (run_dir / "run.json").is_file(), record
        assert Path(record["report"]).is_file()
        stem = f"{record['task']}-a1-t1"
        assert {p.name for p in (ray_out / "sessions").glob(f"{stem}.*")} == {
            f"{stem}.spec.json", f"{stem}.result.json", f"{stem}.log"}
    summary = json.loads((ray_out / "summary.json").read_text(encoding="utf-8"))
    local_summary = json.loads((local_out / "summary.json").read_text(encoding="utf-8"))
    assert summary.keys() == local_summary.keys()
    assert summary["engine"] == "ray" and summary["parallel"] == 4 and summary["success_rate"] == 1.0
    assert summary["engine_startup_s"] > 0 and local_summary["engine_startup_s"] is None
    report = (ray_out / "report.html").read_text(encoding="utf-8")
    assert report.count('href="runs/') == 6
    assert _wait_gone() == []


def _fault_suite(tmp_path: Path, modes: dict[str, str]) -> Path:
    lines = ['[suite]\nname = "ray-faults"\n']
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


def test_a_killed_actor_is_an_infrastructure_error_retried_on_its_restarted_actor(
    cluster: str, tmp_path: Path
) -> None:
    suite = _fault_suite(tmp_path, {"actor-killed": "kill_ray_actor", "fine": "ok"})
    out = tmp_path / "out"
    proc = _eval(str(suite), "--scripted", "--engine", "ray", "--ray-address", cluster, "--parallel", "2",
                 "--retries", "1", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _results(out)
    killed = sorted((r for r in lines if r["task"] == "actor-killed"), key=lambda r: r["try"])
    assert [r["try"] for r in killed] == [1, 2], killed
    # Never the model's failure: recorded as the infrastructure's, not final, then retried.
    assert killed[0]["error_kind"] == "actor_died" and killed[0]["final"] is False and not killed[0]["success"]
    assert killed[1]["error_kind"] is None and killed[1]["success"] and killed[1]["final"]
    assert [r["success"] for r in lines if r["task"] == "fine"] == [True]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["successes"] == 2 and summary["error_kinds"] == {"actor_died": 1} and summary["unsettled"] == 0
    # The restarted actor stopped what the dead one's session left (its agent, Xvfb, app),
    # and its files on the node are gone once the run closed the actors.
    assert _wait_gone() == []
    assert not list(Path(tempfile.gettempdir(), "deskpilot-ray").glob("*/slot-*/out/*/actor-killed*"))


def test_ctrl_c_stops_every_actor_session_and_keeps_results(cluster: str, tmp_path: Path) -> None:
    suite = _fault_suite(tmp_path, {"fine": "ok", "hangs-1": "hang-always", "hangs-2": "hang-always"})
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "RAY_ADDRESS")}
    proc = subprocess.Popen([sys.executable, "-m", "deskpilot", "eval", str(suite), "--scripted", "--engine", "ray",
                             "--ray-address", cluster, "--parallel", "2", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        # "fine" ended and both hanging sessions run (their Xvfb up on the nodes): then Ctrl+C.
        while not ((out / "results.jsonl").is_file() and _displays_running() >= 2):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sessions did not start within 120 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted: every session stopped" in stdout
    assert _wait_gone() == [], "no Xvfb, app or agent left running"
    # The actors stopped their sessions and were closed before the driver ended: their
    # directories on the nodes are gone.
    assert not list(Path(tempfile.gettempdir(), "deskpilot-ray").glob("*/slot-*/out/sessions/hangs-*")), \
        "the actors were closed before the driver ended"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["interrupted"] is True
    assert all(r["task"] == "fine" and r["success"] for r in _results(out))
