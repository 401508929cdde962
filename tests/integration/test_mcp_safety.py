"""``deskpilot mcp`` stops for real: the kill switch ends the session, and a client killed in
the middle of an action leaves nothing pressed. Each test has a server process of its own
(the official SDK's stdio client starts it), on Xvfb with the Tk target app."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _mcp import error_text, meta, server_command, stdio
from apps.harness import TargetApp, keys_and_buttons_down

pytestmark = pytest.mark.x11


def _wait(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, the killed client, never reaps it).
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _run_dir(runs: Path) -> Path:
    assert _wait(lambda: runs.is_dir() and any(runs.iterdir()), 30)
    (run_dir,) = runs.iterdir()
    return run_dir


def test_the_kill_switch_hotkey_ends_the_session_and_nothing_more_is_sent(
    target_app: TargetApp, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    client = stdio(server_command(runs))
    try:
        assert not client.call("screenshot", {"max_width": 960, "max_height": 540}).is_error
        run_dir = _run_dir(runs)
        pid = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["pid"]
        subprocess.run(["xdotool", "key", "ctrl+alt+q"], check=True, timeout=10)
        assert _wait(lambda: not _pid_alive(pid), 15), "the server still runs after the kill switch tripped"
        mark = target_app.mark()
        with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a closed connection
            result = client.call("click", {"x": 100, "y": 100}, timeout=15)
            raise AssertionError(f"a call after the kill switch was answered: {result}")
        target_app.wait_quiet(0.2)
        assert [r for r in target_app.since(mark) if r["type"] == "press"] == []
    finally:
        client.close()
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["outcome"] == "interrupted"
    assert "kill switch (hotkey)" in summary["error"]
    assert summary["safety"]["tripped"]["source"] == "hotkey"
    assert keys_and_buttons_down() == ([], 0)


CLIENT = textwrap.dedent(
    """\
    import asyncio, json, os, sys
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(command=sys.executable, args=sys.argv[1:], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("screenshot", {"max_width": 640, "max_height": 360})
            print("typing", flush=True)
            await s.call_tool("type_text", {"text": "a" * 2000})
            print("typed", flush=True)

    asyncio.run(main())
    """
)


def test_a_client_killed_mid_action_leaves_nothing_pressed_and_the_session_recorded(
    target_app: TargetApp, tmp_path: Path
) -> None:
    target_app.clear()
    target_app.focus("text")
    runs = tmp_path / "runs"
    runs.mkdir()
    params = server_command(runs)
    script = tmp_path / "client.py"
    script.write_text(CLIENT, encoding="utf-8")
    mark = target_app.mark()
    client = subprocess.Popen(
        [sys.executable, str(script), *params.args], stdout=subprocess.PIPE, text=True, env=params.env, cwd=params.cwd
    )
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "typing"
        # Killed while the text is being typed: some of it has arrived, not all.
        target_app.wait_for(lambda r: r["type"] == "text" and len(r["text"]) >= 20, since=mark, timeout=20)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    run_dir = _run_dir(runs)
    pid = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["pid"]
    assert _wait(lambda: not _pid_alive(pid), 30), "the server outlived its client"
    assert _wait(lambda: (run_dir / "summary.json").is_file(), 10)
    assert keys_and_buttons_down() == ([], 0)
    target_app.wait_quiet(0.3)
    texts = [r["text"] for r in target_app.since(mark) if r["type"] == "text"]
    assert texts and set(texts[-1]) == {"a"}
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["mode"] == "mcp"
    turns = [json.loads(line) for line in (run_dir / "turns.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [t["tool_call"]["name"] for t in turns] == ["screenshot", "type_text"]


def test_read_only_serves_only_the_looking_tools(target_app: TargetApp, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    client = stdio(server_command(runs, "--read-only"))
    try:
        names = {t.name for t in client.run(client.session.list_tools()).tools}
        assert names == {"screenshot", "zoom", "screen_info"}
        assert "frame" in meta(client.call("screenshot"))
        assert "click" in error_text(client.call("click", {"x": 1, "y": 1}))
    finally:
        client.close()


def test_max_steps_bounds_the_actions_of_a_session(target_app: TargetApp, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    client = stdio(server_command(runs, "--max-steps", "1", "--tools", "screenshot,move_mouse"))
    try:
        assert {t.name for t in client.run(client.session.list_tools()).tools} == {"screenshot", "move_mouse"}
        client.call("screenshot")
        assert not client.call("move_mouse", {"x": 10, "y": 10, "screenshot_after": False}).is_error
        assert "max_steps" in error_text(client.call("move_mouse", {"x": 20, "y": 20}))
    finally:
        client.close()
