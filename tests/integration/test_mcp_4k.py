"""``deskpilot mcp`` on a 4K screen (an Xvfb of its own, 3840x2160): results stay under the
1 MB a client takes, clicks land on the documented pixel through downscaled and shrunk-to-fit
images, and a frame whose screen changed is refused (in process, with the official SDK's
in-memory client: Xvfb cannot change its resolution, so the monitor layout the frame is
checked against is the one thing played)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp import (
    McpClient,
    error_text,
    image_b64_len,
    meta,
    png_of,
    result_bytes,
    server_command,
    stdio,
)
from apps.harness import TargetApp
from PIL import Image

from deskpilot.testing._xvfb import xvfb as start_xvfb

pytestmark = pytest.mark.x11

ONE_MB = 1_000_000


@pytest.fixture(scope="module")
def display_4k(xvfb: str) -> Iterator[str]:
    """A 4K Xvfb for this module (DISPLAY points at it; the session's comes back after)."""
    with start_xvfb((3840, 2160), timeout=60.0) as display:
        yield display


@pytest.fixture(scope="module")
def app_4k(display_4k: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TargetApp]:
    app = TargetApp(tmp_path_factory.mktemp("app4k") / "events.jsonl")
    try:
        yield app
    finally:
        app.close()


@pytest.fixture(scope="module")
def client(app_4k: TargetApp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpClient]:
    runs = tmp_path_factory.mktemp("mcp4k") / "runs"
    runs.mkdir()
    mcp = stdio(server_command(runs))
    try:
        yield mcp
    finally:
        mcp.close()


def image_point(frame: dict[str, Any], x: int, y: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return math.floor((x - left + 0.5) * iw / width), math.floor((y - top + 0.5) * ih / height)


def documented(frame: dict[str, Any], ix: int, iy: int) -> tuple[int, int]:
    left, top, width, height = frame["screen_rect"]
    iw, ih = frame["image_size"]
    return left + math.floor((ix + 0.5) * width / iw), top + math.floor((iy + 0.5) * height / ih)


def test_a_4k_screenshot_result_is_under_1_mb_by_default(client: McpClient) -> None:
    result = client.call("screenshot")
    assert not result.is_error, result
    info = meta(result)
    assert info["screen_rect"] == [0, 0, 3840, 2160]
    assert info["image_size"] == [1920, 1080] and info["scale"] == [2.0, 2.0]
    assert result_bytes(result) < ONE_MB
    assert Image.open(io.BytesIO(png_of(result))).size == (1920, 1080)


def test_native_4k_is_shrunk_to_fit_the_byte_cap_and_clicks_still_land(client: McpClient, app_4k: TargetApp) -> None:
    result = client.call("screenshot", {"max_width": 3840, "max_height": 2160, "max_bytes": 60_000})
    assert not result.is_error, error_text(result)
    info = meta(result)
    assert image_b64_len(result) <= 60_000 and result_bytes(result) < 61_000
    assert info.get("shrunk_to_fit") is True
    iw, ih = info["image_size"]
    assert iw < 3840 and Image.open(io.BytesIO(png_of(result))).size == (iw, ih)
    ix, iy = image_point(info, *app_4k.center("blue"))
    mark = app_4k.mark()
    click = client.call("click", {"x": ix, "y": iy, "frame": info["frame"], "max_bytes": 60_000})
    assert not click.is_error, error_text(click)
    press = app_4k.wait_for(lambda r: r["type"] == "press", since=mark)
    assert (press["x"], press["y"]) == documented(info, ix, iy) and press["widget"] == "blue"
    assert image_b64_len(click) <= 60_000


def test_a_full_resolution_4k_result_stays_under_the_default_cap(client: McpClient) -> None:
    result = client.call("screenshot", {"max_width": 3840, "max_height": 2160})
    assert not result.is_error, error_text(result)
    assert result_bytes(result) < ONE_MB


def test_a_frame_whose_screen_changed_is_refused(app_4k: TargetApp, tmp_path: Path) -> None:
    from mcp import Client

    from deskpilot.agent import load_config
    from deskpilot.mcp import Desktop, DesktopOptions, build_server
    from deskpilot.mcp._desktop import read_layout

    monitors = [read_layout()]

    async def session() -> tuple[Any, Any, Any]:
        config = load_config(flags={"run.runs_dir": str(tmp_path / "runs"), "run.quiet": True}, search_default=False)
        options = DesktopOptions(layout_reader=lambda: monitors[0])
        async with Desktop.open(config, options) as desktop, Client(build_server(desktop)) as client:
            first = await client.call_tool("screenshot", {})
            frame = meta(first)["frame"]
            # The monitors change (another resolution), as a DPI or layout change would.
            monitors[0] = ((0, 0, 2560, 1440),)
            stale = await client.call_tool("click", {"x": 10, "y": 10, "frame": frame})
            latest = await client.call_tool("click", {"x": 10, "y": 10})
            fresh = await client.call_tool("screenshot", {"max_width": 640, "max_height": 360})
            return stale, latest, fresh

    mark = app_4k.mark()
    stale, latest, fresh = asyncio.run(session())
    assert "stale_frame" in error_text(stale)
    assert "stale_frame" in error_text(latest)  # the last screenshot's frame is just as stale
    assert not fresh.is_error
    with contextlib.suppress(TimeoutError):
        app_4k.wait_quiet(0.2)
    assert [r for r in app_4k.since(mark) if r["type"] == "press"] == []
