"""Seed 001's LM Studio log extraction: the entries of one run, raw and cleaned."""

from __future__ import annotations

import base64
import datetime as dt
import os
import time
from pathlib import Path

import pytest

from deskpilot.agent.client._lmstudio_logs import (
    clean_lines,
    export_lmstudio_logs,
    is_loopback_endpoint,
    select_entries,
    wants_lmstudio_logs,
)


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
    written = export_lmstudio_logs(
        run, since=now - 1, until=now + 1, log_dir=tmp_path / "server-logs"
    )
    assert [p.name for p in written] == ["lmstudio_raw.log", "lmstudio_raw_clean.log"]
    assert "this run" in written[0].read_text() and "old" not in written[0].read_text()
    assert "A" * 80 not in written[1].read_text()


def test_missing_folder_is_not_an_error(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    assert export_lmstudio_logs(run, since=0, until=1, log_dir=tmp_path / "nope") == []
    assert list(run.iterdir()) == []
    # With the option "on" the run records why nothing was copied.
    assert (
        export_lmstudio_logs(run, since=0, until=1, log_dir=tmp_path / "nope", required=True) == []
    )
    assert "no server-log folder" in (run / "lmstudio_logs.txt").read_text()


LOCAL = [
    "http://localhost:1234/v1/chat/completions",
    "HTTP://LocalHost.:1234/v1",
    "localhost:1234/v1/chat/completions",
    "http://127.0.0.1:1234/v1/chat/completions",
    "http://127.4.5.6/v1",
    "http://[::1]:1234/v1/chat/completions",
    "http://[::ffff:127.0.0.1]:1234/v1",
]
REMOTE = [
    "http://192.168.1.20:1234/v1/chat/completions",
    "https://api.openai.com/v1/chat/completions",
    "http://0.0.0.0:1234/v1",
    "http://10.0.0.1/v1",
    "http://localhost.example.com/v1",
    "http://127.0.0.1.nip.io/v1",
    "http://[fe80::1]/v1",
    "http://[::1",
    "",
]


@pytest.mark.parametrize("endpoint", LOCAL)
def test_loopback_endpoints(endpoint: str) -> None:
    assert is_loopback_endpoint(endpoint)
    assert wants_lmstudio_logs("auto", endpoint) and wants_lmstudio_logs("on", endpoint)
    assert not wants_lmstudio_logs("off", endpoint)


@pytest.mark.parametrize("endpoint", REMOTE)
def test_auto_skips_endpoints_elsewhere(endpoint: str) -> None:
    assert not is_loopback_endpoint(endpoint)
    assert not wants_lmstudio_logs("auto", endpoint) and not wants_lmstudio_logs("off", endpoint)
    assert wants_lmstudio_logs("on", endpoint)  # "on" is the user's explicit choice


def test_export_in_auto_mode_only_for_a_local_endpoint(tmp_path: Path) -> None:
    now = time.time()
    logs = tmp_path / "server-logs" / "2026-11"
    logs.mkdir(parents=True)
    (logs / "2026-11-22.1.log").write_text(f"[{stamp(now)}][INFO] someone's request\n")
    folder = tmp_path / "server-logs"
    remote = tmp_path / "remote"
    remote.mkdir()
    endpoint = "http://192.168.1.20:1234/v1/chat/completions"
    assert (
        export_lmstudio_logs(
            remote, since=now - 1, until=now + 1, log_dir=folder, endpoint=endpoint
        )
        == []
    )
    assert list(remote.iterdir()) == []
    forced = tmp_path / "forced"  # "on" (required) still copies: the user asked for it
    forced.mkdir()
    written = export_lmstudio_logs(
        forced, since=now - 1, until=now + 1, log_dir=folder, endpoint=endpoint, required=True
    )
    assert [p.name for p in written] == ["lmstudio_raw.log", "lmstudio_raw_clean.log"]
    local = tmp_path / "local"
    local.mkdir()
    written = export_lmstudio_logs(
        local,
        since=now - 1,
        until=now + 1,
        log_dir=folder,
        endpoint="http://127.0.0.1:1234/v1/chat/completions",
    )
    assert [p.name for p in written] == ["lmstudio_raw.log", "lmstudio_raw_clean.log"]
