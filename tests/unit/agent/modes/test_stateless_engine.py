"""The stateless engine end to end without a display: real loop, real HTTP client, the real
test model server, the simulated desktop (Xvfb runs are in tests/integration)."""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from PIL import Image

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._prompts import SECURITY_NOTE
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.agent.modes.stateless import StatelessSettings, run_stateless
from deskpilot.testing import ModelServer, ScriptedPolicy
from deskpilot.testing._desktop import CLICKED_RGB, SimulatedDesktop

# The simulated desktop (1920x1080): target button at (880, 400, 160, 90), text field at
# (660, 600, 600, 60). In 0..1000 of the whole screen:
TARGET = (500, 412)
FIELD = (500, 583)


def reply(
    observation: str, *actions: dict[str, Any], bboxes: list[dict[str, Any]] | None = None
) -> str:
    return json.dumps(
        {"observation": observation, "bboxes": bboxes or [], "actions": list(actions)}
    )


def click(x: int, y: int, name: str = "click") -> dict[str, Any]:
    return {"name": name, "x1": x, "y1": y}


def config(
    tmp_path: Path, endpoint: str, *, extra: dict[str, Any] | None = None, **stateless: Any
) -> Any:
    discover_modes()
    flags: dict[str, Any] = {
        "model.endpoint": endpoint,
        "run.runs_dir": str(tmp_path / "runs"),
        "run.quiet": True,
        "agent.mode": "stateless",
        "agent.max_steps": 6,
        "stateless.capture_scale_percent": 50,
        "stateless.action_delay_seconds": 0,
        "stateless.drag_step_delay": 0,
        "stateless.panel": "off",
    }
    flags.update({f"stateless.{k}": v for k, v in stateless.items()})
    flags.update(extra or {})
    return load_config(flags=flags, env={}, search_default=False)


def run(
    tmp_path: Path,
    replies: list[Any],
    *,
    desk: SimulatedDesktop | None = None,
    task: str = "click the button",
    extra: dict[str, Any] | None = None,
    **stateless: Any,
) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = desk or SimulatedDesktop()
    with ModelServer(ScriptedPolicy(replies), keep_images=10) as server:
        cfg = config(tmp_path, server.endpoint, extra=extra, **stateless)
        result = run_agent(
            cfg, task, screen_factory=lambda: desk, hands_factory=lambda: desk, handle_signals=False
        )
    return result, server, desk


def decode(png: bytes) -> np.ndarray[Any, Any]:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


def records(run_dir: Path) -> list[dict[str, Any]]:
    return list(iter_turns(run_dir))


# -- the whole loop -----------------------------------------------------------------------------------


