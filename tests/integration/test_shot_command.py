"""`deskpilot shot` end to end on Xvfb: the PNG it writes is the screen."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from apps.harness import TargetApp
from apps.target_app import PATTERN_SIZE, pattern_rgb
from PIL import Image

from deskpilot import imaging
from deskpilot.cli import main

pytestmark = pytest.mark.x11


def test_shot_writes_the_region_and_reports_every_phase(
    target_app: TargetApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x, y, w, h = target_app.widgets["pattern"]
    out = tmp_path / "pattern.png"
    code = main(["shot", "--out", str(out), "--region", f"{x},{y},{w},{h}", "--size", "192x108",
                 "--no-cursor", "--repeat", "3"])
    assert code == 0
    text = capsys.readouterr().out
    for phase in ("capture", "cursor", "prepare", "encode", "total"):
        assert f"  {phase}" in text
    assert "median" in text and f"wrote {out}" in text
    pattern = np.frombuffer(pattern_rgb(*PATTERN_SIZE, target_app.seed), np.uint8).reshape(h, w, 3)
    bgra = np.full((h, w, 4), 255, np.uint8)
    bgra[..., :3] = pattern[..., ::-1]
    got = np.asarray(Image.open(out).convert("RGB"))
    assert np.array_equal(got, imaging.prepare(bgra, size=(192, 108)))


def test_shot_without_out_leaves_the_current_directory_alone(
    target_app: TargetApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["shot", "--size", "192x108"]) == 0
    assert list(tmp_path.iterdir()) == []  # it used to leave shot.png here
    written = Path(capsys.readouterr().out.split("wrote ")[-1].strip())
    try:
        assert Image.open(written).size == (192, 108)
    finally:
        written.unlink()


def test_shot_json_and_stdout(target_app: TargetApp, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["shot", "--out", "-", "--size", "480x270", "--json"]) == 0
    captured = capsysbinary.readouterr()
    image = Image.open(io.BytesIO(captured.out))
    assert image.size == (480, 270)
    record = json.loads(captured.err)
    assert record["physical_size"] == [1920, 1080] and record["image_size"] == [480, 270]
    assert set(record["median_ms"]) == {"capture", "cursor", "prepare", "encode"}
    assert record["cursor"] is not None and record["bytes"] == len(captured.out)
