"""The driver: a suite's attempts through an engine into ``--out DIR``, retries and Ctrl+C included."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from deskpilot._errors import ConfigError, PlatformError
from deskpilot.eval._engine import Attempt, AttemptQueue, Engine, LocalEngine
from deskpilot.eval._results import ResultsLog, summarize, write_report_html
from deskpilot.eval._task import Suite, load_suite

__all__ = ["EvalOutcome", "Progress", "check_platform", "parse_shard", "run_eval", "shard_tasks"]

Record = dict[str, Any]

#: What a session may take on top of the agent's time limit: display, app, checker, report.
SESSION_MARGIN_S = 60.0


@dataclass(slots=True)
class Progress:
    """What the progress line shows; ``report(progress, record)`` is called per result."""

    total: int
    done: int = 0
    successes: int = 0
    failures: int = 0
    errors: int = 0
    retries: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self, running: int) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed * 3600 if elapsed > 0 else 0.0
        return (f"[{self.done}/{self.total}] {self.successes} ok, {self.failures} failed, {self.errors} errors"
                f"{f', {self.retries} retried' if self.retries else ''} · {running} running · "
                f"{elapsed:.0f} s · {rate:.0f} tasks/h")


@dataclass(slots=True)
class EvalOutcome:
    summary: Record
    out: Path
    interrupted: bool = False


def check_platform() -> None:
    """Eval's sessions are isolated desktops: each its own Xvfb display. Windows has none."""
    if sys.platform == "win32":
        raise PlatformError(
            "deskpilot eval is not offered on Windows: each session needs an isolated desktop of its own (an "
            "Xvfb display), which Windows does not have, and a suite on the real desktop would take it over. "
            "Run suites on Linux (or in WSL2 with Xvfb); `deskpilot run` works on Windows.",
            program="deskpilot eval",
        )