def test_native_run_executes_annotates_and_stays_stateless(tmp_path: Path) -> None:
    boot = reply("I start by clicking the target.", click(*TARGET))
    result, server, desk = run(
        tmp_path,
        [
            reply(
                "Target is green. Now the field.",
                click(*FIELD),
                {"name": "type", "text": "héllo"},
                {"name": "key", "keys": "enter"},
                bboxes=[{"x1": 340, "y1": 550, "x2": 660, "y2": 620, "label": "field"}],
            ),
            reply("Submitted, all done.", {"name": "done"}),
        ],
        boot_vlm_output=boot,
    )
    assert result.outcome == "answered", result.error
    assert result.answer == "Submitted, all done."
    assert desk.target_clicks and desk.submitted == ["héllo"]
    assert not server.problems
    # Stateless: every request is the system prompt + one user message with one image.
    assert len(server.requests) == 2
    for request in server.requests:
        roles = [m["role"] for m in request.messages]
        assert roles == ["system", "user"]
        assert len(request.images) == 1 and (request.images[0].width, request.images[0].height) == (
            960,
            540,
        )
        assert request.body["top_p"] == 1.0 and "tools" not in request.body
    system = server.requests[0].messages[0]["content"]
    assert "TASK: click the button" in system and "0..1000" in system and "orange" in system
    assert SECURITY_NOTE in system
    first_text = server.requests[0].messages[1]["content"][0]["text"]
    assert "I start by clicking the target." in first_text and "1 click 500,412" in first_text
    second_text = server.requests[1].messages[1]["content"][0]["text"]
    assert (
        "Target is green" in second_text
        and 'type "héllo"' in second_text
        and "key enter" in second_text
    )

    # The first image shows the target clicked (green) with orange heat over it.
    first = decode(server.requests[0].images[0].data or b"")
    cx, cy = 480, 222  # target centre at 50 %
    assert (
        first[cy - 30 : cy + 30, cx - 70 : cx - 50].reshape(-1, 3).tolist().count(list(CLICKED_RGB))
        == 0
    )
    near = first[cy - 8 : cy + 8, cx - 8 : cx + 8].astype(int)
    assert (near[..., 0] > near[..., 1] + 40).any(), "no orange heat at the click"
    run_dir = result.run_dir
    raw = decode((run_dir / "turn_0001_raw.png").read_bytes())
    assert (raw[cy - 20 : cy + 20, cx - 20 : cx + 20] == CLICKED_RGB).all(axis=2).mean() > 0.9
    assert (run_dir / "turn_0001_annotated.png").read_bytes() == server.requests[0].images[0].data

    # Run directory: the shared format validates; the seed's raw/annotated records are there.
    assert validate_run_dir(run_dir) == []
    recs = records(run_dir)
    stages = [(r["turn"], r.get("stage")) for r in recs]
    assert stages == [
        (1, "raw"),
        (1, "annotated"),
        (1, "turn"),
        (2, "raw"),
        (2, "annotated"),
        (2, "turn"),
        (3, "raw"),
        (3, "annotated"),
        (3, "turn"),
    ]
    raw1 = recs[0]
    assert (
        raw1["model_observation"] == "I start by clicking the target."
        and raw1["raw_png"] == "turn_0001_raw.png"
    )
    assert raw1["actions"] == [{"name": "click", "x1": 500, "y1": 412}]
    assert (
        recs[1]["annotated_png"] == "turn_0001_annotated.png" and recs[1]["annotation"] == "native"
    )
    turn1 = recs[2]
    assert turn1["actions"][0]["physical"] == {
        "kind": "click",
        "x": 960,
        "y": 444,
        "button": "left",
        "count": 1,
    }
    assert {"parse", "action", "capture", "annotate", "encode", "model"} <= set(turn1["timings"])
    assert "overhead" not in turn1["timings"]  # the boot output is no model reply
    assert "overhead" in recs[5]["timings"]  # reply 1 -> request 2
    assert turn1["observation"]["screenshot"] == "turn_0001_annotated.png"
    assert recs[-1]["final"] is True and recs[-1]["answer"] == "Submitted, all done."
    summary = load_summary(run_dir)
    assert summary["mode"] == "stateless" and "annotate" in summary["phases"]
    assert summary["stateless"]["annotate"] == "native"
    assert (run_dir / "main.log").read_text().count("turn 1:") == 1
    info = orjson.loads((run_dir / "stateless.json").read_bytes())
    assert (
        info["working_area"]["image_size"] == [960, 540]
        and "TASK: click the button" in info["system_prompt"]
    )


def test_crop_sandboxes_actions_and_dry_run_touches_nothing(tmp_path: Path) -> None:
    boot = reply(
        "corner",
        click(1000, 1000),
        {"name": "drag", "x1": 0, "y1": 0, "x2": 500, "y2": 500},
        {"name": "scroll", "direction": "up", "amount": 2},
    )
    result, server, desk = run(
        tmp_path,
        [reply("done", {"name": "done"})],
        boot_vlm_output=boot,
        capture_crop="0,0,500,500",
        capture_scale_percent=100,
        physical_execution=False,
    )
    assert result.outcome == "answered", result.error
    # Nothing reached the desktop but the loop's final safety release.
    assert [e["action"] for e in desk.events] == ["release_all"] and not desk.target_clicks
    assert (server.requests[0].images[0].width, server.requests[0].images[0].height) == (960, 540)
    turn1 = next(r for r in records(result.run_dir) if r.get("stage") == "turn")
    physical = [a["physical"] for a in turn1["actions"]]
    # (1000, 1000) of the top-left quadrant is its last pixel, never outside it.
    assert physical[0]["x"] == 959 and physical[0]["y"] == 539
    assert (physical[1]["start"], physical[1]["end"]) == ([0, 0], [480, 270])
    assert physical[2] == {"kind": "scroll", "x": 480, "y": 270, "dy": -2, "dx": 0}
    assert turn1["dry_run"] is True and all(a["ok"] for a in turn1["actions"])


