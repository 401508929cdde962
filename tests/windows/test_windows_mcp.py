"""MCP sessions end to end on the Windows backends (GDI capture, SendInput, the tier's 125 %
scaling) against the demo's Tk app run by the same Windows interpreter, with the official
SDK's clients:

* ``test_deskpilot_mcp_over_stdio``: ``deskpilot mcp`` started by the SDK's stdio client, as a
  client's configuration starts it (a Windows process on pipes);
* ``test_one_mcp_session``: the server in process (the SDK's in-memory transport), which lets
  the test read its records: a screenshot, a click on the documented pixel of the TARGET
  button (image pixel (ix, iy) of a W x H screen shown as iw x ih is the physical pixel
  floor((ix + 0.5) * W / iw)), Unicode text into the field, a denied combo (alt+f4) that
  leaves the app running, the run directory.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs the Win32 backends"),
]

TEXT = "Grüße, 世界 ✓ 42"


def _meta(result: Any) -> dict[str, Any]:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    data: dict[str, Any] = json.loads(texts[-1])
    return data


def _error(result: Any) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def _image_point(frame: dict[str, Any], x: int, y: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return math.floor((x - left + 0.5) * iw / width), math.floor((y - top + 0.5) * ih / height)


def _documented(frame: dict[str, Any], ix: int, iy: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return left + math.floor((ix + 0.5) * width / iw), top + math.floor((iy + 0.5) * height / ih)


def _pywin32_on_path() -> None:
    """pywin32 (the SDK's on Windows) adds win32 and win32\\lib to sys.path with its .pth file,
    which only a site directory reads; the Windows tier puts its packages on PYTHONPATH. Do
    what the .pth does (a pip-installed deskpilot gets it from site-packages)."""
    for entry in list(sys.path):
        if entry and os.path.isfile(os.path.join(entry, "pywin32.pth")):
            for sub in ("win32", os.path.join("win32", "lib")):
                path = os.path.join(entry, sub)
                if os.path.isdir(path) and path not in sys.path:
                    sys.path.append(path)


async def _session(app: Any, runs: Path) -> dict[str, Any]:
    _pywin32_on_path()
    from mcp import Client

    from deskpilot.agent import load_config
    from deskpilot.mcp import Desktop, DesktopOptions, build_server

    # 960x540: the image is half the physical screen, so the mapping is exercised.
    config = load_config(flags={"run.runs_dir": str(runs), "run.quiet": True}, search_default=False)
    seen: dict[str, Any] = {}
    async with Desktop.open(config, DesktopOptions(max_image=(960, 540))) as desktop, \
            Client(build_server(desktop)) as session:
        shot = await session.call_tool("screenshot", {})
        assert not shot.is_error, shot
        frame = seen["frame"] = _meta(shot)
        x, y, w, h = app.widgets["target"]
        ix, iy = _image_point(frame, x + w // 2, y + h // 2)
        seen["target_pixel"] = _documented(frame, ix, iy)
        click = await session.call_tool("click", {"x": ix, "y": iy, "frame": frame["frame"]})
        assert not click.is_error, _error(click)
        seen["after_click"] = _meta(click)
        ex, ey, ew, eh = app.widgets["entry"]
        entry = _image_point(frame, ex + ew // 2, ey + eh // 2)
        click = await session.call_tool("click", {"x": entry[0], "y": entry[1], "screenshot_after": False})
        assert not click.is_error, _error(click)
        typed = await session.call_tool("type_text", {"text": TEXT})
        assert not typed.is_error, _error(typed)
        seen["typed"] = _meta(typed)
        denied = await session.call_tool("press_keys", {"keys": "alt+f4"})
        seen["denied"] = _error(denied)
        info = await session.call_tool("screen_info", {})
        seen["screen_info"] = _meta(info)
    return seen


def test_one_mcp_session(dpi_awareness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wine import tk_entry_text

    from deskpilot.testing._demo import DemoApp

    monkeypatch.chdir(tmp_path)  # no ./deskpilot.toml from the checkout
    runs = tmp_path / "runs"
    runs.mkdir()
    with DemoApp(tmp_path / "events.jsonl", timeout=180) as app:  # a loaded machine starts Tk under Wine slowly
        seen = asyncio.run(asyncio.wait_for(_session(app, runs), 480))
        frame = seen["frame"]
        assert frame["image_size"] == [960, 540]
        width, height = frame["screen_rect"][2:]
        assert frame["scale"] == [round(width / 960, 6), round(height / 540, 6)]
        clicked = app.wait_for(lambda r: r["type"] == "target_clicked", timeout=10)
        assert (clicked["x"], clicked["y"]) == seen["target_pixel"]
        assert seen["typed"]["typed"] == len(TEXT)
        app.wait_for(lambda r: r["type"] == "entry" and r["text"] == tk_entry_text(TEXT), timeout=10)
        assert "policy_denied" in seen["denied"]
        assert app.proc.poll() is None  # alt+f4 was not sent: the app still runs
        expected = os.environ.get("DESKPILOT_EXPECT_LOGPIXELS")
        if expected:
            assert seen["screen_info"]["monitors"][0]["dpi_scale"] == int(expected) / 96
    (run_dir,) = runs.iterdir()
    turns = [json.loads(line) for line in (run_dir / "turns.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [t["tool_call"]["name"] for t in turns] == ["screenshot", "click", "click", "type_text", "press_keys",
                                                       "screen_info"]
    assert turns[1]["action"] == {"kind": "click", "x": seen["target_pixel"][0], "y": seen["target_pixel"][1],
                                  "button": "left", "count": 1}
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["mode"] == "mcp" and summary["outcome"] == "answered"


async def _stdio_session(app: Any, runs: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = dict(os.environ)
    # The server process reads pywin32's directories from PYTHONPATH (see _pywin32_on_path).
    extra = [p for p in sys.path if p.endswith(("win32", os.path.join("win32", "lib")))]
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), *extra]).strip(os.pathsep)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "deskpilot", "mcp", "--runs-dir", str(runs), "--image-size", "960x540"],
        env=env,
        cwd=str(runs.parent),
    )
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        frame = seen["frame"] = _meta(await session.call_tool("screenshot", {}))
        x, y, w, h = app.widgets["target"]
        ix, iy = _image_point(frame, x + w // 2, y + h // 2)
        seen["target_pixel"] = _documented(frame, ix, iy)
        click = await session.call_tool("click", {"x": ix, "y": iy, "frame": frame["frame"]})
        assert not click.is_error, _error(click)
        seen["denied"] = _error(await session.call_tool("press_keys", {"keys": "alt+f4"}))
    return seen


def test_deskpilot_mcp_over_stdio(dpi_awareness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``deskpilot mcp`` as a client starts it: a Windows process on pipes, the SDK's stdio client."""
    from deskpilot.testing._demo import DemoApp

    _pywin32_on_path()
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    with DemoApp(tmp_path / "events.jsonl", timeout=180) as app:
        seen = asyncio.run(asyncio.wait_for(_stdio_session(app, runs), 480))
        clicked = app.wait_for(lambda r: r["type"] == "target_clicked", timeout=10)
        assert (clicked["x"], clicked["y"]) == seen["target_pixel"]
        assert "policy_denied" in seen["denied"]
        assert app.proc.poll() is None
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["mode"] == "mcp"
