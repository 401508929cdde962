"""Every `deskpilot run` that does not end in an answer says why on stderr, whatever stdout
carries (here the JSON summary): a disk that is full from the start (a real full tmpfs),
a run directory deleted while the run writes to it, the step limit."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

pytestmark = pytest.mark.x11

BUSY = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})], delay=0.05)], on_exhausted="repeat")


def deskpilot_run(endpoint: str, runs_dir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "deskpilot", "run", "--endpoint", endpoint, "--runs-dir", str(runs_dir),
         "--dry-run", "--image-size", "480x270", "--json", *extra, "press tab"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=runs_dir.parent,
    )


def reason_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("deskpilot: run ended")]
    assert len(lines) == 1, err
    return lines[0]


@contextlib.contextmanager
def full_tmpfs(path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs at ``path``, filled to the last block (mounted as root, or with
    ``sudo -n`` as CI's runner has it)."""
    path.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size=256k,uid={os.getuid()},gid={os.getgid()}", "tmpfs", str(path)]
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    done = subprocess.run([*prefix, *mount], capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root or passwordless sudo needed): {done.stderr.strip()}")
    try:
        (path / "runs").mkdir()
        try:
            with open(path / "filler", "wb", buffering=0) as filler:
                while True:
                    filler.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        yield path
    finally:
        subprocess.run([*prefix, "umount", str(path)], check=False, timeout=30)


def test_a_disk_full_from_the_start_says_so_on_stderr(xvfb: str, tmp_path: Path) -> None:
    with full_tmpfs(tmp_path / "disk") as disk, ModelServer(BUSY) as server:
        proc = deskpilot_run(server.endpoint, disk / "runs", "--max-steps", "3")
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    line = reason_line(err)
    assert "run ended error (exit 1)" in line and "no space left" in line, line


def test_a_run_directory_deleted_mid_run_says_so_on_stderr(xvfb: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with ModelServer(BUSY) as server:
        proc = deskpilot_run(server.endpoint, runs, "--max-steps", "400")
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proc.poll() is None and len(server.requests) >= 3, proc.communicate()
            (run_dir,) = runs.iterdir()
            shutil.rmtree(run_dir)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, out + err
    line = reason_line(err)
    assert "run ended error (exit 1)" in line and "the run directory was deleted" in line, line


def test_the_step_limit_says_so_on_stderr(xvfb: str, tmp_path: Path) -> None:
    with ModelServer(BUSY) as server:
        proc = deskpilot_run(server.endpoint, tmp_path / "runs", "--max-steps", "2")
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "run ended max_steps (exit 3): reached the step limit" in reason_line(err)
