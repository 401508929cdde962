"""results.jsonl (whole lines only), summary.json's numbers, report.html's links."""

from __future__ import annotations

from pathlib import Path

from deskpilot.eval._results import ResultsLog, summarize, write_report_html


def _record(task: str, attempt: int, try_: int, *, success: bool, final: bool = True, error_kind: str | None = None,
            report: str | None = None) -> dict[str, object]:
    return {"task": task, "attempt": attempt, "try": try_, "success": success, "final": final,
            "error_kind": error_kind, "seconds": 2.0, "steps": 3, "startup_s": 0.5, "session_s": 3.0,
            "prompt_tokens": 100, "report": report}


def test_a_partial_last_line_is_cut_off_and_appends_are_whole_lines(tmp_path: Path) -> None:
    log = ResultsLog(tmp_path)
    assert log.load() == []
    log.append({"task": "a", "text": "Grüße ✓"})
    with open(log.path, "ab") as fh:
        fh.write(b'{"task": "b", "succ')  # a run killed mid-write
    assert log.load() == [{"task": "a", "text": "Grüße ✓"}]
    assert log.path.read_bytes().endswith(b"\n")
    log.append({"task": "c"})
    assert [r["task"] for r in log.load()] == ["a", "c"]


def test_the_summary_counts_final_attempts_and_keeps_errors_apart() -> None:
    records = [
        _record("a", 1, 1, success=True),
        _record("a", 2, 1, success=False),
        _record("b", 1, 1, success=False, final=False, error_kind="app_died"),
        _record("b", 1, 2, success=True),
        _record("c", 1, 1, success=False, error_kind="timeout"),
    ]
    s = summarize(records, suite="x", wall_s=36.0, ran=5, parallel=2, engine="local", scripted=True,
                  tasks=["a", "b", "c"])
    assert (s["tasks"], s["attempts"], s["tries"], s["successes"]) == (3, 4, 5, 2)
    assert s["success_rate"] == 0.5 and s["tasks_per_hour"] == 500.0
    assert s["error_kinds"] == {"app_died": 1, "timeout": 1} and s["unsettled"] == 1
    assert s["per_task"]["a"]["results"] == ["ok", "failed"] and s["per_task"]["a"]["success_rate"] == 0.5
    assert s["per_task"]["b"]["results"] == ["ok"] and s["per_task"]["c"]["results"] == ["error:timeout"]
    assert s["prompt_tokens"] == 500 and s["startup_s"] == {"mean": 0.5, "p50": 0.5, "max": 0.5}


def test_the_report_links_each_run_report_relative_to_the_out_dir(tmp_path: Path) -> None:
    report = tmp_path / "runs" / "a" / "a1-t1" / "r" / "report.html"
    records = [_record("a", 1, 1, success=True, report=str(report)), _record("<b>", 1, 1, success=False)]
    s = summarize(records, suite="x", wall_s=1.0, ran=2, parallel=1, engine="local", scripted=False,
                  tasks=["a", "<b>"])
    text = write_report_html(tmp_path, s, records).read_text(encoding="utf-8")
    assert '<a href="runs/a/a1-t1/r/report.html">✓</a>' in text
    assert "<th>&lt;b&gt;</th>" in text and "<th><b></th>" not in text  # task names are escaped
    assert "1/2 attempts succeeded (50%)" in text
