"""The wlroots input watchdog: a small process that releases the mouse buttons its parent held.

A process killed with SIGKILL runs no clean-up. On sway 1.7 the compositor destroys a dead
client's virtual devices and lets go of its keys, but a mouse button the dead virtual pointer
held stays down for the app: no release ever reaches it (measured; tests/integration/
test_sway_outputs.py). Measured too: a release sent by *another* virtual pointer of the seat
(once the compositor has added it: a round trip after creating it) reaches the app as the
release of that button, and nothing else does (no motion, no press).

So each :class:`deskpilot.input._wlroots.WlrootsInput` starts one watchdog
(``python -m deskpilot._wayland._watchdog``) with a virtual pointer of its own on its own
Wayland connection, and tells it through a pipe which buttons it holds: ``d`` + the button's
index (``code - BTN_LEFT``) *before* each press goes out, ``u`` + index after each release
went out, ``q`` when it closes on purpose. The parent holds the pipe's write end alone
(close-on-exec). The watchdog waits for the parent to end: the pipe ending (the kernel closes
it when the parent dies), a pidfd of the parent, or, looked at every 50 ms, the parent's
``PF_EXITING`` flag. Then it reads what is left in the pipe, sends a release for each button
still held (one ``frame``), waits for the compositor's answer, and exits.

Nothing else: it sends no motion, no press, no key. One case sends a release of a button
that is not down: a kill in the microseconds between the ``d`` and the press leaving the
process (or between a release leaving and its ``u``); sway passes such a lone release on to
the focused client (measured), which sees one release without a press. Keys are not its
business: the compositor releases a dead virtual keyboard's keys (measured).

It ignores SIGINT (Ctrl+C reaches the whole foreground process group; the parent's own
clean-up handles it) and runs in a session of its own. It imports only this room.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

from deskpilot._errors import PlatformError
from deskpilot._wayland._wlr import WlrootsClient, now_ms

__all__ = ["BTN_LEFT", "WlrootsWatchdog", "main", "start_watchdog"]

#: The evdev code of the first mouse button; the pipe carries ``code - BTN_LEFT``.
BTN_LEFT = 0x110
_PRESS = ord("d")
_RELEASE = ord("u")
_STOP = ord("q")
#: How often the watchdog looks whether the parent has started to exit.
_LOOK = 0.05
#: How long a closing parent waits for its watchdog to exit.
_EXIT_WAIT = 1.0


class WlrootsWatchdog:
    """The parent's end: say what is held; :meth:`stop` when the input is closed."""

    def __init__(self, process: subprocess.Popen[bytes], pipe: int) -> None:
        self.process = process
        self._pipe = pipe

    def _send(self, data: bytes) -> None:
        if self._pipe >= 0:
            with contextlib.suppress(OSError):  # a watchdog that died cannot be told
                os.write(self._pipe, data)

    def pressing(self, code: int) -> None:
        """Call before the press of button ``code`` goes out."""
        self._send(bytes((_PRESS, code - BTN_LEFT)))

    def released(self, code: int) -> None:
        """Call after the release of button ``code`` went out."""
        self._send(bytes((_RELEASE, code - BTN_LEFT)))

    def stop(self) -> None:
        """The parent released what it held itself: the watchdog exits, releasing nothing."""
        pipe, self._pipe = self._pipe, -1
        if pipe < 0:
            return
        with contextlib.suppress(OSError):
            os.write(pipe, bytes((_STOP,)))
        with contextlib.suppress(OSError):
            os.close(pipe)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(_EXIT_WAIT)


def start_watchdog(environ: Mapping[str, str] | None = None) -> WlrootsWatchdog | None:
    """A watchdog for this process's virtual pointer on the compositor ``environ`` names
    (default ``os.environ``); None where none can start."""
    env = dict(os.environ)
    if environ is not None:
        env.update(environ)
    read, write = os.pipe()  # both close-on-exec; only ``read`` is handed to the watchdog
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "deskpilot._wayland._watchdog", "--parent", str(os.getpid()),
             "--pipe", str(read)],
            pass_fds=(read,),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    return WlrootsWatchdog(process, write)


def _exiting(pid: int) -> bool:
    """Whether ``pid`` has started to exit (``PF_EXITING`` in /proc/PID/stat) or is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & 0x4)
    except (IndexError, ValueError):
        return False


def _apply(data: bytes, held: set[int]) -> tuple[bool, bytes]:
    """Apply the parent's messages to ``held``: (whether one of them is the stop, the
    incomplete message left at the end, if any)."""
    i = 0
    while i < len(data):
        op = data[i]
        if op == _STOP:
            return True, b""
        if op in (_PRESS, _RELEASE):
            if i + 1 == len(data):
                return False, data[i:]
            code = BTN_LEFT + data[i + 1]
            if op == _PRESS:
                held.add(code)
            else:
                held.discard(code)
            i += 2
        else:
            i += 1
    return False, b""


def watch(parent: int, pipe: int) -> int:
    """The watchdog's body: wait for ``parent`` to end, then release the buttons it held."""
    # Connected, with its virtual pointer added to the seat, before the parent may die:
    # a pointer's events sent before the compositor added it reach no one (measured).
    client = WlrootsClient(PlatformError, ("pointer",))
    pointer = client.create_pointer()
    client.conn.roundtrip()
    held: set[int] = set()
    pending = b""
    pidfd: int | None = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(parent)
    try:
        watched = [pipe] + ([pidfd] if pidfd is not None else [])
        while True:
            ready, _, _ = select.select(watched, [], [], _LOOK)
            if pipe in ready:
                data = os.read(pipe, 4096)
                if not data:
                    break  # its files are closed: it is exiting
                stop, pending = _apply(pending + data, held)
                if stop:
                    return 0  # stopped on purpose: it released what it held itself
            elif ready or _exiting(parent):
                break
        # What it wrote before it died is still in the pipe.
        os.set_blocking(pipe, False)
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(pipe, 4096):
                pending += chunk
        if _apply(pending, held)[0]:
            return 0
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if held:
        for code in sorted(held):
            pointer.request("button", now_ms(), code, 0)
        pointer.request("frame")
        client.conn.roundtrip()
        sys.stderr.write(f"deskpilot watchdog: process {parent} ended holding mouse buttons "
                         f"{[hex(c) for c in sorted(held)]}; released\n")
    client.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deskpilot._wayland._watchdog")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--pipe", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return watch(args.parent, args.pipe)
    except PlatformError as exc:
        sys.stderr.write(f"deskpilot watchdog: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
