"""The Ray engine's overhead per task against the local engine, and a Ray cluster's start-up.

Both engines run the same suite (the ``desktop`` suite's tasks, ``--scripted``: the model
server answers at once, so the difference is the engines' own) at the same parallelism in
the same run of this script, alternating local and Ray for ``--rounds`` rounds. The Ray
cluster is a real multi-node one on this machine (``ray.cluster_utils.Cluster``: a head
without desktops and ``--nodes`` worker raylets sharing ``--parallel`` desktops), started
once and timed: the cluster (raylets up, the driver connected), then per run the actors
(placed, their fork servers up: ``summary.engine_startup_s``). Reported per engine: wall
(the median over rounds; the Ray run's includes its actors' start), tasks per hour, and
the overhead per task = (Ray wall - local wall) / tasks, with and without the actors'
start (what a long suite amortises).

Run: ``.venv/bin/python benchmarks/bench_eval_ray.py [--parallel 2] [--nodes 2]
[--rounds 2] [--tasks A,B] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def ray_cluster(nodes: int, desktops: int) -> Iterator[float]:
    """A head (no desktops) and ``nodes`` worker raylets sharing ``desktops`` desktops; yields
    the seconds it took until the driver was connected."""
    import ray
    from ray.cluster_utils import Cluster

    store = 80 * 1024 * 1024
    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"deskpilot_desktop": 0}, "object_store_memory": store,
        "include_dashboard": False})
    try:
        for i in range(nodes):
            share = desktops // nodes + (1 if i < desktops % nodes else 0)
            cluster.add_node(num_cpus=1, resources={"deskpilot_desktop": share}, object_store_memory=store)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        yield time.perf_counter() - started
    finally:
        ray.shutdown()
        cluster.shutdown()


def one_run(engine: Any, out: Path, tasks: Sequence[str] | None) -> dict[str, Any]:
    from deskpilot.eval import run_eval

    outcome = run_eval("desktop", out, engine=engine, scripted=True, only=tasks)
    s = outcome.summary
    if s["successes"] != s["attempts"]:
        raise RuntimeError(f"{engine.name}: {s['successes']}/{s['attempts']} succeeded: {s['per_task']}")
    return {"engine": engine.name, "wall_s": s["wall_s"], "tasks": s["tasks"], "tasks_per_hour": s["tasks_per_hour"],
            "engine_startup_s": s.get("engine_startup_s")}


def measure(parallel: int, nodes: int, rounds: int, tasks: Sequence[str] | None) -> dict[str, Any]:
    from deskpilot.eval import LocalEngine, RayEngine

    runs: list[dict[str, Any]] = []
    with ray_cluster(nodes, parallel) as cluster_s, tempfile.TemporaryDirectory(prefix="deskpilot-evalray-") as tmp:
        for r in range(rounds):
            runs.append(one_run(LocalEngine(parallel), Path(tmp) / f"local-{r}", tasks))
            print(json.dumps(runs[-1]), flush=True)
            runs.append(one_run(RayEngine(desktops=parallel), Path(tmp) / f"ray-{r}", tasks))
            print(json.dumps(runs[-1]), flush=True)
    local = [r for r in runs if r["engine"] == "local"]
    ray = [r for r in runs if r["engine"] == "ray"]
    count = local[0]["tasks"]
    local_wall = statistics.median(r["wall_s"] for r in local)
    ray_wall = statistics.median(r["wall_s"] for r in ray)
    actors = statistics.median(r["engine_startup_s"] for r in ray)
    return {
        "parallel": parallel, "nodes": nodes, "rounds": rounds, "tasks": count,
        "cluster_startup_s": round(cluster_s, 2), "actors_startup_s": round(actors, 2),
        "local_wall_s": round(local_wall, 2), "ray_wall_s": round(ray_wall, 2),
        "local_tasks_per_hour": round(count / local_wall * 3600), "ray_tasks_per_hour": round(count / ray_wall * 3600),
        "ratio": round(ray_wall / local_wall, 2),
        "overhead_per_task_s": round((ray_wall - local_wall) / count, 3),
        "overhead_per_task_after_startup_s": round((ray_wall - actors - local_wall) / count, 3),
        "runs": runs,
    }


def table(result: dict[str, Any]) -> list[str]:
    r = result
    return [
        f"| engine (`--parallel {r['parallel']}`, {r['tasks']} tasks) | wall | tasks/hour | start-up |",
        "|---|---|---|---|",
        f"| local | {r['local_wall_s']} s | {r['local_tasks_per_hour']} | fork server (in the wall) |",
        f"| ray ({r['nodes']} worker nodes) | {r['ray_wall_s']} s | {r['ray_tasks_per_hour']} | actors "
        f"{r['actors_startup_s']} s (in the wall); cluster {r['cluster_startup_s']} s (before) |",
        "",
        f"Ray / local wall: {r['ratio']}x; overhead per task {r['overhead_per_task_s']} s "
        f"({r['overhead_per_task_after_startup_s']} s once the actors are up).",
    ]


# -- pytest-benchmark entry point (`./dev bench`) -------------------------------------------

def test_eval_ray_overhead_against_the_local_engine(benchmark: Any, capsys: Any) -> None:
    """README's Ray row: the desktop suite through both engines at --parallel 2, one round."""
    results: list[dict[str, Any]] = []
    benchmark.pedantic(lambda: results.append(measure(2, 2, 1, None)), rounds=1, iterations=1)
    benchmark.extra_info.update({k: v for k, v in results[0].items() if isinstance(v, (int, float))})
    with capsys.disabled():
        print("\n" + "\n".join(table(results[0])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=2, help="sessions at once, both engines (default 2)")
    parser.add_argument("--nodes", type=int, default=2, help="Ray worker nodes sharing the desktops (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="local then Ray, this many times (default 2)")
    parser.add_argument("--tasks", default=None, help="a subset of the desktop suite (default: all 24)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    tasks = [t for t in args.tasks.split(",") if t] if args.tasks else None
    result = measure(args.parallel, args.nodes, args.rounds, tasks)
    print("\n".join(table(result)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
