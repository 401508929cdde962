"""``deskpilot scenarios``: list the built-in and user scenarios that ``deskpilot run`` accepts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "scenarios",
        help="list the scenarios `deskpilot run N` accepts",
        description="Built-in scenarios (seeds 000 and 001, the demo) and user scenarios from TOML files.",
    )
    parser.add_argument("name", nargs="?", help="show one scenario in full (number, group:number or name)")
    parser.add_argument("--scenarios", dest="scenario_files", action="append", default=[], metavar="FILE",
                        help="TOML file with [[scenario]] tables (repeatable; also DESKPILOT_SCENARIOS)")
    parser.add_argument("--config", metavar="PATH", help="TOML config file (its [[scenario]] tables count too)")
    parser.add_argument("--toolset", choices=("seed000", "seed001", "extended", "qwen", "uitars", "uitars-1.0"),
                        help="which list a bare number refers to (default: AGENT_TOOLSET or seed000)")
    parser.add_argument("--json", dest="as_json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from deskpilot.agent import all_scenarios, load_config, resolve_scenario
    from deskpilot.rundir import dumps_json

    flags = {"agent.toolset": args.toolset} if args.toolset else {}
    config = load_config(flags=flags, path=args.config)
    scenarios = all_scenarios(files=args.scenario_files, config_data=config.file_data)
    console = Console(highlight=False)
    if args.name:
        s = resolve_scenario(args.name, scenarios, toolset=config.agent.toolset)
        if args.as_json:
            sys.stdout.write(dumps_json(s.as_dict(), indent=True).decode() + "\n")
            return 0
        console.print(f"[bold]{s.ref}[/bold]  {s.name}  ({s.title or 'free-form task'})")
        console.print(f"tool set: {s.toolset or config.agent.toolset} · max steps: {s.max_steps or config.agent.max_steps} · source: {s.source}")
        console.print(s.task)
        return 0
    if args.as_json:
        sys.stdout.write(dumps_json([s.as_dict() for s in scenarios], indent=True).decode() + "\n")
        return 0
    table = Table(show_edge=False, pad_edge=False)
    for column in ("run as", "name", "tools", "title / task"):
        table.add_column(column)
    for s in scenarios:
        title = s.title or s.task
        table.add_row(s.ref, s.name, s.toolset or "-", title if len(title) <= 70 else title[:67] + "...")
    console.print(table)
    default_group = "seed001" if config.agent.toolset == "seed001" else "seed000"
    console.print(
        f"`deskpilot run N` runs scenario N of {default_group} (the active tool set is {config.agent.toolset}); "
        "`deskpilot run group:N` or `deskpilot run NAME` picks any; anything else is a free-form task.",
        style="dim",
    )
    return 0
