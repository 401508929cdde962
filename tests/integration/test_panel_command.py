"""``deskpilot panel`` on Xvfb: the seed's ``python main.py`` — serve the panel, wait for an
injected model output, run it, answer; with no input sent anywhere (``--no-physical``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from deskpilot.agent import iter_turns, validate_run_dir
from deskpilot.testing import ModelServer, ScriptedPolicy

pytestmark = pytest.mark.x11


def test_panel_command_waits_for_an_injection_then_runs(xvfb: str, tmp_path: Path) -> None:
    done = json.dumps({"observation": "Nothing left to do.", "actions": [{"name": "done"}]})
    with ModelServer(ScriptedPolicy([done])) as server:
        (tmp_path / "empty.toml").write_text("")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deskpilot",
                "panel",
                "--panel-port",
                "0",
                "--endpoint",
                server.endpoint,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--json",
                "--no-physical",
                "--max-steps",
                "3",
                "--config",
                str(tmp_path / "empty.toml"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # A token is generated per start and printed in the link (notebook-style).
            assert proc.stderr is not None
            first_lines: list[str] = []
            for line in proc.stderr:
                first_lines.append(line)
                if "?token=" in line:
                    break
            link = next((w for w in "".join(first_lines).split() if "?token=" in w), None)
            assert link, "".join(first_lines)[-3000:]
            url, _, token = link.partition("/?token=")
            deadline = time.monotonic() + 10
            while not (found := list((tmp_path / "runs").glob("*/stateless.json"))):
                assert time.monotonic() < deadline, "no stateless.json"
                time.sleep(0.05)
            assert orjson.loads(found[0].read_bytes())["panel"] == url
            assert httpx.get(f"{url}/state", timeout=5).status_code == 401  # no token, no access
            headers = {"authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, timeout=5, headers=headers) as client:
                deadline = time.monotonic() + 10
                while client.get("/state").json()["phase"] != "waiting_inject":
                    assert time.monotonic() < deadline, "the engine is not waiting for an injection"
                    time.sleep(0.05)
                first = json.dumps(
                    {
                        "observation": "Injected: I click the centre.",
                        "actions": [{"name": "click", "x1": 500, "y1": 500}],
                    }
                )
                assert client.post("/inject", json={"vlm_text": first}).status_code == 202
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert server.problems == []
    stderr = "".join(first_lines) + stderr
    assert proc.returncode == 0, stderr[-3000:]
    assert f"panel at {url}/?token={token}" in stderr
    assert len(token) >= 32
    summary = json.loads(stdout)
    assert summary["outcome"] == "answered" and summary["answer"] == "Nothing left to do."
    run_dir = Path(summary["run_dir"])
    assert validate_run_dir(run_dir) == []
    turn1 = next(r for r in iter_turns(run_dir) if r.get("stage") == "turn")
    assert turn1["dry_run"] is True
    assert turn1["actions"][0]["physical"] == {
        "kind": "click",
        "x": 960,
        "y": 540,
        "button": "left",
        "count": 1,
    }
    assert (run_dir / "turn_0001_annotated.png").is_file() and (run_dir / "main.log").is_file()


def test_panel_hints_what_to_paste_takes_a_plain_reply_and_stays_up_after_the_run(
    xvfb: str, tmp_path: Path
) -> None:
    """Waiting: the terminal says what to paste where; POST /inject takes the model's JSON as
    it is; after the run the panel stays up with the final state until Ctrl+C."""
    import queue
    import signal
    import threading

    done = json.dumps({"observation": "Nothing left to do.", "actions": [{"name": "done"}]})
    (tmp_path / "empty.toml").write_text("")
    with ModelServer(ScriptedPolicy([done])) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deskpilot",
                "panel",
                "--linger",
                "--panel-port",
                "0",
                "--endpoint",
                server.endpoint,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--no-physical",
                "--max-steps",
                "3",
                "--config",
                str(tmp_path / "empty.toml"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stderr is not None
        threading.Thread(
            target=lambda: [lines.put(line) for line in proc.stderr], daemon=True
        ).start()  # type: ignore[union-attr]
        seen: list[str] = []

        def wait_line(needle: str, timeout: float = 60) -> str:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    assert proc.poll() is None, "".join(seen)
                    continue
                seen.append(line)
                if needle in line:
                    return line
            raise AssertionError(f"no {needle!r} in: {''.join(seen)}")

        try:
            wait_line("deskpilot: waiting for a model output")
            curl = wait_line("curl -X POST")
            url = curl.split("curl -X POST ")[1].split("/inject")[0]
            # The line is complete: the token the start-up link printed is in its header.
            token = curl.split("Authorization: Bearer ")[1].split("'")[0]
            assert len(token) >= 32
            reply = b'{"observation": "Injected: I click the centre.", "actions": [{"name": "click", "x1": 500, "y1": 500}]}'
            with httpx.Client(base_url=url, timeout=5, headers={"authorization": f"Bearer {token}"}) as client:
                posted = client.post(
                    "/inject", content=reply, headers={"content-type": "application/json"}
                )
                assert posted.status_code == 202, posted.text
                ended = wait_line("the panel stays up at")
                assert "the run ended (answered)" in ended and "Ctrl+C" in ended
                final = client.get("/state").json()  # the run is over; the panel still answers
                assert final["observation"] == "Nothing left to do." and final["turn"] >= 2
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0
            wait_line("panel stopped", timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/state", timeout=2)
