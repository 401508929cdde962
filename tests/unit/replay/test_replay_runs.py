"""Replaying incomplete, edited and freshly recorded runs; the replay server; the CLI."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import load_config, run_agent
from deskpilot.cli import main
from deskpilot.geometry import Mapping, Rect
from deskpilot.replay import (
    RecordedScreen,
    ReplayError,
    ReplayOptions,
    format_result,
    load_recording,
    replay_run,
)
from deskpilot.replay._policy import END_OF_RECORDING, ReplayPolicy
from deskpilot.testing import Fault, ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(GOLDEN / name, target)
    return target


def rewrite_json(path: Path, **changes: Any) -> None:
    data = orjson.loads(path.read_bytes())
    data.update(changes)
    path.write_bytes(orjson.dumps(data))


def record(tmp_path: Path, script: list[Any], **flags: Any) -> Path:
    """A fresh recording of the real agent on the simulated desktop."""
    desk = SimulatedDesktop(image_size=(192, 108))
    with ModelServer(ScriptedPolicy(script)) as server:
        config = load_config(
            flags={"model.endpoint": server.endpoint, "run.runs_dir": str(tmp_path / "runs"), "run.quiet": True,
                   "screen.image_width": 192, "screen.image_height": 108, **flags},
            env={},
            search_default=False,
        )
        result = run_agent(config, "task", screen_factory=lambda: desk, hands_factory=lambda: desk, handle_signals=False)
    return result.run_dir


def test_a_run_stopped_by_its_time_limit_replays_up_to_where_it_stopped(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("click_element", {"label": "t", "box": [500, 412]})]),
        Reply(tool_calls=[("type_text", {"text": "abc"})]),
        Reply(content="too late", delay=5.0),
    ]
    run = record(tmp_path, script, **{"agent.max_seconds": 0.6})
    recording = load_recording(run)
    assert recording.outcome == "max_time" and not recording.complete
    result = replay_run(run)
    assert result.ok, format_result(result)
    assert (result.answers_recorded, result.answers_replayed, result.last_turn) == (2, 2, 3)
    assert result.replayed_outcome == "error" and END_OF_RECORDING in str(result.replayed_error)


def test_a_crashed_recording_with_a_torn_last_line_replays_its_turns(tmp_path: Path) -> None:
    run = copy("single_seed000", tmp_path)
    lines = (run / "turns.jsonl").read_bytes().splitlines(keepends=True)
    (run / "turns.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:40])
    rewrite_json(run / "summary.json", outcome="running")
    result = replay_run(run)
    assert result.ok, format_result(result)
    assert result.last_turn == 4 and result.answers_replayed == 4
    assert any("last line is not JSON" in n for n in result.notes)


def test_until_replays_a_prefix(tmp_path: Path) -> None:
    result = replay_run(GOLDEN / "team_003", ReplayOptions(until=2))
    assert result.ok, format_result(result)
    assert (result.answers_replayed, result.last_turn) == (2, 2)
    assert "turn" in format_result(result) and "\n3 " not in format_result(result)


def test_a_replay_that_wants_more_than_the_recording_diverges(tmp_path: Path) -> None:
    run = copy("single_seed001", tmp_path)
    lines = (run / "turns.jsonl").read_bytes().splitlines(keepends=True)
    (run / "turns.jsonl").write_bytes(b"".join(lines[:-1]))  # the final answer is gone, summary still "answered"
    result = replay_run(run)
    assert not result.ok
    paths = {(d.turn, d.path) for d in result.divergences}
    assert (7, "turn") in paths and (6, "outcome") in paths
    outcome = next(d for d in result.divergences if d.path == "outcome")
    assert outcome.recorded == "answered" and "more than the recording holds" in outcome.replayed


@pytest.mark.parametrize("name", ["single_seed000", "single_extended_stream", "stateless_flat"])
def test_without_an_exchange_log_answers_are_rebuilt_from_the_turns(tmp_path: Path, name: str) -> None:
    run = copy(name, tmp_path)
    (run / "exchange.jsonl").unlink()
    answers = load_recording(run).answers()
    assert answers and all(a.source == "turns" for a in answers)
    result = replay_run(run)
    assert result.ok, format_result(result)
    assert any("rebuilt from turns.jsonl" in n for n in result.notes)


def test_content_style_tool_calls_go_back_into_the_content(tmp_path: Path) -> None:
    run = copy("single_extended_stream", tmp_path)
    (run / "exchange.jsonl").unlink()
    answer = next(a for a in load_recording(run).answers() if a.turn == 4)
    assert "tool_calls" not in answer.message
    assert answer.message["content"].startswith("I will type now.\n<tool_call>")


def test_a_changed_setting_in_run_json_is_replayed_and_shows(tmp_path: Path) -> None:
    run = copy("single_seed000", tmp_path)
    info = orjson.loads((run / "run.json").read_bytes())
    info["config"]["history"]["keep_last_screenshots"] = 3
    info["config_sources"]["history.keep_last_screenshots"] = "flag history.keep_last_screenshots"
    (run / "run.json").write_bytes(orjson.dumps(info))
    result = replay_run(run)
    assert not result.ok
    assert any(d.path == "request.images" and d.turn == 4 for d in result.divergences)


def test_unreplayable_directories(tmp_path: Path) -> None:
    run = copy("single_seed000", tmp_path)
    (run / "run.json").unlink()
    with pytest.raises(ReplayError, match=r"run\.json is missing"):
        replay_run(run)
    with pytest.raises(ReplayError, match="input must be"):
        replay_run(GOLDEN / "single_seed000", ReplayOptions(input="wet"))


def test_replay_keeps_its_run_directory_when_asked(tmp_path: Path) -> None:
    result = replay_run(GOLDEN / "stateless_turn_dirs_crop", ReplayOptions(out_dir=tmp_path / "out"))
    assert result.ok and result.replay_dir is not None and result.replay_dir.parent == tmp_path / "out"
    replayed = load_recording(result.replay_dir)
    assert replayed.outcome == "answered" and (result.replay_dir / "turn_0001" / "screenshot_raw.png").is_file()
    # The replay directory replays too: it is a recording like any other.
    assert replay_run(result.replay_dir).ok


def test_replay_policy_answers_in_order_then_ends_the_recording() -> None:
    recording = load_recording(GOLDEN / "single_seed001")
    seen: list[int] = []
    policy = ReplayPolicy(recording.answers(), until=2, on_answer=seen.append)
    first = policy.respond(None)  # type: ignore[arg-type]
    assert isinstance(first, Reply) and first.tool_calls[0]["function"]["name"] == "move_mouse"
    assert isinstance(policy.respond(None), Reply)  # type: ignore[arg-type]
    end = policy.respond(None)  # type: ignore[arg-type]
    assert isinstance(end, Fault) and end.status == 410 and END_OF_RECORDING.encode() in end.body
    assert seen == [1, 2] and policy.served == 2
    stop = ReplayPolicy(recording.answers(), check=lambda n, r: "different" if n == 1 else None)
    refused = stop.respond(None)  # type: ignore[arg-type]
    assert isinstance(refused, Fault) and stop.stopped == "different"


def test_recorded_screen_follows_the_answers() -> None:
    recording = load_recording(GOLDEN / "single_extended_stream")
    area = Rect(-1920, 120, 1920, 1080)
    screen = RecordedScreen(recording, area=area, image_size=(384, 216), pointer=lambda: (5, 6))
    first = screen.grab()
    assert first.mapping == Mapping(area, 384, 216) and first.cursor == (5, 6)
    assert screen.served == ["screen_0001.png"]
    screen.advance(1)  # answer 1 was a zoom: the full view is unchanged until answer 2's frame
    zoom = screen.grab_region(Rect(-1100, 480, 270, 152))
    assert zoom.zoomed and zoom.size == (270, 152) and screen.served[-1] == "zoom_0002.png"
    assert screen.grab().digest != first.digest and screen.served[-1] == "screen_0003.png"
    assert screen.probe()[1] == (5, 6)
    screen.advance(99)  # past the end: the last frame stays
    assert screen.grab().digest == screen.grab().digest


def test_replay_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["replay", str(GOLDEN / "single_seed000")]) == 0
    out = capsys.readouterr().out
    assert "OK: the replay matches the recording" in out and "click_element" in out and "960,444" in out
    assert main(["replay", str(GOLDEN / "team_003"), "--until", "1", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["answers_replayed"] == 1 and data["mode"] == "team"
    original = Mapping.norm_to_physical
    monkeypatch.setattr(Mapping, "norm_to_physical", lambda self, nx, ny: (original(self, nx, ny)[0], original(self, nx, ny)[1] - 2))
    assert main(["replay", str(GOLDEN / "single_seed000")]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED" in out and "turn 1: action.y: recorded 444, replayed 442" in out
    assert main(["replay", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", str(GOLDEN / "single_seed000"), "--tolerance", "150%"])


def test_a_confirm_mode_run_replays_with_the_recorded_answers(tmp_path: Path) -> None:
    """Confirm questions are answered as the user answered them (yes, then no), not
    asked on a terminal nobody watches: a no-answer replay would deny the first press."""
    script = [
        Reply(tool_calls=[("press_key", {"key": "ctrl+s"})]),
        Reply(tool_calls=[("press_key", {"key": "ctrl+s"})]),
        Reply(content="saved"),
    ]
    user = iter([True, False])
    desk = SimulatedDesktop(image_size=(192, 108))
    with ModelServer(ScriptedPolicy(script)) as server:
        config = load_config(
            flags={"model.endpoint": server.endpoint, "run.runs_dir": str(tmp_path / "runs"), "run.quiet": True,
                   "screen.image_width": 192, "screen.image_height": 108,
                   "policy.mode": "confirm", "policy.confirm_keys": ["ctrl+s"]},
            env={},
            search_default=False,
        )
        run = run_agent(config, "save", screen_factory=lambda: desk, hands_factory=lambda: desk,
                        handle_signals=False, confirm_prompt=lambda question: next(user)).run_dir
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert [c["confirmed"] for c in summary["safety"]["confirmations"]] == [True, False]
    results = [t["result"] for t in orjson.loads(b"[" + b",".join((run / "turns.jsonl").read_bytes().splitlines()) + b"]")
               if t.get("result")]
    assert results[0]["ok"] and results[1]["error"]["type"] == "policy_denied"

    result = replay_run(run)
    assert result.ok, format_result(result)
    assert not any("did not answer" in n for n in result.notes)

    # A recording without the answers (older deskpilot): every question is answered no,
    # the first press diverges, and the note says why.
    safety = summary["safety"]
    del safety["confirmations"]
    rewrite_json(run / "summary.json", safety=safety)
    result = replay_run(run)
    assert not result.ok
    assert any("did not answer" in n for n in result.notes)


def test_older_runs_recorded_unset_settings_as_0_and_minus_1_and_still_replay(tmp_path: Path) -> None:
    # Before the unset team/agent settings were None, run.json recorded them as 0 / -1.0
    # (team_003 was recorded then). A replay applies the values the run gave explicitly
    # (config_sources); marked so, the old numbers load as None: the run replays as recorded.
    run = copy("team_003", tmp_path)
    info = orjson.loads((run / "run.json").read_bytes())
    assert info["config"]["team"]["planner_temperature"] == -1.0 and info["config"]["team"]["max_steps"] == 0
    assert info["config"]["agent"]["step_delay"] == -1.0
    legacy = [f"team.{key}" for key, value in info["config"]["team"].items()
              if not isinstance(value, bool) and value in (0, -1.0)]
    assert len(legacy) == 8
    info["config_sources"].update({key: f"flag {key}" for key in [*legacy, "agent.step_delay"]})
    (run / "run.json").write_bytes(orjson.dumps(info))
    result = replay_run(run, ReplayOptions(out_dir=tmp_path / "replay"))
    assert result.ok, format_result(result)
    assert result.replay_dir is not None
    replayed = orjson.loads((result.replay_dir / "run.json").read_bytes())
    team = replayed["config"]["team"]  # new runs record unset as null
    assert (team["planner_temperature"], team["max_steps"], team["turn_delay"]) == (None, None, 0.0)
    assert replayed["config"]["agent"]["step_delay"] == 0.0  # a dry replay sets the seeds' sleeps to 0


def test_older_runs_recorded_no_time_limit_and_the_server_context_as_0_and_still_replay(tmp_path: Path) -> None:
    # agent.max_seconds and model.num_ctx said "unset" with 0 before they were None (every
    # golden run was recorded then); given explicitly, the old 0 still loads as unset.
    run = copy("single_seed000", tmp_path)
    info = orjson.loads((run / "run.json").read_bytes())
    assert info["config"]["agent"]["max_seconds"] == 0.0 and info["config"]["model"]["num_ctx"] == 0
    info["config_sources"].update({key: f"flag {key}" for key in ("agent.max_seconds", "model.num_ctx")})
    (run / "run.json").write_bytes(orjson.dumps(info))
    result = replay_run(run, ReplayOptions(out_dir=tmp_path / "replay"))
    assert result.ok, format_result(result)
    assert result.replay_dir is not None
    replayed = orjson.loads((result.replay_dir / "run.json").read_bytes())
    assert replayed["config"]["agent"]["max_seconds"] is None and replayed["config"]["model"]["num_ctx"] is None
    # Unset, the kill switch's budget is the hard cap, as it was with the old 0.
    recorded = orjson.loads((run / "summary.json").read_bytes())["safety"]["budget"]["max_seconds"]
    summary = orjson.loads((result.replay_dir / "summary.json").read_bytes())
    assert summary["safety"]["budget"]["max_seconds"] == recorded == 3600.0
