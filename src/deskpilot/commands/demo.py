"""``deskpilot demo``: the agent clicks, types Unicode and presses Enter in a demo app.

Starts Xvfb when there is no display, the Tk demo app, and the built-in model server
(a pixel-reading policy that finds the magenta TARGET in the screenshots it receives);
runs the agent with real screen capture and real input; shows what the app received,
the run summary and where the screenshots are. ``--endpoint URL`` drives the same demo
with a real model (LM Studio) instead of the built-in server.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from deskpilot.commands.run import add_agent_options, add_model_options, config_from_args

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="watch the agent work a demo app (starts Xvfb if needed)", description=__doc__)
    add_model_options(parser)
    add_agent_options(parser)
    parser.add_argument("--xvfb", action="store_true", help="always use a new virtual display, even when DISPLAY is set")
    parser.add_argument("--latency", type=float, default=0.0, help="simulated model time per answer of the built-in server (s)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import contextlib

    from rich.console import Console

    from deskpilot.agent._console import ConsoleReporter
    from deskpilot.agent._demo import run_demo, virtual_display
    from deskpilot.agent._loop import NullReporter

    use_builtin = args.endpoint is None
    # The demo is short: a few steps; a real model gets the scenario's step budget.
    config = config_from_args(args)
    console = Console(highlight=False)
    need_display = args.xvfb or (sys.platform != "win32" and not os.environ.get("DISPLAY"))
    display_cm = virtual_display() if need_display else contextlib.nullcontext(os.environ.get("DISPLAY", ""))
    with display_cm as display:
        if need_display:
            console.print(f"started a virtual display (Xvfb) on {display}", style="dim")
        if use_builtin:
            console.print("model: the built-in test server (finds the magenta TARGET by its pixels)", style="dim")
        reporter = NullReporter() if (config.run.quiet or args.json_summary) else ConsoleReporter(console)
        result = run_demo(config, use_builtin_server=use_builtin, reporter=reporter, server_latency=args.latency)
    console.print()
    console.print("[bold]what the demo app received[/bold]")
    for name, ok, detail in result.checks:
        console.print(f"[{'green' if ok else 'bold red'}]{'PASS' if ok else 'FAIL'}[/] {name}: {detail}")
    summary = result.run.summary
    shots = summary.get("screenshots") or []
    console.print(f"run directory: {result.run.run_dir}")
    console.print(f"screenshots ({len(shots)}): {summary.get('screenshot_dir')}")
    if args.json_summary:
        from deskpilot.agent._runlog import dumps_json

        sys.stdout.write(dumps_json({**summary, "demo_checks": result.checks}, indent=True).decode() + "\n")
    return 0 if result.ok else 1
