"""``deskpilot panel``: the stateless engine with its local web panel (seed 004's ``python main.py``).

    deskpilot panel                          serve the panel and wait for POST /inject
    deskpilot panel "Open the text editor"   start from BOOT_VLM_OUTPUT and run the task
    deskpilot panel --annotate browser ...   the seed's flow: the page draws the overlays

The panel (http://127.0.0.1:PANEL_PORT, default 8765) shows each screenshot with its
overlays, the model's observation and its JSON, and takes injected model outputs. Every
``deskpilot run`` option works here too; the mode is always ``stateless``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["register"]

# 4-6: the run ended without the model finishing on purpose (README "Model servers").
_EXIT_CODES = {
    "answered": 0,
    "error": 1,
    "max_steps": 3,
    "max_time": 3,
    "truncated": 4,
    "no_action": 5,
    "server_error": 6,
    "failed": 7,
    "interrupted": 130,
}


class _PanelParser(argparse.ArgumentParser):
    """Adds the stateless mode's flags when ``panel`` is parsed (``deskpilot --help`` stays light)."""

    _stateless_added = False

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        if not self._stateless_added:
            self._stateless_added = True
            from deskpilot.agent.modes.stateless import add_arguments

            add_arguments(self.add_argument_group("stateless mode"))  # type: ignore[arg-type]
        return super().parse_known_args(args, namespace)


def register(subparsers: Any) -> None:
    from deskpilot.commands.run import add_agent_options, add_model_options

    parser = subparsers.add_parser(
        "panel",
        help="the stateless agent with its local web panel (seed 004)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Exit codes: 0 answered, 1 error, 3 step/time limit, 130 interrupted.",
    )
    parser.__class__ = _PanelParser
    parser.add_argument(
        "task", nargs="*", help="task text; none: wait for a model output on POST /inject"
    )
    parser.add_argument(
        "--linger",
        dest="linger",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the panel up after the run ends, to look at the final state, until Ctrl+C "
        "(default: when started from a terminal)",
    )
    add_model_options(parser)
    add_agent_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from deskpilot.agent import ConsoleReporter, NullReporter, run_agent
    from deskpilot.agent.modes.stateless import flags
    from deskpilot.capture import check_screen_visible
    from deskpilot.commands.run import config_from_args
    from deskpilot.rundir import dumps_json

    task = " ".join(args.task).strip()
    extra: dict[str, Any] = {k: v for k, v in flags(args).items() if v is not None}
    extra["agent.mode"] = "stateless"
    extra.setdefault("stateless.panel", "on")
    linger = (
        args.linger if args.linger is not None else (sys.stdin.isatty() and sys.stdout.isatty())
    )
    extra.setdefault("stateless.panel_linger", linger)
    config = config_from_args(args, extra)
    # Before the panel serves anything: its live view must never show a black desktop
    # (checked for the capture backend the run will use: auto, mutter, wlroots, mss).
    check_screen_visible(allow_xwayland=args.allow_xwayland, capture=config.screen.capture_backend)
    if not task and config.sources.get("stateless.boot_enabled") == "default":
        # No task: like the seed with BOOT_ENABLED = False, the run starts from an injection.
        config = config_from_args(args, {**extra, "stateless.boot_enabled": False})
    quiet = config.run.quiet or args.json_summary
    reporter = NullReporter() if quiet else ConsoleReporter()
    result = run_agent(config, task, reporter=reporter, allow_xwayland=args.allow_xwayland)
    if args.json_summary:
        sys.stdout.write(dumps_json(result.summary, indent=True).decode() + os.linesep)
    _linger(result.outcome)
    return _EXIT_CODES.get(result.outcome, 1)


def _linger(outcome: str) -> None:
    """Keep the panels the run left up until Ctrl+C (or SIGTERM), then stop them."""
    import signal
    import threading

    from deskpilot.agent.modes.stateless import take_lingering_panels

    panels = take_lingering_panels()
    if not panels:
        return
    print(
        f"deskpilot: the run ended ({outcome}); the panel stays up at {panels[0].page_url} so you can look "
        "at the final state. Press Ctrl+C to stop it.",
        file=sys.stderr,
        flush=True,
    )
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        for panel in panels:
            panel.stop_thread()
        print("deskpilot: panel stopped", file=sys.stderr, flush=True)
