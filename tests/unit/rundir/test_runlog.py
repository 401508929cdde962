"""The run directory: seed screenshot names, append-only turns.jsonl, atomic summary, validation."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from deskpilot.rundir._writer import RunLog, RunLogError, iter_turns, load_summary, validate_run_dir


def test_directories_are_unique(tmp_path: Path) -> None:
    a = RunLog.create(tmp_path, name="run")
    b = RunLog.create(tmp_path, name="run")
    assert a.path.name == "run" and b.path.name == "run-2"
    a.close()
    b.close()
    c = RunLog.create(tmp_path / "nested" / "runs")
    assert c.path.parent == tmp_path / "nested" / "runs"
    c.close()


def test_turns_screenshots_summary_round_trip(tmp_path: Path) -> None:
    log = RunLog.create(tmp_path, name="r", dump_prefix="screen_", dump_start=1)
    log.write_run_info({"task": "t"})
    name1 = log.save_screenshot(b"\x89PNG-one")
    name2 = log.save_screenshot(b"\x89PNG-two")
    zoom = log.save_screenshot(b"\x89PNG-zoom", prefix="zoom_")
    assert (name1, name2, zoom) == ("screen_0001.png", "screen_0002.png", "zoom_0003.png")
    log.write_turn({"turn": 0, "observation": {"screenshot": name1}, "text": "Grüße ✓"})
    log.write_turn({"turn": 1, "observation": {"screenshot": name2}, "path": Path("x"), "tup": (1, 2)})
    log.flush()
    assert (log.path / "screen_0002.png").read_bytes() == b"\x89PNG-two"
    turns = list(iter_turns(log.path))
    assert [t["turn"] for t in turns] == [0, 1]
    assert turns[0]["v"] == 1 and turns[0]["text"] == "Grüße ✓" and turns[1]["tup"] == [1, 2]
    assert validate_run_dir(log.path) == ["summary.json is missing"]
    log.write_summary({"outcome": "running"})
    assert any("did not finish" in p for p in validate_run_dir(log.path))
    log.write_summary({"outcome": "answered"})
    log.close()
    log.close()  # idempotent
    assert validate_run_dir(log.path) == []
    assert load_summary(log.path)["outcome"] == "answered"
    with pytest.raises(RunLogError, match="closed"):
        log.write_turn({"turn": 2})


def test_dump_dir_and_start_index(tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    log = RunLog.create(tmp_path / "runs", dump_dir=dumps, dump_prefix="shot_", dump_start=42)
    name = log.save_screenshot(b"png")
    log.close()
    assert (dumps / "shot_0042.png").is_file()
    assert name == str((dumps / "shot_0042.png").resolve())  # outside the run dir: absolute


def test_disabled_screenshots(tmp_path: Path) -> None:
    log = RunLog.create(tmp_path, save_screenshots=False)
    assert log.save_screenshot(b"png") is None
    log.close()
    assert not list(log.path.glob("*.png"))


def test_validation_finds_damage(tmp_path: Path) -> None:
    log = RunLog.create(tmp_path, name="r")
    log.write_run_info({})
    log.write_turn({"turn": 0, "observation": {"screenshot": "screen_0009.png"}})
    log.write_summary({"outcome": "answered"})
    log.close()
    assert validate_run_dir(log.path) == ["turn 0: screenshot screen_0009.png is missing"]
    with open(log.path / "turns.jsonl", "ab") as fh:
        fh.write(b'{"turn": 1, "trunc')
    problems = validate_run_dir(log.path)
    assert len(problems) == 1 and "turns.jsonl:2: not JSON" in problems[0]


def test_every_line_is_synced_json(tmp_path: Path) -> None:
    log = RunLog.create(tmp_path)
    for i in range(50):
        log.write_turn({"turn": i, "payload": {"ok": True, "i": i}})
    log.flush()
    # Readable by another process while the run goes on (flushed, not buffered).
    lines = (log.path / "turns.jsonl").read_bytes().splitlines()
    assert len(lines) == 50 and all(orjson.loads(line)["turn"] == i for i, line in enumerate(lines))
    log.close()
    assert os.path.getsize(log.path / "turns.jsonl") > 0


def test_the_public_format_doc_names_every_key_the_golden_runs_hold() -> None:
    """docs/run-directory.md is the run directory's public description (README points there):
    every key of run.json, summary.json and the turn records of every mode is in it."""
    import json

    root = Path(__file__).resolve().parents[3]
    doc = (root / "docs" / "run-directory.md").read_text(encoding="utf-8")
    missing = set()
    for run in sorted((root / "tests" / "golden").iterdir()):
        if not (run / "summary.json").is_file():
            continue
        for name in ("run.json", "summary.json"):
            missing |= {(run.name, name, k) for k in json.loads((run / name).read_text()) if f'"{k}"' not in doc}
        for line in (run / "turns.jsonl").read_text().splitlines():
            missing |= {(run.name, "turns", k) for k in json.loads(line) if f'"{k}"' not in doc and f"`{k}`" not in doc}
    assert not missing, sorted(missing)