def test_turn_dirs_layout_and_garbage_replies(tmp_path: Path) -> None:
    result, server, _ = run(
        tmp_path,
        [
            "I am not sure what to do.",
            reply("ok", {"name": "fly", "x1": 1, "y1": 1}),
            reply("done", {"name": "done"}),
        ],
        log_layout="turn_dirs",
    )
    assert result.outcome == "answered", result.error
    run_dir = result.run_dir
    for n in (1, 2, 3, 4):
        folder = run_dir / f"turn_{n:04d}"
        assert (folder / "screenshot_raw.png").is_file() and (
            folder / "screenshot_annotated.png"
        ).is_file()
        assert (folder / "vlm_output.json").is_file()
    garbage = orjson.loads((run_dir / "turn_0002" / "vlm_output.json").read_bytes())
    assert (
        garbage["text"] == "I am not sure what to do."
        and garbage["source"] == "text"
        and garbage["actions"] == []
    )
    # The model hears about what was refused.
    third = server.requests[2].messages[1]["content"][0]["text"]
    assert "Refused from your last answer: action 1: unknown action 'fly'" in third
    assert validate_run_dir(run_dir) == []


def test_max_steps_closes_the_record(tmp_path: Path) -> None:
    discover_modes()
    desk = SimulatedDesktop()
    with ModelServer(
        ScriptedPolicy([reply("again", click(10, 10))], on_exhausted="repeat")
    ) as server:
        result = run_stateless(
            load_config(
                flags={
                    "model.endpoint": server.endpoint,
                    "run.runs_dir": str(tmp_path / "runs"),
                    "agent.max_steps": 2,
                    "stateless.panel": "off",
                    "stateless.action_delay_seconds": 0,
                    "run.quiet": True,
                },
                env={},
                search_default=False,
            ),
            "loop",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    assert result.outcome == "max_steps" and result.steps == 2
    assert validate_run_dir(result.run_dir) == []
    turns = [r for r in records(result.run_dir) if r.get("stage") == "turn"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and turns[-1]["ended_by"] == "max_steps"


def test_browser_annotation_round_trip_and_timeout_fallback(tmp_path: Path) -> None:
    """A stand-in for the panel page: polls /state and posts an annotated image back."""
    desk = SimulatedDesktop()
    posted: list[int] = []
    stop = threading.Event()

    problems: list[str] = []

    def fake_page() -> None:
        base = None
        while base is None and not stop.is_set():
            found = list((tmp_path / "runs").glob("*/stateless.json"))
            if found:
                base = orjson.loads(found[0].read_bytes())["panel"]
            time.sleep(0.02)
        with httpx.Client(base_url=base, timeout=5) as client:
            while not stop.is_set():
                try:
                    state = client.get("/state").json()
                except httpx.HTTPError:
                    return  # the run ended and the panel with it
                if (
                    state["waiting_annotation"]
                    and state["pending_seq"] not in posted
                    and state["pending_seq"] != 2
                ):
                    img = decode(base64.b64decode(state["raw_b64"])).copy()
                    img[:10, :10] = (0, 255, 0)  # "the overlay" this page draws
                    buf = io.BytesIO()
                    Image.fromarray(img).save(buf, format="PNG")
                    wrong = client.post(
                        "/annotated", json={"seq": state["pending_seq"] + 7, "image_b64": "AAAA"}
                    )
                    if wrong.status_code != 409:
                        problems.append(f"wrong seq answered {wrong.status_code}")
                    ok = client.post(
                        "/annotated",
                        json={
                            "seq": state["pending_seq"],
                            "image_b64": base64.b64encode(buf.getvalue()).decode(),
                        },
                    )
                    if ok.status_code != 200:
                        problems.append(f"annotated answered {ok.status_code}: {ok.text}")
                    posted.append(state["pending_seq"])
                time.sleep(0.02)

    page = threading.Thread(target=fake_page, daemon=True)
    page.start()
    try:
        result, server, _ = run(
            tmp_path,
            [reply("two", click(*FIELD)), reply("three", {"name": "done"})],
            desk=desk,
            annotate="browser",
            panel="on",
            panel_token="off",  # the stand-in page talks to it directly (tokens: test_robust_panel)
            port=0,
            annotate_timeout=2.0,  # turn 2 waits this long; the answered turns take ~50 ms
        )
    finally:
        stop.set()
        page.join(5)
    assert result.outcome == "answered", result.error
    assert problems == []
    assert posted == [1, 3]  # turn 2 is left unanswered: the engine draws it natively
    first = decode(server.requests[0].images[0].data or b"")
    assert (first[:10, :10] == (0, 255, 0)).all()
    how = {
        r["turn"]: r["annotation"] for r in records(result.run_dir) if r.get("stage") == "annotated"
    }
    assert how == {1: "browser", 2: "native_fallback", 3: "browser"}
    assert load_summary(result.run_dir)["stateless"]["annotation_fallbacks"] == 1


def test_annotate_timeout_zero_waits_for_the_browser_until_stopped(tmp_path: Path) -> None:
    """Seed scenario C: no fallback to native drawing, however long the page takes; the
    wait still ends when the run is stopped (here by max_seconds)."""
    started = time.perf_counter()
    result, server, desk = run(
        tmp_path,
        [reply("done", {"name": "done"})],
        boot_vlm_output=reply("go", click(*TARGET)),
        annotate="browser",
        panel="on",
        port=0,
        annotate_timeout=0,
        extra={"agent.max_seconds": 1.5},
    )
    elapsed = time.perf_counter() - started
    assert result.outcome == "max_time", (result.outcome, result.error)
    assert 1.5 <= elapsed < 30
    # It waited: nothing was drawn natively instead, no request went to the model.
    assert server.requests == [] and desk.target_clicks
    assert not list(result.run_dir.glob("turn_0001_annotated.png"))
    assert validate_run_dir(result.run_dir) == []


@pytest.mark.parametrize(
    ("level", "debug_line", "info_line"),
    [("DEBUG", True, True), ("info", False, True), ("Warning", False, False)],
)
def test_log_level_sets_main_log_level(
    tmp_path: Path, level: str, debug_line: bool, info_line: bool
) -> None:
    before = logging.getLogger("deskpilot").level
    result, _, _ = run(
        tmp_path,
        [reply("done", {"name": "done"})],
        boot_vlm_output=reply("go", click(*TARGET)),
        log_level=level,
    )
    assert result.outcome == "answered", result.error
    text = (result.run_dir / "main.log").read_text(encoding="utf-8")
    assert ("DEBUG deskpilot.stateless: turn 1: reply parsed from json" in text) is debug_line
    assert ("INFO deskpilot.stateless: turn 1: 1 action(s)" in text) is info_line
    # The level only applies for the run: the deskpilot logger is restored after it.
    assert logging.getLogger("deskpilot").level == before


def test_log_level_from_env_and_toml(tmp_path: Path) -> None:
    cfg = load_config(flags={}, env={"LOG_LEVEL": "debug"}, search_default=False)
    assert cfg.section(StatelessSettings).log_level == "DEBUG"
    assert cfg.section(StatelessSettings).log_level_number == 10
    toml = tmp_path / "deskpilot.toml"
    toml.write_text('[stateless]\nlog_level = "error"\n', encoding="utf-8")
    cfg = load_config(env={}, path=toml)
    assert cfg.section(StatelessSettings).log_level == "ERROR"
    assert load_config(env={}, search_default=False).section(StatelessSettings).log_level == "INFO"
    with pytest.raises(ValueError, match="log_level"):
        load_config(env={"LOG_LEVEL": "chatty"}, search_default=False)


def test_wait_for_injection_then_timeout_is_an_error(tmp_path: Path) -> None:
    result, server, _ = run(
        tmp_path, [], boot_enabled=False, inject_timeout=0.2, port=0, panel="auto"
    )
    assert result.outcome == "error" and "no model output was injected" in (result.error or "")
    assert server.requests == []


def test_injection_starts_the_loop(tmp_path: Path) -> None:
    injected: list[int] = []

    def inject() -> None:
        for _ in range(250):
            found = list((tmp_path / "runs").glob("*/stateless.json"))
            if found:
                base = orjson.loads(found[0].read_bytes())["panel"]
                response = httpx.post(
                    f"{base}/inject",
                    json={"vlm_text": reply("injected", click(*TARGET))},
                    timeout=5,
                )
                injected.append(response.status_code)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=inject, daemon=True)
    thread.start()
    result, server, desk = run(
        tmp_path,
        [reply("done", {"name": "done"})],
        boot_enabled=False,
        inject_timeout=10,
        port=0,
        panel="auto",
        panel_token="off",  # posted without one (tokens: test_robust_panel)
    )
    thread.join(5)
    assert injected == [202]
    assert result.outcome == "answered" and desk.target_clicks
    assert "injected" in server.requests[0].messages[1]["content"][0]["text"]


# -- the safety policy ------------------------------------------------------------------------------

SECRET = "sk-proj-" + "Zq8wEr4tYu1iOp7aSd2fGh5jKl0zXc3v"  # an OpenAI-style key (fake)


@pytest.mark.parametrize("physical", [True, False], ids=["physical", "dry_run"])
def test_denied_actions_do_not_run_and_are_recorded_and_fed_back(
    tmp_path: Path, physical: bool
) -> None:
    boot = reply(
        "Click the field, then the rest.",
        click(*FIELD),
        {"name": "key", "keys": "alt+f4"},
        {"name": "type", "text": f"token {SECRET}"},
        {"name": "type", "text": "ok"},
        {"name": "key", "keys": "enter"},
    )
    result, server, desk = run(
        tmp_path,
        [reply("Done.", {"name": "done"})],
        boot_vlm_output=boot,
        physical_execution=physical,
    )
    assert result.outcome == "answered", result.error
    keys = [e["key"] for e in desk.events if e["action"] == "key"]
    typed = [e["text"] for e in desk.events if e["action"] == "type"]
    if physical:
        # Neither alt+f4 nor the secret reached the desktop; the allowed actions around
        # them did.
        assert keys == ["enter"] and typed == ["ok"] and desk.submitted == ["ok"]
    else:
        assert keys == [] and typed == []
    turn1 = next(r for r in records(result.run_dir) if r["turn"] == 1 and r.get("stage") == "turn")
    actions = turn1["actions"]
    assert [a["ok"] for a in actions] == [True, False, False, True, True]
    denied = [a["result"]["error"] for a in actions[1:3]]
    assert [d["type"] for d in denied] == ["policy_denied", "policy_denied"]
    assert denied[0]["rule"] == "keys.deny:alt+f4"
    assert denied[1]["rule"].startswith("text.secret:")
    assert "Do not retry" in denied[0]["message"]
    assert all("result" not in a for a in (actions[0], actions[3], actions[4]))
    assert turn1["policy_denied"] == 2
    assert turn1["result"]["error"] == {"type": "policy_denied"} and turn1["result"]["denied"] == 2
    # The next request tells the model which actions the policy refused and why.
    feedback = server.requests[0].messages[1]["content"][0]["text"]
    assert "2 key alt+f4 (REFUSED, policy_denied: refused by policy [keys.deny:alt+f4]" in feedback
    assert "do not retry it" in feedback
    assert '4 type "ok"' in feedback and '4 type "ok" (' not in feedback
    # The secret stays out of every file of the run, main.log included.
    for path in result.run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".log"):
            assert SECRET not in path.read_text(encoding="utf-8"), path.name
    safety = load_summary(result.run_dir)["safety"]
    assert safety["decisions"]["denied"] == 2


