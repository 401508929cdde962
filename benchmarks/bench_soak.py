"""Soak: hundreds of turns against the local test server on Xvfb with zero model latency.

What must stay flat over a long run: resident memory, open file descriptors, X
connections, and the client-side turn overhead (reply -> next request). The agent runs
in this process with real capture (mss/XShm) and real XTest input on a private Xvfb that
shows a corpus screenshot; the scripted model alternates ``observe_screen``, clicks on
two spots (so screenshots differ) and a harmless key. The ``guarded`` workload is a
default run (the safety layer on: policy check on every action, kill-switch watcher
thread polling the pointer over its own X connection); ``plain`` switches it off.

Sampled after every turn: RSS (/proc/self/statm), open fds (/proc/self/fd) and the
clients connected to the private X server (the picture viewer + this process). "start"
is taken after a warm-up of 25 turns (imports, first encodes and caches are not leaks);
"before -> after" compares the process before and after a whole run (all released).

Run: ``.venv/bin/python benchmarks/bench_soak.py [--turns 500] [--json out.json]``, or
``./dev bench -k soak`` (500 turns, both workloads).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _xvfb import screen_with_picture

WARMUP = 25
SPOTS = ([40, 960], [60, 960])  # inert spots of the picture (bottom-left, away from the corner)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def x_clients() -> int:
    """Connections the X server holds open (its accepted sockets on /tmp/.X11-unix).

    The benchmark's Xvfb is private: besides the picture viewer, every client is this
    process. (Counting this process's own Unix sockets would also count asyncio's
    self-pipes.)"""
    display = os.environ.get("DISPLAY", ":0").lstrip(":").split(".")[0]
    suffix = f".X11-unix/X{display}"
    count = 0
    with open("/proc/net/unix") as fh:
        next(fh)
        for line in fh:
            parts = line.split()
            # Num RefCount Protocol Flags Type St Inode Path; St 03 = connected
            if len(parts) >= 8 and parts[5] == "03" and parts[7].endswith(suffix):
                count += 1
    return count


def _script(turns: int) -> list[Any]:
    from deskpilot.testing import Reply

    replies: list[Any] = []
    for i in range(turns):
        if i % 3 == 0:
            replies.append(Reply(tool_calls=[("observe_screen", {})]))
        elif i % 3 == 1:
            replies.append(Reply(tool_calls=[("click_element", {"label": "inert spot", "box": SPOTS[i % 2]})]))
        else:
            replies.append(Reply(tool_calls=[("press_key", {"key": "shift"})]))
    replies.append("Done.")
    return replies


class Sampler:
    """A loop reporter that samples the process after every turn."""

    def __init__(self) -> None:
        self.samples: list[dict[str, float]] = []

    def start(self, info: Any) -> None:
        pass

    def phase(self, turn: int, phase: str) -> None:
        pass

    def turn(self, record: Any) -> None:
        self.samples.append({"turn": record.get("turn", -1), "rss_mb": rss_mb(), "fds": open_fds(),
                             "x": x_clients(), "t": time.perf_counter()})

    def finish(self, summary: Any) -> None:
        pass


def soak(turns: int, work: Path, *, guarded: bool) -> dict[str, Any]:
    from deskpilot.agent import iter_turns, load_config, load_summary, run_agent
    from deskpilot.agent._timings import percentile
    from deskpilot.testing import ModelServer, ScriptedPolicy

    flags: dict[str, Any] = {"run.runs_dir": str(work / "runs"), "agent.max_steps": turns + 2,
                             "screen.input_backend": "xtest", "run.save_screenshots": False}
    # "guarded" is what every run does by default (policy, kill switch, budget, redaction);
    # "plain" switches the safety layer off to show what it costs.
    flags["safety.enabled"] = guarded
    sampler = Sampler()
    with ModelServer(ScriptedPolicy(_script(turns)), validate=False, keep_images=0, max_records=4) as server:
        cfg = load_config(flags={"model.endpoint": server.endpoint, **flags}, env={}, search_default=False)
        before = {"fds": open_fds(), "x": x_clients()}
        started = time.perf_counter()
        result = run_agent(cfg, "soak", reporter=sampler, handle_signals=False)
        wall = time.perf_counter() - started
        after = {"fds": open_fds(), "x": x_clients()}
    if result.outcome != "answered":
        raise RuntimeError(f"soak run ended {result.outcome}: {result.error}")
    records = list(iter_turns(result.run_dir))[1:-1]
    overhead = [r["timings"]["overhead"] for r in records]
    head, tail = overhead[:100], overhead[-100:]
    samples = sampler.samples
    start = samples[min(WARMUP, len(samples) - 2)]
    end = samples[-2]  # the last turn while running (the final record is written after cleanup)
    out: dict[str, Any] = {
        "workload": "guarded" if guarded else "plain",
        "turns": len(records) + 1,
        "wall_s": round(wall, 2),
        "rss_start_mb": round(start["rss_mb"], 1),
        "rss_end_mb": round(end["rss_mb"], 1),
        "rss_peak_mb": round(max(s["rss_mb"] for s in samples), 1),
        "fds_start": int(start["fds"]),
        "fds_end": int(end["fds"]),
        "x_start": int(start["x"]),
        "x_end": int(end["x"]),
        "fds_before_after": f"{before['fds']} -> {after['fds']}",
        "x_before_after": f"{before['x']} -> {after['x']}",
        "overhead_p50_ms": round(percentile(overhead, 50), 2),
        "overhead_p95_ms": round(percentile(overhead, 95), 2),
        "overhead_p95_first100_ms": round(percentile(head, 95), 2),
        "overhead_p95_last100_ms": round(percentile(tail, 95), 2),
    }
    if guarded:
        safety = load_summary(result.run_dir).get("safety") or {}
        out["policy_checks"] = (safety.get("decisions") or {}).get("checked", 0)
        out["policy_check_us"] = policy_check_cost()
    return out


def policy_check_cost(n: int = 5000) -> dict[str, float]:
    """Median microseconds of one SafetyGuard decision per action kind (no window rules read)."""
    import statistics

    from deskpilot.safety import PolicySettings, SafetyGuard

    guard = SafetyGuard.from_settings(PolicySettings(), window_reader=None)
    actions = {
        "click": {"kind": "click", "x": 100, "y": 200, "button": "left", "count": 1, "label": "OK"},
        "key": {"kind": "key", "key": "ctrl+shift+t"},
        "type_80": {"kind": "type", "text": "The quick brown fox jumps over the lazy dog, 1234 5678. " * 2},
    }
    out: dict[str, float] = {}
    for name, action in actions.items():
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            guard.decide(action)
            times.append(time.perf_counter() - t0)
        out[name] = round(statistics.median(times) * 1e6, 1)
    return out


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| workload | turns | RSS start -> end (peak) MB | fds start -> end | X clients start -> end | "
        "fds / X clients before -> after the run | overhead p50 / p95 ms | p95 first 100 -> last 100 ms | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['turns']} | {r['rss_start_mb']} -> {r['rss_end_mb']} ({r['rss_peak_mb']}) | "
            f"{r['fds_start']} -> {r['fds_end']} | {r['x_start']} -> {r['x_end']} | "
            f"{r['fds_before_after']} / {r['x_before_after']} | {r['overhead_p50_ms']} / {r['overhead_p95_ms']} | "
            f"{r['overhead_p95_first100_ms']} -> {r['overhead_p95_last100_ms']} | {r['wall_s']} |"
        )
    return lines


# -- pytest-benchmark entry point (`./dev bench`) -------------------------------------------

def test_soak_500_turns_plain_and_guarded(benchmark: Any, capsys: Any) -> None:
    """README's soak row: 500 turns each, safety off and on; RSS, fds and X clients flat."""
    rows: list[dict[str, Any]] = []

    def once() -> None:
        with screen_with_picture() as _, tempfile.TemporaryDirectory(prefix="deskpilot-soak-") as tmp:
            for workload in ("plain", "guarded"):
                rows.append(soak(500, Path(tmp) / workload, guarded=workload == "guarded"))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update({f"{r['workload']} {k}": v for r in rows for k, v in r.items()
                                 if isinstance(v, (int, float))})
    with capsys.disabled():
        print("\n" + "\n".join(table(rows)))
    for r in rows:
        assert r["fds_end"] == r["fds_start"] and r["x_end"] == r["x_start"], r  # nothing leaks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--workload", choices=("plain", "guarded"), action="append", help="default: both")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with screen_with_picture() as (display, shown), tempfile.TemporaryDirectory(prefix="deskpilot-soak-") as tmp:
        print(f"Xvfb {display} 1920x1080 showing {shown.name}; {args.turns} turns, model latency 0", flush=True)
        for workload in args.workload or ("plain", "guarded"):
            rows.append(soak(args.turns, Path(tmp) / workload, guarded=workload == "guarded"))
            print(json.dumps(rows[-1]), flush=True)
    print("\n".join(table(rows)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
