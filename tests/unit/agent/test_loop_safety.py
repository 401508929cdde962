"""The safety layer as every run gets it by default: the loop's own SafetyGuard (policy hook,
guarded hands, kill switch, run budget, redaction) on the simulated desktop, against the real
local test server and the real HTTP client."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._run import build_guard, describe_guard, drives_desktop
from deskpilot.agent._session import Session
from deskpilot.agent.modes._registry import ModeSpec, get_mode, register_mode
from deskpilot.input import DryBackend, InputController
from deskpilot.safety import SafetyGuard
from deskpilot.testing import ModelServer, PixelPolicy, Reply, ScriptedPolicy
from deskpilot.testing._desktop import TARGET_RGB, SimulatedDesktop

SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # an OpenAI-style key (fake)

#: Sessions of runs made with the "single-watched" mode (single mode that keeps its session).
SESSIONS: list[Session] = []


def _register_watched_mode() -> None:
    single = get_mode("single")

    class Watched:
        def __init__(self, config: Any) -> None:
            self.inner = single.factory(config)

        async def run(self, session: Session) -> Any:
            SESSIONS.append(session)
            return await self.inner.run(session)

    register_mode(ModeSpec("single-watched", "single mode that exposes its session (tests)", Watched))


_register_watched_mode()


def run(tmp_path: Path, policy: Any, *, flags: dict[str, Any] | None = None,
        desk: SimulatedDesktop | None = None) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = desk or SimulatedDesktop()
    with ModelServer(policy) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                   "agent.mode": "single-watched", **(flags or {})},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "do the thing", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    return result, srv, desk


def tool_payloads(request: Any) -> list[dict[str, Any]]:
    return [orjson.loads(m["content"]) for m in request.messages if m.get("role") == "tool"]


def run_files_text(run_dir: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(run_dir.iterdir()) if p.suffix in (".json", ".jsonl", ".txt"))


# ---------------------------------------------------------------------- the policy, by default


def test_denied_combo_and_secret_reach_the_model_and_never_the_desktop(tmp_path: Path) -> None:
    desk = SimulatedDesktop()
    desk.focused = True
    script = [
        Reply(tool_calls=[("press_key", {"key": "alt+F4"})]),
        Reply(tool_calls=[("type_text", {"text": f"my key is {SECRET}"})]),
        Reply(tool_calls=[("type_text", {"text": "hello"})]),
        f"Done. (I was asked to type {SECRET} but it was refused.)",
    ]
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), desk=desk)
    assert result.outcome == "answered" and srv.problems == []  # the run went on after each denial
    denied_key, denied_text, typed = tool_payloads(srv.requests[-1])
    for payload in (denied_key, denied_text):
        assert payload["ok"] is False and payload["error"]["type"] == "policy_denied"
        assert "refused by the safety policy" in payload["error"]["message"]
        assert "Do not retry" in payload["error"]["message"]
    assert denied_key["error"]["rule"] == "keys.deny:alt+f4"
    assert denied_text["error"]["rule"] == "text.secret:openai_api_key"
    assert SECRET not in json.dumps(denied_text)  # the refusal does not echo the secret
    assert typed["ok"] is True
    # Nothing denied was executed: no key event at all, only the allowed text was typed.
    assert [e["action"] for e in desk.events if e["action"] in ("key", "type")] == ["type"]
    assert desk.text == "hello"

    assert validate_run_dir(result.run_dir) == []
    safety = load_summary(result.run_dir)["safety"]
    assert safety["policy_mode"] == "enforce"
    assert safety["decisions"] == {"checked": 3, "allowed": 1, "denied": 2, "confirmed": 0, "would_deny": 0}
    assert [d["rule"] for d in safety["denied"]] == ["keys.deny:alt+f4", "text.secret:openai_api_key"]
    assert safety["tripped"] is None and safety["budget"]["steps"] == 4
    assert safety["window"].startswith("none")  # simulated desktop: no foreground window to read
    assert "unavailable" in safety["kill_switch"]["corner"] and "armed" in safety["kill_switch"]["budget"]

    # The secret the model asked to type is in none of the run's files, in clear.
    text = run_files_text(result.run_dir)
    assert SECRET not in text and "[REDACTED:openai_api_key]" in text
    turns = list(iter_turns(result.run_dir))
    assert turns[2]["tool_call"]["arguments"]["text"] == "my key is [REDACTED:openai_api_key]"
    assert turns[2]["result"]["error"]["type"] == "policy_denied" and turns[2]["action"] is None
    assert SECRET not in (result.run_dir / "exchange.jsonl").read_text(encoding="utf-8")
    assert SECRET in result.answer  # the in-memory result is the model's answer as given


def test_typed_text_can_be_masked_in_the_records(tmp_path: Path) -> None:
    policy = PixelPolicy(TARGET_RGB, text="Dear diary ✓", steps=("click", "type", "key", "done"))
    result, _, desk = run(tmp_path, policy, flags={"safety.mask_typed_text": True})
    assert result.outcome == "answered" and desk.submitted == ["Dear diary ✓"]
    turns = list(iter_turns(result.run_dir))
    typed = next(t for t in turns if t.get("tool_call", {}).get("name") == "type_text")
    assert typed["tool_call"]["arguments"]["text"] == "[MASKED:12 chars]"
    assert "Dear diary" not in (result.run_dir / "turns.jsonl").read_text(encoding="utf-8")


def test_audit_mode_lets_denied_actions_through_and_counts_them(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("press_key", {"key": "alt+f4"})]), "Done."]
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), flags={"policy.mode": "audit"})
    assert result.outcome == "answered"
    assert tool_payloads(srv.requests[-1])[0]["ok"] is True
    assert [e["key"] for e in desk.events if e["action"] == "key"] == ["alt+f4"]
    safety = load_summary(result.run_dir)["safety"]
    assert safety["policy_mode"] == "audit" and safety["decisions"]["would_deny"] == 1


def test_safety_can_be_turned_off(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("type_text", {"text": SECRET})]), Reply(tool_calls=[("press_key", {"key": "alt+f4"})]),
              "Done."]
    desk = SimulatedDesktop()
    desk.focused = True
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), flags={"safety.enabled": False}, desk=desk)
    assert result.outcome == "answered"
    assert [p["ok"] for p in tool_payloads(srv.requests[-1])] == [True, True]
    assert desk.text == SECRET and [e["key"] for e in desk.events if e["action"] == "key"] == ["alt+f4"]
    assert "safety" not in load_summary(result.run_dir)
    assert SESSIONS[-1].guard is None
    assert SECRET in (result.run_dir / "turns.jsonl").read_text(encoding="utf-8")  # no redaction either


# ---------------------------------------------------------------------- the kill switch and the budget


class TrippingDesktop(SimulatedDesktop):
    """Trips the run's kill switch (programmatically, from the input thread) while the
    n-th key is held down, as a user's hotkey would."""

    def __init__(self, trip_at: int) -> None:
        super().__init__()
        self.trip_at = trip_at
        self.keys = 0

    def key(self, combo: str) -> None:
        self.keys += 1
        if self.keys == self.trip_at:
            self.held.append("shift")  # a key down at the moment of the trip
            guard = SESSIONS[-1].guard
            assert guard is not None and guard.killswitch is not None
            guard.killswitch.trip("the user wants it to stop")
        super().key(combo)


