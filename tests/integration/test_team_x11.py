"""Team mode end to end on a real X server: ``deskpilot run --mode team`` (the CLI, in
process) with real capture, real XTest input, the Tk target app and the local model server.

The "model" is a small role-aware policy: planner requests (text only) get a plan; executor
requests (one screenshot each) are answered by *looking*: the red target is found by colour
in the PNG the agent sent, clicked at its normalized centre; then the entry is clicked,
Unicode text typed, Enter pressed, and completion reported with evidence.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from apps.harness import TargetApp

from deskpilot.agent import iter_turns, load_summary, validate_run_dir
from deskpilot.agent.modes.team import VARIANTS, TeamVariant
from deskpilot.cli import main
from deskpilot.testing import ModelServer, RecordedRequest, Reply, find_color

pytestmark = pytest.mark.x11

TEXT = "Grüße ✓ team"
EVIDENCE = (
    "The red target was clicked, the entry shows the typed text 'Grüße ✓ team' and Enter was "
    "pressed in the entry, which is what the task asked for."
)


def norm(value: float, size: int) -> int:
    return max(0, min(1000, round((value + 0.5) * 1000 / size)))


class LookingPolicy:
    """Planner: one plan. Executor: find red, click it; click the entry; type; enter; report."""

    def __init__(self, variant: TeamVariant, entry: tuple[int, int, int, int], screen: tuple[int, int]) -> None:
        self.v = variant
        x, y, w, h = entry
        self.entry = [norm(x + w / 2, screen[0]), norm(y + h / 2, screen[1])]
        self.step = 0
        self.roles: list[tuple[str, int]] = []
        self.found: list[Any] = []
        self._lock = threading.Lock()

    def _args(self, **values: Any) -> dict[str, Any]:
        why = "justification" if self.v.name == "002" else "reasoning"
        label = "label" if self.v.name == "002" else "element_name"
        out: dict[str, Any] = {why: "as planned"}
        if "at" in values:
            out[label] = values["name"]
            out["position"] = values["at"]
        out.update({k: v for k, v in values.items() if k in ("text", "key")})
        return out

    def respond(self, request: RecordedRequest) -> Reply:
        planner = self.v.tool_name("plan") in request.tool_names
        with self._lock:
            self.roles.append(("planner" if planner else "executor", request.image_count))
            if planner:
                args = ({"operator_instructions": "Click red, then type into the entry and press Enter.", "rationale": "r"}
                        if self.v.name == "002" else
                        {"instructions": "Click red, then type into the entry and press Enter.", "reasoning": "r"})
                return Reply(content="PLAN", tool_calls=[(self.v.tool_name("plan"), args)])
            step, self.step = self.step, self.step + 1
        if step == 0:
            image = request.last_image
            assert image is not None and image.data is not None
            found = find_color(image.data, (255, 0, 0), tolerance=40)
            self.found.append((found, image.width, image.height))
            if found is None:
                return Reply(content="no red target visible")
            cx, cy = found[0], found[1]
            at = [norm(cx, image.width), norm(cy, image.height)]
            return Reply(content="OBS: red target", tool_calls=[(self.v.tool_name("click"), self._args(name="red target", at=at))])
        if step == 1:
            return Reply(content="OBS: entry", tool_calls=[(self.v.tool_name("click"), self._args(name="entry", at=self.entry))])
        if step == 2:
            return Reply(content="typing", tool_calls=[(self.v.tool_name("type"), self._args(text=TEXT))])
        if step == 3:
            return Reply(content="submit", tool_calls=[(self.v.tool_name("key"), self._args(key="enter"))])
        return Reply(content="done", tool_calls=[(self.v.tool_name("complete"), {"evidence": EVIDENCE})])


@pytest.mark.parametrize("variant", ["002", "003"])
def test_cli_team_run_drives_the_tk_app(
    variant: str, start_target_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./deskpilot.toml from the checkout
    for name in ("LMSTUDIO_ENDPOINT", "LMSTUDIO_MODEL", "AGENT_MODE", "AGENT_MAX_STEPS", "TEAM_VARIANT"):
        monkeypatch.delenv(name, raising=False)
    app: TargetApp = start_target_app()
    v = VARIANTS[variant]
    screen = tuple(app.ready["screen"])
    policy = LookingPolicy(v, app.widgets["entry"], screen)  # type: ignore[arg-type]
    mark = app.mark()
    with ModelServer(policy) as srv:
        code = main([
            "run", "--mode", "team", "--variant", variant, "--endpoint", srv.endpoint,
            "--runs-dir", str(tmp_path / "runs"), "--image-size", "960x540", "--json",
            "Click the red target, type the text into the entry and press Enter",
        ])
        assert srv.problems == []
    out = capsys.readouterr().out
    summary = orjson.loads(out[out.index("{"):])
    assert code == 0, (summary.get("outcome"), summary.get("error"), policy.found)
    assert summary["outcome"] == "answered" and summary["answer"] == EVIDENCE and summary["mode"] == "team"
    # planner requests carry no image, executor requests exactly one; the planner plans on
    # turn 1 and reviews every review_interval turns (seed 002: turn 5)
    expected: list[tuple[str, int]] = []
    while sum(1 for role, _ in expected if role == "executor") < 5:
        turn = len(expected) + 1
        expected.append(("planner", 0) if turn == 1 or turn % v.review_interval == 0 else ("executor", 1))
    assert policy.roles == expected

    records = app.since(mark)
    red = app.widgets["red"]
    press = next(r for r in records if r["type"] == "press" and r["button"] == 1)
    assert press["widget"] == "red" and red[0] <= press["x"] < red[0] + red[2] and red[1] <= press["y"] < red[1] + red[3]
    app.wait_for(lambda r: r["type"] == "key" and r["keysym"] == "Return", since=mark, timeout=5)
    entries = [r["text"] for r in app.since(mark) if r["type"] == "entry"]
    assert entries and entries[-1] == TEXT

    run_dir = Path(summary["run_dir"])
    assert validate_run_dir(run_dir) == []
    turns = list(iter_turns(run_dir))
    assert [t.get("team", {}).get("team_role") for t in turns[1:]] == [role for role, _ in expected]
    assert turns[2]["result"]["ok"] is True and turns[2]["action"]["kind"] == "click"
    assert turns[2]["mapping"]["physical_size"] == list(screen) and turns[2]["mapping"]["image_size"] == [960, 540]
    log = (run_dir / "execution_log.txt").read_text(encoding="utf-8")
    mode_word = v.planning_mode
    for needle in (f"TURN 1 - {mode_word}", "TURN 2 - EXECUTION", "MISSION COMPLETE", "DEBRIEF", "final_status: answered"):
        assert needle in log
    assert load_summary(run_dir)["team"]["variant"] == variant
