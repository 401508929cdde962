"""Interrupt matrix: SIGINT and SIGTERM delivered in each phase of a turn, on Xvfb.

A child process runs the real agent (real capture, real XTest input, the real test
server) with a reporter that prints each phase as it starts. The parent sends the
signal as soon as the phase of the case begins. To make short phases long enough to be
hit, the harness slows them in the child: grabs sleep during ``capture``/``settle``,
encoding sleeps during ``encode``, the drag lasts 3 s, the typed text is long and the
model answer of the ``model`` case takes 10 s.

After the child exits: no key and no mouse button may be down on the X server
(XQueryKeymap, XQueryPointer), every line of every JSONL file parses, and the run
directory is complete with the summary saying ``interrupted``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from deskpilot._x11 import XDisplay as Connection
from deskpilot.agent import load_summary, validate_run_dir

pytestmark = pytest.mark.x11

CHILD = textwrap.dedent(
    r'''
    import json, sys, time
    from deskpilot import imaging
    from deskpilot.agent import load_config, run_agent
    from deskpilot.agent._screen import CapturerScreen
    from deskpilot.input import InputController
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    case, runs_dir = sys.argv[1], sys.argv[2]

    def mark(name):
        print("MARK " + name, flush=True)

    class Reporter:
        def start(self, info): pass
        def phase(self, turn, phase): mark(f"phase:{phase}")
        def turn(self, record): pass
        def finish(self, summary): pass

    class Hands:
        def __init__(self):
            self.c = InputController("xtest")
        def __getattr__(self, name):
            return getattr(self.c, name)
        def drag(self, start, end=None, **kw):
            mark("drag")
            self.c.drag(start, end, duration=3.0, steps=300)
        def type_text(self, text):
            mark("typing")
            self.c.type_text(text)

    class Screen:
        def __init__(self):
            self.s = CapturerScreen(size=(960, 540))
        def __getattr__(self, name):
            return getattr(self.s, name)
        def _slow(self):
            if case in ("capture", "settle"):
                time.sleep(0.15)
        def grab(self):
            self._slow()
            return self.s.grab()
        def probe(self):
            self._slow()
            return self.s.probe()

    if case == "encode":
        original = imaging.encode_png
        def slow_encode(*a, **k):
            time.sleep(0.3)
            return original(*a, **k)
        imaging.encode_png = slow_encode

    text = "Hello World, typed Slowly. " * 300
    script = {
        "capture": [Reply(tool_calls=[("click_element", {"label": "a", "box": [500, 500]})])] * 3,
        "encode": [Reply(tool_calls=[("click_element", {"label": "a", "box": [500, 500]})])] * 3,
        "settle": [Reply(tool_calls=[("click_element", {"label": "a", "box": [500, 500]})])] * 3,
        "model": [Reply(content="thinking very slowly", delay=10)],
        "drag": [Reply(tool_calls=[("drag", {"start": [300, 300], "end": [700, 700]})])],
        "typing": [Reply(tool_calls=[("type_text", {"text": text})])],
    }[case]
    with ModelServer(ScriptedPolicy(script + ["Done."])) as server:
        cfg = load_config(flags={
            "model.endpoint": server.endpoint, "run.runs_dir": runs_dir, "agent.toolset": "extended",
            "screen.input_backend": "xtest", "agent.max_steps": 8,
            "agent.max_type_chars": 10000,  # the typing case types 8,100 characters in one call
        }, env={}, search_default=False)
        result = run_agent(cfg, "interrupt me", reporter=Reporter(), hands_factory=Hands, screen_factory=Screen)
    print("RESULT " + json.dumps({"outcome": result.outcome, "error": result.error, "run_dir": str(result.run_dir)}),
          flush=True)
    '''
)

PHASES = {
    "capture": "phase:capture",
    "encode": "phase:encode",
    "model": "phase:model",
    "drag": "drag",
    "typing": "typing",
    "settle": "phase:settle",
}


def _held_inputs() -> tuple[list[int], int]:
    with Connection() as conn:
        keymap = conn.keymap()
        buttons = conn.pointer_buttons() & 0x1F00  # Button1Mask..Button5Mask
    down = [i * 8 + b for i, byte in enumerate(keymap) for b in range(8) if byte & (1 << b)]
    return down, buttons


FIGURES: list[dict[str, Any]] = []


@pytest.fixture(scope="module", autouse=True)
def _print_figures() -> Any:
    yield
    if FIGURES:
        print("\n| phase | signal | outcome | stop latency (ms) | keys down | buttons down | JSONL lines | run dir |")
        print("|---|---|---|---|---|---|---|---|")
        for f in FIGURES:
            print(f"| {f['phase']} | {f['signal']} | {f['outcome']} | {f['latency_ms']} | {f['keys']} | "
                  f"{f['buttons']} | {f['lines']} (0 truncated) | valid |")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", list(PHASES))
def test_a_signal_in_any_phase_leaves_nothing_held_and_a_complete_record(
    xvfb: str, tmp_path: Path, phase: str, sig: signal.Signals
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), phase, str(tmp_path / "runs")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "DISPLAY": xvfb},
    )
    marker = PHASES[phase]
    sent_at: float | None = None
    result: dict[str, Any] | None = None
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if line.startswith("MARK ") and sent_at is None and line.split()[1] == marker:
                if phase == "drag":
                    time.sleep(0.2)  # well inside the 3 s drag
                proc.send_signal(sig)
                sent_at = time.monotonic()
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
            if time.monotonic() > deadline:
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    exited = time.monotonic()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert sent_at is not None, f"phase {marker} never started\n{stderr}"
    assert result is not None, f"the child printed no result (rc {proc.returncode})\n{stderr[-3000:]}"
    assert result["outcome"] == "interrupted", result
    assert sig.name in (result["error"] or "")

    keys, buttons = _held_inputs()
    assert keys == [], f"keys still down: {keys}"
    assert buttons == 0, f"buttons still down: {buttons:#x}"

    run_dir = Path(result["run_dir"])
    assert validate_run_dir(run_dir) == []
    lines = 0
    for name in ("turns.jsonl", "exchange.jsonl"):
        path = run_dir / name
        if path.exists():
            text = path.read_text()
            assert text == "" or text.endswith("\n"), f"{name} ends mid-line"
            for line in text.splitlines():
                json.loads(line)
                lines += 1
    summary = load_summary(run_dir)
    assert summary["outcome"] == "interrupted"
    FIGURES.append({"phase": phase, "signal": sig.name, "outcome": result["outcome"],
                    "latency_ms": round((exited - sent_at) * 1000), "keys": len(keys),
                    "buttons": bin(buttons).count("1"), "lines": lines})


# -- Ctrl+C at the edges: interpreter start-up and a second one during clean-up -----------------

CLI_CHILD = textwrap.dedent(
    r'''
    import sys, time
    from deskpilot.input import InputController
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    original = InputController.release_all

    def slow_release(self):
        # A clean-up step long enough for the second Ctrl+C to land in it.
        print("MARK release", flush=True)
        time.sleep(2.0)
        original(self)

    InputController.release_all = slow_release
    from deskpilot.cli import main

    with ModelServer(ScriptedPolicy([Reply(content="thinking very slowly", delay=30)])) as server:
        code = main(["run", "--endpoint", server.endpoint, "--dry-run", "--runs-dir", sys.argv[1], "wait for me"])
    sys.exit(code)
    '''
)


def test_a_second_ctrl_c_during_clean_up_exits_130_and_says_what_was_being_done(xvfb: str, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CLI_CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "DISPLAY": xvfb, "COLUMNS": "200"})
    signals = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "run directory:" in line and signals == 0:
                time.sleep(0.5)  # inside the 30 s model wait
                proc.send_signal(signal.SIGINT)
                signals = 1
            elif line.startswith("MARK release") and signals == 1:
                time.sleep(0.3)
                proc.send_signal(signal.SIGINT)
                signals = 2
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert signals == 2, stderr
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "SIGINT again while releasing held keys and mouse buttons" in stderr, stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_summary(run_dir)["outcome"] == "interrupted"
    assert validate_run_dir(run_dir) == []


STARTUP_CHILD = textwrap.dedent(
    r'''
    import sys, time, importlib.abc

    class SlowImport(importlib.abc.MetaPathFinder):
        # Stretches one import of the CLI's start-up so the signal lands inside it.
        def find_spec(self, name, path, target=None):
            if name == "deskpilot.agent._config":
                print("MARK importing", file=sys.stderr, flush=True)
                time.sleep(5)
            return None

    sys.meta_path.insert(0, SlowImport())
    from deskpilot.cli import main
    sys.exit(main(sys.argv[1:]))
    '''
)


def test_ctrl_c_while_the_cli_starts_prints_no_traceback(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(STARTUP_CHILD)
    proc = subprocess.Popen([sys.executable, str(script), "run", "--endpoint", "http://127.0.0.1:9/v1/chat/completions",
                             "--runs-dir", str(tmp_path / "runs"), "x"], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("MARK importing"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    proc.wait(timeout=30)
    assert "Traceback" not in rest, rest[-3000:]
    assert proc.returncode == 130, (proc.returncode, rest)
    assert rest.strip().splitlines()[-1] == "deskpilot: interrupted while starting", rest
