"""``deskpilot eval SUITE``: run a task suite, each task in an isolated desktop, and score it.

    deskpilot eval --list                              the suites
    deskpilot eval desktop --list                      a suite's tasks
    deskpilot eval desktop --scripted --parallel 4     every task played by its scripted solution
    deskpilot eval desktop --endpoint URL --model M --repeat 3 --out evals/m1
    deskpilot eval my-suite.toml --resume --out evals/m1
    deskpilot eval desktop --scripted --engine ray --ray-address HEAD:6379
    deskpilot eval desktop --scripted --shard 0/4 --out evals/shard-0     a quarter of the tasks
    deskpilot eval desktop --merge evals/shard-* --out evals/all          join the shards' results

Each session is its own Xvfb display, the task's app, one agent run (the model, mode and
tool set given, or ``--scripted``: the built-in model server playing the task's solution
through the same client, tools and input) and the task's checker, which reads the app's
state. Results go to ``--out``: results.jsonl (a line per attempt as it ends),
summary.json and report.html. Infrastructure errors (an app or display that dies, a hung
or killed session) are retried (``--retries``) and never count as the model's failure.
Ctrl+C stops every session and keeps the finished results (``--resume`` goes on).
``--engine ray`` runs the sessions as Ray actors, one desktop each, on the nodes of a Ray
cluster (pip install "deskpilot[ray]"; docs/evaluation.md). Linux only: the sessions need Xvfb.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from deskpilot.commands.run import add_model_options

__all__ = ["register"]

#: Exit codes: every attempt succeeded; some failed; infrastructure errors left after retries.
EXIT_OK, EXIT_FAILED, EXIT_INFRA, EXIT_INTERRUPTED = 0, 1, 3, 130


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eval", help="run a task suite in isolated desktops and score it", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("suite", nargs="?", help="a built-in suite (see --list) or a .toml suite file")
    g = parser.add_argument_group("eval")
    g.add_argument("--list", dest="list_only", action="store_true", help="list the suites (or a suite's tasks)")
    g.add_argument("--scripted", action="store_true",
                   help="play each task's scripted solution through the built-in model server (no model needed)")
    g.add_argument("--parallel", type=int, default=None, metavar="N",
                   help="sessions at once (default 1; with --engine ray: every desktop the cluster has)")
    g.add_argument("--out", default=None, metavar="DIR", help="results directory (default evals/SUITE-TIMESTAMP)")
    g.add_argument("--resume", action="store_true", help="go on in --out DIR, skipping finished attempts")
    g.add_argument("--repeat", type=int, default=1, metavar="K", help="attempts per task (default 1)")
    g.add_argument("--retries", type=int, default=2, metavar="R",
                   help="retries of an attempt after an infrastructure error (default 2)")
    g.add_argument("--tasks", default=None, metavar="A,B", help="run only these tasks (comma-separated)")
    g.add_argument("--session-timeout", dest="session_timeout", type=float, default=None, metavar="S",
                   help="seconds a session may take before it counts as hung (default: the task's limit + 60)")
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="where sessions run: this host, or Ray actors on a cluster's nodes (default local)")
    g.add_argument("--ray-address", dest="ray_address", default=None, metavar="ADDR",
                   help="the Ray cluster's head (HOST:PORT; default $RAY_ADDRESS, else a local Ray for this run)")
    g.add_argument("--shard", default=None, metavar="K/N",
                   help="run only the tasks i with i %% N == K in suite order (0 <= K < N), e.g. one pod's share")
    g.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="join the --out directories of shards into --out (results, summary, report); runs nothing")
    g.add_argument("--mode", help="agent mode (default single)")
    g.add_argument("--toolset", metavar="NAME", help="tool set (default: each task's own, extended)")
    add_model_options(parser)
    parser.set_defaults(handler=handle)


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings every session's agent gets (what the flags and --set say). The API key
    travels in the sessions' environment (LMSTUDIO_API_KEY), never in the session specs
    written under --out."""
    import os

    from deskpilot.agent import parse_set_option

    flags: dict[str, Any] = {}
    for text in args.set_values or []:
        key, raw = parse_set_option(text)
        flags[key] = raw
    for attr, key in (("endpoint", "model.endpoint"), ("model", "model.model"), ("api_key", "model.api_key"),
                      ("server", "model.server"), ("timeout", "model.timeout"), ("mode", "agent.mode"),
                      ("toolset", "agent.toolset")):
        value = getattr(args, attr, None)
        if value is not None:
            flags[key] = value
    key = flags.pop("model.api_key", None)
    if key is not None:
        os.environ["LMSTUDIO_API_KEY"] = str(key)
    return flags


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from deskpilot.eval import SUITES, load_suite

    console = Console(highlight=False)
    if not args.suite:
        table = Table("suite", "tasks", "what")
        for name in SUITES:
            suite = load_suite(name)
            what = suite.description + (f" [bold red]({suite.unavailable})[/]" if suite.unavailable else "")
            table.add_row(name, str(len(suite.tasks)), what)
        console.print(table)
        console.print("a suite file: deskpilot eval PATH.toml (docs/evaluation.md)", style="dim")
        return EXIT_OK
    suite = load_suite(args.suite)
    table = Table("task", "exercises", "instruction", title=f"{suite.name}: {len(suite.tasks)} tasks")
    for task in suite.tasks:
        table.add_row(task.name, ", ".join(task.tags), task.instruction)
    console.print(table)
    return EXIT_OK


