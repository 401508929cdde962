"""deploy/kubernetes: the Indexed Job's manifest parses, its pods each run one shard of the
suite with options `deskpilot eval` accepts, and the merge Job joins them."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from deskpilot.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"


def _docs(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if doc]


def _command(script: str, env: dict[str, str]) -> list[str]:
    """The `deskpilot ...` command of a container's shell script, its variables expanded."""
    joined = script.replace("\\\n", " ")
    line = next(raw.strip() for raw in joined.splitlines() if raw.strip().startswith("deskpilot "))
    expanded = re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: env[m.group(1) or m.group(2)], line)
    return shlex.split(expanded)


def test_the_indexed_job_runs_shard_k_of_n_per_index_into_its_own_directory() -> None:
    claim, job = _docs("eval-indexed-job.yaml")
    assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and 1 <= spec["parallelism"] <= spec["completions"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert int(env["SHARDS"]) == spec["completions"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["results"] == "/results"
    assert {v["name"]: v for v in pod["volumes"]}["results"]["persistentVolumeClaim"]["claimName"] == \
        claim["metadata"]["name"]
    outs = set()
    for index in range(spec["completions"]):
        argv = _command(container["args"][0], {**env, "JOB_COMPLETION_INDEX": str(index)})
        assert argv[:2] == ["deskpilot", "eval"]
        args = build_parser().parse_args(argv[1:])  # every option is one `deskpilot eval` has
        assert args.suite == env["SUITE"] and args.shard == f"{index}/{spec['completions']}"
        assert args.resume and args.endpoint == env["MODEL_ENDPOINT"] and args.parallel == int(env["SESSIONS"])
        outs.add(args.out)
    assert outs == {f"/results/shard-{i}" for i in range(spec["completions"])}


def test_the_merge_job_joins_every_shard_directory() -> None:
    (job,) = _docs("eval-merge-job.yaml")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    argv = _command(container["args"][0], dict(os.environ))
    args = build_parser().parse_args(argv[1:])
    assert args.merge == ["/results/shard-*"] and args.out == "/results/merged"  # the shell expands the glob
    _, indexed = _docs("eval-indexed-job.yaml")
    assert container["image"] == indexed["spec"]["template"]["spec"]["containers"][0]["image"]
