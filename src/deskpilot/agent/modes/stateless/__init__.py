"""The stateless mode (seed 004): JSON replies, several actions per turn, annotated screenshots.

The model keeps no conversation: every request is the system prompt, the model's own last
``observation`` (its story) and one screenshot on which the engine has drawn what the
model did (orange action heat with a fading trail, blue boxes it asked for, labels).
``deskpilot run --mode stateless "task"`` runs it; settings are the ``[stateless]``
section (:class:`StatelessSettings`, the seed's config keys); ``--annotate browser``
keeps the seed's flow where the panel page draws the overlays.
"""

from __future__ import annotations

import argparse
from typing import Any

from deskpilot.agent.modes._registry import ModeSpec
from deskpilot.agent.modes.stateless._config import StatelessSettings
from deskpilot.agent.modes.stateless._engine import (
    StatelessError,
    StatelessMode,
    run_stateless,
    take_lingering_panels,
)
from deskpilot.agent.modes.stateless._protocol import (
    ACTION_NAMES,
    BBox,
    Rejection,
    ReplyAction,
    VlmOutput,
    parse_vlm_output,
)

__all__ = [
    "ACTION_NAMES",
    "MODE",
    "BBox",
    "Rejection",
    "ReplyAction",
    "StatelessError",
    "StatelessMode",
    "StatelessSettings",
    "VlmOutput",
    "add_arguments",
    "flags",
    "parse_vlm_output",
    "run_stateless",
    "take_lingering_panels",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The stateless mode's own flags on ``deskpilot run`` (and ``deskpilot panel``)."""
    parser.add_argument(
        "--annotate",
        choices=("native", "browser", "none"),
        help="who draws the overlays (STATELESS_ANNOTATE)",
    )
    parser.add_argument(
        "--panel",
        dest="stateless_panel",
        choices=("auto", "on", "off"),
        help="local web panel (STATELESS_PANEL)",
    )
    parser.add_argument(
        "--panel-port",
        dest="panel_port",
        type=int,
        metavar="PORT",
        help="panel port, 0 = any (PANEL_PORT)",
    )
    parser.add_argument(
        "--no-panel-token",
        dest="panel_token",
        action="store_const",
        const="off",
        default=None,
        help="serve the panel without a token (any local process may then read /state and "
        "POST /inject); by default each start generates one and prints the link with it",
    )
    parser.add_argument(
        "--crop",
        dest="capture_crop",
        metavar="X1,Y1,X2,Y2",
        help="working area in 0..1000 (CAPTURE_CROP)",
    )
    parser.add_argument(
        "--no-physical",
        dest="physical_execution",
        action="store_false",
        default=None,
        help="record actions, send no input (PHYSICAL_EXECUTION=false)",
    )
    parser.add_argument(
        "--wait-inject",
        dest="boot_enabled",
        action="store_false",
        default=None,
        help="start by waiting for POST /inject instead of BOOT_VLM_OUTPUT (BOOT_ENABLED=false)",
    )
    parser.add_argument(
        "--log-layout",
        dest="log_layout",
        choices=("flat", "turn_dirs"),
        help="run artifacts (LOG_LAYOUT)",
    )


def flags(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "stateless.annotate": getattr(args, "annotate", None),
        "stateless.panel": getattr(args, "stateless_panel", None),
        "stateless.port": getattr(args, "panel_port", None),
        "stateless.panel_token": getattr(args, "panel_token", None),
        "stateless.capture_crop": getattr(args, "capture_crop", None),
        "stateless.physical_execution": getattr(args, "physical_execution", None),
        "stateless.boot_enabled": getattr(args, "boot_enabled", None),
        "stateless.log_layout": getattr(args, "log_layout", None),
    }


MODE = ModeSpec(
    "stateless",
    "seed 004: JSON actions, several per turn, annotated screenshots, crop sandbox, local panel",
    StatelessMode,
    sections={"stateless": StatelessSettings},
    add_arguments=add_arguments,
    flags=flags,
)
