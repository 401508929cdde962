"""One session: one isolated desktop, one task, one agent run, its checker, clean-up.

:func:`run_session` does it in the calling process: its own Xvfb (``DISPLAY`` points at
it), the task's app, the built-in model server playing the task's solution when the
attempt is scripted, the agent through its normal entry point
(:func:`deskpilot.agent._run.run_agent`: the same client, tools, policy and input as
``deskpilot run``), the checker on the app's state, the run's own report. The local
engine runs each session in a process of its own (``python -m deskpilot.eval
SPEC RESULT``) and process group, so a session that dies, hangs or is killed takes
nothing else with it and leaves nothing behind.

What it returns is one line of ``results.jsonl``; ``error_kind`` names an infrastructure
error (never the model's failure): ``setup`` (display or app did not start),
``app_died``, ``display_died``, ``model_server`` (the server failed, not the model),
``agent_error`` (the agent stopped on an error of its own), ``interrupted``. The engine
adds ``timeout`` and ``session_killed``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deskpilot._errors import DeskpilotError, PlatformError
from deskpilot.eval._task import Layout, Step, Task, load_suite, resolve_args, run_check

__all__ = ["AppProcess", "SolutionPolicy", "main", "run_session"]

Record = dict[str, Any]


class AppProcess:
    """The task's app, speaking the line protocol of :mod:`deskpilot.eval._task`."""

    def __init__(self, argv: Sequence[str], *, timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     encoding="utf-8", bufsize=1)
        self._lines: queue.Queue[Record | None] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._reader, daemon=True, name="deskpilot-eval-app").start()
        try:
            self.ready = self._next("ready", timeout)
        except BaseException:
            self.close()
            raise

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    self._lines.put(record)
        self._lines.put(None)

    def _next(self, kind: str, timeout: float) -> Record:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PlatformError(f"the app did not answer {kind!r} within {timeout:g} s", program="app")
            try:
                record = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if record is None:
                raise PlatformError(f"the app exited (code {self.proc.wait()}) before answering {kind!r}",
                                    program="app")
            if record.get("type") == kind:
                return record
            if record.get("type") == "error":
                # Alive, but a scene or a solver failed: the solution gives up, the model's way.
                raise PlatformError(f"the app could not answer {kind!r}: {record.get('message')}", program="app")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def query(self, kind: str, *, timeout: float = 10.0) -> Record:
        """Send ``state`` or ``layout`` and return the answer."""
        with self._lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(kind + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise PlatformError(f"the app is gone ({exc})", program="app") from exc
            return self._next(kind, timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class SolutionPolicy:
    """The built-in model server's policy for ``--scripted``: the task's steps, one per request,
    their ``@name`` boxes resolved against the app's layout at that moment."""

    def __init__(self, steps: Sequence[Step], app: AppProcess, screen: tuple[int, int], final: str) -> None:
        self.steps = list(steps)
        self.app = app
        self.screen = screen
        self.final = final
        self.index = 0
        self.repeats = 0
        #: What each answer was, for the attempt's record when a solution goes wrong.
        self.log: list[str] = []

    def respond(self, request: Any) -> Any:
        from deskpilot.testing import Reply, tool_call

        while self.index < len(self.steps):
            step = self.steps[self.index]
            try:
                answer = self.app.query("layout") if self._needs_layout(step) else {}
            except PlatformError as exc:  # the app died (recorded as such after the run) or failed
                return self._give_up(str(exc))
            layout: Layout = answer.get("widgets") or {}
            texts: dict[str, str] = answer.get("texts") or {}
            if step.until is not None:
                if step.until in layout:
                    self.index += 1
                    self.repeats = 0
                    continue
                if self.repeats >= step.repeat:
                    return self._give_up(f"{step.until!r} did not appear after {step.repeat} {step.tool} calls")
                self.repeats += 1
            else:
                self.index += 1
            try:
                args = resolve_args(step.args, layout, self.screen, texts)
            except KeyError as exc:
                return self._give_up(f"{exc.args[0]!r} is not on the screen")
            self.log.append(f"{step.tool} {args}")
            return Reply(tool_calls=[tool_call(step.tool, args)])
        self.log.append("final")
        return Reply(content=self.final)

    @staticmethod
    def _needs_layout(step: Step) -> bool:
        return step.until is not None or any(isinstance(v, str) and v[:1] in ("@", "$") for v in step.args.values())

    def _give_up(self, why: str) -> Any:
        from deskpilot.testing import Reply

        self.log.append(f"gave up: {why}")
        self.index = len(self.steps)
        return Reply(content=f"I cannot finish: {why}.")


def _server_pid() -> int | None:
    """The pid of this session's X server: the Xvfb child of this process (the xvfb helper
    keeps its process to itself; there is one per session)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        comm, _, rest = stat.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if comm == "Xvfb" and len(fields) > 1 and int(fields[1]) == me:
            return int(entry.name)
    return None


def _display_alive(display: str, pid: int | None) -> bool:
    """Whether the session's own X server still runs. Its process, not its socket: once it
    dies, another session's Xvfb may take the same display number."""
    if pid is not None:
        try:
            state = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")  # a zombie: dead, not yet reaped by the xvfb helper
    number = display.lstrip(":").split(".")[0]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(f"/tmp/.X11-unix/X{number}")
        except OSError:
            return False
    return True


def _peak_rss_kb() -> dict[str, int]:
    # ru_maxrss is in KiB on Linux. Children: the largest waited-for child (app or Xvfb).
    return {"session_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "child_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}


def _config(task: Task, spec: Mapping[str, Any], runs_dir: Path, endpoint: str | None) -> Any:
    from deskpilot.agent import load_config
    from deskpilot.agent.modes import discover_modes

    discover_modes()
    flags: dict[str, Any] = {"agent.toolset": task.toolset, "agent.max_steps": task.max_steps,
                             "agent.max_seconds": task.max_seconds}
    flags.update(spec.get("flags") or {})
    flags.update({"run.runs_dir": str(runs_dir), "run.quiet": True})
    if endpoint is not None:
        flags["model.endpoint"] = endpoint
    return load_config(flags=flags, path=spec.get("config"), search_default=False)


def run_session(spec: Mapping[str, Any]) -> Record:
    """Run one attempt described by ``spec`` (suite, task, attempt, try, out, scripted,
    flags, config) and return its result record. Needs Xvfb (POSIX)."""
    from deskpilot.agent import NullReporter, Scenario, run_agent
    from deskpilot.testing import xvfb

    started = time.monotonic()
    task = load_suite(str(spec["suite"])).task(str(spec["task"]))
    attempt, try_ = int(spec.get("attempt", 1)), int(spec.get("try", 1))
    runs_dir = Path(spec["out"]) / "runs" / task.name / f"a{attempt}-t{try_}"
    record: Record = {"task": task.name, "attempt": attempt, "try": try_, "success": False, "outcome": None,
                      "steps": 0, "seconds": 0.0, "run_dir": None, "error_kind": None, "error": None}
    with contextlib.ExitStack() as stack:
        try:
            display = stack.enter_context(xvfb(task.screen, timeout=20.0))
            server_pid = _server_pid()
            app = AppProcess(task.app)
            stack.callback(app.close)
        except (DeskpilotError, OSError) as exc:
            record.update(error_kind="setup", error=str(exc))
            return _finish(record, started)
        record["startup_s"] = round(time.monotonic() - started, 3)
        server = None
        policy = None
        if spec.get("scripted"):
            from deskpilot.testing import ModelServer

            policy = SolutionPolicy(task.solution, app, task.screen, task.final)
            server = stack.enter_context(ModelServer(policy))
        # A display that died already must not be connected to: another session's Xvfb may
        # hold its number by now (the agent would work that session's desktop).
        if not _display_alive(display, server_pid):
            record.update(error_kind="display_died", error=f"the X server on {display} died before the run")
            return _finish(record, started)
        config = _config(task, spec, runs_dir, server.endpoint if server else None)
        scenario = Scenario(task.name, task.instruction, title=task.name, group="eval", max_steps=task.max_steps)
        try:
            result = run_agent(config, scenario, reporter=NullReporter())
        except DeskpilotError as exc:
            # Refused before the run began: the screen check opens the display first, so a
            # display that died after the check above ends here, not in the run's outcome.
            if not _display_alive(display, server_pid):
                record.update(error_kind="display_died", error=f"the X server on {display} died before the run: {exc}")
            else:
                record.update(error_kind="setup", error=f"the run could not start: {exc}")
            return _finish(record, started)
        summary: Mapping[str, Any] = result.summary
        totals = summary.get("totals") or {}
        record.update(outcome=result.outcome, steps=result.steps, run_dir=str(result.run_dir),
                      seconds=round(float(summary.get("duration_s") or 0.0), 3),
                      prompt_tokens=totals.get("prompt_tokens"), completion_tokens=totals.get("completion_tokens"),
                      prefill=summary.get("prefill"))
        if policy is not None:
            record["solution"] = policy.log
        if not _display_alive(display, server_pid):
            record.update(error_kind="display_died", error=f"the X server on {display} died during the run")
        elif not app.alive:
            record.update(error_kind="app_died", error=f"the app exited with code {app.proc.returncode} during the run")
        elif result.outcome == "interrupted":
            record.update(error_kind="interrupted", error=result.error)
        elif result.outcome == "server_error":
            record.update(error_kind="model_server", error=result.error)
        elif result.outcome == "error":
            record.update(error_kind="agent_error", error=result.error)
        else:
            try:
                state = app.query("state")
            except PlatformError as exc:
                record.update(error_kind="app_died", error=str(exc))
            else:
                state.pop("type", None)
                record["success"], record["detail"] = run_check(task, state)
        record["report"] = _write_report(result.run_dir)
    return _finish(record, started)


def _write_report(run_dir: Path) -> str | None:
    from deskpilot.report import write_report

    try:
        return str(write_report(run_dir, embed=False))
    except (DeskpilotError, OSError, ValueError):
        return None


def _finish(record: Record, started: float) -> Record:
    record["session_s"] = round(time.monotonic() - started, 3)
    record.update(_peak_rss_kb())
    return record


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m deskpilot.eval SPEC.json RESULT.json``: the result is written
    whole (a temporary file renamed) or not at all."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: python -m deskpilot.eval SPEC.json RESULT.json\n")
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    record = run_session(spec)
    target = Path(args[1])
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
