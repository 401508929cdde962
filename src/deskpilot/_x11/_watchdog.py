"""The input watchdog: a small process that outlives its parent and lets go of what it held.

A process killed with SIGKILL (the OOM killer, a task manager, ``kill -9``) runs no
clean-up: a button or a Shift it held stays down on the user's desktop. Every XTest
controller already records what it holds on the display *before* each press
(:mod:`deskpilot._x11._record`: one asynchronous property write on the connection the
press goes out on, so the server always sees the record before the press), and the
next controller to open a record transaction reclaims a dead owner's keys. The
watchdog makes that happen at once instead of "whenever deskpilot runs next".

Lifetime. While a process has an XTest controller open on a display
(:class:`deskpilot.input.InputController` and so every run that sends real input), one
watchdog runs for it (``python -m deskpilot._x11._watchdog``, started by the first
controller, told to stop when the last one closes). The parent keeps the write end of
a pipe that only it holds (close-on-exec: no program the agent starts inherits it).
The watchdog connects to the display at start and then waits for

- the pipe to end: the kernel closes it when the parent dies, however it dies; a
  ``q`` written before is a parent that released its input and stops it on purpose;
- or a pidfd of the parent to become readable (Linux 5.3+), which also covers a
  forked child that inherited the pipe and outlives the parent;
- or, looked at every 50 ms, the parent's ``PF_EXITING`` flag in ``/proc``: the first
  sign of a SIGKILL, while the kernel may still spend a few hundred ms freeing a large
  process's memory before it closes the pipe.

Once the parent is ending, it opens one record transaction: what the parent's owners
and every dead owner recorded is released, minus what a live owner holds
(:func:`deskpilot._x11._record.reclaim_dead_owners`), and the process exits. (An
exiting process sends no more requests; what it wrote before reached the server's
socket before the kill was acted on.)

Nothing else. It releases only keycodes and buttons that a dead deskpilot controller
recorded as held, through the XTest device, whose key state is not the user's keyboard
(a release of a key the XTest device does not hold is dropped by the server). The
alternative, "release every key the agent may press that is down at death", would let
go of a Shift the user holds, which the promise forbids. Why the record and not a pipe
of presses to the watchdog: the record is written before each press already, so the
watchdog adds no work per action; it survives the watchdog too (the next controller
reclaims it); and every controller of the display shares it.

The watchdog ignores SIGINT (Ctrl+C reaches the whole foreground process group and
the parent's own clean-up handles it) and runs in a session of its own, so closing
the terminal does not end it first. It imports only this room (no numpy, no agent),
so it is ready about 0.1 s after it starts on an idle machine; a parent killed
before then is still released, as soon as the watchdog is up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from deskpilot._errors import PlatformError
from deskpilot._x11._display import XDisplay
from deskpilot._x11._record import Owner, process_exiting, process_start_time, release_dead_owners

__all__ = ["Watchdog", "hold_watchdog", "main"]

#: What a parent writes before closing the pipe when it stops the watchdog on purpose.
_STOP = b"q"
#: How often the watchdog looks whether the parent has started to exit.
_LOOK = 0.05
#: How long the last controller's close waits for the watchdog to exit.
_EXIT_WAIT = 1.0


@dataclass(slots=True)
class Watchdog:
    """A running watchdog and the controllers of this process that hold it."""

    display: str
    process: subprocess.Popen[bytes]
    pipe: int
    users: int = 0

    def release(self) -> None:
        """One controller is done with it; the last one stops it (its input is released)."""
        with _lock:
            self.users -= 1
            if self.users > 0:
                return
            _running.pop((os.getpid(), self.display), None)
            pipe, self.pipe = self.pipe, -1
        if pipe >= 0:
            with contextlib.suppress(OSError):
                os.write(pipe, _STOP)
            with contextlib.suppress(OSError):
                os.close(pipe)
        # Waited for, briefly: its X connection is gone when the controller's close
        # returns (a run leaves the display as it found it).
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(_EXIT_WAIT)


_running: dict[tuple[int, str], Watchdog] = {}
_lock = threading.Lock()


def hold_watchdog(display: str | None = None) -> Watchdog | None:
    """This process's watchdog for ``display`` (default ``$DISPLAY``), started if none
    runs; the caller calls :meth:`Watchdog.release` when it closes. None where none can
    start (the record still lets the next controller reclaim what a killed one held)."""
    name = display if display is not None else os.environ.get("DISPLAY", "")
    if not name or sys.platform == "win32":
        return None
    key = (os.getpid(), name)  # a forked child is a parent of its own
    with _lock:
        found = _running.get(key)
        if found is not None and found.process.poll() is None:
            found.users += 1
            return found
        read, write = os.pipe()  # both close-on-exec; only ``read`` is handed to the watchdog
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "deskpilot._x11._watchdog", "--display", name,
                 "--parent", str(os.getpid()), "--pipe", str(read)],
                pass_fds=(read,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write)
            return None
        finally:
            os.close(read)
        watchdog = _running[key] = Watchdog(name, process, write, users=1)
        return watchdog


def _wait_for_parent(parent: int, pipe: int) -> bool:
    """Block until the parent is ending (True) or stops the watchdog on purpose (False).

    Three signs, the first one wins: ``PF_EXITING`` on the parent (looked at every
    :data:`_LOOK` seconds: set first thing when a SIGKILL is acted on, while the kernel
    may still spend a few hundred ms freeing a large process's memory before it closes
    its files), the pipe ending (its files closed), the pidfd (a zombie)."""
    pidfd: int | None = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(parent)
    can_look = os.path.isdir("/proc")
    try:
        watched = [pipe] + ([pidfd] if pidfd is not None else [])
        while True:
            ready, _, _ = select.select(watched, [], [], _LOOK if can_look else None)
            if pipe in ready:
                data = os.read(pipe, 64)
                if _STOP in data:
                    return False
                if not data:
                    return True  # its files are closed: it is exiting (or exec'd another program)
            elif ready:
                return True  # the pidfd: a zombie
            elif can_look and process_exiting(parent):
                return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def watch(display: str, parent: int, pipe: int) -> int:
    """The watchdog's body: wait for ``parent`` to end, then release what it held."""
    start = process_start_time(parent)
    ending = Owner(socket.gethostname(), parent, start, "")
    # Connected before the parent dies: acting is then one transaction, no set-up.
    with XDisplay(PlatformError, display) as conn:
        if start is not None and not _wait_for_parent(parent, pipe):
            return 0  # stopped on purpose: the parent released what it held itself
        released = release_dead_owners(conn, ending)
    if released:
        keys = sorted({k for e in released for k in e.keys})
        buttons = sorted({b for e in released for b in e.buttons})
        sys.stderr.write(
            f"deskpilot watchdog: process {parent} ended holding keycodes {keys} and buttons {buttons}; released\n"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deskpilot._x11._watchdog")
    parser.add_argument("--display", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--pipe", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return watch(args.display, args.parent, args.pipe)


if __name__ == "__main__":
    sys.exit(main())