def _heat_drawn(run_dir: Path, image: bytes, turn: int, box: tuple[int, int, int, int]) -> bool:
    """Whether the annotated ``image`` of ``turn`` differs from its raw screenshot in ``box``
    (x0, y0, x1, y1 in image pixels): something was drawn there."""
    raw = decode((run_dir / f"turn_{turn:04d}_raw.png").read_bytes())
    annotated = decode(image)
    x0, y0, x1, y1 = box
    return bool((raw[y0:y1, x0:x1] != annotated[y0:y1, x0:x1]).any())


TARGET_BOX = (420, 180, 540, 265)  # around the target at 50 % (960x540), heat radius included


@pytest.mark.parametrize("physical", [True, False], ids=["physical", "dry_run"])
def test_refused_actions_get_no_heat_and_stay_out_of_the_trail(
    tmp_path: Path, physical: bool
) -> None:
    """The heat shows where actions ran (the prompt says so): a click the policy refused
    is not drawn, this turn nor in the next turns' trail; in a dry run an allowed click
    counts as run (seed 004) and is drawn."""
    boot = reply("Click the target.", click(*TARGET))
    deny_all = {"policy.deny_windows": ["title:nothing-like-this"], "policy.unknown_window": "deny"}
    result, server, desk = run(
        tmp_path,
        [reply("Nothing to do.", bboxes=[]), reply("Done.", {"name": "done"})],
        boot_vlm_output=boot,
        physical_execution=physical,
        extra=deny_all,
    )
    assert result.outcome == "answered", result.error
    assert not desk.target_clicks
    turn1 = next(r for r in records(result.run_dir) if r["turn"] == 1 and r.get("stage") == "turn")
    assert turn1["actions"][0]["result"]["error"]["type"] == "policy_denied"
    images = [r.images[0].data or b"" for r in server.requests]
    assert len(images) == 2
    # Nothing drawn anywhere: no heat, no marker, no label of the refused click ...
    assert not _heat_drawn(result.run_dir, images[0], 1, (0, 0, 960, 540))
    # ... and no trail of it on the next screenshot.
    assert not _heat_drawn(result.run_dir, images[1], 2, (0, 0, 960, 540))
    # The model still hears that it was refused.
    assert "REFUSED, policy_denied" in server.requests[0].messages[1]["content"][0]["text"]

    # Without the denial the same click is drawn, and trails into the next turn, whether
    # it reached the desktop (physical) or not (dry run).
    allowed, server, desk = run(
        tmp_path / "allowed",
        [reply("Nothing to do.", bboxes=[]), reply("Done.", {"name": "done"})],
        boot_vlm_output=boot,
        physical_execution=physical,
    )
    assert allowed.outcome == "answered", allowed.error
    assert bool(desk.target_clicks) is physical
    first, second = (r.images[0].data or b"" for r in server.requests)
    assert _heat_drawn(allowed.run_dir, first, 1, TARGET_BOX)
    assert _heat_drawn(allowed.run_dir, second, 2, TARGET_BOX)


