"""The HTML run report without a browser: what each turn shows, marks, partial runs, the CLI.

(tests/integration/test_report_browser.py loads the same pages in headless Chromium.)
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import orjson
import pytest

from deskpilot.cli import main
from deskpilot.replay import RecordingError, load_recording
from deskpilot.report import build_report_data, render_report, write_report

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
RUNS = sorted(p.name for p in GOLDEN.iterdir() if (p / "turns.jsonl").is_file())


def sections(page: str) -> list[str]:
    return re.findall(r'<section class="turn" id="turn-(\d+)"', page)


@pytest.mark.parametrize("name", RUNS)
def test_every_golden_run_renders_one_section_per_turn(name: str) -> None:
    page = render_report(GOLDEN / name)
    recording = load_recording(GOLDEN / name)
    assert sections(page) == [str(r["turn"]) for r in sorted(recording.turns(), key=lambda r: r["turn"])]
    assert html.escape(recording.task) in page
    assert 'id="phases"' in page and "p95 ms" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "").replace("http://127.0.0.1:0/", "")
    assert "<script src" not in page and "<link" not in page  # nothing to fetch at view time
    # Each screenshot file is embedded at most once, whatever number of turns show it.
    payloads = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert payloads and len(payloads) == len(set(payloads))


def test_single_mode_turn_shows_the_image_the_model_saw_with_the_click() -> None:
    data = build_report_data(load_recording(GOLDEN / "single_seed000"))
    turns = {t.number: t for t in data.turns}
    assert turns[0].image == "screen_0001.png" and turns[0].kind == "initial"
    one = turns[1]
    assert one.image == "screen_0001.png" and one.image_size == (384, 216)
    click = next(m for m in one.marks if m.kind == "click")
    # Physical (960, 444) on a 1920x1080 area seen at 384x216: pixel centres map to image pixels.
    assert click.x == pytest.approx(960.5 * 384 / 1920) and click.y == pytest.approx(444.5 * 216 / 1080)
    assert one.calls[0].name == "click_element" and one.calls[0].action == {
        "kind": "click", "x": 960, "y": 444, "button": "left", "count": 1, "label": "target"}
    assert one.reasoning == "The magenta button is the target." and one.content == "Clicking it."
    # The nested box format of turn 2 is drawn as a rectangle, the click at its centre.
    box = next(m for m in turns[2].marks if m.kind == "box")
    assert (box.x, box.y, box.x2, box.y2) == pytest.approx((340 * 384 / 1000, 560 * 216 / 1000, 660 * 384 / 1000, 610 * 216 / 1000))
    # A call whose arguments did not parse shows the raw text; a refused extra call is named.
    assert turns[6].calls[0].arguments == '{"text": "unterminated'
    assert [c.note for c in turns[7].calls] == ["", "not run: too_many_tool_calls"]
    assert turns[9].final and turns[9].answer == "Done: typed and submitted."
    assert "key" in {m.label.split(":")[0] for m in turns[7].marks if m.kind == "text"}


def test_zoom_turn_maps_the_next_click_through_the_crop() -> None:
    data = build_report_data(load_recording(GOLDEN / "single_extended_stream"))
    turns = {t.number: t for t in data.turns}
    assert any(m.kind == "zoom" for m in turns[1].marks)
    seen = turns[2]
    assert seen.image == "zoom_0002.png"
    click = next(m for m in seen.marks if m.kind == "click")
    mapping = seen.record["mapping"]
    w, h = mapping["image_size"]
    assert 0 <= click.x <= w and 0 <= click.y <= h and click.x == pytest.approx(w / 2, abs=2)
    drag = next(m for m in turns[5].marks if m.kind == "drag")
    assert drag.x2 is not None and drag.x2 > drag.x  # an arrow to the right, down
    scroll = next(m for m in turns[6].marks if m.kind == "scroll")
    assert scroll.x2 is not None and scroll.x2 < 0  # scrolled left


def test_team_planner_turn_has_no_image_and_executor_turns_do() -> None:
    data = build_report_data(load_recording(GOLDEN / "team_003"))
    kinds = [(t.kind, t.image) for t in data.turns]
    assert kinds[1] == ("planner", None)
    assert all(image for kind, image in kinds if kind == "executor")
    assert "no image" in data.turns[1].image_note


def test_stateless_turn_draws_all_its_actions_on_the_previous_annotated_image() -> None:
    data = build_report_data(load_recording(GOLDEN / "stateless_flat"))
    turns = {t.number: t for t in data.turns}
    assert turns[1].image is None and "boot" in turns[1].image_note
    two = turns[2]
    assert two.image == "turn_0001_annotated.png"
    assert [m.index for m in two.marks if m.index is not None] == [1, 2, 3]
    assert any(m.kind == "bbox" and m.label == "field" for m in two.marks)
    three = turns[3]
    assert {m.kind for m in three.marks} >= {"drag", "scroll", "double_click"}
    assert two.stateless is not None and two.stateless["observation"] == "Target is green. Now the field."


def test_report_escapes_what_the_run_recorded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "single_seed000", run)
    info = orjson.loads((run / "run.json").read_bytes())
    info["task"] = "<script>alert(1)</script> & co"
    (run / "run.json").write_bytes(orjson.dumps(info))
    page = render_report(run)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page


def test_linked_images_are_relative_to_the_html_file(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    shutil.copytree(GOLDEN / "team_003", run)
    out = write_report(run, tmp_path / "html" / "team.html", embed=False)
    page = out.read_text(encoding="utf-8")
    links = re.findall(r'src="([^"]+\.png)"', page)
    assert links and all(link.startswith("../runs/a/") for link in links)
    assert all((out.parent / link).resolve().is_file() for link in links)


def test_partial_run_directories_never_crash(tmp_path: Path) -> None:
    run = tmp_path / "crashed"
    shutil.copytree(GOLDEN / "stateless_flat", run)
    lines = (run / "turns.jsonl").read_bytes().splitlines(keepends=True)
    (run / "turns.jsonl").write_bytes(b"".join(lines[:-3]) + b'{"v":1,"turn":')
    (run / "summary.json").write_bytes(orjson.dumps({"outcome": "running", "task": "x"}))
    (run / "turn_0002_annotated.png").unlink()
    page = render_report(run)
    assert 'id="partial"' in page and "still running" in page and "turn_0002_annotated.png is missing" in page
    assert sections(page)  # what is there is shown
    (run / "summary.json").unlink()
    data = build_report_data(load_recording(run))
    assert data.outcome.startswith("unknown") and data.totals["requests"] == 3 and data.totals["images_sent"] == 3
    assert [p["phase"] for p in data.phases][-1] == "overhead"  # p50/p95 counted from the turns
    # Almost nothing: only run.json.
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(GOLDEN / "single_seed000" / "run.json", bare / "run.json")
    page = render_report(bare)
    assert 'id="partial"' in page and "turns.jsonl is missing" in page and "No turn was recorded" in page
    # Garbage in every file.
    junk = tmp_path / "junk"
    junk.mkdir()
    for name in ("run.json", "summary.json", "turns.jsonl", "exchange.jsonl"):
        (junk / name).write_bytes(b"\x00not json[")
    (junk / "screen_0001.png").write_bytes(b"not a png")
    assert 'id="partial"' in render_report(junk)


def test_not_a_run_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="not a run directory"):
        render_report(tmp_path)
    with pytest.raises(RecordingError, match="not a directory"):
        render_report(tmp_path / "missing")


def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "single_seed001", run)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert (run / "report.html").is_file() and "report.html" in out and "8 turns" in out and "answered" in out
    assert "prefill per turn:" in out and "images in context" in out
    assert main(["report", str(run), "--out", str(tmp_path / "x.html"), "--link"]) == 0
    assert "data:image/png" not in (tmp_path / "x.html").read_text(encoding="utf-8")
    assert main(["report", str(tmp_path / "nothing")]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_a_failed_runs_text_is_not_shown_as_an_answer(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "single_seed000", run)
    answered = render_report(run)
    assert '<div class="final" id="answer"><div class="label">answer</div>' in answered
    summary = orjson.loads((run / "summary.json").read_bytes())
    summary.update(outcome="error", error="model server went away", answer="I could not find the button.")
    (run / "summary.json").write_bytes(orjson.dumps(summary))
    page = render_report(run)
    box = re.search(r'<div class="(final[^"]*)" id="answer"><div class="label">([^<]*)</div>', page)
    assert box is not None and box.group(1) == "final failed"
    assert "the run ended error, this is not an answer" in box.group(2)
    assert "I could not find the button." in page


def test_prefill_column_per_request_and_per_turn_averages(tmp_path: Path) -> None:
    page = render_report(GOLDEN / "single_seed000")
    data = build_report_data(load_recording(GOLDEN / "single_seed000"))
    recorded = [t.request["prefill"] for t in data.turns if t.request]
    assert recorded and all({"images", "reused_messages", "text_tokens", "images_in_context"} <= set(p) for p in recorded)
    assert 'id="prefill"' in page and page.count("<tr><td><a href=\"#turn-") == len(recorded)
    assert data.prefill is not None and data.prefill["max_images_in_context"] == 2  # keep-last-2, chunk 1
    # A crashed run has no summary: the same figures come from the turn records.
    shutil.copytree(GOLDEN / "single_seed000", tmp_path / "run")
    (tmp_path / "run" / "summary.json").unlink()
    partial = build_report_data(load_recording(tmp_path / "run"))
    assert partial.prefill is not None
    assert partial.prefill["images_per_turn"] == data.prefill["images_per_turn"]
    assert partial.prefill["max_images_in_context"] == 2


def test_each_turn_says_how_the_screen_settled(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "single_seed000", run)
    records = [orjson.loads(line) for line in (run / "turns.jsonl").read_bytes().splitlines() if line.strip()]
    settled = [r for r in records if "settle" in r]
    assert len(settled) >= 3  # recorded before issue 20: polls, stable, waited_ms
    settled[0]["settle"] = {"polls": 3, "stable": True, "waited_ms": 61.4, "damage": 4, "ended": "quiet",
                            "first_reaction_ms": 21.7, "frames": 2, "quiet_ms": 33.3}
    settled[1]["settle"] = {"polls": 31, "stable": True, "waited_ms": 301.2, "ended": "no_reaction", "frames": 0}
    settled[2]["settle"] = {"polls": 9, "stable": False, "waited_ms": 1500.3, "damage": 90, "ended": "max",
                            "first_reaction_ms": 0.0, "frames": 88, "quiet_ms": 33.3}
    (run / "turns.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    page = render_report(run)
    lines = re.findall(r'<div class="caption settle[^"]*" data-ended="(\w*)"[^>]*>settle: ([^<]*)</div>', page)
    by_end = {ended: html.unescape(text) for ended, text in lines}
    assert by_end["quiet"] == (
        "first reaction at 21.7 ms, 2 frames, quiet 33.3 ms, waited 61.4 ms, 3 probes, 4 DAMAGE events"
    )
    assert by_end["no_reaction"] == "no visible reaction (the screen unchanged), waited 301 ms, 31 probes, polling"
    assert "still changing at the bound" in by_end["max"]
    assert 'class="caption settle still-changing"' in page
    # The old records still render: what they had.
    assert any(ended == "" and "stable, waited" in text and "polling" in text for ended, text in lines)
