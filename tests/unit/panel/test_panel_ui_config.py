"""The panel's UI config (the seed's ``UI_CONFIG``): CSS colours and sections <-> OverlayStyle.

Moved out of deskpilot.imaging, which draws an :class:`OverlayStyle` and knows no CSS.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from deskpilot._errors import ConfigError
from deskpilot.imaging import OverlayStyle
from deskpilot.panel import parse_color, style_from_ui_config, style_to_ui_config

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("rgba(255, 140, 0, 0.55)", (255, 140, 0, 140)),
        ("rgb(0,0,0)", (0, 0, 0, 255)),
        ("RGBA(10,20,30,1)", (10, 20, 30, 255)),
        ("#f80", (255, 136, 0, 255)),
        ("#1e90ff", (30, 144, 255, 255)),
        ("#1e90ff80", (30, 144, 255, 128)),
        ([1, 2, 3], (1, 2, 3, 255)),
        ([300, -5, 3.6, 0.5], (255, 0, 4, 128)),
        ("rgba(100%, 0%, 50%, 0)", (255, 0, 128, 0)),
    ],
)
def test_parse_color(value: Any, expected: tuple[int, int, int, int]) -> None:
    assert parse_color(value) == expected


@pytest.mark.parametrize(
    "value", ["orange", "#12345", "rgba(1,2)", "rgba(a,b,c,d)", [1, 2], None, 7, [1, 2, "x"]]
)
def test_parse_color_rejects(value: Any) -> None:
    with pytest.raises(ConfigError):
        parse_color(value)


def test_style_reads_the_seed_ui_config_and_round_trips() -> None:
    ui = {
        "executed_heat": {
            "enabled": True,
            "radius_scale": 0.05,
            "stops": [[0, "rgba(255,120,0,0.6)"], [1, "rgba(255,120,0,0)"]],
            "trail_turns": 3,
            "trail_shrink": 0.7,
        },
        "bbox_heat": {
            "enabled": True,
            "border": "rgba(0,120,255,0.9)",
            "border_width": 3,
            "fill_stops": [[0, "rgba(0,120,255,0.1)"], [1, "rgba(0,120,255,0.3)"]],
        },
    }
    style = style_from_ui_config(ui)
    assert style.heat_radius_scale == 0.05 and style.trail_turns == 3 and style.trail_shrink == 0.7
    assert style.heat_stops[0] == (0.0, (255, 120, 0, 153))
    assert style.bbox_border == (0, 120, 255, 230) and style.bbox_border_width == 3
    again = style_from_ui_config(style_to_ui_config(style))
    assert again == style


@pytest.mark.parametrize(
    "ui",
    [
        {"executed_heat": {"radius": 1}},
        {"heat": {}},
        {"executed_heat": {"trail_turns": 0}},
        {"executed_heat": {"trail_shrink": 1.5}},
        {"executed_heat": {"stops": []}},
        {"executed_heat": {"stops": [[0, "blue"]]}},
        {"bbox_heat": {"enabled": "yes"}},
        {"labels": {"scale": 2.5}},
        {"bbox_heat": []},
    ],
)
def test_style_rejects_bad_ui_config(ui: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        style_from_ui_config(ui)


@pytest.mark.parametrize(
    ("ui", "message"),
    [
        (
            {"executed_heat": {"trail_turns": 0}},
            r"^executed_heat\.trail_turns must be 1\.\.64, got 0$",
        ),
        (
            {"executed_heat": {"radius_scale": 2}},
            r"^executed_heat\.radius_scale must be in \(0, 1\]",
        ),
        ({"executed_heat": {"trail_shrink": 0}}, r"^executed_heat\.trail_shrink must be in"),
        ({"bbox_heat": {"border_width": 65}}, r"^bbox_heat\.border_width must be 0\.\.64"),
        ({"labels": {"scale": 17}}, r"^labels\.scale must be 0\.\.16, got 17$"),
    ],
)
def test_out_of_range_values_are_named_by_their_ui_key(ui: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        style_from_ui_config(ui)
    assert info.value.details["key"] == message[1:].split(" ")[0].replace("\\", "")
    assert info.value.details["field"] in {f.name for f in fields(OverlayStyle)}


def test_the_default_style_is_what_the_golden_runs_recorded() -> None:
    """``stateless.json`` of the golden stateless runs holds the default style's UI config."""
    recorded = sorted(GOLDEN.glob("stateless_*/stateless.json"))
    assert recorded
    for path in recorded:
        assert json.loads(path.read_text())["ui"] == style_to_ui_config(OverlayStyle()), path