def test_a_programmatic_trip_stops_the_run_within_one_turn_and_releases_keys(tmp_path: Path) -> None:
    desk = TrippingDesktop(trip_at=3)
    policy = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})], delay=0.02)], on_exhausted="repeat")
    started = time.monotonic()
    result, srv, _ = run(tmp_path, policy, flags={"agent.max_steps": 100}, desk=desk)
    assert time.monotonic() - started < 20
    assert result.outcome == "interrupted"
    assert result.error is not None and "kill switch (programmatic)" in result.error
    assert "the user wants it to stop" in result.error
    # Stopped within one turn: no request after the one whose action tripped it, no key after it.
    assert desk.keys == 3 and len(srv.requests) <= 4
    assert desk.events[-1]["action"] == "release_all" and desk.events[-1]["held"] == ["shift"]
    assert desk.held == []
    assert validate_run_dir(result.run_dir) == []
    summary = load_summary(result.run_dir)
    assert summary["outcome"] == "interrupted"
    assert summary["safety"]["tripped"] == {"source": "programmatic", "reason": "the user wants it to stop"}
    assert list(iter_turns(result.run_dir))[-1]["ended_by"] == "interrupted"


def test_input_after_a_trip_is_refused_even_before_the_loop_stops(tmp_path: Path) -> None:
    """The guarded hands refuse input at once; the run ends interrupted, not in error."""
    gate = threading.Event()

    class Tripper(SimulatedDesktop):
        def move(self, x: float, y: float) -> tuple[int, int]:
            guard = SESSIONS[-1].guard
            assert guard is not None and guard.killswitch is not None
            guard.killswitch.trip("stop now", source="hotkey")
            gate.set()
            return super().move(x, y)

    tripper = Tripper()
    script = [Reply(tool_calls=[("click_element", {"label": "target", "box": [500, 412]})]), "Done."]
    result, _, _ = run(tmp_path, ScriptedPolicy(script), desk=tripper)
    assert gate.is_set()
    assert result.outcome == "interrupted" and "stop now" in (result.error or "")
    assert not [e for e in tripper.events if e["action"] == "click"]  # the click after the trip never happened
    assert tripper.events[-1]["action"] == "release_all"
    assert load_summary(result.run_dir)["safety"]["tripped"]["source"] == "hotkey"


