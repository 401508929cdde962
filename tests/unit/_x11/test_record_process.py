"""How the input watchdog tells that a process is ending (Linux /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from deskpilot._x11._record import process_exiting, process_start_time

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")


def test_a_running_process_is_not_ending() -> None:
    assert not process_exiting(os.getpid())
    assert process_start_time(os.getpid()) is not None


def test_a_killed_process_is_ending_while_a_zombie_and_once_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not process_exiting(child.pid)
        child.kill()
        # PF_EXITING is set first; the process becomes a zombie once its memory and files are
        # torn down, later on a loaded machine (CI saw the start time still there).
        deadline = time.monotonic() + 10
        while process_start_time(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert process_start_time(child.pid) is None  # not reaped yet: a zombie
        assert process_exiting(child.pid)
    finally:
        child.wait()
    assert process_exiting(child.pid)  # gone