class _RefusingDesk(SimulatedDesktop):
    """The simulated desktop whose keyboard fails with ``error`` (an OS refusal, a stop)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def key(self, combo: str) -> None:
        raise self.error


def test_an_input_failure_skips_the_rest_of_the_turn(tmp_path: Path) -> None:
    from deskpilot._errors import InputError

    desk = _RefusingDesk(InputError("the X server refused the key event", call="XTestFakeKeyEvent"))
    boot = reply("Press enter, then click.", {"name": "key", "keys": "enter"}, click(*TARGET))
    result, server, _ = run(
        tmp_path, [reply("Done.", {"name": "done"})], desk=desk, boot_vlm_output=boot
    )
    assert result.outcome == "answered", result.error
    assert not desk.target_clicks
    turn1 = next(r for r in records(result.run_dir) if r["turn"] == 1 and r.get("stage") == "turn")
    first, second = turn1["actions"]
    assert first["ok"] is False and first["result"]["error"]["type"] == "action_failed"
    assert "refused the key event" in first["error"]
    assert second["skipped"] and "ok" not in second
    assert turn1["result"]["error"] == {"type": "action_failed"} and "policy_denied" not in turn1
    # The skipped click did not run: no heat at the target (the failed key is listed).
    image = server.requests[0].images[0].data or b""
    assert not _heat_drawn(result.run_dir, image, 1, TARGET_BOX)
    assert (
        "(FAILED: InputError: the X server refused"
        in server.requests[0].messages[1]["content"][0]["text"]
    )


def test_a_stop_during_an_action_ends_the_run(tmp_path: Path) -> None:
    """A kill-switch trip surfaces from the guarded hands as RunInterrupted: it stops the
    run, it is not one action's failure that the turn steps over."""
    from deskpilot._errors import RunInterrupted

    desk = _RefusingDesk(RunInterrupted("input refused: fail-safe corner", reason="corner"))
    boot = reply("Press enter, then click.", {"name": "key", "keys": "enter"}, click(*TARGET))
    result, server, _ = run(
        tmp_path, [reply("Done.", {"name": "done"})], desk=desk, boot_vlm_output=boot
    )
    assert result.outcome == "interrupted", (result.outcome, result.error)
    assert not desk.target_clicks and server.requests == []