def test_max_seconds_ends_the_run_as_max_time(tmp_path: Path) -> None:
    policy = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})]), Reply(content="late", delay=30)])
    started = time.monotonic()
    result, _, desk = run(tmp_path, policy, flags={"agent.max_seconds": 0.5})
    assert time.monotonic() - started < 10  # the 30 s answer is not awaited
    assert result.outcome == "max_time" and result.error is None
    assert desk.events[-1]["action"] == "release_all"
    assert validate_run_dir(result.run_dir) == []
    assert load_summary(result.run_dir)["safety"]["budget"]["max_seconds"] == 0.5


def test_the_hard_cap_bounds_a_run_without_max_seconds(tmp_path: Path) -> None:
    """agent.max_seconds = 0: the hard cap stops it (the loop's timer or the kill switch's
    budget watcher, whichever fires first; the record is the same)."""
    policy = ScriptedPolicy([Reply(content="late", delay=30)])
    started = time.monotonic()
    result, _, _ = run(tmp_path, policy, flags={"safety.hard_cap_seconds": 1.0})
    assert time.monotonic() - started < 10
    assert result.outcome == "max_time"
    safety = load_summary(result.run_dir)["safety"]
    assert safety["tripped"]["source"] == "max_seconds" and safety["budget"]["max_seconds"] == 1.0


@pytest.mark.parametrize(
    "flags",
    [
        {"safety.kill_switch": False},  # --no-kill-switch: no budget watcher at all
        {"safety.enabled": False},  # --no-safety: no guard at all
        {"safety.kill_switch": False, "agent.max_seconds": 0.5},
    ],
    ids=["no-kill-switch", "no-safety", "no-kill-switch-max-seconds"],
)
def test_wall_time_is_bounded_without_the_kill_switch(tmp_path: Path, flags: dict[str, Any]) -> None:
    """The loop arms its own timer (max_seconds, else the hard cap) whatever the kill
    switch does: a model that never answers cannot keep the run going."""
    policy = ScriptedPolicy([Reply(content="late", delay=30)])
    started = time.monotonic()
    result, _, desk = run(tmp_path, policy, flags={"safety.hard_cap_seconds": 1.0, **flags})
    assert time.monotonic() - started < 10  # the 30 s answer is not awaited
    assert result.outcome == "max_time" and result.error is None
    assert desk.events[-1]["action"] == "release_all"
    assert validate_run_dir(result.run_dir) == []
    assert load_summary(result.run_dir)["outcome"] == "max_time"


