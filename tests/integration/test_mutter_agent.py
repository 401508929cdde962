"""The agent on a real headless GNOME (mutter): ``auto`` capture and input pick Mutter, the
scripted model server gets real frames (the app's picture, not Xwayland's black), its
clicks land on the documented pixel, its text (outside the layout too) arrives exactly,
the settle waits on the stream's frames (``settle_signal`` "damage"), and the X11 watchers
are not armed on a desktop they cannot see."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _mcp import error_text, meta, png_of, server_command, stdio
from _mutter_tier import GtkApp, block_colors, started_desktop
from PIL import Image

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.geometry import Mapping, Rect
from deskpilot.input import InputController
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._mutter import MutterDesktop

pytestmark = [pytest.mark.mutter]


@pytest.fixture(scope="module")
def desktop() -> Iterator[MutterDesktop]:
    with started_desktop() as session:
        yield session


@pytest.fixture(scope="module")
def app(desktop: MutterDesktop) -> Iterator[GtkApp]:
    gtk = GtkApp(desktop)
    with InputController("mutter") as hands:
        gtk.wait_in_place(hands)
    yield gtk
    gtk.close()


def config(tmp_path: Path, endpoint: str, **flags: Any) -> Any:
    return load_config(
        flags={"model.endpoint": endpoint, "run.runs_dir": str(tmp_path / "runs"),
               "screen.image_width": 960, "screen.image_height": 540, "screen.cursor": False, **flags},
        env={},
        search_default=False,
    )


def test_single_mode_run_on_gnome(app: GtkApp, tmp_path: Path) -> None:
    full = Mapping(Rect(0, 0, 1920, 1080), 960, 540)
    click_at = (750, 600)  # 0..1000 over the image
    script = [
        Reply(tool_calls=[("click_element", {"label": "picture", "box": list(click_at)})]),
        Reply(tool_calls=[("click_element", {"label": "entry", "box": [100, 55]})]),
        Reply(tool_calls=[("type_text", {"text": "agent: ü € 😀 日本語"})]),
        "Done.",
    ]
    app.drain()
    with ModelServer(ScriptedPolicy(script), keep_images=len(script)) as server:
        result = run_agent(config(tmp_path, server.endpoint, **{"agent.toolset": "extended"}), "gnome")
        assert server.problems == []
    assert result.outcome == "answered", result.error
    # The model saw the app's picture (960x540, area-averaged from 1920x1080 blocks).
    image = server.requests[0].last_image
    assert image is not None
    seen = np.asarray(Image.open(io.BytesIO(bytes(image.data))).convert("RGB"))
    assert seen.shape == (540, 960, 3)
    expected = block_colors(1920, 1080).reshape(540, 2, 960, 2, 3).mean(axis=(1, 3))
    outside_entry = np.ones((540, 960), bool)
    outside_entry[:60, :350] = False
    assert np.abs(seen.astype(float) - expected)[outside_entry].max() <= 1
    # Its click landed on the documented pixel.
    clicks = [e for e in app.drain() if e["type"] in ("click", "text")]
    first = next(e for e in clicks if e["type"] == "click")
    assert (first["x"], first["y"]) == full.norm_to_physical(*click_at)
    texts = [e["text"] for e in clicks if e["type"] == "text"]
    assert texts and texts[-1] == "agent: ü € 😀 日本語"
    summary = load_summary(result.run_dir)
    assert summary["settle_signal"] == "damage"
    # The kill switch watched the corner through the stream; window rules read no window.
    assert summary["safety"]["kill_switch"]["corner"].startswith("armed"), summary["safety"]
    assert validate_run_dir(result.run_dir) == []
    assert result.steps == 4 and list(iter_turns(result.run_dir))


def test_the_mcp_server_over_stdio_on_gnome(app: GtkApp, tmp_path: Path) -> None:
    """``deskpilot mcp`` with ``auto`` backends on GNOME, driven by the official SDK client:
    it starts (not refused as Xwayland), its screenshot is the app's picture, and a click on
    image pixel (ix, iy) lands on the documented physical pixel."""
    runs = tmp_path / "runs"
    runs.mkdir()
    client = stdio(server_command(runs))
    try:
        shot = client.call("screenshot", {"max_width": 960, "max_height": 540})
        assert not shot.is_error, shot
        info = meta(shot)
        assert info["screen_rect"] == [0, 0, 1920, 1080] and info["image_size"] == [960, 540]
        seen = np.asarray(Image.open(io.BytesIO(png_of(shot))).convert("RGB")).astype(float)
        expected = block_colors(1920, 1080).reshape(540, 2, 960, 2, 3).mean(axis=(1, 3))
        outside_entry = np.ones((540, 960), bool)
        outside_entry[:60, :350] = False
        # The picture, not a black frame (but for the cursor the server draws in).
        assert (np.abs(seen - expected).max(axis=2)[outside_entry] > 1).sum() < 400
        ix, iy = 611, 377
        app.drain()
        result = client.call("click", {"x": ix, "y": iy, "frame": info["frame"], "screenshot_after": False})
        assert not result.is_error, error_text(result)
        click = app.wait("click")
        # Image pixel (ix, iy) of a 960-wide image over 1920 pixels: physical floor((ix + 0.5) * 2).
        assert (click["button"], click["x"], click["y"]) == (1, math.floor((ix + 0.5) * 2), math.floor((iy + 0.5) * 2))
    finally:
        client.close()
    assert len(list(runs.iterdir())) == 1
