"""The stateless mode end to end on a real X server: real capture, real XTest input, the Tk
demo app, the real local model server with a policy that reads the annotated screenshots,
through ``deskpilot run --mode stateless`` (native annotation) and with the seed's browser
panel in a real headless Chromium (``--annotate browser``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from PIL import Image

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.testing import ModelServer, ScriptedPolicy, find_color
from deskpilot.testing._chromium import Chromium
from deskpilot.testing._demo import DemoApp
from deskpilot.testing._demo_app import TARGET_RGB

pytestmark = pytest.mark.x11

TEXT = "stateless ✓ ok"
PANEL_TOKEN = "browser-test-token-0123456789"


@pytest.fixture
def app(xvfb: str, tmp_path: Path) -> Iterator[DemoApp]:
    with DemoApp(tmp_path / "events.jsonl") as demo:
        yield demo


def decode(png: bytes) -> np.ndarray[Any, Any]:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


class LookingPolicy:
    """A stateless 'model' that reads the screenshot it is sent.

    Request 1: finds the magenta target, answers click + type + Enter (one turn, three
    actions). Request 2: checks the annotated image shows orange heat where it clicked
    (the point of the mode) and that the target turned green, then answers done.
    """

    def __init__(self) -> None:
        self.step = 0
        self.click: tuple[int, int] | None = None
        self.saw_heat = False
        self.saw_green = False
        self.seen_sizes: list[tuple[int, int]] = []

    def respond(self, request: Any) -> str:
        image = request.images[-1]
        png = image.data or b""
        self.seen_sizes.append((image.width, image.height))
        self.step += 1
        if self.step == 1:
            found = find_color(png, TARGET_RGB, tolerance=10)
            if found is None:
                return json.dumps(
                    {"observation": "I cannot see the target.", "actions": [{"name": "done"}]}
                )
            cx, cy = found[0], found[1]
            self.click = (
                round((cx + 0.5) * 1000 / image.width),
                round((cy + 0.5) * 1000 / image.height),
            )
            return json.dumps(
                {
                    "observation": "I see the magenta TARGET; I click it, type the text and press Enter.",
                    "bboxes": [
                        {
                            "x1": self.click[0] - 50,
                            "y1": self.click[1] - 50,
                            "x2": self.click[0] + 50,
                            "y2": self.click[1] + 50,
                            "label": "target",
                        }
                    ],
                    "actions": [
                        {"name": "click", "x1": self.click[0], "y1": self.click[1]},
                        {"name": "type", "text": TEXT},
                        {"name": "key", "keys": "enter"},
                    ],
                }
            )
        assert self.click is not None
        pixels = decode(png).astype(int)
        x = self.click[0] * image.width // 1000
        y = self.click[1] * image.height // 1000
        window = pixels[max(0, y - 25) : y + 25, max(0, x - 25) : x + 25].reshape(-1, 3)
        self.saw_heat = bool(
            (
                (window[:, 0] > 180)
                & (window[:, 0] > window[:, 1] + 40)
                & (window[:, 1] > window[:, 2] + 20)
            ).any()
        )
        green = pixels[max(0, y - 60) : y + 60, max(0, x - 90) : x + 90].reshape(-1, 3)
        self.saw_green = bool(((green[:, 1] > 150) & (green[:, 0] < 80) & (green[:, 2] < 80)).any())
        return json.dumps(
            {
                "observation": "The target is green and the text was submitted.",
                "actions": [{"name": "done"}],
            }
        )


def check_app(app: DemoApp) -> None:
    submitted = app.wait_for(lambda r: r["type"] == "submitted", timeout=10)
    assert submitted["text"] == TEXT
    x, y, w, h = app.widgets["target"]
    clicked = next(e for e in app.events() if e["type"] == "target_clicked")
    assert x <= clicked["x"] < x + w and y <= clicked["y"] < y + h


def check_run_dir(run_dir: Path, annotation: str) -> list[dict[str, Any]]:
    assert validate_run_dir(run_dir) == []
    records = list(iter_turns(run_dir))
    assert [(r["turn"], r.get("stage")) for r in records] == [
        (1, "raw"),
        (1, "annotated"),
        (1, "turn"),
        (2, "raw"),
        (2, "annotated"),
        (2, "turn"),
        (3, "raw"),
        (3, "annotated"),
        (3, "turn"),
    ]
    assert [r["annotation"] for r in records if r.get("stage") == "annotated"] == [annotation] * 3
    for n in (1, 2, 3):
        assert (run_dir / f"turn_{n:04d}_raw.png").is_file() and (
            run_dir / f"turn_{n:04d}_annotated.png"
        ).is_file()
    turn2 = records[5]
    assert [a["physical"]["kind"] for a in turn2["actions"]] == ["click", "type", "key"]
    assert all(a["ok"] for a in turn2["actions"])
    assert "overhead" in turn2["timings"] and "annotate" in turn2["timings"]
    return records


def test_cli_run_mode_stateless_native(app: DemoApp, tmp_path: Path) -> None:
    policy = LookingPolicy()
    with ModelServer(policy, keep_images=2) as server:
        cmd = [
            sys.executable,
            "-m",
            "deskpilot",
            "run",
            "--mode",
            "stateless",
            "--endpoint",
            server.endpoint,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--json",
            "--max-steps",
            "5",
            "--set",
            "stateless.capture_scale_percent=50",
            "--set",
            "stateless.action_delay_seconds=0.05",
            "--config",
            str(tmp_path / "none.toml"),
            "Click the magenta TARGET, type the text and press Enter.",
        ]
        (tmp_path / "none.toml").write_text("")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ})
        assert server.problems == []
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "answered" and summary["mode"] == "stateless"
    assert policy.seen_sizes == [(960, 540), (960, 540)]
    assert policy.saw_heat, "the annotated screenshot showed no heat where the model clicked"
    assert policy.saw_green
    check_app(app)
    run_dir = Path(summary["run_dir"])
    records = check_run_dir(run_dir, "native")
    assert records[0]["actions"] == []  # the boot output does nothing
    assert load_summary(run_dir)["phases"]["annotate"]["count"] == 3


@pytest.mark.browser
def test_browser_annotation_end_to_end_with_chromium(app: DemoApp, tmp_path: Path) -> None:
    policy = LookingPolicy()
    discover_modes()
    result: list[Any] = []
    with ModelServer(policy, keep_images=2) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "agent.mode": "stateless",
                "agent.max_steps": 5,
                "stateless.annotate": "browser",
                "stateless.port": 0,
                "stateless.panel_token": PANEL_TOKEN,  # the page is opened with it, as users do
                "stateless.capture_scale_percent": 50,
                "stateless.annotate_timeout": 30,
            },
            env={},
            search_default=False,
        )
        runner = threading.Thread(
            target=lambda: result.append(run_agent(cfg, "Click the TARGET", handle_signals=False))
        )
        runner.start()
        browser = Chromium()
        try:
            url = None
            deadline = time.monotonic() + 30
            while url is None and time.monotonic() < deadline:
                found = list((tmp_path / "runs").glob("*/stateless.json"))
                if found:
                    url = orjson.loads(found[0].read_bytes())["panel"]
                time.sleep(0.05)
            assert url, "the engine never started its panel"
            session = browser.open(f"{url}/?token={PANEL_TOKEN}")
            runner.join(90)
            assert not runner.is_alive(), "the run did not finish"
            posted = browser.evaluate(session, "document.body.dataset.posted")
        finally:
            browser.close()
        assert server.problems == []
    run = result[0]
    assert run.outcome == "answered", run.error
    assert posted == "3"
    assert policy.saw_heat, (
        "the browser-annotated screenshot showed no heat where the model clicked"
    )
    check_app(app)
    check_run_dir(run.run_dir, "browser")
    assert load_summary(run.run_dir)["stateless"]["annotation_fallbacks"] == 0


def test_crop_captures_exactly_the_working_area(app: DemoApp, tmp_path: Path) -> None:
    """CAPTURE_CROP through the fused native capture path: the model's image is that part
    of the screen, pixel for pixel, and nothing is sent with --no-physical."""
    from deskpilot.capture import Capturer

    discover_modes()
    done = json.dumps({"observation": "done", "actions": [{"name": "done"}]})
    boot = json.dumps({"observation": "look", "actions": [{"name": "click", "x1": 1000, "y1": 0}]})

    with ModelServer(ScriptedPolicy([done])) as server:
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "agent.mode": "stateless",
                "stateless.capture_crop": "250,250,750,750",
                "stateless.physical_execution": False,
                "stateless.boot_vlm_output": boot,
                "screen.cursor": False,
            },
            env={},
            search_default=False,
        )
        result = run_agent(cfg, "look at the middle", handle_signals=False)
    assert result.outcome == "answered", result.error
    with Capturer("mss", cursor=False) as cap:
        full = cap.grab().rgb
    raw = decode((result.run_dir / "turn_0001_raw.png").read_bytes())
    assert raw.shape == (540, 960, 3)
    assert (
        np.abs(raw.astype(int) - full[270:810, 480:1440].astype(int)).mean() < 1.0
    )  # the app may repaint a caret
    turn1 = next(r for r in iter_turns(result.run_dir) if r.get("stage") == "turn")
    assert (
        turn1["actions"][0]["physical"]["x"] == 1439 and turn1["actions"][0]["physical"]["y"] == 270
    )
    assert not [e for e in app.events() if e["type"] == "press"]