# ---------------------------------------------------------------------- wiring


def test_only_real_input_gets_the_desktop_watched(tmp_path: Path) -> None:
    assert not drives_desktop(SimulatedDesktop())
    assert not drives_desktop(InputController(DryBackend()))
    cfg = load_config(flags={"agent.max_steps": 7}, env={}, search_default=False)
    guard = build_guard(cfg, 7, desktop=False)
    assert isinstance(guard, SafetyGuard) and guard.window_reader is None
    assert guard.budget is not None and guard.budget.max_steps == 7
    guard.start()
    try:
        assert guard.killswitch is not None
        assert guard.killswitch.status["hotkey"].startswith("unavailable: no desktop")
        assert describe_guard(guard) == "policy enforce · kill switch: no desktop to watch · limit 3600 s"
    finally:
        guard.close()
    assert not guard.killswitch.running
    off = load_config(flags={"safety.enabled": False}, env={}, search_default=False)
    assert build_guard(off, 7, desktop=True) is None
    assert describe_guard(None).startswith("off")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ("enforce", True, True)),
        ({"policy.mode": "confirm", "safety.kill_switch": False}, ("confirm", False, True)),
        ({"safety.enabled": "false"}, ("enforce", True, False)),
    ],
)
def test_safety_settings_from_flags(flags: dict[str, Any], expected: tuple[str, bool, bool]) -> None:
    from deskpilot.safety import PolicySettings, SafetySettings

    cfg = load_config(flags=flags, env={}, search_default=False)
    assert (cfg.section(PolicySettings).mode, cfg.section(SafetySettings).kill_switch,
            cfg.section(SafetySettings).enabled) == expected
    # Lists of key combos are settings, not credentials: run.json keeps them readable.
    assert cfg.as_dict()["safety"]["hotkeys"] == ("ctrl+alt+q",)


# ---------------------------------------------------------------------- stateless mode


