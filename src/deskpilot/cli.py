"""The ``deskpilot`` command.

Each subcommand lives in its own module under :mod:`deskpilot.commands` and exposes
``register(subparsers)``; this file only wires them together, so that ``deskpilot
--help`` imports no numpy, no capture backend and no HTTP client.
"""

from __future__ import annotations

import sys

from deskpilot._errors import DeskpilotError, RunInterrupted
from deskpilot._version import __version__

# Everything else is imported inside main(): until then a Ctrl+C can only print
# Python's own traceback (see main). Not typing.TYPE_CHECKING, for the same reason.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

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
    "mcp",
    "replay",
    "report",
    "eval",
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
    import argparse
    import importlib

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


def _sanitize_last_resort() -> None:
    """Log records reach the terminal through logging's last-resort handler (WARNING and
    up, message only, stderr) when nothing else handles them; several quote what the
    model wrote. Same handler, its text passed through :func:`terminal_text`."""
    import logging

    from deskpilot._untrusted import terminal_text

    class _TerminalHandler(logging.StreamHandler):  # type: ignore[type-arg]
        @property  # type: ignore[override]
        def stream(self) -> Any:  # the stderr of the moment, like logging's own
            return sys.stderr

        @stream.setter
        def stream(self, value: Any) -> None:
            pass

        def format(self, record: logging.LogRecord) -> str:
            return terminal_text(super().format(record))

    handler = _TerminalHandler()
    handler.setLevel(logging.WARNING)
    logging.lastResort = handler


def main(argv: Sequence[str] | None = None) -> int:
    started = False
    try:
        from deskpilot._untrusted import terminal_text

        _sanitize_last_resort()
        # Building the parser imports every command (and, for `run`, the agent): a
        # Ctrl+C that early is an interruption like any other, not a traceback.
        try:
            parser = build_parser()
        except ImportError as exc:
            # A stale compiled core, or DESKPILOT_REQUIRE_NATIVE=1 without one: the message
            # says what to do, a traceback through the subcommand imports would only bury it.
            if not (exc.name or "").startswith("deskpilot._native"):
                raise
            print(f"deskpilot: error: {exc}", file=sys.stderr)
            return 1
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        started = True
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("deskpilot: interrupted" if started else "deskpilot: interrupted while starting", file=sys.stderr)
        return 130
    except RunInterrupted as exc:
        # Ctrl+C outside a run's handlers: before it started or while it winds down.
        print(terminal_text(f"deskpilot: {exc}"), file=sys.stderr)
        return 130
    except DeskpilotError as exc:
        # Error messages quote what servers and models sent.
        print(terminal_text(f"deskpilot: error: {exc}"), file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        # `pip install deskpilot` is the capture library alone: name the missing extra.
        from deskpilot._extras import missing_extra_message

        message = missing_extra_message(exc)
        if message is None:
            raise
        print(f"deskpilot: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
