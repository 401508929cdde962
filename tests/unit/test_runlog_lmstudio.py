"""Seed 001's LM Studio log extraction: the entries of one run, raw and cleaned."""

from __future__ import annotations

import base64
import datetime as dt
import os
import time
from pathlib import Path

from deskpilot.agent._lmstudio_logs import clean_lines, export_lmstudio_logs, select_entries


def stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def test_select_entries_keeps_continuation_lines() -> None:
    now = time.time()
    lines = [
        f"[{stamp(now - 100)}][INFO] before the run\n",
        f"[{stamp(now)}][INFO] Received request: POST to /v1/chat/completions with body {{\n",
        '  "model": "qwen3-vl-8b-instruct",\n',
        "}\n",
        f"{stamp(now + 1)} [INFO] [qwen3-vl] Generated prediction\n",
        f"[{stamp(now + 100)}][INFO] after the run\n",
    ]
    kept = select_entries(lines, since=now - 1, until=now + 2)
    assert kept == lines[1:5]


def test_clean_lines_summarize_images_and_drop_brace_lines() -> None:
    payload = base64.b64encode(os.urandom(300)).decode()
    lines = [f'  "url": "data:image/png;base64,{payload}"\n', "  },\n", "\n", "[x] text\n"]
    cleaned = clean_lines(lines)
    assert len(cleaned) == 2 and "sha256:" in cleaned[0] and payload not in cleaned[0]
    assert f"len:{len(payload)}" in cleaned[0] and cleaned[1] == "[x] text\n"


def test_export_into_the_run_directory(tmp_path: Path) -> None:
    now = time.time()
    logs = tmp_path / "server-logs" / "2026-11"
    logs.mkdir(parents=True)
    (logs / "2026-11-22.1.log").write_text(
        f"[{stamp(now - 500)}][INFO] old\n[{stamp(now)}][INFO] this run data:image/png;base64,{'A' * 80}\n"
    )
    run = tmp_path / "run"
    run.mkdir()
    written = export_lmstudio_logs(run, since=now - 1, until=now + 1, log_dir=tmp_path / "server-logs")
    assert [p.name for p in written] == ["lmstudio_raw.log", "lmstudio_raw_clean.log"]
    assert "this run" in written[0].read_text() and "old" not in written[0].read_text()
    assert "A" * 80 not in written[1].read_text()


def test_missing_folder_is_not_an_error(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    assert export_lmstudio_logs(run, since=0, until=1, log_dir=tmp_path / "nope") == []
    assert list(run.iterdir()) == []
    # With the option "on" the run records why nothing was copied.
    assert export_lmstudio_logs(run, since=0, until=1, log_dir=tmp_path / "nope", required=True) == []
    assert "no server-log folder" in (run / "lmstudio_logs.txt").read_text()
