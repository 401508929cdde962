"""Engines: who runs the sessions. The driver hands out attempts, an engine runs them.

An engine is one class with ``run(queue, spec, stop)``: it takes :class:`Attempt`\\ s from
the :class:`AttemptQueue` until it answers ``None``, runs each as a session (see
:mod:`deskpilot.eval._session`) wherever it runs sessions, and hands every result back
with ``queue.done(attempt, record)`` as it arrives; when ``stop`` is set it stops every
session it runs and returns. The queue owns retries and the order; the engine only
runs. :class:`LocalEngine` is the pool of N processes on this host;
:class:`deskpilot.eval._ray.RayEngine` is the same shape over a Ray cluster (actors, each
running one session at a time on its node the way the local engine does).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Attempt", "AttemptQueue", "Engine", "LocalEngine"]

Record = dict[str, Any]

#: Set in every session's environment (and so in its Xvfb, app and agent): the run's token,
#: so a test (or a user) can find anything a session left running.
SESSION_ENV = "DESKPILOT_EVAL_RUN"


@dataclass(frozen=True, slots=True)
class Attempt:
    task: str
    #: Which repeat of the task (1..--repeat).
    attempt: int
    #: Which try of that attempt (1, then 2.. after infrastructure errors).
    try_: int
    #: Seconds the whole session may take before it counts as hung.
    timeout: float


class AttemptQueue:
    """The attempts still to run, the ones running, and what to do with each result.

    ``on_result(attempt, record) -> Attempt | None`` is called (under the queue's lock, in
    the order results arrive) for every result; an attempt it returns is queued again at
    the front (a retry). :meth:`take` blocks while the queue is empty but attempts are
    still running (one of them may come back as a retry) and answers ``None`` once
    everything is done or :meth:`close` was called.
    """

    def __init__(self, attempts: list[Attempt], on_result: Callable[[Attempt, Record], Attempt | None]) -> None:
        self._pending: deque[Attempt] = deque(attempts)
        self._running = 0
        self._closed = False
        self._on_result = on_result
        self._cond = threading.Condition()

    def take(self, *, block: bool = True) -> Attempt | None:
        """The next attempt. ``block=False`` (an engine that waits on its sessions itself,
        as the Ray engine does): None at once when nothing is pending right now."""
        with self._cond:
            while block and not self._closed and not self._pending and self._running:
                self._cond.wait()
            if self._closed or not self._pending:
                return None
            self._running += 1
            return self._pending.popleft()

    def done(self, attempt: Attempt, record: Record | None) -> None:
        """``record`` None: the attempt was stopped (Ctrl+C), nothing to record."""
        with self._cond:
            self._running -= 1
            if record is not None:
                retry = self._on_result(attempt, record)
                if retry is not None:
                    self._pending.appendleft(retry)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def running(self) -> int:
        return self._running

    @property
    def finished(self) -> bool:
        """Closed, or nothing pending and nothing running: no attempt will come any more."""
        with self._cond:
            return self._closed or (not self._pending and not self._running)


class Engine(Protocol):
    name: str
    #: How many sessions it runs at once (the summary reports it).
    parallel: int
    #: Seconds it took to start before the first session (Ray's actors); None: nothing to start.
    startup_s: float | None

    def run(self, queue: AttemptQueue, spec: Mapping[str, Any], stop: threading.Event) -> None:
        """Run attempts from ``queue`` until it answers None or ``stop`` is set."""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a reused id of someone else's group
        return False
    return True


def stop_group(pgid: int, *, grace: float = 5.0) -> None:
    """SIGTERM every process of the group (the session, its agent, Xvfb, app, browser),
    SIGKILL what is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Process(Protocol):
    """A running session process: its id (also its process group's) and its exit code."""

    pid: int

    def wait(self, timeout: float | None) -> int | None:
        """The exit code once it ended (negative: the signal), None while it runs."""


