"""The input watchdog on Windows: a small process that releases what its parent held.

The X11 watchdog (:mod:`deskpilot._x11._watchdog`) reads what a dead process held from
the record every XTest controller keeps on the display. Windows has no such shared
place, so the SendInput backend keeps one: a named shared-memory block of 516 bytes
that the watchdog maps too, where the backend counts each virtual-key code and mouse
button it holds. A press is counted *before* its SendInput call and a release after
it (one byte written under a lock: microseconds, no system call), so at any moment
of a kill the block names at least everything that is down.

Lifetime. While a process has a SendInput backend open, one watchdog runs for it
(``python -m deskpilot.input._win_watchdog``), started by the first backend and told
to stop by the last one's close. Its standard input is a pipe whose write end only
the parent holds (not inheritable: programs the agent starts never hold it). When the
parent ends however it ends (TerminateProcess from a task manager, a crash), Windows
closes that handle and the watchdog's read returns end-of-file without the ``q`` a
clean close writes first; it then sends the key-up and button-up events for what the
block counts as held and exits.

Nothing else: only virtual keys and buttons this process pressed through deskpilot
and had not released. Windows keeps one state per key, so a key the user holds too
*and* the agent held at its death is let go; a key the agent never pressed never is.
A process killed before its watchdog has mapped the block (its first moments: the
interpreter is starting) is not released by it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import mmap
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deskpilot.input._base import InputBackend

__all__ = ["BLOCK_SIZE", "HeldInput", "WinWatchdog", "hold_win_watchdog", "main", "release_held"]

#: 256 counters by virtual-key code, 256 "pressed as an extended key" flags, 3 buttons,
#: and the byte the watchdog sets once it watches.
_EXTENDED = 256
_BUTTONS = 512
_READY = 515
BLOCK_SIZE = 516
_BUTTON_NAMES = ("left", "right", "middle")
_STOP = b"q"
_EXIT_WAIT = 1.0


class HeldInput:
    """The held keys and buttons of one process, counted in ``block`` (any writable
    buffer of :data:`BLOCK_SIZE` bytes: the shared mapping, or a bytearray in tests)."""

    def __init__(self, block: mmap.mmap | bytearray) -> None:
        self.block = block
        self._lock = threading.Lock()

    def key(self, vk: int, extended: bool, down: bool) -> None:
        if not 0 <= vk < 256:
            return
        with self._lock:
            count = self.block[vk]
            if down:
                self.block[_EXTENDED + vk] = 1 if extended else 0
                self.block[vk] = min(255, count + 1)
            else:
                self.block[vk] = max(0, count - 1)

    def button(self, name: str, down: bool) -> None:
        if name not in _BUTTON_NAMES:
            return
        index = _BUTTONS + _BUTTON_NAMES.index(name)
        with self._lock:
            count = self.block[index]
            self.block[index] = min(255, count + 1) if down else max(0, count - 1)

    @property
    def watched(self) -> bool:
        """Whether the watchdog has mapped this block and waits for the parent's end."""
        return bool(self.block[_READY])

    def held(self) -> tuple[list[tuple[int, bool]], list[str]]:
        """``([(vk, extended), ...], [button, ...])`` held now."""
        with self._lock:
            keys = [(vk, bool(self.block[_EXTENDED + vk])) for vk in range(256) if self.block[vk]]
            buttons = [name for i, name in enumerate(_BUTTON_NAMES) if self.block[_BUTTONS + i]]
        return keys, buttons


@dataclass(slots=True)
class WinWatchdog:
    """The running watchdog and the backends of this process that hold it."""

    tag: str
    process: subprocess.Popen[bytes]
    held: HeldInput
    users: int = 0

    def release(self) -> None:
        """One backend is done with it; the last one stops it (its input is released)."""
        with _lock:
            self.users -= 1
            if self.users > 0:
                return
            if _running.get(os.getpid()) is self:
                del _running[os.getpid()]
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(_STOP)
                stdin.flush()
            with contextlib.suppress(OSError, ValueError):
                stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(_EXIT_WAIT)


_running: dict[int, WinWatchdog] = {}
_lock = threading.Lock()
_counter = itertools.count(1)


def hold_win_watchdog() -> WinWatchdog | None:
    """This process's watchdog, started if none runs (Windows only; None elsewhere or
    where it cannot start). The caller calls :meth:`WinWatchdog.release` when it closes."""
    if sys.platform != "win32":
        return None
    with _lock:
        found = _running.get(os.getpid())
        if found is not None and found.process.poll() is None:
            found.users += 1
            return found
        tag = f"deskpilot-held-{os.getpid()}-{next(_counter)}"
        try:
            block = mmap.mmap(-1, BLOCK_SIZE, tagname=tag)
            process = subprocess.Popen(
                [sys.executable, "-m", "deskpilot.input._win_watchdog", "--tag", tag, "--parent", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),  # Ctrl+C is the parent's
            )
        except OSError:
            return None
        watchdog = _running[os.getpid()] = WinWatchdog(tag, process, HeldInput(block), users=1)
        return watchdog


def release_held(held: HeldInput, hands: InputBackend) -> tuple[list[tuple[int, bool]], list[str]]:
    """Send the key-up and button-up events for what ``held`` counts through ``hands``
    (a SendInput backend); returns what it released."""
    from deskpilot.input._keys import KeySpec

    keys, buttons = held.held()
    for vk, extended in keys:
        hands.key(KeySpec(f"vk{vk:#04x}", vk, extended, None), False)
    for name in buttons:
        if name in ("left", "right", "middle"):
            hands.button(name, False)  # type: ignore[arg-type]
    return keys, buttons


def watch(tag: str, parent: int) -> int:
    """The watchdog's body: wait for the parent's pipe to end, then release."""
    if sys.platform != "win32":
        raise SystemExit("the SendInput watchdog runs on Windows only")
    from deskpilot.input._sendinput import SendInputBackend

    held = HeldInput(mmap.mmap(-1, BLOCK_SIZE, tagname=tag))
    # Ready before the parent dies: acting is then a few SendInput calls, no imports.
    hands = SendInputBackend(dpi_awareness=False, watchdog=False)
    held.block[_READY] = 1
    stdin = sys.stdin.buffer
    while True:
        data = stdin.read(1)
        if data == _STOP:
            return 0  # stopped on purpose: the parent released what it held itself
        if not data:
            break  # end of file without a stop: the parent is gone
    keys, buttons = release_held(held, hands)
    hands.close()
    if keys or buttons:
        sys.stderr.write(
            f"deskpilot watchdog: process {parent} ended holding virtual keys "
            f"{[hex(vk) for vk, _ in keys]} and buttons {buttons}; released\n"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deskpilot.input._win_watchdog")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    return watch(args.tag, args.parent)


if __name__ == "__main__":
    sys.exit(main())
