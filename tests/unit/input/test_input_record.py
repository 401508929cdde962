"""The input record's pure parts: who counts as alive, and what a record line may hold."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from deskpilot._x11._record import Owner, OwnerEntry, _start_time, process_alive

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")


def test_this_process_is_alive_under_its_own_identity() -> None:
    me = Owner.current()
    assert me.pid == os.getpid() and me.host == socket.gethostname() and me.start is not None
    assert process_alive(me.host, me.pid, me.start)
    assert Owner.current().key != me.key  # two controllers of one process are two owners


def test_a_reused_pid_does_not_keep_a_dead_owner_alive() -> None:
    me = Owner.current()
    assert not process_alive(me.host, me.pid, str(int(me.start or 0) + 1))


def test_a_killed_process_is_dead_before_and_after_it_is_reaped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = None
    while start is None:
        start = _start_time(proc.pid)
    assert process_alive(socket.gethostname(), proc.pid, start)
    proc.kill()
    deadline = time.monotonic() + 10
    while _start_time(proc.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # a zombie until reaped: it must already count as dead
    assert not process_alive(socket.gethostname(), proc.pid, start)
    proc.wait()
    assert not process_alive(socket.gethostname(), proc.pid, start)


def test_owners_on_another_host_are_never_judged_dead() -> None:
    assert process_alive("some-other-host.invalid", 1, "0")


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        "x",
        {},
        {"host": "h"},
        {"host": "h", "pid": "x"},
        {"host": "h", "pid": 1, "keys": "ab"},
        {"host": "h", "pid": 1, "borrowed": {"x": 1}},
    ],
)
def test_garbled_lines_are_refused(raw: object) -> None:
    assert OwnerEntry.parse(raw) is None


def test_a_line_round_trips() -> None:
    entry = OwnerEntry("h", 12, "345", {50, 62}, {1}, {93: 0x01004E16})
    back = OwnerEntry.parse(entry.dump())
    assert back == entry and not back.empty()
    assert OwnerEntry("h", 1, None).empty()
