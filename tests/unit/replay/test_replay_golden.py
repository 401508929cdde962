"""The golden runs (tests/golden/) replayed through the real loop: behaviour must not drift.

Each golden run is a recording of the real agent (single mode with three tool sets,
team mode, stateless mode in both layouts) against the scripted test server on the
simulated desktop. Replaying it runs the current client, parser, tools, geometry,
history pruning and modes against the recorded model answers and screenshots; any
change in what they do (a coordinate, a payload, a pruned message, a parsed call) is a
divergence. Deliberately broken parts below prove the replay notices.

After an *intended* behaviour change, regenerate: .venv/bin/python scripts/make_golden_runs.py
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deskpilot.agent.client import _chat as _client
from deskpilot.agent.client._history import History
from deskpilot.agent.tools import _core as _tools
from deskpilot.geometry import Mapping
from deskpilot.replay import format_result, load_recording, replay_run

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
RUNS = sorted(p.name for p in GOLDEN.iterdir() if (p / "turns.jsonl").is_file())
REGENERATE = "\nIf this change of behaviour is intended, regenerate: .venv/bin/python scripts/make_golden_runs.py"


def test_golden_runs_cover_every_mode_and_stay_small() -> None:
    modes = {load_recording(GOLDEN / name).mode for name in RUNS}
    assert modes == {"single", "team", "stateless"}
    size = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert size < 1_000_000, f"tests/golden holds {size} bytes: keep golden runs small"


@pytest.mark.parametrize("name", RUNS)
def test_golden_run_replays_identically(name: str) -> None:
    result = replay_run(GOLDEN / name)
    assert result.ok, format_result(result) + REGENERATE
    assert result.answers_replayed == result.answers_recorded > 0
    assert result.recorded_outcome == result.replayed_outcome == "answered"
    assert len(result.replayed_turns) == len(result.recorded_turns)


def off_by(dx: int) -> Callable[[Any, float, float], tuple[int, int]]:
    original = Mapping.norm_to_physical

    def broken(self: Mapping, nx: float, ny: float) -> tuple[int, int]:
        x, y = original(self, nx, ny)
        return x + dx, y

    return broken


@pytest.mark.parametrize(
    ("name", "turn", "path"),
    [
        ("single_seed000", 1, "action.x"),
        ("single_seed001", 1, "action.x"),
        ("single_extended_stream", 1, "observation.mapping.origin[0]"),  # the zoom crop moved
        ("team_003", 2, "action.x"),  # turn 1 is the planner's: nothing is mapped there
        ("stateless_flat", 1, "actions[0].physical.x"),
        ("stateless_turn_dirs_crop", 1, "actions[0].physical.x"),
    ],
)
def test_broken_geometry_diverges_at_the_first_mapped_turn(monkeypatch: pytest.MonkeyPatch, name: str, turn: int, path: str) -> None:
    monkeypatch.setattr(Mapping, "norm_to_physical", off_by(3))
    result = replay_run(GOLDEN / name)
    assert not result.ok
    first = result.first_divergence
    assert first is not None and first.turn == turn, format_result(result)
    mine = [d for d in result.divergences if d.turn == turn]
    assert path in [d.path for d in mine], format_result(result)
    moved = next(d for d in mine if d.path == path)
    assert moved.replayed == moved.recorded + 3
    assert f"turn {turn}: {path}: recorded {moved.recorded}, replayed {moved.replayed}" in format_result(result)


def test_broken_think_pruning_diverges_in_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(History, "_drop_think", lambda self, entry: None)
    result = replay_run(GOLDEN / "single_seed000")  # keeps 1 think; turn 3 is the first to prune one
    assert not result.ok and result.first_divergence is not None and result.first_divergence.turn == 3
    contents = [d for d in result.divergences if d.turn == 3 and d.path.startswith("request.body.messages")]
    assert contents and "<think>" in str(contents[0].replayed) and "<think>" not in str(contents[0].recorded)


def test_broken_image_pruning_diverges_in_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(History, "_drop_image", lambda self, entry: None)
    result = replay_run(GOLDEN / "single_seed000")  # keeps 2 screenshots; request 4 holds 4
    assert not result.ok
    images = [d for d in result.divergences if d.path == "request.images"]
    assert images and images[0].turn == 4 and images[0].recorded == 2 and images[0].replayed == 3


def test_changed_tool_payload_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _tools.ok_payload
    monkeypatch.setattr(_tools, "ok_payload", lambda **extra: original(**extra, schema=2))
    result = replay_run(GOLDEN / "single_seed000")
    first = result.first_divergence
    assert first is not None and (first.turn, first.path, first.kind) == (1, "result.schema", "result")


def test_changed_tool_call_parsing_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _client.parse_message_tool_calls
    monkeypatch.setattr(_client, "parse_message_tool_calls", lambda raw, **kw: original(raw, **kw)[:1])
    result = replay_run(GOLDEN / "single_seed000")  # turn 7 answered two calls; the second got refused
    first = result.first_divergence
    assert first is not None and first.turn == 7 and first.path.startswith("extra_calls"), format_result(result)


def other_bytes_after_the_first_frame(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """An encoder that reproduces the first recorded frame's bytes and no other frame's:
    what ISA-L does on a CPU with another instruction set (same pixels, other matches)."""
    from deskpilot import imaging
    from deskpilot.replay._screen import decode_png

    original = imaging.encode_png
    first = next(p for p in sorted((GOLDEN / name).glob("screen_*.png")))
    first_pixels = imaging.frame_digest(decode_png(first))

    def encode(rgb: Any, level: int = 1) -> Any:
        return original(rgb, level=level if imaging.frame_digest(rgb) == first_pixels else 9)

    monkeypatch.setattr(imaging, "encode_png", encode)


def test_another_deflate_output_compares_request_images_by_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    other_bytes_after_the_first_frame(monkeypatch, "single_uitars")
    result = replay_run(GOLDEN / "single_uitars")
    assert result.ok, format_result(result)
    assert any("request images compared by their pixels" in note for note in result.notes)


def test_other_pixels_diverge_in_the_request_when_bytes_cannot_be_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    from deskpilot.replay._screen import RecordedScreen

    other_bytes_after_the_first_frame(monkeypatch, "single_uitars")
    original = RecordedScreen._load

    def load(self: RecordedScreen, name: str) -> Any:
        frame = original(self, name).copy()
        if name.endswith("screen_0003.png"):
            frame[0, 0] ^= 0xFF  # one pixel the model would be shown differently
        return frame

    monkeypatch.setattr(RecordedScreen, "_load", load)
    result = replay_run(GOLDEN / "single_uitars")
    assert not result.ok
    images = [d for d in result.divergences if d.turn == 3 and d.path.endswith("image_url.url")]
    assert len(images) == 1, format_result(result)
    assert str(images[0].recorded).startswith("<image pixels:") and str(images[0].replayed).startswith("<image pixels:")
