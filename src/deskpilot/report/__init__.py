"""A run directory as one self-contained HTML page that a person reads at a glance.

::

    from deskpilot.report import write_report
    path = write_report("runs/20250101-120000")              # runs/.../report.html, images embedded
    path = write_report(run_dir, out="r.html", embed=False)  # images linked relative to r.html

Per turn: the screenshot the model saw with what it did drawn over it (clicks, drags,
scrolls, boxes, typed text), the model's text and tool call, the result and a bar of
phase timings; at the top the task, outcome, totals and p50/p95 per phase. Works for
every mode and for a partial (crashed) run directory, which it reports as partial.
"""

from __future__ import annotations

import os
from pathlib import Path

from deskpilot.report._html import render_html
from deskpilot.report._model import ReportData, build_report_data
from deskpilot.rundir import load_recording

__all__ = ["ReportData", "build_report_data", "render_report", "write_report"]

REPORT_FILE = "report.html"


def render_report(run_dir: str | os.PathLike[str], *, embed: bool = True, out_dir: str | os.PathLike[str] | None = None) -> str:
    """The HTML text of a run's report (``out_dir``: where links are relative to)."""
    data = build_report_data(load_recording(run_dir))
    return render_html(data, embed=embed, out_dir=Path(out_dir) if out_dir is not None else None)


def write_report(
    run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, embed: bool = True
) -> Path:
    """Write the report (default ``RUN_DIR/report.html``); returns its path."""
    target = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render_report(run_dir, embed=embed, out_dir=target.parent)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target