def run_eval(
    suite: str | Suite,
    out: str | os.PathLike[str],
    *,
    engine: Engine | None = None,
    scripted: bool = False,
    repeat: int = 1,
    retries: int = 2,
    only: Sequence[str] | None = None,
    timeout: float | None = None,
    flags: Mapping[str, Any] | None = None,
    config: str | None = None,
    resume: bool = False,
    shard: tuple[int, int] | None = None,
    on_result: Callable[[Progress, Record, int], None] | None = None,
) -> EvalOutcome:
    """Run ``suite`` (a name, a .toml path or a Suite with a ``ref``) into ``out``.

    Each (task, attempt) is tried until it ends without an infrastructure error or
    ``retries`` retries are spent. ``shard=(K, N)``: only the tasks whose index ``i`` (in
    suite order, after ``only``) has ``i % N == K`` (a Kubernetes Indexed Job's pods). Ctrl+C (or SIGTERM) stops every session, keeps what
    finished, writes the summary and the report and returns ``interrupted=True``.
    """
    check_platform()
    suite_obj = suite if isinstance(suite, Suite) else load_suite(suite)
    if suite_obj.unavailable:
        raise ConfigError(suite_obj.unavailable, where="SUITE")
    if not suite_obj.ref:
        raise ConfigError(f"suite {suite_obj.name!r} has no ref: sessions could not load it")
    engine = engine or LocalEngine(1)
    tasks = [t for t in suite_obj.tasks if not only or t.name in only]
    if only:
        missing = sorted(set(only) - {t.name for t in tasks})
        if missing:
            raise ConfigError(f"suite {suite_obj.name!r} has no task {', '.join(missing)}", where="--tasks")
    if shard is not None:
        index, count = shard
        if not 0 <= index < count:
            raise ConfigError(f"shard {index}/{count}: K must be in 0..N-1", where="--shard")
        tasks = shard_tasks(tasks, index, count)
    if scripted:
        unsolved = [t.name for t in tasks if not t.solution]
        if unsolved:
            raise ConfigError(f"--scripted needs a solution for every task; none for {', '.join(unsolved)}")
    if repeat < 1 or retries < 0:
        raise ConfigError("--repeat is at least 1 and --retries at least 0")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = ResultsLog(out_dir)
    previous = log.load()
    if previous and not resume:
        raise ConfigError(f"{out_dir} already holds results: add --resume to go on, or choose another --out",
                          where="--out")
    settled = {(r["task"], r["attempt"]) for r in previous if r.get("final")}
    tries = {(r["task"], r["attempt"]): r["try"] for r in previous if not r.get("final")}
    by_name = {t.name: t for t in tasks}

    def limit(name: str) -> float:
        return timeout if timeout is not None else by_name[name].max_seconds + SESSION_MARGIN_S

    attempts = [Attempt(t.name, a, tries.get((t.name, a), 0) + 1, limit(t.name))
                for a in range(1, repeat + 1) for t in tasks if (t.name, a) not in settled]
    records = list(previous)
    progress = Progress(total=len(attempts))
    lock = threading.Lock()
    queue: AttemptQueue

    def settle(attempt: Attempt, record: Record) -> Attempt | None:
        retry = bool(record.get("error_kind")) and attempt.try_ <= retries
        record = {**record, "suite": suite_obj.name, "final": not retry, "ended": round(time.time(), 3)}
        with lock:
            log.append(record)
            records.append(record)
            progress.done += 0 if retry else 1
            if retry:
                progress.retries += 1
            elif record.get("error_kind"):
                progress.errors += 1
            elif record.get("success"):
                progress.successes += 1
            else:
                progress.failures += 1
        if on_result is not None:
            on_result(progress, record, queue.running)
        return Attempt(attempt.task, attempt.attempt, attempt.try_ + 1, attempt.timeout) if retry else None

    queue = AttemptQueue(attempts, settle)
    spec = {"suite": suite_obj.ref, "out": str(out_dir.resolve()), "scripted": scripted, "flags": dict(flags or {}),
            "config": config, "token": uuid.uuid4().hex}
    stop = threading.Event()
    started = time.monotonic()
    interrupted = False
    failures: list[BaseException] = []
    # The engine's end, as an event: a KeyboardInterrupt that lands inside Thread.join can
    # leave is_alive() False while the thread still runs (CPython's join is not safe against
    # an exception mid-wait), and the driver must wait until every session was stopped.
    ended = threading.Event()

    def run_engine() -> None:
        try:
            engine.run(queue, spec, stop)
        except BaseException as exc:  # re-raised here below, in the caller's thread
            failures.append(exc)
        finally:
            ended.set()

    runner = threading.Thread(target=run_engine, name="deskpilot-eval-engine", daemon=True)
    old_term = _install_sigterm()
    try:
        runner.start()
        while not ended.wait(0.2):
            pass
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        queue.close()
        # Every session is stopped by its worker (SIGTERM, then SIGKILL to its group).
        while not ended.is_set():
            try:
                ended.wait(0.2)
            except KeyboardInterrupt:
                continue  # a second Ctrl+C: the sessions are already being stopped
    finally:
        _restore_sigterm(old_term)
    if failures:
        raise failures[0]
    wall = time.monotonic() - started
    summary = summarize(records, suite=suite_obj.name, wall_s=wall, ran=progress.done + progress.retries,
                        parallel=engine.parallel, engine=engine.name, scripted=scripted,
                        tasks=[t.name for t in tasks])
    summary["interrupted"] = interrupted
    summary["engine_startup_s"] = engine.startup_s
    if shard is not None:
        summary["shard"] = f"{shard[0]}/{shard[1]}"
    from deskpilot.rundir import dumps_json

    (out_dir / "summary.json.tmp").write_bytes(dumps_json(summary, indent=True))
    os.replace(out_dir / "summary.json.tmp", out_dir / "summary.json")
    write_report_html(out_dir, summary, records)
    return EvalOutcome(summary, out_dir, interrupted)


T = TypeVar("T")


def shard_tasks(tasks: Sequence[T], index: int, count: int) -> list[T]:
    """Shard ``index`` of ``count``: the items ``i`` with ``i % count == index``, in order."""
    return [task for i, task in enumerate(tasks) if i % count == index]


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (``--shard``) as (K, N); K in 0..N-1."""
    head, sep, tail = text.partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index, count = -1, 0
    if not sep or count < 1 or not 0 <= index < count:
        raise ConfigError(f"--shard {text!r}: give K/N with N at least 1 and K in 0..N-1 (0/4 .. 3/4)",
                          where="--shard")
    return index, count


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _install_sigterm() -> Any:
    # SIGTERM stops a suite like Ctrl+C does (a CI job cancelled, `kill`).
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_interrupt)


def _restore_sigterm(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)
