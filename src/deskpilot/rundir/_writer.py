"""The run directory: an append-only, crash-safe record of one agent run.

Users read this format in ``docs/run-directory.md`` (with what team and stateless mode
add); keep the two in step (tests/unit/rundir/test_runlog.py checks the doc names every key).
The records' types (:mod:`deskpilot.rundir._records`) are the same schema for the code;
tests/unit/rundir/test_records.py checks the golden runs and the doc against them.

Layout (format version 1)::

    runs/<YYYYmmdd-HHMMSS>[-N]/
      run.json            what was asked: task, scenario, mode, toolset, resolved config
                          (secrets masked) and where each value came from, host info
      turns.jsonl         one JSON object per line, one line per turn (see below);
                          appended, flushed and fsynced after every turn
      screen_0001.png     every screenshot the model was sent, seed names
                          (<AGENT_DUMP_PREFIX><index:04d>.png from AGENT_DUMP_START; when
                          AGENT_DUMP_DIR is set they go there instead and turns record
                          the absolute path)
      zoom_0003.png       (extended toolset) native-resolution crops sent by ``zoom``
      exchange.jsonl      sanitized HTTP exchange log, one JSON record per HTTP attempt
                          (images -> sha256 + length; see deskpilot.rundir._exchange)
      summary.json        outcome and totals; written at start with outcome "running"
                          and atomically replaced at the end, also on crash or Ctrl+C
      lmstudio_raw.log,   (optional, seed 001) LM Studio server-log lines of this run,
      lmstudio_raw_clean.log   raw and with base64 images replaced

A ``turns.jsonl`` record (keys absent when not applicable)::

    {"v": 1, "turn": 3, "time": 1732250000.123, "mode": "single", "role": "agent",
     "request": {"messages": 9, "images": 2, "bytes": 812345},   # what was sent this turn
     "model": {"content": "...", "reasoning": null, "finish_reason": "tool_calls",
               "usage": {...}, "timings": {...}, "attempts": 1, "streamed": false,
               "tool_calls": [{"id": "call_1", "name": "click_element", "arguments": {...},
                               "raw_arguments": "{...}"}]},
     "tool_call": {"id": "call_1", "name": "click_element", "arguments": {...}},
                                               # + "raw_arguments" when they did not parse
     "result": {"ok": true, "action": "click", "label": "OK", "box": [...], "point": [...],
                "changed": true, "changed_region": [x1, y1, x2, y2],   # 0..1000, or null
                "pointer_moved_only": true, "no_effect_repeats": 3, "warning": "..."},
                                               # the payload the model got back
     "action": {"kind": "click", "x": 960, "y": 324, "button": "left", "count": 1, "label": "OK"},
     "mapping": {"monitor": 1, "origin": [0, 0], "physical_size": [1920, 1080],
                 "image_size": [1536, 864], "scale": [1.25, 1.25]},  # the frame the call used
     "more_calls": [{...tool_call..., "result", "action", "mapping"}],  # agent.one_tool_call off
     "extra_calls": [{"id": ..., "name": ..., "result": {...too_many_tool_calls...}}],
     "settle": {"polls": 2, "stable": true, "waited_ms": 24.1},
     "screen_unchanged": true,                 # the settled screen equals the last frame
     "observation": {"screenshot": "screen_0004.png", "mapping": {...}, "digest": "9f...",
                     "reused": false,          # same frame encoded before: no new file
                     "unchanged": false,       # same pixels as the last image sent
                     "zoomed": false, "png_bytes": 81234,
                     "sent": "image"},         # or "note": a one-line text instead
     "timings": {"model": 812.0, "parse": 0.1, "action": 3.2, "capture": 9.8,
                 "settle": 4.1, "encode": 4.1, "request_build": 0.3, "overhead": 21.6},
     "action_started_early": true,             # streaming: the call ran before the stream ended
     "final": true, "answer": "...",           # the final turn only
     "ended_by": "interrupted"}                # the last turn of a run stopped from outside

Every append-only file (``turns.jsonl``, ``exchange.jsonl``, team mode's
``execution_log.txt``, stateless ``main.log``) goes through :class:`LineFile`: a line is
on disk whole or not at all. When the disk refuses a write (full, read-only, the run
directory deleted) the file is truncated back to its last whole line, nothing more is
written but the summary (compact, or in place of the old one when even that does not
fit), and the run stops with a :class:`RunLogError` that says which file and why.

Turn 0 is the initial observation (no model call). Turn N's ``timings`` hold the model
wait of request N and everything done with its answer, up to the next request
(``overhead``: reply parsed -> next request handed to the HTTP client; absent on turn 0
and on the last turn). ``mapping`` is what replay needs to turn the recorded call's
0..1000 coordinates into the recorded physical ``action``; the observation's mapping is
the frame of the image the *next* call will use. Modes add their own keys (team mode:
``role`` "planner"/"executor").

``run.json``: ``{"v", "task", "scenario" (name, group, index, toolset, task, ...) or null,
"mode", "toolset", "config" (every setting, secrets masked), "config_sources"
("section.key" -> "default" / "environment variable X" / "flag ..." / "config file ..."),
"config_file", "deskpilot", "python", "platform", "imaging_backend", "started", "pid"}``.

``summary.json``: ``{"v", "run_dir", "task", "mode", "model", "endpoint", "outcome"
("running" | "answered" | "max_steps" | "max_time" | "interrupted" | "error" | a mode's
own word), "error", "error_details", "answer" (think blocks stripped), "steps",
"max_steps", "started", "ended", "duration_s", "screenshots", "screenshot_dir",
"totals": {"requests", "tool_calls", "tool_errors", "request_bytes", "prompt_tokens",
"completion_tokens", "images_sent", "frames_encoded"}, "phases": {phase: {"count",
"p50_ms", "p95_ms", "mean_ms", "max_ms", "total_ms"}}, "run_log_errors",
"lmstudio_logs", "dpi_awareness", "safety"}``.

``safety`` (absent with ``[safety] enabled = false``): ``{"policy_mode", "decisions":
{"checked", "allowed", "denied", "confirmed", "would_deny"}, "denied": [{"kind", "allowed",
"rule", "reason", "category", "window", "check_ms"}, ...] (first 50), "confirmations":
[{"kind", "rule", "confirmed"}, ...] (every confirm question's answer in order, absent when
none was asked; a replay answers them the same way), "window" (how window
rules read the foreground window), "kill_switch": {"budget", "hotkey", "corner"} (armed /
unavailable / off), "tripped": {"source", "reason", ...} or null, "budget": {"max_steps",
"max_seconds", "steps", "elapsed_s"}}``.

Redaction: with the safety layer on, every record above (and ``exchange.jsonl``) is
written through :func:`deskpilot.safety.redact`: secrets become
``[REDACTED:<detector>]``; with ``[safety] mask_typed_text`` typed text becomes
``[MASKED:<n> chars]``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import orjson

from deskpilot._errors import RunLogError
from deskpilot._untrusted import scrub_surrogates
from deskpilot.rundir._files import EXCHANGE_FILE, RUN_FILE, SUMMARY_FILE, TURNS_FILE
from deskpilot.rundir._records import RunInfo, Summary, TurnRecord

__all__ = [
    "FORMAT_VERSION",
    "LineFile",
    "RunLog",
    "RunLogError",
    "dumps_json",
    "iter_turns",
    "load_summary",
    "validate_run_dir",
    "write_file",
]

FORMAT_VERSION = 1


@runtime_checkable
class _AsDict(Protocol):
    """A record-like value that says what it is as a dict (a trip, a decision)."""

    def as_dict(self) -> Any: ...


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return f"<{len(obj)} bytes>"
    if isinstance(obj, _AsDict):
        return obj.as_dict()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def dumps_json(obj: Any, *, indent: bool = False) -> bytes:
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    try:
        return orjson.dumps(obj, default=_default, option=option)
    except TypeError:
        # A lone surrogate from a model's JSON cannot be written as UTF-8; the record is
        # kept with U+FFFD in its place instead of being lost.
        return orjson.dumps(scrub_surrogates(obj), default=_default, option=option)


def run_file_error(path: Path, exc: OSError, doing: str) -> RunLogError:
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif exc.errno == errno.EROFS:
        why = "the file system is read-only"
    elif exc.errno == errno.ENOENT:
        why = "the run directory was deleted"
    return RunLogError(
        f"cannot {doing} {str(path)!r}: {why}; the run stops",
        path=str(path),
        errno=errno.errorcode.get(exc.errno or 0, exc.errno),
    )


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (temp file + rename); no temp file is left on failure."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_file(path: Path, data: bytes) -> None:
    """Write a new run file (a screenshot); a failed write leaves no partial file."""
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise run_file_error(path, exc, "write") from None


class LineFile:
    """The one writer of the append-only run files (``turns.jsonl``, ``exchange.jsonl``,
    team mode's ``execution_log.txt``): every line is on disk whole or not at all.

    A write that fails part-way (disk full, I/O error) is rolled back by truncating the
    file to the end of its last whole line; the file then refuses further lines and
    :attr:`failure` says why. A file (or run directory) deleted while the run writes is
    a failure too, found before the write (on POSIX the writes would otherwise go to an
    unlinked inode and vanish silently). Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self.failure: RunLogError | None = None
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                               | getattr(os, "O_BINARY", 0), 0o644)
            self._size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise run_file_error(self.path, exc, "open") from None

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole lines); raises :class:`RunLogError` after rolling back."""
        with self._lock:
            if self._fd < 0:
                raise RunLogError(f"{str(self.path)!r} is closed", path=str(self.path))
            if self.failure is not None:
                raise self.failure
            try:
                if os.fstat(self._fd).st_nlink == 0:
                    raise FileNotFoundError(errno.ENOENT, "deleted")
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
                if self._fsync:
                    os.fsync(self._fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
                self.failure = run_file_error(self.path, exc, "append to")
                raise self.failure from None
            self._size += len(data)

    def sync(self) -> None:
        with self._lock:
            if self._fd >= 0 and self.failure is None:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)


_SUMMARY_ESSENTIALS = ("v", "run_dir", "task", "mode", "outcome", "error", "steps", "started", "ended", "run_log_errors")


def _overwrite(path: Path, data: bytes) -> None:
    # Not atomic: the last resort on a full disk, rewriting blocks the old file holds.
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


class RunLog:
    """Writes one run directory. Disk work happens on one writer thread, in order.

    ``write_turn`` and ``save_screenshot`` return immediately (the turn loop never
    waits on the disk); ``flush`` waits for everything queued so far. ``close`` drains,
    fsyncs and closes; it is idempotent and safe to call from ``finally``.
    """

    def __init__(
        self,
        path: Path,
        *,
        dump_dir: Path | None = None,
        dump_prefix: str = "screen_",
        dump_start: int = 1,
        save_screenshots: bool = True,
    ) -> None:
        self.path = path
        self.dump_dir = dump_dir if dump_dir is not None else path
        self.dump_prefix = dump_prefix
        self._next_index = dump_start
        self.save_screenshots = save_screenshots
        self.screenshots: list[str] = []
        self.errors: list[str] = []
        self.turns_written = 0
        #: Applied to every record before it is written (turns, run.json, summary.json):
        #: the safety layer's redaction of secrets / typed text. None: written as is.
        self.redactor: Callable[[Any], Any] | None = None
        #: The first write that failed (disk full, read-only, run directory deleted):
        #: nothing more is written but the summary, and ``on_failure`` was told once.
        self.failure: RunLogError | None = None
        #: Called once with the failure, from whichever thread found it (the loop stops
        #: the run through it).
        self.on_failure: Callable[[RunLogError], None] | None = None
        self._turns = LineFile(path / TURNS_FILE, fsync=True)
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._writer = threading.Thread(target=self._drain, name="deskpilot-runlog", daemon=True)
        self._writer.start()

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(
        cls,
        runs_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        dump_dir: str | os.PathLike[str] | None = None,
        dump_prefix: str = "screen_",
        dump_start: int = 1,
        save_screenshots: bool = True,
    ) -> RunLog:
        """Make ``runs_dir/<timestamp>`` (``-2``, ``-3``... when taken) and open it."""
        root = Path(runs_dir)
        try:
            root.mkdir(parents=True, exist_ok=True)
            base = name or time.strftime("%Y%m%d-%H%M%S")
            path = root / base
            suffix = 1
            while True:
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    suffix += 1
                    path = root / f"{base}-{suffix}"
            dump: Path | None = None
            if dump_dir:
                dump = Path(dump_dir)
                dump.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunLogError(f"cannot create the run directory under {str(root)!r}: {exc}", path=str(root)) from None
        return cls(path, dump_dir=dump, dump_prefix=dump_prefix, dump_start=dump_start, save_screenshots=save_screenshots)

    # ------------------------------------------------------------------ writer thread
    def _drain(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except RunLogError as exc:
                self.fail(exc)
            except Exception as exc:  # keep recording the rest; report at the end
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def fail(self, exc: RunLogError) -> None:
        """Record that a run file cannot be written; the first failure stops the run."""
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = exc
        if not first:
            return
        self.errors.append(str(exc))
        callback = self.on_failure
        if callback is not None:
            try:
                callback(exc)
            except Exception as cb_exc:  # the writer thread must survive a bad callback
                self.errors.append(f"on_failure: {type(cb_exc).__name__}: {cb_exc}")

    def _submit(self, job: Callable[[], None]) -> None:
        if self._closed:
            raise RunLogError(f"run directory {str(self.path)!r} is closed")
        self._queue.put(job)

    def flush(self, timeout: float = 10.0) -> None:
        """Block until every queued write is on disk."""
        if self._closed:
            return
        done = threading.Event()
        self._queue.put(done.set)
        if not done.wait(timeout):
            self.errors.append(f"flush timed out after {timeout} s")

    # ------------------------------------------------------------------ records
    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.path).as_posix()
        except ValueError:
            return str(path.resolve())

    def reserve_screenshot(self, prefix: str | None = None) -> tuple[str, Path]:
        """The next seed-style file name (``screen_0001.png``) and its path."""
        with self._lock:
            index = self._next_index
            self._next_index += 1
        folder = self.dump_dir if prefix is None else self.path
        target = folder / f"{prefix or self.dump_prefix}{index:04d}.png"
        return self._relative(target), target

    def save_screenshot(self, png: bytes, *, prefix: str | None = None) -> str | None:
        """Queue a PNG for writing; returns its name as turns record it (None if disabled)."""
        if not self.save_screenshots:
            return None
        name, target = self.reserve_screenshot(prefix)
        self.screenshots.append(name)

        def write() -> None:
            if self.failure is None:
                write_file(target, png)

        self._submit(write)
        return name

    def write_new_file(self, path: Path, data: bytes) -> None:
        """Write a new file of the run now (not queued): a mode's own screenshots. A
        failure leaves no partial file, stops the run (:meth:`fail`) and is raised."""
        if self.failure is not None:
            raise self.failure
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            failure = run_file_error(path.parent, exc, "create")
            self.fail(failure)
            raise failure from None
        try:
            write_file(path, data)
        except RunLogError as exc:
            self.fail(exc)
            raise

    def write_turn(self, record: TurnRecord) -> TurnRecord:
        """Queue one turns.jsonl line; the writer flushes and fsyncs after it. Returns
        the record as written (redacted when a redactor is set; ``record`` is not changed)."""
        if self.redactor is not None:
            record = cast(TurnRecord, self.redactor(record))
        line = dumps_json({"v": FORMAT_VERSION, **record}) + b"\n"
        self.turns_written += 1

        def write() -> None:
            if self.failure is None:
                self._turns.append(line)  # flushed and fsynced; rolled back if it fails

        self._submit(write)
        return record

    def write_json(self, name: str, obj: Any) -> None:
        """Write a JSON file in the run directory atomically, now (not queued)."""
        if self.redactor is not None:
            obj = self.redactor(obj)
        path = self.path / name
        try:
            _atomic_write(path, dumps_json(obj, indent=True))
        except OSError as exc:
            failure = run_file_error(path, exc, "write")
            self.fail(failure)
            raise failure from None

    def replace_file(self, name: str, data: bytes) -> None:
        """Replace a file of the run atomically (temp file + rename; none left behind).
        For files no writer has open any more: call it after :meth:`close`."""
        _atomic_write(self.path / name, data)

    def write_run_info(self, info: RunInfo) -> None:
        record: RunInfo = {"v": FORMAT_VERSION, **info}
        self.write_json(RUN_FILE, record)

    def write_summary(self, summary: Summary) -> None:
        """Write summary.json; when the disk refuses it, still say what happened if any
        byte can be written: compact, then only the essentials, each first atomically and
        then in place of the old summary (whose blocks are already allocated)."""
        record: Summary = {"v": FORMAT_VERSION, "run_dir": str(self.path), **summary}
        try:
            self.write_json(SUMMARY_FILE, record)
            return
        except RunLogError as exc:
            failure = exc
        if self.redactor is not None:
            record = cast(Summary, self.redactor(record))
        written: Mapping[str, Any] = record
        essentials = {k: written[k] for k in _SUMMARY_ESSENTIALS if k in written}
        path = self.path / SUMMARY_FILE
        for data in (dumps_json(record), dumps_json(essentials)):
            for write in (_atomic_write, _overwrite):
                try:
                    write(path, data)
                except OSError:
                    continue
                return
        raise failure

    @property
    def exchange_log_path(self) -> Path:
        return self.path / EXCHANGE_FILE

    def close(self) -> None:
        """Drain the writer, fsync turns.jsonl, close files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join(timeout=30)
        try:
            self._turns.sync()
        except OSError as exc:
            self.errors.append(f"closing turns.jsonl: {exc}")
        finally:
            self._turns.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------- reading


