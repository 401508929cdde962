"""``[stateless]``: every seed 004 setting, resolved like the rest of the agent's config.

Precedence per key: ``--set stateless.key=value`` / mode flags > environment > TOML
``[stateless]`` > default. The seed's ``config.py`` names work as environment variables
where they are distinctive (``CAPTURE_CROP``, ``PHYSICAL_EXECUTION``, ...); the generic ones
get a prefix (the seed's ``HOST``/``PORT`` are ``PANEL_HOST``/``PANEL_PORT``). The model
connection (``API_URL``, ``MODEL``, ``TEMPERATURE``, ``MAX_TOKENS``,
``VLM_HTTP_TIMEOUT_SECONDS``) is the shared ``[model]`` section (``LMSTUDIO_*``); the
runs folder is ``[run] runs_dir``::

    [stateless]
    capture_crop = [0, 0, 500, 500]          # the top-left quadrant: sandbox
    capture_scale_percent = 80
    physical_execution = false               # run the loop, touch nothing
    annotate = "browser"                     # the seed's panel draws the overlays
    log_level = "DEBUG"                      # main.log's level (LOG_LEVEL)
    [stateless.ui.executed_heat]
    trail_turns = 4
    stops = [[0, "rgba(255,106,0,0.6)"], [1, "rgba(255,170,0,0)"]]

With ``annotate = "browser"`` the engine waits ``annotate_timeout`` seconds (default 30)
for the page's annotated image and then draws the overlays natively, so a closed browser
tab does not stall the run; ``annotate_timeout = 0`` waits forever, as seed 004's scenario
C does (the wait stays interruptible: Ctrl+C / SIGTERM, the kill switch and
``[agent] max_seconds`` stop the run while it waits).

Structured values (``capture_crop``, ``ui``) accept TOML arrays/tables, or JSON text from
the environment (``CAPTURE_CROP='{"x1":0,"y1":0,"x2":500,"y2":500}'`` or ``"0,0,500,500"``).

The panel drives the desktop, so it stays on loopback unless told otherwise, and a
``host`` beyond loopback is refused here (before anything starts) without a token::

    [stateless]
    host = "0.0.0.0"
    panel_token = "generate"                 # the default; or a fixed one (PANEL_TOKEN), 16+ characters
    panel_allowed_hosts = "desk.lan"         # names other machines use to reach it
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import orjson

from deskpilot._errors import ConfigError
from deskpilot.agent._config import setting
from deskpilot.geometry import NORM_MAX
from deskpilot.imaging import OverlayStyle

__all__ = [
    "DEFAULT_BOOT_OUTPUT",
    "LOG_LEVELS",
    "MIN_ANNOTATE_TIMEOUT",
    "StatelessSettings",
    "output_size",
]

#: ``log_level`` names (case-insensitive; WARN and FATAL are accepted as aliases).
LOG_LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}

#: The shortest positive ``annotate_timeout`` (a browser needs that long to draw and post).
MIN_ANNOTATE_TIMEOUT = 0.1

DEFAULT_BOOT_OUTPUT = (
    '{"observation": "Start of the task. I have not acted yet; I look at the screen first.",'
    ' "bboxes": [], "actions": []}'
)


@dataclass(frozen=True, slots=True)
class StatelessSettings:
    """``[stateless]``: the working area, execution, annotation, panel, boot and logging."""

    # -- working area and capture (seed: CAPTURE_*) --
    capture_crop: tuple[int, int, int, int] = setting(
        (0, 0, NORM_MAX, NORM_MAX),
        env="CAPTURE_CROP",
        help="working area as x1,y1,x2,y2 in 0..1000 of the monitor: what the model sees and the only place it can act",
    )
    capture_width: int = setting(
        0,
        env="CAPTURE_WIDTH",
        minimum=0,
        maximum=16384,
        help="with capture_height: output size after the crop",
    )
    capture_height: int = setting(0, env="CAPTURE_HEIGHT", minimum=0, maximum=16384)
    capture_scale_percent: int = setting(
        100,
        env="CAPTURE_SCALE_PERCENT",
        maximum=100,
        help="uniform downscale after the crop when width/height are unset; <= 0 means 100",
    )
    capture_delay: float = setting(
        0.0,
        env="CAPTURE_DELAY",
        minimum=0.0,
        help="fixed sleep before the capture (the [agent] settle policy runs after it)",
    )
    # -- execution (seed: PHYSICAL_EXECUTION, ACTION_DELAY_SECONDS, DRAG_*) --
    physical_execution: bool = setting(
        True, env="PHYSICAL_EXECUTION", help="false: parse, plan and record actions, send no input"
    )
    action_delay_seconds: float = setting(
        0.05,
        env="ACTION_DELAY_SECONDS",
        minimum=0.0,
        maximum=60.0,
        help="pause between two actions of a turn",
    )
    drag_duration_steps: int = setting(
        20, env="DRAG_DURATION_STEPS", minimum=1, maximum=1000, help="intermediate moves of a drag"
    )
    drag_step_delay: float = setting(
        0.01, env="DRAG_STEP_DELAY", minimum=0.0, maximum=1.0, help="seconds between drag moves"
    )
    max_actions: int = setting(
        8,
        env="STATELESS_MAX_ACTIONS",
        minimum=1,
        maximum=64,
        help="actions per turn (more are refused)",
    )
    max_bboxes: int = setting(
        8,
        env="STATELESS_MAX_BBOXES",
        minimum=0,
        maximum=64,
        help="boxes per turn (more are refused)",
    )
    # -- annotation and panel --
    annotate: str = setting(
        "native",
        env="STATELESS_ANNOTATE",
        choices=("native", "browser", "none"),
        help="who draws the overlays: the compiled core, the panel page in a browser (seed flow), or nobody",
    )
    annotate_timeout: float = setting(
        30.0,
        env="STATELESS_ANNOTATE_TIMEOUT",
        minimum=0.0,
        help="seconds to wait for the browser's annotated image, then draw natively; "
        "0 = wait forever (the seed's flow; Ctrl+C, the kill switch and max_seconds still stop it)",
    )
    ui: dict[str, Any] | None = setting(  # noqa: RUF009 - setting() returns a dataclasses.field
        None, env="UI_CONFIG", help="the seed's UI_CONFIG: executed_heat, bbox_heat, labels"
    )
    panel: str = setting(
        "auto",
        env="STATELESS_PANEL",
        choices=("auto", "on", "off"),
        help="local web panel; auto = when browser annotation or injection needs it",
    )
    host: str = setting(
        "127.0.0.1",
        env="PANEL_HOST",
        help="panel bind address; beyond loopback the panel needs panel_token",
    )
    port: int = setting(
        8765, env="PANEL_PORT", minimum=0, maximum=65535, help="panel port; 0 = any free port"
    )
    panel_token: str = setting(
        "generate",
        env="PANEL_TOKEN",
        help='token every panel request must carry (Bearer, ?token= or its cookie); "generate" '
        '(default) = a random one per start, printed in the panel link; "off" = none '
        "(--no-panel-token; refused when host is not loopback)",
    )
    panel_allowed_hosts: str = setting(
        "",
        env="PANEL_ALLOWED_HOSTS",
        help="comma-separated extra Host names (name or name:port) the panel answers for; "
        "127.0.0.1, localhost, [::1] and the bound address always work",
    )
    # -- boot (seed: BOOT_ENABLED, BOOT_VLM_OUTPUT) --
    boot_enabled: bool = setting(
        True, env="BOOT_ENABLED", help="start with boot_vlm_output; false: wait for POST /inject"
    )
    boot_vlm_output: str = setting(
        DEFAULT_BOOT_OUTPUT,
        env="BOOT_VLM_OUTPUT",
        help="the first 'model output' the loop executes",
    )
    panel_linger: bool = setting(
        False,
        env="PANEL_LINGER",
        help="keep the panel up after the run ends, to look at the final state "
        "(`deskpilot panel` at a terminal does; Ctrl+C stops it)",
    )
    inject_timeout: float = setting(
        0.0,
        env="STATELESS_INJECT_TIMEOUT",
        minimum=0.0,
        help="seconds to wait for /inject without boot; 0 = forever",
    )
    # -- model request and prompt --
    top_p: float = setting(1.0, env=("STATELESS_TOP_P", "TOP_P"), minimum=0.0, maximum=1.0)
    system_prompt: str = setting(
        "",
        env="STATELESS_SYSTEM_PROMPT",
        help="replaces the built-in prompt ({task}, {max_actions}, {max_bboxes} are filled in; "
        "the security note on screen text is appended unless the template has it)",
    )
    feedback: bool = setting(
        True,
        env="STATELESS_FEEDBACK",
        help="tell the model which actions ran and which were refused",
    )
    # -- logging (seed: LOG_LAYOUT, LOG_TO_FILE, LOG_LEVEL) --
    log_layout: str = setting(
        "flat",
        env="LOG_LAYOUT",
        choices=("flat", "turn_dirs"),
        help="turn_NNNN_raw/annotated.png files, or turn_NNNN/ folders",
    )
    log_to_file: bool = setting(True, env="LOG_TO_FILE", help="main.log in the run directory")
    log_level: str = setting(
        "INFO",
        env=("STATELESS_LOG_LEVEL", "LOG_LEVEL"),
        help="main.log's level (seed: LOG_LEVEL): DEBUG, INFO, WARNING, ERROR or CRITICAL",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "capture_crop", _parse_crop(self.capture_crop))
        object.__setattr__(self, "log_level", _parse_log_level(self.log_level))
        ui = _parse_ui(self.ui)
        object.__setattr__(self, "ui", ui)
        from deskpilot.panel import style_from_ui_config

        style_from_ui_config(ui or {})  # validate now, where the error names the setting
        if self.panel == "off" and (self.annotate == "browser" or not self.boot_enabled):
            needs = (
                "annotate = browser"
                if self.annotate == "browser"
                else "boot_enabled = false (POST /inject)"
            )
            raise ConfigError(
                f"stateless.panel is off but {needs} needs the panel: use auto or on",
                where="stateless.panel",
            )
        if self.panel_enabled():
            # Refuse at load time what the panel would refuse at start: a panel reachable
            # from the network without a token, a short token, a malformed host name.
            from deskpilot.panel import PanelAccess, resolve_token

            token, _ = resolve_token(self.panel_token)
            PanelAccess(self.host, self.port, token=token, allowed_hosts=self.allowed_hosts)
        if 0 < self.annotate_timeout < MIN_ANNOTATE_TIMEOUT:
            raise ConfigError(
                f"stateless.annotate_timeout must be 0 (wait forever) or at least "
                f"{MIN_ANNOTATE_TIMEOUT} s, got {self.annotate_timeout}",
                where="stateless.annotate_timeout",
            )
        if (self.capture_width > 0) != (self.capture_height > 0):
            raise ConfigError(
                "stateless.capture_width and capture_height must be set together (or both 0)",
                where="stateless.capture_width",
            )

    @property
    def log_level_number(self) -> int:
        """``log_level`` as the :mod:`logging` number (``"DEBUG"`` -> 10)."""
        return LOG_LEVELS[self.log_level]

    @property
    def overlay_style(self) -> OverlayStyle:
        from deskpilot.panel import style_from_ui_config

        return style_from_ui_config(self.ui or {})

    @property
    def crop_fraction(self) -> tuple[float, float, float, float]:
        """``capture_crop`` as fractions 0..1 (what :func:`deskpilot.geometry.crop_rect` takes)."""
        x1, y1, x2, y2 = self.capture_crop
        return (x1 / NORM_MAX, y1 / NORM_MAX, x2 / NORM_MAX, y2 / NORM_MAX)

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """``panel_allowed_hosts`` as a tuple of names."""
        return tuple(h.strip() for h in self.panel_allowed_hosts.split(",") if h.strip())

    def panel_enabled(self) -> bool:
        if self.panel == "auto":
            return self.annotate == "browser" or not self.boot_enabled
        return self.panel == "on"


def output_size(settings: StatelessSettings, crop_width: int, crop_height: int) -> tuple[int, int]:
    """The model image size for a working area of ``crop_width x crop_height`` pixels (seed rules)."""
    if settings.capture_width > 0 and settings.capture_height > 0:
        return settings.capture_width, settings.capture_height
    percent = settings.capture_scale_percent
    if percent <= 0 or percent >= 100:
        return crop_width, crop_height
    return max(1, round(crop_width * percent / 100)), max(1, round(crop_height * percent / 100))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}: {value!r} is not a number 0..1000", where=where)
    return float(value)


def _parse_crop(value: Any) -> tuple[int, int, int, int]:
    where = "stateless.capture_crop"
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("{", "[")):
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise ConfigError(f"{where}: {text!r} is not JSON", where=where) from None
        else:
            try:
                value = [float(p) for p in text.replace(";", ",").split(",")]
            except ValueError:
                raise ConfigError(
                    f"{where}: {text!r}: expected x1,y1,x2,y2 in 0..1000", where=where
                ) from None
    if isinstance(value, dict):
        try:
            value = [value[k] for k in ("x1", "y1", "x2", "y2")]
        except KeyError:
            raise ConfigError(f"{where}: a table needs x1, y1, x2, y2", where=where) from None
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise ConfigError(f"{where}: expected x1,y1,x2,y2 in 0..1000, got {value!r}", where=where)
    x1, y1, x2, y2 = (_number(v, where) for v in value)
    if not all(0 <= v <= NORM_MAX for v in (x1, y1, x2, y2)):
        raise ConfigError(
            f"{where}: values must be within 0..1000, got {list(value)!r}", where=where
        )
    left, right = sorted((round(x1), round(x2)))
    top, bottom = sorted((round(y1), round(y2)))
    if right - left < 1 or bottom - top < 1:
        raise ConfigError(f"{where}: the working area {list(value)!r} is empty", where=where)
    return (left, top, right, bottom)


def _parse_log_level(value: Any) -> str:
    name = str(value).strip().upper()
    name = {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(name, name)
    if name not in LOG_LEVELS:
        raise ConfigError(
            f"stateless.log_level: {value!r} is not one of {', '.join(LOG_LEVELS)}",
            where="stateless.log_level",
            choices=list(LOG_LEVELS),
        )
    return name


def _parse_ui(value: Any) -> dict[str, Any] | None:
    where = "stateless.ui"
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{where}: UI_CONFIG must be a JSON object", where=where) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {type(value).__name__}", where=where)
    return value
