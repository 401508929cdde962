"""The agent end to end on the Windows backends: GDI capture (cursor drawn), SendInput, DPI
awareness, adaptive settle, the local pixel-reading/scripted model servers, the demo's Tk app
run by the same Windows interpreter. All three modes, default settings.

Each run must click the magenta target inside its bounds, deliver the text, press Enter once
and leave a complete run directory. Under Wine the text a Tk Entry receives follows Tk's own
handling of VK_PACKET (see :func:`expected_entry_text`, docs/wine-deviations.md).
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs the Win32 backends"),
]

TEXT = "Grüße, 世界 ✓ 42"


def expected_entry_text(text: str) -> str:
    """What the demo's Tk Entry receives for ``text`` typed with KEYEVENTF_UNICODE."""
    from wine import tk_entry_text

    return tk_entry_text(text)


@pytest.fixture
def app(dpi_awareness: Any, tmp_path: Path) -> Iterator[Any]:
    from deskpilot.testing._demo import DemoApp

    with DemoApp(tmp_path / "events.jsonl") as demo:
        yield demo


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no ./deskpilot.toml from the checkout
    for name in (
        "LMSTUDIO_ENDPOINT",
        "LMSTUDIO_MODEL",
        "AGENT_MODE",
        "AGENT_MAX_STEPS",
        "TEAM_VARIANT",
    ):
        monkeypatch.delenv(name, raising=False)


def check_app(app: Any, text: str) -> None:
    submitted = app.wait_for(lambda r: r["type"] == "submitted", timeout=10)
    assert submitted["text"] == expected_entry_text(text)
    events = app.events()
    assert sum(1 for e in events if e["type"] == "submitted") == 1  # one Enter
    x, y, w, h = app.widgets["target"]
    clicked = [e for e in events if e["type"] == "target_clicked"]
    assert clicked, "the target was never clicked"
    assert x <= clicked[0]["x"] < x + w and y <= clicked[0]["y"] < y + h


def check_run(summary: dict[str, Any], mode: str) -> Path:
    from deskpilot.agent import load_summary, validate_run_dir

    assert summary["outcome"] == "answered", summary
    assert summary["mode"] == mode
    run_dir = Path(summary["run_dir"])
    assert validate_run_dir(run_dir) == []
    written = load_summary(run_dir)
    assert written["outcome"] == "answered"
    return run_dir


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    from deskpilot.cli import main

    code = main(argv)
    out = capsys.readouterr().out
    return code, orjson.loads(out[out.index("{") :])


def test_single_mode_pixel_reading_server(
    app: Any, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from deskpilot.testing import ModelServer, PixelPolicy
    from deskpilot.testing._demo_app import TARGET_RGB

    policy = PixelPolicy(
        TARGET_RGB,
        label="TARGET button",
        text=TEXT,
        key="enter",
        steps=("click", "type", "key", "done"),
        final="Done: clicked, typed, pressed Enter.",
        tool_names={"observe": "observe_screen"},
    )
    with ModelServer(policy) as server:
        code, summary = run_cli(
            [
                "run",
                "--endpoint",
                server.endpoint,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--image-size",
                "960x540",
                "--json",
                "--max-steps",
                "8",
                "Click the magenta TARGET, type the text and press Enter",
            ],
            capsys,
        )
        assert server.problems == []
    assert code == 0, summary
    run_dir = check_run(summary, "single")
    check_app(app, TEXT)
    from deskpilot.agent import iter_turns

    turns = list(iter_turns(run_dir))
    names = [t.get("tool_call", {}).get("name") for t in turns]
    assert names[1:4] == ["click_element", "type_text", "press_key"]
    assert turns[1]["result"]["changed"] is True  # the target turned green: settle saw it
    summary_json = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    dpi = summary_json["dpi_awareness"]
    assert dpi["reported_by"] is not None and dpi["level"] in ("per_monitor", "per_monitor_v2")
    # A cursor the OS would not hand over is noted once, not on every turn.
    assert sum("cursor_missing" in t.get("observation", {}) for t in turns) <= 1


@pytest.mark.parametrize("variant", ["002", "003"])
def test_team_mode_planner_and_executor(
    variant: str, app: Any, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from deskpilot.testing import ModelServer, TeamPolicy
    from deskpilot.testing._demo_app import CLICKED_RGB, TARGET_RGB

    # The built-in team model (./dev demo --mode team): plans, then reads the target by colour.
    policy = TeamPolicy(TARGET_RGB, done_rgb=CLICKED_RGB, text=TEXT, key="enter")
    with ModelServer(policy) as server:
        code, summary = run_cli(
            [
                "run",
                "--mode",
                "team",
                "--variant",
                variant,
                "--endpoint",
                server.endpoint,
                "--runs-dir",
                str(tmp_path / "runs"),
                "--image-size",
                "960x540",
                "--json",
                "Click the magenta target, type the text into the entry and press Enter",
            ],
            capsys,
        )
        assert server.problems == []
    assert code == 0, summary
    check_run(summary, "team")
    check_app(app, TEXT)


def test_stateless_mode_json_protocol(
    app: Any, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    from deskpilot.testing import ModelServer, StatelessPolicy
    from deskpilot.testing._demo_app import CLICKED_RGB, TARGET_RGB

    (tmp_path / "none.toml").write_text("")
    # The built-in stateless model: a box and click + type + Enter in one turn, then done.
    policy = StatelessPolicy(TARGET_RGB, done_rgb=CLICKED_RGB, text=TEXT, key="enter")
    with ModelServer(policy, keep_images=2) as server:
        code, summary = run_cli(
            [
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
                "--config",
                str(tmp_path / "none.toml"),
                "Click the magenta TARGET, type the text and press Enter.",
            ],
            capsys,
        )
        assert server.problems == []
    assert code == 0, summary
    run_dir = check_run(summary, "stateless")
    check_app(app, TEXT)
    annotated = sorted(run_dir.glob("turn_*_annotated.png"))
    assert annotated
    with Image.open(io.BytesIO(annotated[0].read_bytes())) as im:
        assert im.size == (960, 540)