def iter_turns(run_dir: str | os.PathLike[str]) -> Iterator[TurnRecord]:
    """Parse ``turns.jsonl`` line by line; a bad line raises :class:`RunLogError`."""
    path = Path(run_dir) / TURNS_FILE
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise RunLogError(f"cannot read {str(path)!r}: {exc}", path=str(path)) from None
    with fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise RunLogError(f"{path}:{number}: not JSON: {exc}", path=str(path), line=number) from None
            if not isinstance(record, dict):
                raise RunLogError(f"{path}:{number}: a record must be an object", path=str(path), line=number)
            yield cast(TurnRecord, record)


def load_summary(run_dir: str | os.PathLike[str]) -> Summary:
    path = Path(run_dir) / SUMMARY_FILE
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RunLogError(f"cannot read {str(path)!r}: {exc}", path=str(path)) from None
    if not isinstance(data, dict):
        raise RunLogError(f"{path}: summary must be an object", path=str(path))
    return cast(Summary, data)


def validate_run_dir(run_dir: str | os.PathLike[str]) -> list[str]:
    """Problems with a recorded run directory (empty list = complete and valid)."""
    root = Path(run_dir)
    problems: list[str] = []
    for name in (RUN_FILE, TURNS_FILE, SUMMARY_FILE):
        if not (root / name).is_file():
            problems.append(f"{name} is missing")
    if problems:
        return problems
    try:
        turns = list(iter_turns(root))
    except RunLogError as exc:
        return [str(exc)]
    try:
        summary = load_summary(root)
    except RunLogError as exc:
        return [str(exc)]
    if summary.get("outcome") in (None, "running"):
        problems.append(f"summary outcome is {summary.get('outcome')!r}: the run did not finish its record")
    numbers = [t.get("turn") for t in turns]
    if numbers != sorted(numbers):  # type: ignore[type-var]
        problems.append(f"turn numbers are not in order: {numbers}")
    for record in turns:
        if record.get("v") != FORMAT_VERSION:
            problems.append(f"turn {record.get('turn')}: format version {record.get('v')!r}")
        shot = (record.get("observation") or {}).get("screenshot")
        if shot:
            shot_path = Path(shot) if Path(shot).is_absolute() else root / shot
            if not shot_path.is_file():
                problems.append(f"turn {record.get('turn')}: screenshot {shot} is missing")
    return problems
