"""The ``deskpilot`` command.

Each subcommand lives in its own module under :mod:`deskpilot.commands` and exposes
``register(subparsers)``; this file only wires them together, so that ``deskpilot
--help`` imports no numpy, no capture backend and no HTTP client.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from deskpilot._errors import DeskpilotError
from deskpilot._version import __version__

__all__ = ["main"]

#: Subcommand modules, in the order --help lists them.
COMMANDS: tuple[str, ...] = (
    "run",
    "demo",
    "scenarios",
    "shot",
    "doctor",
    "testserver",
    "panel",
    "replay",
    "report",
)


#: The seed numbers the help texts mention, and the names they go by (README: "Names").
NAMES_HELP = """\
names: the earlier designs ("seeds") live on as
  seed 000  single mode, tool set element (--toolset element, alias seed000; the default)
  seed 001  single mode, tool set pointer (--toolset pointer, alias seed001)
  seed 002  team mode, variant commander/operator (--variant commander/operator, alias 002)
  seed 003  team mode, variant planner/executor (--variant planner/executor, alias 003; the default)
  seed 004  stateless mode (--mode stateless) and `deskpilot panel`
try every mode: deskpilot demo --all"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deskpilot",
        description="Fast screen capture and a desktop agent driven by a vision-language model.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=NAMES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"deskpilot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"deskpilot.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
    except ImportError as exc:
        # A stale compiled core, or DESKPILOT_REQUIRE_NATIVE=1 without one: the message says
        # what to do, a traceback through the subcommand imports would only bury it.
        if not (exc.name or "").startswith("deskpilot._native"):
            raise
        print(f"deskpilot: error: {exc}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except DeskpilotError as exc:
        print(f"deskpilot: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("deskpilot: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
