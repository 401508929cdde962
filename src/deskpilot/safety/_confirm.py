"""Asking the user on the terminal before a sensitive action.

The question goes to stderr (stdout may be a pipe or a live display); the answer is
read from stdin when it is a terminal. There is no silent default: with no terminal
the prompt raises :class:`NoTerminalError` (the policy denies and says why), and an
unanswered question times out (the policy denies too).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

from deskpilot._errors import ConfirmationAborted, NoTerminalError
from deskpilot._untrusted import terminal_text

__all__ = ["ConfirmationAborted", "NoTerminalError", "terminal_prompt"]

_HINT = "Allow? [y]es / [N]o / [a]lways this run: "
#: How often a waiting prompt looks at its abort flag.
_ABORT_POLL = 0.05


def _check_abort(abort: threading.Event | None, stderr: IO[str] | None = None) -> None:
    if abort is not None and abort.is_set():
        if stderr is not None:
            stderr.write("\n(the run is stopping: not allowed)\n")
            stderr.flush()
        raise ConfirmationAborted("the run stopped before anyone answered", rule="confirm.aborted")


def _read_line_posix(
    stream: IO[str],
    timeout: float,
    abort: threading.Event | None = None,
    stderr: IO[str] | None = None,
) -> str:
    import select

    deadline = time.monotonic() + timeout
    while True:
        _check_abort(abort, stderr)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer")
        ready, _, _ = select.select(
            [stream], [], [], min(left, _ABORT_POLL) if abort is not None else left
        )
        if ready:
            return stream.readline()


def _read_line_windows(
    timeout: float, abort: threading.Event | None = None
) -> str:  # pragma: no cover - Windows
    if sys.platform == "win32":
        import msvcrt

        deadline = time.monotonic() + timeout
        chars: list[str] = []
        while time.monotonic() < deadline:
            _check_abort(abort)
            if not msvcrt.kbhit():
                time.sleep(0.02)
                continue
            ch = msvcrt.getwche()
            if ch in ("\r", "\n"):
                sys.stderr.write("\n")
                return "".join(chars)
            if ch == "\x03":
                raise KeyboardInterrupt
            if ch == "\b":
                if chars:
                    chars.pop()
                continue
            chars.append(ch)
        raise TimeoutError("no answer")
    raise NoTerminalError("the Windows console reader runs on Windows only", rule="confirm.no_tty")


def terminal_prompt(
    question: str,
    *,
    timeout: float = 60.0,
    stdin: IO[str] | None = None,
    stderr: IO[str] | None = None,
    abort: threading.Event | None = None,
) -> str:
    """Print ``question`` and read ``y``/``n``/``a``; returns the raw answer.

    Raises :class:`NoTerminalError` when stdin is not a terminal,
    :class:`TimeoutError` when nobody answers within ``timeout`` seconds and
    :class:`ConfirmationAborted` soon after ``abort`` is set (from another thread: the
    run is stopping and the question is withdrawn).
    """
    stdin = sys.stdin if stdin is None else stdin
    stderr = sys.stderr if stderr is None else stderr
    try:
        interactive = stdin is not None and not stdin.closed and stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        raise NoTerminalError(
            "there is no terminal to ask on (stdin is not a tty); "
            "allow the action in the [policy] table or run interactively",
            rule="confirm.no_tty",
        )
    # The question quotes what the model asked to type or press.
    stderr.write(f"\n{terminal_text(question)}\n{_HINT}")
    stderr.flush()
    if sys.platform == "win32" and stdin is sys.stdin:
        line = _read_line_windows(timeout, abort)
    else:
        line = _read_line_posix(stdin, timeout, abort, stderr)
    if not line:  # EOF: the terminal went away
        raise NoTerminalError("the terminal closed before answering", rule="confirm.eof")
    return line.strip()
