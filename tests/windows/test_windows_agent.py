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
import threading
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
    from deskpilot.agent._demo import DemoApp

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


def norm(value: float, size: int) -> int:
    return max(0, min(1000, round((value + 0.5) * 1000 / size)))


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
    from deskpilot.agent._demo_app import TARGET_RGB
    from deskpilot.testing import ModelServer, PixelPolicy

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


class TeamPolicy:
    """Planner: one plan. Executor: find the magenta target in the PNG, click it; click the
    entry; type; Enter; report completion with evidence."""

    def __init__(self, variant: Any, entry: list[int], screen: tuple[int, int]) -> None:
        from deskpilot.agent._demo_app import TARGET_RGB

        self.v = variant
        self.target_rgb = TARGET_RGB
        x, y, w, h = entry
        self.entry = [norm(x + w / 2, screen[0]), norm(y + h / 2, screen[1])]
        self.step = 0
        self._lock = threading.Lock()

    def _args(self, **values: Any) -> dict[str, Any]:
        why = "justification" if self.v.name == "002" else "reasoning"
        label = "label" if self.v.name == "002" else "element_name"
        out: dict[str, Any] = {why: "as planned"}
        if "at" in values:
            out[label] = values["name"]
            out["position"] = values["at"]
        out.update({k: v for k, v in values.items() if k in ("text", "key")})
        return out

    def respond(self, request: Any) -> Any:
        from deskpilot.testing import Reply, find_color

        with self._lock:
            if self.v.tool_name("plan") in request.tool_names:
                text = "Click the magenta target, then type into the entry and press Enter."
                args = (
                    {"operator_instructions": text, "rationale": "r"}
                    if self.v.name == "002"
                    else {"instructions": text, "reasoning": "r"}
                )
                return Reply(content="PLAN", tool_calls=[(self.v.tool_name("plan"), args)])
            step, self.step = self.step, self.step + 1
        if step == 0:
            image = request.last_image
            found = find_color(image.data, self.target_rgb, tolerance=10)
            if found is None:
                return Reply(content="no target visible")
            at = [norm(found[0], image.width), norm(found[1], image.height)]
            return Reply(
                content="target",
                tool_calls=[(self.v.tool_name("click"), self._args(name="target", at=at))],
            )
        if step == 1:
            return Reply(
                content="entry",
                tool_calls=[(self.v.tool_name("click"), self._args(name="entry", at=self.entry))],
            )
        if step == 2:
            return Reply(
                content="typing", tool_calls=[(self.v.tool_name("type"), self._args(text=TEXT))]
            )
        if step == 3:
            return Reply(
                content="submit", tool_calls=[(self.v.tool_name("key"), self._args(key="enter"))]
            )
        evidence = (
            "The magenta target was clicked and turned green, the entry shows the typed "
            "text and Enter was pressed in it, which is what the task asked for."
        )
        return Reply(
            content="done", tool_calls=[(self.v.tool_name("complete"), {"evidence": evidence})]
        )


@pytest.mark.parametrize("variant", ["002", "003"])
def test_team_mode_planner_and_executor(
    variant: str, app: Any, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from deskpilot.agent.team import VARIANTS
    from deskpilot.testing import ModelServer

    screen = tuple(app.ready["screen"])
    policy = TeamPolicy(VARIANTS[variant], app.widgets["entry"], screen)  # type: ignore[arg-type]
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


class StatelessPolicy:
    """Request 1: find the target, answer click + type + Enter in one turn. Then done."""

    def __init__(self) -> None:
        self.step = 0

    def respond(self, request: Any) -> str:
        from deskpilot.agent._demo_app import TARGET_RGB
        from deskpilot.testing import find_color

        image = request.images[-1]
        self.step += 1
        if self.step == 1:
            found = find_color(image.data or b"", TARGET_RGB, tolerance=10)
            if found is None:
                return json.dumps({"observation": "no target", "actions": [{"name": "done"}]})
            x, y = norm(found[0], image.width), norm(found[1], image.height)
            return json.dumps(
                {
                    "observation": "I see the magenta TARGET.",
                    "bboxes": [
                        {"x1": x - 40, "y1": y - 40, "x2": x + 40, "y2": y + 40, "label": "target"}
                    ],
                    "actions": [
                        {"name": "click", "x1": x, "y1": y},
                        {"name": "type", "text": TEXT},
                        {"name": "key", "keys": "enter"},
                    ],
                }
            )
        return json.dumps({"observation": "Submitted.", "actions": [{"name": "done"}]})


def test_stateless_mode_json_protocol(
    app: Any, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    from deskpilot.testing import ModelServer

    (tmp_path / "none.toml").write_text("")
    with ModelServer(StatelessPolicy(), keep_images=2) as server:
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