# -- panel settings -------------------------------------------------------------------------------


def test_panel_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(ValueError, match="PANEL_TOKEN"):
        StatelessSettings(host="0.0.0.0", panel="on", panel_token="off")
    with pytest.raises(ValueError, match="PANEL_TOKEN"):
        StatelessSettings(host="192.168.1.5", boot_enabled=False, panel_token="off")  # auto: the panel starts
    assert StatelessSettings(host="0.0.0.0", panel="on").panel_token == "generate"  # the default
    assert StatelessSettings(host="0.0.0.0", panel="on", panel_token="generate").panel_enabled()
    assert StatelessSettings(host="0.0.0.0", panel="on", panel_token="x" * 16).panel_token
    # No panel, nothing listens: the address does not matter.
    assert not StatelessSettings(host="0.0.0.0").panel_enabled()
    with pytest.raises(ValueError, match="16"):
        StatelessSettings(panel="on", panel_token="short")
    with pytest.raises(ValueError, match="allowed host"):
        StatelessSettings(panel="on", panel_allowed_hosts="ok.lan, not a host")
    assert StatelessSettings(panel_allowed_hosts=" a.lan, b.lan:9000 ,").allowed_hosts == (
        "a.lan",
        "b.lan:9000",
    )
    cfg = load_config(
        flags={"agent.mode": "stateless", "stateless.panel": "on"},
        env={"PANEL_TOKEN": "t" * 20, "PANEL_HOST": "0.0.0.0"},
        search_default=False,
    )
    assert cfg.section(StatelessSettings).panel_token == "t" * 20
    assert cfg.as_dict()["stateless"]["panel_token"] == "***"


