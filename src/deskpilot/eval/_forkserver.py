"""The local engine's fork server: the agent imported once, a forked process per session.

Importing the agent costs a session process about 1.5 s of CPU (numpy, httpx, the modes,
the imaging core); a suite of short tasks spends more on that than on the tasks. The
fork server (``python -m deskpilot.eval --fork-server``) imports it all once, starts no
thread, and forks one child per session: the child starts a new session and process
group (``setsid``: the engine stops it and everything it started with one ``killpg``),
points stdout and stderr at the session's log and runs :func:`deskpilot.eval._session.main`.

Protocol, one line each way: the engine writes ``{"id": N, "args": [SPEC, RESULT], "log":
PATH}``; the server answers ``started N PID`` (or ``failed N REASON``) and, whenever a child
ends, ``exit PID CODE`` (CODE negative: killed by that signal). The server reaps its
children on SIGCHLD (a wake-up pipe; one thread, select) and exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any

__all__ = ["serve"]


def _preload() -> None:
    # What every session imports; loaded here, before any fork, so children share it.
    import deskpilot.agent  # the run, the scenarios, the session
    import deskpilot.eval._session
    import deskpilot.report
    from deskpilot.agent.modes import discover_modes
    from deskpilot.testing import xvfb

    discover_modes()
    del deskpilot, xvfb


def _child(request: dict[str, Any]) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 is /dev/null for the child's life
        sys.stdout = open(1, "w", closefd=False, buffering=1, encoding="utf-8")  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False, buffering=1, encoding="utf-8")  # noqa: SIM115
        from deskpilot.eval._session import main

        code = main([str(a) for a in request["args"]])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> int:
    _preload()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    out = sys.stdout

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    say("ready")
    stdin = sys.stdin.fileno()
    buffer = b""
    while True:
        ready, _, _ = select.select([stdin, wake_r], [], [])
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        # Reap on every wake-up: a SIGCHLD can arrive between select and here.
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")
        if stdin in ready:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                return 0
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                if not raw.strip():
                    continue
                request = json.loads(raw)
                try:
                    pid = os.fork()
                except OSError as exc:
                    say(f"failed {request['id']} {exc}")
                    continue
                if pid == 0:
                    _child(request)
                say(f"started {request['id']} {pid}")
