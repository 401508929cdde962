"""``deskpilot replay``: play a recorded run back without a model and report what differs.

    deskpilot replay runs/20250101-120000                 dry: recorded screens, no input sent
    deskpilot replay runs/20250101-120000 --until 5       turns 0..5 only
    deskpilot replay RUN --input real --tolerance 2%      re-execute on this desktop, compare screens

Exit codes: 0 the replay matches the recording, 1 it diverged (or stopped at a screen
that differs), 2 the run cannot be replayed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from deskpilot._untrusted import terminal_text

__all__ = ["parse_fraction", "register"]


def parse_fraction(text: str) -> float:
    """``0.02``, ``2%`` -> 0.02 (argparse type)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share like 0.02 or 2%, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"the share must be between 0 and 1 (0%..100%), got {text!r}")
    return value


def _pixel_tolerance(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 0..255, got {text!r}") from None
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError(f"the per-pixel tolerance must be 0..255, got {value}")
    return value


def _turn(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a turn number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a turn number is >= 0, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a recorded run without a model and report divergences",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Exit codes: 0 matches, 1 diverged, 2 cannot replay.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<timestamp>)")
    parser.add_argument(
        "--input",
        choices=("dry", "real"),
        default="dry",
        help="dry (default): recorded screenshots, no input sent; real: re-execute on this desktop",
    )
    parser.add_argument("--until", type=_turn, metavar="N", help="replay turns 0..N only")
    parser.add_argument(
        "--tolerance",
        type=parse_fraction,
        default=0.01,
        metavar="SHARE",
        help="--input real: share of pixels that may differ beyond the per-pixel tolerance (default 1%%)",
    )
    parser.add_argument(
        "--pixel-tolerance",
        dest="pixel_tolerance",
        type=_pixel_tolerance,
        default=32,
        metavar="N",
        help="--input real: per-channel difference 0..255 that still counts as equal (default 32)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="keep the replay's own run directory under DIR (default: a temporary one, removed)",
    )
    parser.add_argument("--json", dest="json_output", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from deskpilot._errors import DeskpilotError
    from deskpilot.replay import FrameTolerance, ReplayOptions, format_result, replay_run
    from deskpilot.rundir import dumps_json

    options = ReplayOptions(
        input=args.input,
        until=args.until,
        tolerance=FrameTolerance(args.pixel_tolerance, args.tolerance),
        out_dir=Path(args.out) if args.out else None,
    )
    try:
        result = replay_run(args.run_dir, options)
    except DeskpilotError as exc:
        print(terminal_text(f"deskpilot replay: cannot replay {args.run_dir}: {exc}"), file=sys.stderr)
        return 2
    if args.json_output:
        sys.stdout.write(dumps_json(result.as_dict(), indent=True).decode() + os.linesep)
    else:
        print(terminal_text(format_result(result)))  # recorded model text
    return 0 if result.ok else 1
