"""``deskpilot demo``: the agent clicks, types Unicode and presses Enter in a demo app.

Starts Xvfb when there is no display, the Tk demo app, and the built-in model server: a
pixel-reading model that finds the magenta TARGET in the screenshots it receives and
speaks the protocol of the mode asked for (``--mode single``: tool calls; ``--mode team``:
a planner's plan, then executor tool calls, in either team variant; ``--mode stateless``:
JSON with a box and several actions per turn). ``--all`` runs every mode, both team
variants, one after the other. Runs the agent with real screen capture and real input;
shows what the app received, the run summary and where the screenshots are.
``--endpoint URL`` drives the same demo with a real model (LM Studio) instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from deskpilot.commands.run import add_agent_options, add_model_options, config_from_args

__all__ = ["register"]

#: What ``--all`` runs: (mode, team variant).
ALL_RUNS: tuple[tuple[str, str | None], ...] = (
    ("single", None),
    ("team", "planner/executor"),
    ("team", "commander/operator"),
    ("stateless", None),
)

_MODEL_LABEL = {
    "single": "the built-in test server (finds the magenta TARGET by its pixels; tool calls)",
    "team": "the built-in test server (a planner's plan, then executor tool calls that find the magenta "
    "TARGET by its pixels)",
    "stateless": "the built-in test server (finds the magenta TARGET by its pixels; JSON with a box and "
    "three actions in one turn)",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="watch the agent work a demo app (starts Xvfb if needed)", description=__doc__
    )
    add_model_options(parser)
    add_agent_options(parser)
    g = parser.add_argument_group("demo")
    g.add_argument(
        "--all",
        dest="all_modes",
        action="store_true",
        help="run every mode: single, team (planner/executor, then commander/operator), stateless",
    )
    g.add_argument(
        "--variant",
        metavar="NAME",
        help="team variant for --mode team: planner/executor (default) or commander/operator",
    )
    g.add_argument(
        "--xvfb",
        action="store_true",
        help="always use a new virtual display, even when DISPLAY is set",
    )
    g.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="simulated model time per answer of the built-in server (s)",
    )
    parser.set_defaults(handler=handle)


def _runs(args: argparse.Namespace) -> list[tuple[str | None, str | None]]:
    from deskpilot._errors import ConfigError

    if args.all_modes:
        if args.mode or args.variant:
            raise ConfigError(
                "--all runs every mode and team variant: leave out --mode and --variant",
                where="--all",
            )
        return list(ALL_RUNS)
    if args.variant and args.mode not in (None, "team"):
        raise ConfigError(
            f"--variant is for --mode team, not --mode {args.mode}", where="--variant"
        )
    return [("team" if args.variant else args.mode, args.variant)]


def handle(args: argparse.Namespace) -> int:
    import contextlib

    from rich.console import Console

    from deskpilot.agent import ConsoleReporter, NullReporter
    from deskpilot.testing import DemoResult, run_demo, virtual_display

    use_builtin = args.endpoint is None
    console = Console(highlight=False)
    # Configs first: a bad flag is reported before a display or an app starts.
    configs = []
    for mode, variant in _runs(args):
        extra: dict[str, Any] = {"agent.mode": mode, "team.variant": variant}
        configs.append(config_from_args(args, extra))
    need_display = args.xvfb or (sys.platform != "win32" and not os.environ.get("DISPLAY"))
    blind = "" if need_display else _blind_display(args.allow_xwayland)
    need_display = need_display or bool(blind)
    display_cm = (
        virtual_display() if need_display else contextlib.nullcontext(os.environ.get("DISPLAY", ""))
    )
    results: list[tuple[str, DemoResult]] = []
    with display_cm as display:
        if blind:
            console.print(
                f"DISPLAY={blind} is Xwayland (a Wayland session): deskpilot cannot see that desktop, so the "
                "demo runs on a virtual display instead (--allow-xwayland: on Xwayland, X11 windows only)",
                style="dim",
            )
        if need_display:
            console.print(f"started a virtual display (Xvfb) on {display}", style="dim")
        for config in configs:
            mode = config.agent.mode
            title = _title(config)
            if len(configs) > 1:
                console.rule(f"[bold]{title}[/bold]")
            quiet = config.run.quiet or args.json_summary
            label = _MODEL_LABEL.get(mode) if use_builtin else None
            reporter = NullReporter() if quiet else ConsoleReporter(console, model_label=label)
            result = run_demo(
                config,
                use_builtin_server=use_builtin,
                reporter=reporter,
                server_latency=args.latency,
                allow_xwayland=args.allow_xwayland,
            )
            results.append((title, result))
            console.print()
            console.print(f"[bold]what the demo app received[/bold] ({title})")
            for name, ok, detail in result.checks:
                console.print(
                    f"[{'green' if ok else 'bold red'}]{'PASS' if ok else 'FAIL'}[/] {name}: {detail}"
                )
            summary = result.run.summary
            shots = summary.get("screenshots") or []
            if quiet:  # the reporter printed it otherwise
                console.print(f"run directory: {result.run.run_dir}")
            console.print(f"screenshots ({len(shots)}): {summary.get('screenshot_dir')}")
    if len(results) > 1:
        console.print()
        console.print("[bold]all modes[/bold]")
        for title, result in results:
            passed = sum(1 for _, ok, _ in result.checks if ok)
            mark = "[green]PASS[/]" if result.ok else "[bold red]FAIL[/]"
            console.print(
                f"{mark} {title}: outcome {result.run.outcome}, {passed}/{len(result.checks)} checks, "
                f"{result.run.summary.get('steps')} steps · {result.run.run_dir}"
            )
    if args.json_summary:
        from deskpilot.rundir import dumps_json

        payload: Any = [{**r.run.summary, "demo_checks": r.checks} for _, r in results]
        sys.stdout.write(
            dumps_json(payload[0] if len(payload) == 1 else payload, indent=True).decode() + "\n"
        )
    return 0 if all(r.ok for _, r in results) else 1


def _blind_display(allow_xwayland: bool) -> str:
    """The DISPLAY when capture cannot see it (Xwayland, not allowed), else ""."""
    if sys.platform == "win32":
        return ""
    from deskpilot._errors import ScreenNotVisibleError
    from deskpilot.capture import check_screen_visible

    try:
        check_screen_visible(allow_xwayland=allow_xwayland)
    except ScreenNotVisibleError:
        return os.environ.get("DISPLAY", "")
    return ""


def _title(config: Any) -> str:
    mode = str(config.agent.mode)
    if mode != "team":
        return f"{mode} mode"
    from deskpilot.agent.modes.team import TeamSettings, resolve_variant

    variant = resolve_variant(config.section(TeamSettings).variant)
    return f"team mode, {variant.planner_role}/{variant.executor_role}"
