"""The panel's UI config: the seed's ``UI_CONFIG`` form of an overlay style.

The seed's panel (and ``GET /config``, and ``stateless.json`` of a run) describe the overlays
as sections with CSS colours::

    {"executed_heat": {enabled, radius_scale, stops, trail_turns, trail_shrink},
     "bbox_heat": {enabled, border, border_width, fill_stops},
     "labels": {enabled, markers, scale, color, background, box_color, action_color, outline}}

:class:`deskpilot.imaging.OverlayStyle` is the same style as pixels draw it (RGBA tuples,
flat fields). This module translates between the two, so that imaging stays a pixel library
that knows neither CSS nor the panel::

    style = style_from_ui_config({"executed_heat": {"trail_turns": 3}})
    state = PanelState(config={"ui": style_to_ui_config(style)})
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from deskpilot._errors import ConfigError
from deskpilot.imaging import OverlayStyle

if TYPE_CHECKING:
    from deskpilot.imaging import GradientStops, Rgba

__all__ = ["parse_color", "style_from_ui_config", "style_to_ui_config"]

#: OverlayStyle fields whose range the style checks itself, by their UI_CONFIG key.
_UI_KEYS = {
    "heat_radius_scale": "executed_heat.radius_scale",
    "trail_turns": "executed_heat.trail_turns",
    "trail_shrink": "executed_heat.trail_shrink",
    "bbox_border_width": "bbox_heat.border_width",
    "label_scale": "labels.scale",
}

_RGBA_RE = re.compile(r"^rgba?\(\s*([^)]*)\)$", re.IGNORECASE)


def _channel(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"colour {what} must be a number 0..255, got {value!r}")
    return max(0, min(255, round(value)))


def _alpha(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"colour {what} alpha must be a number 0..1, got {value!r}")
    return max(0, min(255, round(float(value) * 255)))


def parse_color(value: Any) -> Rgba:
    """A colour as ``(r, g, b, a)`` 0..255 from the seed's CSS forms or a list.

    Accepted: ``"rgba(255, 140, 0, 0.55)"``, ``"rgb(0, 0, 0)"``, ``"#rgb"``, ``"#rrggbb"``,
    ``"#rrggbbaa"``, ``[r, g, b]`` and ``[r, g, b, alpha 0..1]``. Raises ConfigError otherwise.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("#"):
            digits = text[1:]
            if len(digits) == 3 and all(c in "0123456789abcdefABCDEF" for c in digits):
                digits = "".join(c * 2 for c in digits)
            if len(digits) in (6, 8) and all(c in "0123456789abcdefABCDEF" for c in digits):
                raw = bytes.fromhex(digits)
                return (raw[0], raw[1], raw[2], raw[3] if len(raw) == 4 else 255)
            raise ConfigError(f"colour {value!r}: expected #rgb, #rrggbb or #rrggbbaa")
        match = _RGBA_RE.match(text)
        if match is None:
            raise ConfigError(
                f"colour {value!r}: expected rgba(r, g, b, a), rgb(r, g, b) or #rrggbb"
            )
        parts = [p.strip() for p in match.group(1).split(",")]
        try:
            # Percentages: of 255 for the channels, of 1 for the alpha.
            numbers = [
                float(p[:-1]) * (255 if i < 3 else 1) / 100 if p.endswith("%") else float(p)
                for i, p in enumerate(parts)
            ]
        except ValueError:
            raise ConfigError(f"colour {value!r} has a part that is not a number") from None
        value = numbers
    if isinstance(value, (list, tuple)) and len(value) in (3, 4):
        rgb = tuple(_channel(v, "channel") for v in value[:3])
        a = _alpha(value[3], repr(value)) if len(value) == 4 else 255
        return (rgb[0], rgb[1], rgb[2], a)
    raise ConfigError(f"colour {value!r}: expected a CSS colour string or [r, g, b(, a)]")


def _css(color: Rgba) -> str:
    return f"rgba({color[0]},{color[1]},{color[2]},{round(color[3] / 255, 4)})"


def _parse_stops(value: Any, what: str) -> GradientStops:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{what} must be a non-empty list of [position 0..1, colour]")
    stops: list[tuple[float, Rgba]] = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ConfigError(f"{what}: each stop is [position, colour], got {item!r}")
        pos, color = item
        if isinstance(pos, bool) or not isinstance(pos, (int, float)) or not math.isfinite(pos):
            raise ConfigError(f"{what}: stop position must be a number 0..1, got {pos!r}")
        stops.append((min(1.0, max(0.0, float(pos))), parse_color(color)))
    # Like CanvasGradient.addColorStop: stable order by position.
    return tuple(sorted(stops, key=lambda s: s[0]))