def test_generated_token_guards_the_running_panel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def client() -> None:
        for _ in range(500):
            err = capsys.readouterr().err
            seen.setdefault("err", "")
            seen["err"] += err
            if "?token=" in seen["err"]:
                break
            time.sleep(0.02)
        else:
            return
        link = next(w for w in seen["err"].split() if "?token=" in w)
        base, _, token = link.partition("/?token=")
        seen["token"] = token
        seen["without"] = httpx.get(f"{base}/state", timeout=5).status_code
        seen["inject_without"] = httpx.post(
            f"{base}/inject", json={"vlm_text": "x"}, timeout=5
        ).status_code
        response = httpx.post(
            f"{base}/inject",
            json={"vlm_text": reply("injected", click(*TARGET))},
            headers={"authorization": f"Bearer {token}"},
            timeout=5,
        )
        seen["inject"] = response.status_code

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    result, _server, desk = run(
        tmp_path,
        [reply("done", {"name": "done"})],
        boot_enabled=False,
        inject_timeout=10,
        port=0,
        panel="auto",
        panel_token="generate",
    )
    thread.join(5)
    assert seen.get("without") == 401 and seen.get("inject_without") == 401, seen
    assert seen.get("inject") == 202, seen
    assert result.outcome == "answered" and desk.target_clicks
    token = seen["token"]
    assert len(token) >= 32
    written = orjson.loads((result.run_dir / "stateless.json").read_bytes())
    assert written["panel_token"] is True and "token" not in written["panel"]
    for path in result.run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".log"):
            assert token not in path.read_text(encoding="utf-8"), path.name


