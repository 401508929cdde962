"""``deskpilot mcp`` over stdio, driven by the official SDK client (mcp.client.stdio), against
the Tk target app on Xvfb: one server process for the module, every tool seen by the app.

The app records every press, key and text change with root coordinates, so a click is
checked against the documented pixel: the image pixel (ix, iy) of a frame whose image is
iw x ih over a W x H screen is the physical pixel floor((ix + 0.5) * W / iw).
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp import McpClient, error_text, meta, png_of, server_command, stdio
from apps.harness import TargetApp, keys_and_buttons_down
from PIL import Image

pytestmark = pytest.mark.x11


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "runs"


@pytest.fixture(scope="module")
def client(target_app: TargetApp, runs_dir: Path) -> Iterator[McpClient]:
    runs_dir.mkdir(parents=True, exist_ok=True)
    mcp = stdio(server_command(runs_dir))
    try:
        yield mcp
    finally:
        mcp.close()


@pytest.fixture
def app(target_app: TargetApp) -> TargetApp:
    target_app.clear()
    target_app.focus("entry")
    target_app.wait_quiet(0.1)
    return target_app


def documented(frame: dict[str, Any], ix: int, iy: int) -> tuple[int, int]:
    """The physical pixel under the centre of image pixel (ix, iy) of ``frame``."""
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return left + math.floor((ix + 0.5) * width / iw), top + math.floor((iy + 0.5) * height / ih)


def image_point(frame: dict[str, Any], x: int, y: int) -> tuple[int, int]:
    """The image pixel of ``frame`` that covers physical pixel (x, y)."""
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return math.floor((x - left + 0.5) * iw / width), math.floor((y - top + 0.5) * ih / height)


def presses(app: TargetApp, mark: int) -> list[dict[str, Any]]:
    return [r for r in app.since(mark) if r["type"] == "press" and r["button"] == 1]


def test_every_tool_is_listed_with_a_typed_schema_and_annotations(client: McpClient) -> None:
    tools = {t.name: t for t in client.run(client.session.list_tools()).tools}
    assert set(tools) == {"screenshot", "click", "move_mouse", "drag", "scroll", "type_text", "press_keys",
                          "wait", "zoom", "screen_info"}
    for name, tool in tools.items():
        assert tool.annotations is not None, name
        assert tool.annotations.read_only_hint is not None and tool.annotations.destructive_hint is not None, name
        assert tool.input_schema["type"] == "object", name
    assert tools["screenshot"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["click"].annotations.destructive_hint is True  # type: ignore[union-attr]
    click = tools["click"].input_schema
    assert set(click["required"]) == {"x", "y"}
    assert {"x", "y", "button", "count", "frame", "coordinates", "screenshot_after"} <= set(click["properties"])


def test_screenshot_is_a_png_with_its_frame_metadata(client: McpClient) -> None:
    result = client.call("screenshot")
    assert not result.is_error, result
    info = meta(result)
    image = Image.open(io.BytesIO(png_of(result)))
    assert image.size == tuple(info["image_size"]) == (1920, 1080)
    assert info["screen_rect"] == [0, 0, 1920, 1080]
    assert info["scale"] == [1.0, 1.0]
    assert info["frame"].startswith("f")
    assert info["cursor"] is not None


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 720), (1000, 1000), (777, 333)])
@pytest.mark.parametrize("target", ["red", "blue", "pad"])
def test_click_lands_on_the_documented_pixel_for_every_image_size(
    client: McpClient, app: TargetApp, size: tuple[int, int], target: str
) -> None:
    shot = meta(client.call("screenshot", {"max_width": size[0], "max_height": size[1]}))
    iw, ih = shot["image_size"]
    assert iw <= size[0] and ih <= size[1] and (iw == size[0] or ih == size[1])
    ix, iy = image_point(shot, *app.center(target))
    mark = app.mark()
    result = client.call("click", {"x": ix, "y": iy, "frame": shot["frame"]})
    assert not result.is_error, error_text(result)
    press = app.wait_for(lambda r: r["type"] == "press" and r["button"] == 1, since=mark)
    assert (press["x"], press["y"]) == documented(shot, ix, iy)
    assert press["widget"] == target
    # The settled screenshot after the click comes in the same result, as a new frame.
    after = meta(result)
    assert after["frame"] != shot["frame"] and "changed" in after
    assert Image.open(io.BytesIO(png_of(result))).size == (iw, ih)


def test_norm1000_coordinates_per_call(client: McpClient, app: TargetApp) -> None:
    shot = meta(client.call("screenshot", {"max_width": 1280, "max_height": 720}))
    x, y, w, h = app.widgets["green"]
    nx, ny = (x + w // 2) * 1000 // 1920, (y + h // 2) * 1000 // 1080
    mark = app.mark()
    result = client.call("click", {"x": nx, "y": ny, "coordinates": "norm1000", "frame": shot["frame"],
                                   "screenshot_after": False})
    assert not result.is_error, error_text(result)
    assert not any(c.type == "image" for c in result.content)
    press = app.wait_for(lambda r: r["type"] == "press", since=mark)
    assert press["widget"] == "green"
    assert (press["x"], press["y"]) == (nx * 1920 // 1000, ny * 1080 // 1000)


def test_unicode_text_is_typed_exactly_and_the_screen_change_is_reported(client: McpClient, app: TargetApp) -> None:
    text = "Grüße, 世界 ✓ — ½ €42 😀"
    shot = meta(client.call("screenshot", {"max_width": 1280, "max_height": 720}))
    client.call("click", {"x": image_point(shot, *app.center("entry"))[0],
                          "y": image_point(shot, *app.center("entry"))[1], "screenshot_after": False})
    mark = app.mark()
    result = client.call("type_text", {"text": text})
    assert not result.is_error, error_text(result)
    info = meta(result)
    assert info["typed"] == len(text)
    assert info["changed"] is True and info["changed_region"] is not None
    app.wait_for(lambda r: r["type"] == "entry" and r["text"] == text, since=mark)


def test_press_keys_takes_a_combo_and_a_sequence(client: McpClient, app: TargetApp) -> None:
    mark = app.mark()
    client.call("type_text", {"text": "abc def", "screenshot_after": False})
    app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "abc def", since=mark)
    mark = app.mark()
    result = client.call("press_keys", {"keys": ["ctrl+a", "delete"]})
    assert not result.is_error, error_text(result)
    app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "", since=mark)
    mark = app.mark()
    result = client.call("press_keys", {"keys": "shift+a"})
    assert not result.is_error, error_text(result)
    app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "A", since=mark)


def test_drag_and_scroll_are_seen_by_the_app(client: McpClient, app: TargetApp) -> None:
    shot = meta(client.call("screenshot", {"max_width": 960, "max_height": 540}))
    x, y, w, h = app.widgets["pad"]
    start = image_point(shot, x + w // 4, y + h // 4)
    end = image_point(shot, x + 3 * w // 4, y + 3 * h // 4)
    mark = app.mark()
    result = client.call("drag", {"x1": start[0], "y1": start[1], "x2": end[0], "y2": end[1], "frame": shot["frame"]})
    assert not result.is_error, error_text(result)
    release = app.wait_for(lambda r: r["type"] == "release" and r["button"] == 1, since=mark)
    records = app.since(mark)
    press = next(r for r in records if r["type"] == "press" and r["button"] == 1)
    assert (press["x"], press["y"]) == documented(shot, *start)
    assert (release["x"], release["y"]) == documented(shot, *end)
    assert any(r["type"] == "motion" for r in records)
    mark = app.mark()
    where = image_point(shot, *app.center("pad"))
    result = client.call("scroll", {"x": where[0], "y": where[1], "direction": "down", "amount": 2})
    assert not result.is_error, error_text(result)
    app.wait_for(lambda r: r["type"] == "scroll" and r["direction"] == "down", since=mark)
    app.wait_quiet(0.2)
    scrolls = [r for r in app.since(mark) if r["type"] == "scroll"]
    assert [r["direction"] for r in scrolls] == ["down", "down"]
    assert all(r["widget"] == "pad" for r in scrolls)


def test_move_mouse_moves_the_pointer(client: McpClient, app: TargetApp) -> None:
    shot = meta(client.call("screenshot", {"max_width": 1920, "max_height": 1080}))
    result = client.call("move_mouse", {"x": 700, "y": 500, "frame": shot["frame"]})
    assert not result.is_error, error_text(result)
    info = json.loads(client.call("screen_info").content[0].text)  # type: ignore[union-attr]
    assert info["cursor"] == [700, 500]


def test_screen_info_names_the_monitors_and_the_cursor(client: McpClient) -> None:
    result = client.call("screen_info")
    assert not result.is_error, error_text(result)
    info = meta(result)
    assert info["monitors"] == [
        {"index": 1, "rect": [0, 0, 1920, 1080], "primary": info["monitors"][0]["primary"],
         "name": info["monitors"][0]["name"], "dpi_scale": 1.0}
    ]
    assert info["primary"] == 1
    assert len(info["cursor"]) == 2


def test_zoom_shows_the_region_at_native_resolution_and_clicks_on_it_land_there(client: McpClient, app: TargetApp) -> None:
    shot = meta(client.call("screenshot", {"max_width": 960, "max_height": 540}))
    x, y, w, h = app.widgets["yellow"]
    a = image_point(shot, x, y)
    b = image_point(shot, x + w - 1, y + h - 1)
    result = client.call("zoom", {"x1": a[0], "y1": a[1], "x2": b[0], "y2": b[1], "frame": shot["frame"]})
    assert not result.is_error, error_text(result)
    zoom = meta(result)
    assert zoom["scale"] == [1.0, 1.0]  # native resolution
    zx, zy, zw, zh = zoom["screen_rect"]
    assert zx <= x + 2 and zy <= y + 2 and zx + zw >= x + w - 2 and zy + zh >= y + h - 2
    image = Image.open(io.BytesIO(png_of(result))).convert("RGB")
    assert image.getpixel((zoom["image_size"][0] // 2, zoom["image_size"][1] // 2)) == (255, 255, 0)
    mark = app.mark()
    result = client.call("click", {"x": 10, "y": 10, "frame": zoom["frame"], "screenshot_after": False})
    assert not result.is_error, error_text(result)
    press = app.wait_for(lambda r: r["type"] == "press", since=mark)
    assert (press["x"], press["y"]) == (zx + 10, zy + 10)


def test_wait_returns_the_settled_screenshot_and_whether_it_changed(client: McpClient, app: TargetApp) -> None:
    result = client.call("wait", {"until": "settled"})
    assert not result.is_error, error_text(result)
    assert isinstance(meta(result)["changed"], bool)
    png_of(result)
    # Something else draws while the client waits for a change: the wait ends with it.
    waiting = asyncio.run_coroutine_threadsafe(
        client.session.call_tool("wait", {"until": "changed", "seconds": 20}), client._loop
    )
    time.sleep(0.5)
    subprocess.run(["xdotool", "type", "--delay", "0", "zzz"], check=True, timeout=10)
    started = time.monotonic()
    result = waiting.result(timeout=30)
    assert time.monotonic() - started < 15
    assert not result.is_error, error_text(result)
    assert meta(result)["changed"] is True


def test_denied_actions_are_tool_errors_that_say_why_and_send_nothing(client: McpClient, app: TargetApp) -> None:
    mark = app.mark()
    for arguments in ({"keys": "alt+f4"}, {"keys": ["super+r", "ctrl+a"]}, {"keys": "ctrl+alt+delete"}):
        result = client.call("press_keys", arguments)
        assert "policy_denied" in error_text(result), arguments
        assert "sent before it" not in error_text(result)
    result = client.call("type_text", {"text": "my key is sk-proj-4fQ2x9Lm7Zt1Vb8Nc3Kd6Hs0Jw5Ry2Ua"})
    assert "policy_denied" in error_text(result)
    app.wait_quiet(0.2)
    assert [r for r in app.since(mark) if r["type"] in ("key", "entry", "text")] == []
    # A sequence stops at its first denied combo, and says what it sent before it.
    result = client.call("press_keys", {"keys": ["shift+b", "super+r", "shift+c"]})
    assert "policy_denied" in error_text(result) and "sent before it: shift+b" in error_text(result)
    app.wait_for(lambda r: r["type"] == "entry" and r["text"].endswith("B"), since=mark)
    app.wait_quiet(0.2)
    assert not any(r["type"] == "entry" and "C" in r["text"] for r in app.since(mark))


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("click", {"x": "12", "y": 40}, "x"),
        ("click", {"x": 10, "y": 40, "button": "fourth"}, "button"),
        ("click", {"x": 10, "y": 40, "count": 0}, "count"),
        ("click", {"x": 10, "y": 40, "count": True}, "count"),
        ("click", {"x": 1e309, "y": 40}, "x"),
        ("click", {"x": 100000, "y": 40}, "out_of_range"),
        ("click", {"x": -1, "y": 40}, "out_of_range"),
        ("click", {"x": 10, "y": 40, "frame": "f999999"}, "unknown_frame"),
        ("click", {"x": 10, "y": 40, "bogus": 1}, "invalid_args"),
        ("click", {"y": 40}, "x"),
        ("scroll", {"x": 10, "y": 40, "direction": "sideways"}, "direction"),
        ("scroll", {"x": 10, "y": 40, "direction": "down", "amount": 1000}, "amount"),
        ("type_text", {"text": ""}, "text"),
        ("type_text", {"text": "x" * 2001}, "text_too_long"),
        ("type_text", {"text": 42}, "text"),
        ("press_keys", {"keys": "ctrl+nosuchkey"}, "invalid_key"),
        ("press_keys", {"keys": ["a", "nosuchkey"]}, "invalid_key"),
        ("press_keys", {"keys": []}, "invalid_args"),
        ("drag", {"x1": 1, "y1": 1, "x2": 5, "y2": 5, "button": "right"}, "unsupported"),
        ("wait", {"seconds": -1}, "seconds"),
    ],
)
def test_malformed_calls_are_tool_errors_and_perform_nothing(
    client: McpClient, app: TargetApp, name: str, arguments: dict[str, Any], error: str
) -> None:
    client.call("screenshot", {"max_width": 960, "max_height": 540})
    mark = app.mark()
    result = client.call(name, arguments)
    assert error in error_text(result)
    app.wait_quiet(0.1)
    assert [r for r in app.since(mark) if r["type"] not in ("motion",)] == []
    assert keys_and_buttons_down() == ([], 0)


def test_every_call_is_a_turn_of_the_run_directory(client: McpClient, runs_dir: Path) -> None:

    client.call("screenshot", {"max_width": 640, "max_height": 360})
    (run_dir,) = runs_dir.iterdir()
    turns = [json.loads(line) for line in (run_dir / "turns.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    assert all(t["mode"] == "mcp" and "tool_call" in t and "result" in t for t in turns)
    clicks = [t for t in turns if t["tool_call"]["name"] == "click" and t["result"].get("ok")]
    assert clicks and all(t["action"]["kind"] == "click" for t in clicks)
    denied = [t for t in turns if (t["result"].get("error") or {}).get("type") == "policy_denied"]
    assert denied and all(("action" in t) == ("performed_before" in t["result"]) for t in denied)
    assert sum("action" in t for t in denied) == 1  # the sequence that sent shift+b before its denial
    shots = [t["observation"]["screenshot"] for t in turns if "observation" in t]
    assert shots and all((run_dir / s).is_file() for s in shots)


def test_a_recorded_session_replays_and_reports(target_app: TargetApp, tmp_path: Path) -> None:
    """A short session of its own: once the client has gone, ``deskpilot replay`` plays its
    calls again (recorded screens, dry input) and finds no difference; ``deskpilot report``
    draws it."""
    from deskpilot.agent import validate_run_dir
    from deskpilot.cli import main
    from deskpilot.replay import replay_run

    runs = tmp_path / "runs"
    runs.mkdir()
    session = stdio(server_command(runs))
    try:
        shot = meta(session.call("screenshot", {"max_width": 960, "max_height": 540}))
        ix, iy = image_point(shot, *target_app.center("entry"))
        assert not session.call("click", {"x": ix, "y": iy, "frame": shot["frame"]}).is_error
        assert not session.call("type_text", {"text": "naïve café ✓"}).is_error
        assert session.call("press_keys", {"keys": "alt+f4"}).is_error
        assert session.call("click", {"x": 5000, "y": 1}).is_error
        assert not session.call("press_keys", {"keys": ["ctrl+a", "delete"]}).is_error
    finally:
        session.close()
    (run_dir,) = runs.iterdir()
    assert validate_run_dir(run_dir) == []
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["mode"] == "mcp" and summary["outcome"] == "answered" and summary["totals"]["tool_calls"] == 6
    result = replay_run(run_dir)
    assert result.ok, [d.describe() for d in result.divergences]
    assert [t["tool_call"]["name"] for t in result.replayed_turns] == [
        "screenshot", "click", "type_text", "press_keys", "click", "press_keys"]
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "naïve café ✓" in html and "press_keys" in html