def style_from_ui_config(ui: Mapping[str, Any]) -> OverlayStyle:
    """An overlay style from the seed's ``UI_CONFIG`` shape (unknown keys are refused).

    ``{"executed_heat": {enabled, radius_scale, stops, trail_turns, trail_shrink},
    "bbox_heat": {enabled, border, border_width, fill_stops}, "labels": {enabled,
    markers, scale, color, background, box_color, action_color, outline}}``.
    """
    if not isinstance(ui, Mapping):
        raise ConfigError(f"UI config must be a table, got {type(ui).__name__}")
    known = {"executed_heat", "bbox_heat", "labels"}
    if unknown := sorted(set(ui) - known):
        raise ConfigError(f"unknown UI config section(s) {unknown}; known: {sorted(known)}")
    style = OverlayStyle()
    changes: dict[str, Any] = {}
    heat = _section(
        ui, "executed_heat", {"enabled", "radius_scale", "stops", "trail_turns", "trail_shrink"}
    )
    if "enabled" in heat:
        changes["heat_enabled"] = _bool(heat["enabled"], "executed_heat.enabled")
    if "radius_scale" in heat:
        changes["heat_radius_scale"] = _float(heat["radius_scale"], "executed_heat.radius_scale")
    if "stops" in heat:
        changes["heat_stops"] = _parse_stops(heat["stops"], "executed_heat.stops")
    if "trail_turns" in heat:
        changes["trail_turns"] = _int(heat["trail_turns"], "executed_heat.trail_turns")
    if "trail_shrink" in heat:
        changes["trail_shrink"] = _float(heat["trail_shrink"], "executed_heat.trail_shrink")
    box = _section(ui, "bbox_heat", {"enabled", "border", "border_width", "fill_stops"})
    if "enabled" in box:
        changes["bbox_enabled"] = _bool(box["enabled"], "bbox_heat.enabled")
    if "border" in box:
        changes["bbox_border"] = parse_color(box["border"])
    if "border_width" in box:
        changes["bbox_border_width"] = round(_float(box["border_width"], "bbox_heat.border_width"))
    if "fill_stops" in box:
        changes["bbox_fill_stops"] = _parse_stops(box["fill_stops"], "bbox_heat.fill_stops")
    labels = _section(
        ui,
        "labels",
        {
            "enabled",
            "markers",
            "scale",
            "color",
            "background",
            "box_color",
            "action_color",
            "outline",
        },
    )
    for key, attr in (("enabled", "labels_enabled"), ("markers", "markers_enabled")):
        if key in labels:
            changes[attr] = _bool(labels[key], f"labels.{key}")
    if "scale" in labels:
        changes["label_scale"] = _int(labels["scale"], "labels.scale")
    for key, attr in (
        ("color", "label_color"),
        ("background", "label_background"),
        ("box_color", "box_label_color"),
        ("action_color", "action_color"),
        ("outline", "outline_color"),
    ):
        if key in labels:
            changes[attr] = parse_color(labels[key])
    try:
        return replace(style, **changes)
    except ConfigError as exc:  # a value out of the style's range: name it by its UI key
        name = exc.details.get("field")
        if name not in _UI_KEYS:
            raise
        raise ConfigError(
            str(exc).replace(name, _UI_KEYS[name], 1), key=_UI_KEYS[name], **exc.details
        ) from None


def style_to_ui_config(style: OverlayStyle) -> dict[str, Any]:
    """The seed's ``UI_CONFIG`` shape (CSS colours), as served to the panel by ``GET /config``."""
    return {
        "executed_heat": {
            "enabled": style.heat_enabled,
            "radius_scale": style.heat_radius_scale,
            "stops": [[p, _css(c)] for p, c in style.heat_stops],
            "trail_turns": style.trail_turns,
            "trail_shrink": style.trail_shrink,
        },
        "bbox_heat": {
            "enabled": style.bbox_enabled,
            "border": _css(style.bbox_border),
            "border_width": style.bbox_border_width,
            "fill_stops": [[p, _css(c)] for p, c in style.bbox_fill_stops],
        },
        "labels": {
            "enabled": style.labels_enabled,
            "markers": style.markers_enabled,
            "scale": style.label_scale,
            "color": _css(style.label_color),
            "background": _css(style.label_background),
            "box_color": _css(style.box_label_color),
            "action_color": _css(style.action_color),
            "outline": _css(style.outline_color),
        },
    }


def _section(ui: Mapping[str, Any], name: str, keys: set[str]) -> Mapping[str, Any]:
    section = ui.get(name, {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"UI config {name!r} must be a table, got {type(section).__name__}")
    if unknown := sorted(set(section) - keys):
        raise ConfigError(f"unknown key(s) {unknown} in UI config {name!r}; known: {sorted(keys)}")
    return section


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{what} must be true or false, got {value!r}")
    return value


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number, got {value!r}")
    return float(value)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer, got {value!r}")
    return value
