"""``execution_log.txt``: the seeds' human-readable event log, beside turns.jsonl.

Append-only and flushed after every write (a crash loses nothing already written).
Sections, as the seeds list them::

    ==== EXECUTION LOG START 2025-01-31 14:02:11 ====
    [14:02:11.020] ==== INITIALIZATION ====
    [14:02:11.021] ==== TURN 1 - PLANNING ====
    [14:02:11.022] MODE SWITCH: EXECUTION -> PLANNING (scheduled review)
    [14:02:11.030] API REQUEST #2 (executor): {...}       image by length + screenshot name
    [14:02:11.931] API RESPONSE #2 (executor): {...}
    [14:02:11.932] TOOL click_screen_element: args {...} -> result
    [14:02:11.933] STATE UPDATE: {"turn": 3, "active_history": 2, ...}
    [14:02:11.934] SCREENSHOT: screen_0003.png
    [14:02:20.000] ==== MISSION COMPLETE ==== / ==== DEBRIEF ====

Images never reach this file: the engine logs each request with every image data URL
replaced by its length and the screenshot it came from,
``data:image/png;base64,<N base64 chars: screen_0003.png>`` (see
``TeamMode._request_for_log``), and the system prompts by length (they are logged in
full once, at initialization).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from deskpilot._errors import RunLogError
from deskpilot.rundir import EXECUTION_LOG_FILE, LineFile

__all__ = ["EXECUTION_LOG", "ExecutionLog"]

EXECUTION_LOG = EXECUTION_LOG_FILE
_RULE = "=" * 80


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


class ExecutionLog:
    """Writes ``execution_log.txt``; every method appends and flushes. Thread-safe.

    Writes after :meth:`close` are ignored (cleanup paths may log late), never raised.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        redact: Callable[[str], str] | None = None,
        on_failure: Callable[[RunLogError], None] | None = None,
    ) -> None:
        self.path = Path(path)
        #: Applied to every line before it is written (the safety layer's secret
        #: redaction: typed text and the model's replies appear here verbatim otherwise).
        self.redact = redact
        #: Told (once) when a line cannot be written (disk full, run directory gone):
        #: the run's record stops, the mode is not interrupted by a log line.
        self.on_failure = on_failure
        self._fh: LineFile | None = LineFile(self.path)
        self._lock = threading.Lock()
        self.api_calls = 0
        self.lines = 0

    @classmethod
    def in_directory(
        cls,
        directory: str | os.PathLike[str],
        *,
        redact: Callable[[str], str] | None = None,
        on_failure: Callable[[RunLogError], None] | None = None,
    ) -> ExecutionLog:
        return cls(Path(directory) / EXECUTION_LOG, redact=redact, on_failure=on_failure)

    # ------------------------------------------------------------------ writing
    def _write(self, text: str) -> None:
        if self.redact is not None:
            text = self.redact(text)
        with self._lock:
            if self._fh is None or self._fh.failure is not None:
                return
            data = (text if text.endswith("\n") else text + "\n").encode("utf-8", "replace")
            try:
                self._fh.append(data)  # whole lines or nothing
            except RunLogError as exc:
                if self.on_failure is not None:
                    self.on_failure(exc)
                return
            self.lines += text.count("\n") + (0 if text.endswith("\n") else 1)

    def _stamp(self) -> str:
        now = time.time()
        return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"

    def event(self, label: str, text: str = "") -> None:
        """One line ``[hh:mm:ss.mmm] LABEL: text`` (continuation lines indented)."""
        body = f"{label}: {text}" if text else label
        body = body.replace("\n", "\n    ")
        self._write(f"[{self._stamp()}] {body}")

    def section(self, title: str) -> None:
        self._write(f"[{self._stamp()}] ==== {title} ====")

    def start(self) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self._write(f"{_RULE}\nEXECUTION LOG START {stamp}\n{_RULE}")

    def initialization(self, settings: dict[str, Any]) -> None:
        self.section("INITIALIZATION")
        for key, value in settings.items():
            self.event(f"  {key}", value if isinstance(value, str) else _json(value))

    def turn(self, number: int, mode: str) -> None:
        self.section(f"TURN {number} - {mode}")

    def mode_switch(self, old: str, new: str, reason: str) -> None:
        self.event("MODE SWITCH", f"{old} -> {new} ({reason})")

    def api_request(self, role: str, request: dict[str, Any]) -> int:
        """Log a request (already redacted); returns its call number for the response."""
        with self._lock:
            self.api_calls += 1
            number = self.api_calls
        self.event(f"API REQUEST #{number} ({role})", _json(request))
        return number

    def api_response(self, number: int, role: str, response: Mapping[str, Any]) -> None:
        self.event(f"API RESPONSE #{number} ({role})", _json(response))

    def api_error(self, role: str, error: str) -> None:
        self.event(f"API ERROR ({role})", error)

    def tool(self, name: str, args: Any, result: str) -> None:
        self.event(f"TOOL {name or '<none>'}", f"args {_json(args)} -> {result}")

    def state(self, **values: Any) -> None:
        self.event("STATE UPDATE", _json(values))

    def screenshot(self, name: str | None) -> None:
        if name:
            self.event("SCREENSHOT", name)

    def warning(self, text: str) -> None:
        self.event("WARNING", text)

    def debrief(self, values: dict[str, Any], *, completed: bool) -> None:
        if completed:
            self.section("MISSION COMPLETE")
        self.section("DEBRIEF")
        for key, value in values.items():
            self.event(f"  {key}", value if isinstance(value, str) else _json(value))

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    @property
    def closed(self) -> bool:
        return self._fh is None

    def __enter__(self) -> ExecutionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
