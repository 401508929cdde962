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
