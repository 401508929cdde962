"""The results of a suite run in ``--out DIR``: ``results.jsonl``, ``summary.json``, ``report.html``.

``results.jsonl`` gets one line per try of an attempt as it ends, written with one
``write`` on a file opened for appending, so a line is whole or absent; a run killed
mid-write leaves at most a line without its newline, which :meth:`ResultsLog.load` cuts
off. ``final`` marks the line that settles an attempt (no infrastructure error, or the
last try); ``--resume`` skips attempts that have one.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "REPORT_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "ResultsLog",
    "merge_results",
    "summarize",
    "write_report_html",
]

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"

Record = dict[str, Any]


class ResultsLog:
    def __init__(self, out: Path) -> None:
        self.path = out / RESULTS_FILE

    def load(self) -> list[Record]:
        """The whole lines written so far (a trailing partial line is cut off the file)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) != len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(len(whole))
        return [json.loads(line) for line in whole.splitlines() if line.strip()]

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _stats(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"mean": round(statistics.fmean(values), 3), "p50": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def summarize(records: Sequence[Record], *, suite: str, wall_s: float, ran: int, parallel: int, engine: str,
              scripted: bool, tasks: Sequence[str]) -> Record:
    """``summary.json`` from every line so far; ``ran``: tries run by this invocation (for
    tasks per hour over ``wall_s``)."""
    finals = [r for r in records if r.get("final")]
    per_task: dict[str, Record] = {}
    for name in tasks:
        mine = [r for r in finals if r["task"] == name]
        mine.sort(key=lambda r: r["attempt"])
        successes = sum(1 for r in mine if r.get("success"))
        per_task[name] = {
            "attempts": len(mine),
            "successes": successes,
            "success_rate": round(successes / len(mine), 4) if mine else None,
            "results": ["ok" if r.get("success") else (f"error:{r['error_kind']}" if r.get("error_kind") else "failed")
                        for r in mine],
            "mean_seconds": round(statistics.fmean(r.get("seconds") or 0.0 for r in mine), 3) if mine else None,
            "mean_steps": round(statistics.fmean(r.get("steps") or 0 for r in mine), 2) if mine else None,
            "reports": [r.get("report") for r in mine],
        }
    kinds: dict[str, int] = {}
    for r in records:
        if r.get("error_kind"):
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    successes = sum(1 for r in finals if r.get("success"))

    def total(key: str) -> int | None:
        values = [r[key] for r in records if isinstance(r.get(key), int)]
        return sum(values) if values else None

    return {
        "suite": suite,
        "engine": engine,
        "parallel": parallel,
        "scripted": scripted,
        "tasks": len(tasks),
        "attempts": len(finals),
        "tries": len(records),
        "successes": successes,
        "success_rate": round(successes / len(finals), 4) if finals else None,
        "infrastructure_errors": sum(kinds.values()),
        "error_kinds": kinds,
        "unsettled": sum(1 for r in finals if r.get("error_kind")),
        "wall_s": round(wall_s, 3),
        "tasks_per_hour": round(ran / wall_s * 3600, 1) if wall_s > 0 and ran else None,
        "startup_s": _stats([r["startup_s"] for r in records if isinstance(r.get("startup_s"), (int, float))]),
        "session_s": _stats([r["session_s"] for r in records if isinstance(r.get("session_s"), (int, float))]),
        "peak_rss_kb": {"agent": max((r.get("session_rss_kb") or 0 for r in records), default=0),
                        "app_or_xvfb": max((r.get("child_rss_kb") or 0 for r in records), default=0)},
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
        # The servers' prompt-cache estimates per attempt, where the server reports them.
        "prefill": [r["prefill"] for r in finals if r.get("prefill")],
        "per_task": per_task,
    }


_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.ok{background:#e6f4ea}
.failed{background:#fce8e6}.error{background:#fef7e0}"""


def write_report_html(out: Path, summary: Mapping[str, Any], records: Sequence[Record]) -> Path:
    """``OUT/report.html``: the table of tasks and attempts with links to each run's report."""
    rows = []
    for name, task in summary["per_task"].items():
        cells = []
        finals = sorted((r for r in records if r["task"] == name and r.get("final")), key=lambda r: r["attempt"])
        for record, result in zip(finals, task["results"], strict=True):
            css = result.split(":")[0]
            text = {"ok": "✓", "failed": "✗"}.get(result, "⚠ " + result.partition(":")[2])
            title = html.escape(str(record.get("detail") or record.get("error") or ""), quote=True)
            report = record.get("report")
            link = os.path.relpath(report, out) if report else None
            body = f'<a href="{html.escape(link)}">{text}</a>' if link else text
            cells.append(f'<td class="{css}" title="{title}">{body}</td>')
        rate = task["success_rate"]
        rows.append(f"<tr><th>{html.escape(name)}</th><td>{'' if rate is None else f'{rate:.0%}'}</td>"
                    f"<td>{task['mean_steps']}</td><td>{task['mean_seconds']}</td>{''.join(cells)}</tr>")
    rate = summary["success_rate"]
    head = (f"<h1>deskpilot eval: {html.escape(summary['suite'])}</h1><p>{summary['successes']}/{summary['attempts']} "
            f"attempts succeeded ({'' if rate is None else f'{rate:.0%}'}), {summary['infrastructure_errors']} "
            f"infrastructure errors, {summary['wall_s']} s wall, {summary['tasks_per_hour']} tasks/hour, "
            f"engine {summary['engine']} ×{summary['parallel']}{', scripted' if summary['scripted'] else ''}.</p>")
    table = ("<table><tr><th>task</th><th>success</th><th>steps</th><th>seconds</th><th>attempts</th></tr>"
             + "".join(rows) + "</table>")
    text = (f"<!doctype html><html><head><meta charset=utf-8><title>deskpilot eval {html.escape(summary['suite'])}"
            f"</title><style>{_CSS}</style></head><body>{head}{table}</body></html>")
    target = out / REPORT_FILE
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target


def merge_results(shards: Sequence[Path], out: Path, *, tasks: Sequence[str] | None = None) -> Record:
    """Join the ``--out`` directories of a suite's shards (``--shard K/N`` runs, such as a
    Kubernetes Indexed Job's pods) into ``out``: their ``runs/`` and ``sessions/`` copied
    in, every ``results.jsonl`` line appended with its paths pointing into ``out``, and
    ``summary.json`` and ``report.html`` written over all of them. The shards ran at the
    same time: ``wall_s`` is the longest shard's. ``tasks``: the order of the summary's
    tasks (the suite's); default, the order the shards' summaries list them in."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    log = ResultsLog(out)
    if log.load():
        raise ValueError(f"{out} already holds results: merge into an empty directory")
    records: list[Record] = []
    order: list[str] = []
    walls: list[float] = []
    summaries: list[Record] = []
    target = str(out.resolve())
    for shard in shards:
        shard_log = ResultsLog(shard)
        if not shard_log.path.is_file():
            raise ValueError(f"{shard} has no {RESULTS_FILE}: not a deskpilot eval --out directory")
        summary_path = shard / SUMMARY_FILE
        summary: Record = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
        summaries.append(summary)
        walls.append(float(summary.get("wall_s") or 0.0))
        order.extend(name for name in summary.get("per_task", {}) if name not in order)
        for sub in ("runs", "sessions"):
            if (shard / sub).is_dir():
                shutil.copytree(shard / sub, out / sub, dirs_exist_ok=True)
        for record in shard_log.load():
            order.extend([record["task"]] if record["task"] not in order else [])
            record = {k: _moved(v, record["task"], target) if k in ("run_dir", "report") else v
                      for k, v in record.items()}
            log.append(record)
            records.append(record)
    first = summaries[0] if summaries else {}
    wall = max(walls, default=0.0)
    summary = summarize(records, suite=str(first.get("suite") or (records[0].get("suite") if records else "")),
                        wall_s=wall, ran=len(records), parallel=sum(int(s.get("parallel") or 1) for s in summaries),
                        engine=str(first.get("engine") or "local"), scripted=bool(first.get("scripted")),
                        tasks=[t for t in tasks if t in order] if tasks is not None else order)
    summary["merged"] = [str(shard) for shard in shards]
    summary["interrupted"] = any(s.get("interrupted") for s in summaries)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    write_report_html(out, summary, records)
    return summary


def _moved(value: Any, task: str, target: str) -> Any:
    """A path a shard recorded (``SHARD_OUT/runs/TASK/...``, wherever that shard ran) as
    the same file under ``target``."""
    if not isinstance(value, str):
        return value
    marker = f"/runs/{task}/"
    at = value.find(marker)
    return value if at < 0 else target + value[at:]