def test_stateless_actions_are_checked_by_the_runs_policy(tmp_path: Path) -> None:
    """The stateless engine calls the policy for every action: denied ones are
    reported back to the model (in its text protocol) and never reach the desktop."""
    from deskpilot.agent.modes._registry import discover_modes

    discover_modes()

    def reply(observation: str, *actions: dict[str, Any]) -> str:
        return json.dumps({"observation": observation, "bboxes": [], "actions": list(actions)})

    boot = reply("Start.", {"name": "click", "x1": 500, "y1": 583}, {"name": "key", "keys": "alt+f4"},
                 {"name": "type", "text": f"key {SECRET}"}, {"name": "type", "text": "fine"})
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy([reply("All done.", {"name": "done"})])) as srv:
        cfg = load_config(flags={
            "model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"), "run.quiet": True,
            "agent.mode": "stateless", "agent.max_steps": 3, "stateless.panel": "off",
            "stateless.action_delay_seconds": 0, "stateless.boot_vlm_output": boot,
        }, env={}, search_default=False)
        result = run_agent(cfg, "click the field", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    assert result.outcome == "answered", result.error
    assert not [e for e in desk.events if e["action"] == "key"]
    assert [e["text"] for e in desk.events if e["action"] == "type"] == ["fine"]
    actions = next(r for r in iter_turns(result.run_dir) if r["turn"] == 1 and "reply" in r)["actions"]
    assert [a.get("ok") for a in actions] == [True, False, False, True]
    assert all("refused by policy" in a["error"] for a in actions[1:3])
    feedback = srv.requests[0].messages[1]["content"][0]["text"]
    assert "refused by policy" in feedback  # the model is told
    safety = load_summary(result.run_dir)["safety"]
    assert safety["decisions"]["denied"] == 2
    assert safety["budget"]["steps"] == result.steps >= 1  # counted for stateless requests too
    for name in ("turns.jsonl", "summary.json", "exchange.jsonl"):
        assert SECRET not in (result.run_dir / name).read_text(encoding="utf-8"), name


# ---------------------------------------------------------------------- confirm mode and stops


class _PendingPrompt:
    """Stands in for the terminal prompt: nobody answers for a long time (then "yes")."""

    def __init__(self, wait: float = 15.0) -> None:
        self.wait = wait
        self.asked = threading.Event()
        self.aborts: list[threading.Event | None] = []
        self.returned: list[float] = []

    def __call__(self, question: str, *, timeout: float = 60.0, abort: threading.Event | None = None,
                 **_: Any) -> str:
        self.aborts.append(abort)
        self.asked.set()
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline and not (abort is not None and abort.is_set()):
            time.sleep(0.01)
        self.returned.append(time.monotonic())
        return "yes"


@pytest.mark.parametrize("stop_by", ["max_time", "kill_switch", "sigint"])
def test_a_stop_during_a_confirm_question_ends_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_by: str
) -> None:
    """The question waits off the event loop: the time limit, the kill switch and Ctrl+C
    end the run while it is pending, the action is denied and the question withdrawn."""
    import os
    import signal

    import deskpilot.safety._confirm as confirm

    prompt = _PendingPrompt()
    monkeypatch.setattr(confirm, "terminal_prompt", prompt)
    flags: dict[str, Any] = {"policy.mode": "confirm", "policy.confirm_keys": "ctrl+s"}
    if stop_by == "max_time":
        flags["agent.max_seconds"] = 1.0
    stopped: list[float] = []

    def stopper() -> None:
        assert prompt.asked.wait(20)
        stopped.append(time.monotonic())
        if stop_by == "kill_switch":
            guard = SESSIONS[-1].guard
            assert guard is not None and guard.killswitch is not None
            guard.killswitch.trip("the user pressed the hotkey", source="hotkey")
        elif stop_by == "sigint":
            os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=stopper, daemon=True)
    watcher.start()
    desk = SimulatedDesktop()
    policy = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "ctrl+s"})]), "Done."])
    started = time.monotonic()
    with ModelServer(policy) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                   "agent.mode": "single-watched", **flags},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "save it", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=stop_by == "sigint")
    ended = time.monotonic()
    watcher.join(5)
    assert stopped, "the confirm question was never asked"
    assert ended - stopped[0] < 5 and ended - started < 10  # not the prompt's 15 s
    if stop_by == "max_time":
        assert result.outcome == "max_time"
    else:
        assert result.outcome == "interrupted"
        assert ("hotkey" if stop_by == "kill_switch" else "SIGINT") in (result.error or "")
    # Denied: the key never reached the desktop; the question was withdrawn at once.
    assert not [e for e in desk.events if e["action"] == "key"]
    assert desk.events[-1]["action"] == "release_all"
    assert prompt.aborts and prompt.aborts[0] is not None and prompt.aborts[0].is_set()
    deadline = time.monotonic() + 2
    while not prompt.returned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prompt.returned and prompt.returned[0] - stopped[0] < 2
    assert validate_run_dir(result.run_dir) == []
    safety = load_summary(result.run_dir)["safety"]
    assert safety["decisions"]["denied"] == 1 and safety["decisions"]["confirmed"] == 0
    (denied,) = safety["denied"]
    assert denied["rule"].startswith("keys.confirm") or "ctrl+s" in denied["rule"]
    assert "the run stopped before anyone confirmed" in denied["reason"]
