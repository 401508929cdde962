"""The wlroots watchdog's pipe messages (the release itself is tested on a real sway:
tests/integration/test_sway_outputs.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from deskpilot._wayland._watchdog import BTN_LEFT, WlrootsWatchdog, _apply, _exiting


def test_presses_and_releases_are_tracked_across_reads() -> None:
    held: set[int] = set()
    stop, left = _apply(b"d\x00d\x01u", held)
    assert (stop, left, held) == (False, b"u", {BTN_LEFT, BTN_LEFT + 1})
    stop, left = _apply(left + b"\x00", held)
    assert (stop, left, held) == (False, b"", {BTN_LEFT + 1})


def test_the_stop_ends_it_whatever_is_held() -> None:
    held: set[int] = set()
    assert _apply(b"d\x02q", held) == (True, b"")


def test_the_parent_end_writes_what_the_watchdog_reads() -> None:
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dog = WlrootsWatchdog(proc, write)
    dog.pressing(BTN_LEFT + 2)
    dog.released(BTN_LEFT + 2)
    dog.pressing(BTN_LEFT)
    dog.stop()
    dog.pressing(BTN_LEFT)  # after the stop: nothing is written
    data = b""
    while chunk := os.read(read, 64):
        data += chunk
    os.close(read)
    assert data == b"d\x02u\x02d\x00q"


def test_a_process_that_ended_is_exiting() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert _exiting(proc.pid)
    assert not _exiting(os.getpid())