class _Spawned:
    """A session started with ``Popen`` (no fork server)."""

    def __init__(self, argv: list[str], log: Path, env: Mapping[str, str]) -> None:
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                         env=dict(env), start_new_session=True)
        self.pid = self.proc.pid

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


class _Forked:
    def __init__(self, pid: int, server: ForkServer) -> None:
        self.pid = pid
        self.server = server

    def wait(self, timeout: float | None) -> int | None:
        return self.server.wait_exit(self.pid, timeout)


class ForkServer:
    """The engine's side of :mod:`deskpilot.eval._forkserver`: start, ask for a session, hear
    exits. Thread-safe; :attr:`alive` turns false when the server ends."""

    def __init__(self, env: Mapping[str, str], *, timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "deskpilot.eval", "--fork-server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=dict(env), start_new_session=True)
        self._cond = threading.Condition()
        self._started: dict[int, int | str] = {}
        self._exits: dict[int, int] = {}
        self._ids = iter(range(1, 1 << 62))
        self._ready = False
        self.alive = True
        threading.Thread(target=self._read, name="deskpilot-eval-forkserver", daemon=True).start()
        with self._cond:
            self._cond.wait_for(lambda: self._ready or not self.alive, timeout)
            if not self._ready:
                self.close()
                raise RuntimeError("the fork server did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            word, _, rest = raw.decode("utf-8", "replace").strip().partition(" ")
            with self._cond:
                if word == "ready":
                    self._ready = True
                elif word == "started":
                    ident, _, pid = rest.partition(" ")
                    self._started[int(ident)] = int(pid)
                elif word == "failed":
                    ident, _, why = rest.partition(" ")
                    self._started[int(ident)] = why
                elif word == "exit":
                    pid, _, code = rest.partition(" ")
                    self._exits[int(pid)] = int(code)
                self._cond.notify_all()
        with self._cond:
            self.alive = False
            self._cond.notify_all()

    def start(self, args: list[str], log: Path) -> _Forked:
        with self._cond:
            ident = next(self._ids)
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(json.dumps({"id": ident, "args": args, "log": str(log)}).encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise RuntimeError(f"the fork server is gone ({exc})") from exc
            self._cond.wait_for(lambda: ident in self._started or not self.alive, 30.0)
            answer = self._started.pop(ident, None)
        if not isinstance(answer, int):
            raise RuntimeError(f"the fork server did not start the session: {answer or 'no answer'}")
        return _Forked(answer, self)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or not self.alive, timeout)
            if pid in self._exits:
                return self._exits.pop(pid)
            if not self.alive:  # nobody reaps it now: it is an orphan of init; ask the kernel
                return None if _group_alive(pid) else -int(signal.SIGKILL)
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class LocalEngine:
    """``--parallel N`` on this host: N threads, each running one session process at a time.

    Each session is a process in a new session and process group (so Ctrl+C on the
    terminal reaches the driver only, and stopping a session stops everything it
    started), forked by the fork server (:mod:`deskpilot.eval._forkserver`: the agent is
    imported once), or with ``fork_server=False`` (or when the server cannot start) a
    fresh ``python -m deskpilot.eval``; its stdout and stderr go to
    ``OUT/sessions/NAME.log``."""

    name = "local"
    startup_s: float | None = None  # nothing to start: sessions fork from this host

    def __init__(self, parallel: int = 1, *, fork_server: bool = True) -> None:
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        self.parallel = parallel
        self.fork_server = fork_server
        self._server: ForkServer | None = None
        #: The sessions' environment, set by :meth:`run` (None: this one's, without DISPLAY).
        self._env: dict[str, str] | None = None

    def open(self, token: str, extra_env: Mapping[str, str] | None = None) -> None:
        """The sessions' environment (this process's, ``extra_env`` over it) and the fork
        server: what :meth:`run` does first; the Ray engine's actors call it and
        :meth:`run_one` themselves."""
        env = {**os.environ, **(extra_env or {}), SESSION_ENV: token}
        env.pop("DISPLAY", None)  # each session makes its own
        self._env = env
        if self.fork_server:
            try:
                self._server = ForkServer(env)
            except (OSError, RuntimeError):
                self._server = None

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def run(self, queue: AttemptQueue, spec: Mapping[str, Any], stop: threading.Event) -> None:
        self.open(str(spec.get("token", "")))
        try:
            threads = [threading.Thread(target=self._worker, args=(queue, spec, stop), name=f"deskpilot-eval-{i}",
                                        daemon=True) for i in range(self.parallel)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            self.close()

    def _worker(self, queue: AttemptQueue, spec: Mapping[str, Any], stop: threading.Event) -> None:
        while not stop.is_set():
            attempt = queue.take()
            if attempt is None:
                return
            record: Record | None = None
            try:
                record = self.run_one(attempt, spec, stop)
            finally:
                queue.done(attempt, record)

    def _start(self, args: list[str], log: Path) -> _Process:
        server = self._server
        if server is not None and server.alive:
            try:
                return server.start(args, log)
            except RuntimeError:
                pass  # the server died: this and later sessions start the slow way
        env = self._env or {k: v for k, v in os.environ.items() if k != "DISPLAY"}
        return _Spawned([sys.executable, "-m", "deskpilot.eval", *args], log, env)

    def on_started(self, pgid: int) -> None:
        """Called with each session's process group as it starts (the Ray engine's actors
        note it on disk, so the actor that replaces a crashed one stops what it left)."""

    def run_one(self, attempt: Attempt, spec: Mapping[str, Any], stop: threading.Event) -> Record | None:
        """One session process; its record, or None when ``stop`` ended it."""
        out = Path(spec["out"])
        sessions = out / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        stem = f"{attempt.task}-a{attempt.attempt}-t{attempt.try_}"
        spec_path, result_path = sessions / f"{stem}.spec.json", sessions / f"{stem}.result.json"
        result_path.unlink(missing_ok=True)
        spec_path.write_text(json.dumps({**spec, "task": attempt.task, "attempt": attempt.attempt,
                                         "try": attempt.try_}), encoding="utf-8")
        started = time.monotonic()
        proc = self._start([str(spec_path), str(result_path)], sessions / f"{stem}.log")
        self.on_started(proc.pid)
        ended = None
        code: int | None = None
        try:
            while True:
                code = proc.wait(0.1)
                if code is not None:
                    break
                if stop.is_set():
                    ended = "stopped"
                    break
                if time.monotonic() - started > attempt.timeout:
                    ended = "timeout"
                    break
        finally:
            # Whatever happened, nothing of the session outlives it.
            stop_group(proc.pid, grace=5.0 if ended else 1.0)
            if code is None:
                code = proc.wait(10.0)
        base: Record = {"task": attempt.task, "attempt": attempt.attempt, "try": attempt.try_, "success": False,
                        "outcome": None, "steps": 0, "seconds": 0.0, "run_dir": None,
                        "session_s": round(time.monotonic() - started, 3)}
        if ended == "stopped":
            return None
        if ended == "timeout":
            return {**base, "error_kind": "timeout",
                    "error": f"the session took longer than {attempt.timeout:g} s and was stopped"}
        if result_path.is_file():
            record: Record = json.loads(result_path.read_text(encoding="utf-8"))
            return record
        if code is None:
            return {**base, "error_kind": "session_killed",
                    "error": "the session process ended without a result (its exit status is unknown)"}
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return {**base, "error_kind": "session_killed", "error": f"the session process was killed by {name}"}
        tail = (sessions / f"{stem}.log").read_text(encoding="utf-8", errors="replace")[-400:]
        return {**base, "error_kind": "session_crashed", "error": f"the session exited with code {code}: {tail}"}
