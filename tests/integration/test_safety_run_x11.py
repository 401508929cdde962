"""The safety layer in real runs on Xvfb: `deskpilot run` stopped by the fail-safe corner
(while another client holds the kill hotkey), and window rules reading the real foreground
window. Real parts: the CLI, capture, XTest input, the X kill-switch watcher, the local
model server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from deskpilot._x11 import XDisplay as Connection
from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.safety import KillSwitch
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

pytestmark = pytest.mark.x11


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def wait_until(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def held_inputs() -> tuple[list[int], int]:
    with Connection() as conn:
        keymap = conn.keymap()
        buttons = conn.pointer_buttons() & 0x1F00
    return [i * 8 + b for i, byte in enumerate(keymap) for b in range(8) if byte & (1 << b)], buttons


@pytest.fixture
def centred(xvfb: str) -> Iterator[str]:
    xdotool("mousemove", "960", "540")
    yield xvfb
    xdotool("mousemove", "960", "540")


def test_deskpilot_run_stops_on_the_fail_safe_corner(centred: str, tmp_path: Path) -> None:
    # A model that would press tab forever (slowly enough to watch it).
    policy = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})], delay=0.1)], on_exhausted="repeat")
    # Another client holds the default kill hotkey: the run must say so and still be stoppable.
    with KillSwitch(corner=False, hotkeys=("ctrl+alt+q",)) as other, ModelServer(policy) as server:
        assert other.status["hotkey"] == "armed: ctrl+alt+q"
        proc = subprocess.Popen(
            [sys.executable, "-m", "deskpilot", "run", "--endpoint", server.endpoint,
             "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540", "--max-steps", "200",
             "--json", "press tab until stopped"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )
        try:
            assert wait_until(lambda: len(server.requests) >= 3 or proc.poll() is not None, 60), "no requests"
            assert proc.poll() is None, proc.communicate()
            at_move = len(server.requests)
            xdotool("mousemove", "0", "0")  # the user slams the pointer into the top-left corner
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        after_move = len(server.requests) - at_move
    assert proc.returncode == 130, out + err  # interrupted
    assert after_move <= 1  # stopped within one turn of the gesture
    summary = orjson.loads(out)
    assert summary["outcome"] == "interrupted" and "fail-safe" in summary["error"]
    safety = summary["safety"]
    assert safety["tripped"]["source"] == "corner" and (safety["tripped"]["x"], safety["tripped"]["y"]) == (0, 0)
    assert safety["kill_switch"]["corner"].startswith("armed")
    assert "unavailable" in safety["kill_switch"]["hotkey"] and "already grabbed" in safety["kill_switch"]["hotkey"]
    assert safety["window"].startswith("reading")  # real input: window rules read the focus
    run_dir = Path(summary["run_dir"])
    assert validate_run_dir(run_dir) == []
    assert load_summary(run_dir)["outcome"] == "interrupted"
    assert list(iter_turns(run_dir))[-1]["ended_by"] == "interrupted"
    assert held_inputs() == ([], 0)  # no key or button left down


TK_APP = textwrap.dedent(
    """
    import sys, tkinter as tk
    root = tk.Tk(className="Vaultish")
    root.title("Passwords - Vaultish")
    root.geometry("1920x1080+0+0")
    entry = tk.Entry(root)
    entry.pack()
    entry.bind("<Key>", lambda e: print("KEY", e.keysym, flush=True))
    root.bind_all("<Button>", lambda e: print("CLICK", e.x_root, e.y_root, flush=True))
    def ready():
        root.focus_force()
        entry.focus_set()
        root.update()
        print("READY", flush=True)
    root.after(100, ready)
    root.after(30000, root.destroy)
    root.mainloop()
    """
)


def test_window_rules_read_the_real_foreground_window(centred: str, tmp_path: Path) -> None:
    app = subprocess.Popen([sys.executable, "-c", TK_APP], stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "READY"
        script = [
            Reply(tool_calls=[("click_element", {"label": "entry", "box": [500, 10]})]),
            Reply(tool_calls=[("press_key", {"key": "a"})]),
            "Done.",
        ]
        with ModelServer(ScriptedPolicy(script)) as server:
            cfg = load_config(
                flags={"model.endpoint": server.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                       "screen.image_width": 960, "screen.image_height": 540,
                       "policy.deny_windows": "class:vaultish"},
                env={}, search_default=False,
            )
            result = run_agent(cfg, "click and type", handle_signals=False)
            payloads = [orjson.loads(m["content"]) for m in server.requests[-1].messages if m.get("role") == "tool"]
    finally:
        app.terminate()
        out, _ = app.communicate(timeout=10)
    assert result.outcome == "answered"
    assert [p["error"]["type"] for p in payloads] == ["policy_denied", "policy_denied"]
    assert all(p["error"]["rule"] == "window.deny:class:vaultish" for p in payloads)
    assert "CLICK" not in out and "KEY" not in out  # the app received nothing
    denied = load_summary(result.run_dir)["safety"]["denied"]
    assert [d["kind"] for d in denied] == ["click", "key"]
    assert "Vaultish" in denied[0]["window"]