def test_settings_validation() -> None:
    with pytest.raises(ValueError):
        StatelessSettings(capture_crop=(0, 0, 0, 10))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        StatelessSettings(capture_width=100)
    assert StatelessSettings(capture_crop="[0, 0, 250, 250]").capture_crop == (0, 0, 250, 250)  # type: ignore[arg-type]
    assert StatelessSettings(
        capture_crop={"x1": 0, "y1": 0, "x2": 250, "y2": 1000}
    ).crop_fraction == (0.0, 0.0, 0.25, 1.0)  # type: ignore[arg-type]
    assert (
        StatelessSettings(ui='{"executed_heat": {"trail_turns": 2}}').overlay_style.trail_turns == 2
    )  # type: ignore[arg-type]
    assert StatelessSettings(annotate="browser", panel="auto").panel_enabled()
    assert not StatelessSettings().panel_enabled()
    assert StatelessSettings(boot_enabled=False).panel_enabled()
    with pytest.raises(ValueError, match="needs the panel"):
        StatelessSettings(annotate="browser", panel="off")
    # annotate_timeout: 0 = wait forever; a positive value is at least 0.1 s.
    assert StatelessSettings(annotate="browser", annotate_timeout=0).annotate_timeout == 0
    assert StatelessSettings(annotate_timeout=0.1).annotate_timeout == 0.1
    with pytest.raises(ValueError, match="annotate_timeout"):
        StatelessSettings(annotate_timeout=0.05)
    cfg = load_config(
        flags={"agent.mode": "stateless"},
        env={"STATELESS_ANNOTATE_TIMEOUT": "0"},
        search_default=False,
    )
    assert cfg.section(StatelessSettings).annotate_timeout == 0


def test_a_thinking_model_is_acted_on_by_its_final_answer_not_its_draft(tmp_path: Path) -> None:
    """A reply whose content is empty and whose reasoning holds the JSON: the last complete
    reply object there is the model's answer; the first is its draft.

    Source: the seeds' stateless protocol (/work/shared/seeds/004_*: "If parsing fails, it
    tries to extract the first {...} block") reads the *content*; a thinking model behind a
    reasoning parser (LM Studio, llama.cpp --reasoning-format, vLLM --reasoning-parser) leaves
    content empty and drafts its JSON in the reasoning before it settles on the answer, which
    comes last. Acting on the first block repeated the draft.
    """
    draft = reply("Maybe the corner?", click(50, 50))
    final = reply("No: the target is in the middle.", click(*TARGET))
    thinking = (
        f"Let me draft an answer:\n```json\n{draft}\n```\nWait, the corner is empty; the magenta "
        f"target is in the middle of the screen. Final answer:\n{final}"
    )
    boot = reply("I look first.")
    result, server, desk = run(
        tmp_path,
        [{"content": "", "reasoning": thinking}, reply("Clicked, done.", {"name": "done"})],
        boot_vlm_output=boot,
    )
    assert result.outcome == "answered", result.error
    clicks = [(e["x"], e["y"]) for e in desk.events if e["action"] == "click"]
    assert len(clicks) == 1 and desk.target_clicks == clicks  # the answer's click, not the draft's
    recs = records(result.run_dir)
    from_reasoning = [r for r in recs if r.get("reply", {}).get("from_reasoning")]
    assert len(from_reasoning) == 1
    assert from_reasoning[0]["reply"]["observation"] == "No: the target is in the middle."
    assert not server.problems
