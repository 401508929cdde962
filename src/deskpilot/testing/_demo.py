"""``deskpilot demo``: the agent on a (virtual) display against the built-in model server.

Steps: start Xvfb when there is no display (``-displayfd``, so the display number never
collides), start the Tk demo app (:mod:`deskpilot.testing._demo_app`), start the local model server
with the pixel-reading policy (unless an endpoint is given: then a real LM Studio
drives it), run the agent with real capture and real input, check what the app
received, stop everything. Also used by the integration tests.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskpilot._errors import ConfigError, DeskpilotError, PlatformError
from deskpilot.agent import (
    BUILTIN_SCENARIOS,
    DEMO_TEXT,
    AgentConfig,
    Reporter,
    RunResult,
    Scenario,
    run_agent,
)

__all__ = ["DEMO_MODES", "DemoApp", "DemoResult", "demo_policy", "run_demo", "virtual_display"]

Record = dict[str, Any]


@contextlib.contextmanager
def virtual_display(size: tuple[int, int] = (1920, 1080), *, timeout: float = 15.0) -> Iterator[str]:
    """Start Xvfb, point ``DISPLAY`` at it for the block, stop it after."""
    from deskpilot.testing._xvfb import xvfb

    if shutil.which("Xvfb") is None:  # the demo's own advice: a desktop works too
        raise PlatformError(
            "there is no display and Xvfb is not installed: install it (apt-get install xvfb) or run on a desktop",
            program="Xvfb",
        )
    with xvfb(size, timeout=timeout) as display:
        yield display


class DemoApp:
    """The running demo app: its ``ready`` record and the events it recorded."""

    def __init__(
        self,
        events_path: Path,
        *,
        geometry: str | None = None,
        timeout: float = 20.0,
        module: str = "deskpilot.testing._demo_app",
    ) -> None:
        """``module``: the app to run (another target with the same command line and
        events, e.g. :mod:`deskpilot.testing._settle_app`)."""
        self.events_path = events_path
        events_path.write_text("", encoding="utf-8")
        cmd = [sys.executable, "-m", module, "--events", str(events_path)]
        if geometry:
            cmd += ["--geometry", geometry]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True)
        self.records: list[Record] = []
        self._offset = 0
        self._buffer = ""
        try:
            self.ready = self.wait_for(lambda r: r.get("type") == "ready", timeout=timeout)
        except BaseException:
            self.close()
            raise
        self.widgets: dict[str, list[int]] = self.ready["widgets"]

    def _read(self) -> None:
        with open(self.events_path, encoding="utf-8") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
            self._offset = fh.tell()
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split("\n")
        self.records.extend(json.loads(line) for line in lines if line.strip())

    def events(self) -> list[Record]:
        self._read()
        return list(self.records)

    def wait_for(self, predicate: Callable[[Record], bool], *, timeout: float = 10.0) -> Record:
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            for record in self.records:
                if predicate(record):
                    return record
            if self.proc.poll() is not None:
                raise PlatformError(f"the demo app exited with code {self.proc.returncode}", program="demo app")
            if time.monotonic() > deadline:
                raise PlatformError(f"the demo app did not report in {timeout:g} s", program="demo app")
            time.sleep(0.02)

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

    def __enter__(self) -> DemoApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class DemoResult:
    run: RunResult
    events: list[Record]
    target: list[int]
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    mode: str = "single"

    @property
    def ok(self) -> bool:
        return self.run.outcome == "answered" and all(ok for _, ok, _ in self.checks)


def _checks(events: list[Record], target: list[int], text: str) -> list[tuple[str, bool, str]]:
    x, y, w, h = target
    clicks = [e for e in events if e.get("type") == "press" and e.get("button") == 1]
    inside = [c for c in clicks if x <= c["x"] < x + w and y <= c["y"] < y + h]
    submitted = [e.get("text") for e in events if e.get("type") == "submitted"]
    out = [
        (
            "target clicked within its bounds",
            bool(inside),
            f"click at ({inside[0]['x']}, {inside[0]['y']}) inside {target}" if inside
            else f"clicks: {[(c['x'], c['y']) for c in clicks]}, target {target}",
        ),
        ("text typed exactly", text in submitted, f"submitted {submitted!r}, expected {text!r}"),
        ("Enter received", bool(submitted), f"{len(submitted)} submission(s)"),
    ]
    return out


def demo_scenario() -> Scenario:
    return next(s for s in BUILTIN_SCENARIOS if s.name == "demo")


#: The demo's modes, in the order ``--all`` runs them.
DEMO_MODES = ("single", "team", "stateless")


def demo_policy(mode: str) -> Any:
    """The built-in pixel-reading model for ``mode``, speaking that mode's protocol."""
    from deskpilot.testing import PixelPolicy, StatelessPolicy, TeamPolicy
    from deskpilot.testing._demo_app import CLICKED_RGB, TARGET_RGB

    if mode == "team":
        return TeamPolicy(TARGET_RGB, done_rgb=CLICKED_RGB, text=DEMO_TEXT, key="enter")
    if mode == "stateless":
        return StatelessPolicy(TARGET_RGB, done_rgb=CLICKED_RGB, text=DEMO_TEXT, key="enter")
    if mode != "single":
        raise ConfigError(f"the demo has no built-in model for mode {mode!r}; use one of {', '.join(DEMO_MODES)}")
    return PixelPolicy(
        TARGET_RGB,
        label="TARGET button",
        text=DEMO_TEXT,
        key="enter",
        steps=("click", "type", "key", "done"),
        final="Done: I clicked the TARGET, typed the text and pressed Enter.",
        tool_names={"observe": "observe_screen"},
    )


def run_demo(
    config: AgentConfig,
    *,
    use_builtin_server: bool = True,
    reporter: Reporter | None = None,
    work_dir: Path | None = None,
    server_latency: float = 0.0,
    allow_xwayland: bool = False,
) -> DemoResult:
    """Run the demo in ``config.agent.mode`` on the current display (call inside
    :func:`virtual_display` if needed). With the built-in server, the model is the
    pixel-reading policy of that mode (:func:`demo_policy`). ``allow_xwayland``: as
    :func:`~deskpilot.agent.run_agent`'s (the demo app is an X11 window)."""
    scenario = demo_scenario()
    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="deskpilot-demo-"))
    tmp.mkdir(parents=True, exist_ok=True)
    with DemoApp(tmp / "demo_events.jsonl") as app:
        target = app.widgets["target"]
        if use_builtin_server:
            from deskpilot.testing import ModelServer

            policy = demo_policy(config.agent.mode)
            with ModelServer(policy, latency=server_latency) as server:
                cfg = config.replace(model=_with_endpoint(config, server.endpoint))
                result = run_agent(cfg, scenario, reporter=reporter, allow_xwayland=allow_xwayland)
                problems = server.problems
        else:
            result = run_agent(config, scenario, reporter=reporter, allow_xwayland=allow_xwayland)
            problems = []
        # The app records asynchronously: give the last events a moment to land.
        with contextlib.suppress(DeskpilotError):
            app.wait_for(lambda r: r.get("type") == "submitted", timeout=2.0)
        events = app.events()
    checks = _checks(events, target, DEMO_TEXT)
    if use_builtin_server:
        checks.append(("requests valid (tool schema, ids, image data URLs)", not problems, "; ".join(problems[:3]) or "no problems"))
    return DemoResult(result, events, target, checks, mode=config.agent.mode)


def _with_endpoint(config: AgentConfig, endpoint: str) -> Any:
    import dataclasses

    return dataclasses.replace(config.model, endpoint=endpoint)