def _merge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from deskpilot._errors import ConfigError
    from deskpilot.eval import load_suite, merge_results

    if not args.out:
        raise ConfigError("--merge writes into --out DIR (an empty directory)", where="--out")
    order = [t.name for t in load_suite(args.suite).tasks] if args.suite else None
    try:
        s = merge_results([Path(d) for d in args.merge], Path(args.out), tasks=order)
    except ValueError as exc:
        raise ConfigError(str(exc), where="--merge") from exc
    rate = s["success_rate"]
    percent = f" ({rate:.0%})" if rate is not None else ""
    print(f"{s['suite']}: {len(args.merge)} shards, {s['successes']}/{s['attempts']} succeeded{percent}, "
          f"{s['infrastructure_errors']} infrastructure errors, {s['wall_s']:.1f} s (longest shard)")
    print(f"results: {Path(args.out) / 'results.jsonl'} · report: {Path(args.out) / 'report.html'}")
    if s["unsettled"]:
        return EXIT_INFRA
    return EXIT_OK if s["successes"] == s["attempts"] else EXIT_FAILED


def handle(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from deskpilot._errors import ConfigError
    from deskpilot.eval import Engine, LocalEngine, Progress, check_platform, parse_shard, run_eval

    if args.list_only:
        return _list(args)
    if args.merge:
        return _merge(args)
    if not args.suite:
        raise ConfigError("name a suite (deskpilot eval --list shows them)", where="SUITE")
    check_platform()
    if args.parallel is not None and args.parallel < 1:
        raise ConfigError("--parallel is at least 1", where="--parallel")
    if args.ray_address and args.engine != "ray":
        raise ConfigError("--ray-address goes with --engine ray", where="--ray-address")
    if not args.scripted and not args.endpoint:
        import os

        if not (os.environ.get("LMSTUDIO_ENDPOINT") or args.config or any(s.startswith("model.endpoint")
                                                                           for s in args.set_values)):
            raise ConfigError("give a model (--endpoint URL, LMSTUDIO_ENDPOINT or a config file) or --scripted",
                              where="--endpoint")
    suite_name = Path(args.suite).stem
    out = Path(args.out or f"evals/{suite_name}-{time.strftime('%Y%m%d-%H%M%S')}")
    tty = sys.stderr.isatty()

    def report(progress: Progress, record: dict[str, Any], running: int) -> None:
        line = progress.line(running)
        if tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            mark = "ok" if record.get("success") else (f"error {record['error_kind']}" if record.get("error_kind")
                                                       else "failed")
            sys.stderr.write(f"{line} · {record['task']}#{record['attempt']}: {mark}\n")
        sys.stderr.flush()

    only = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    shard = parse_shard(args.shard) if args.shard else None
    engine: Engine
    if args.engine == "ray":
        from deskpilot.eval import RayEngine

        ray_engine = RayEngine(args.ray_address, desktops=args.parallel)
        ray_engine.connect()  # before anything runs: a missing ray or desktop resource says so here
        engine = ray_engine
    else:
        engine = LocalEngine(args.parallel or 1)
    outcome = run_eval(
        args.suite, out, engine=engine, scripted=args.scripted, repeat=args.repeat,
        retries=args.retries, only=only, timeout=args.session_timeout, flags=_flags(args), config=args.config,
        resume=args.resume, shard=shard, on_result=report,
    )
    if tty:
        sys.stderr.write("\n")
    s = outcome.summary
    rate = s["success_rate"]
    left = f" ({s['unsettled']} left after retries)" if s["unsettled"] else ""
    percent = f" ({rate:.0%})" if rate is not None else ""
    print(f"{s['suite']}: {s['successes']}/{s['attempts']} succeeded{percent}, {s['infrastructure_errors']} "
          f"infrastructure errors{left}, {s['wall_s']:.1f} s, {s['tasks_per_hour']} tasks/hour at "
          f"--parallel {s['parallel']}{' (ray)' if s['engine'] == 'ray' else ''}")
    for name, task in s["per_task"].items():
        if task["results"] and any(r != "ok" for r in task["results"]):
            print(f"  {name}: {', '.join(task['results'])}")
    print(f"results: {out / 'results.jsonl'} · summary: {out / 'summary.json'} · report: {out / 'report.html'}")
    if outcome.interrupted:
        print("interrupted: every session stopped; finished results kept (--resume goes on)")
        return EXIT_INTERRUPTED
    if s["unsettled"]:
        return EXIT_INFRA
    return EXIT_OK if s["successes"] == s["attempts"] else EXIT_FAILED
