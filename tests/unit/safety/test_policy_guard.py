"""SafetyGuard: the tool layer's policy hook, guarded hands, config sections, and the whole
loop (single mode, real HTTP client and test server, simulated desktop) under the guard."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot._errors import ActionDeniedError, ConfigError, RunInterrupted
from deskpilot.actions import (
    Action,
    Click,
    Drag,
    Hold,
    KeyPress,
    MoveMouse,
    Scroll,
    TypeText,
    Wait,
    Zoom,
)
from deskpilot.agent import iter_turns, load_config, load_summary, run_agent, validate_run_dir
from deskpilot.agent._config import register_section
from deskpilot.agent.modes._registry import ModeSpec, get_mode, register_mode
from deskpilot.geometry import Box, Rect
from deskpilot.safety import (
    SETTINGS_SECTIONS,
    PolicyDenied,
    PolicySettings,
    SafetyGuard,
    SafetySettings,
    WindowInfo,
    action_request,
    run_guarded,
)
from deskpilot.testing import ModelServer, PixelPolicy, Reply, ScriptedPolicy
from deskpilot.testing._desktop import TARGET_RGB, SimulatedDesktop

for _name, _cls in SETTINGS_SECTIONS.items():
    register_section(_name, _cls)


class FakeReader:
    def __init__(self, info: WindowInfo | None) -> None:
        self.info = info
        self.reads = 0

    def active(self) -> WindowInfo | None:
        self.reads += 1
        return self.info

    def close(self) -> None:
        pass


class StillDesktop:
    """A watch backend with a fixed pointer, for guards whose switch must not trip."""

    def __init__(self) -> None:
        self.pointer_at = (960, 540)

    def bounds(self) -> Rect:
        return Rect(0, 0, 1920, 1080)

    def pointer(self) -> tuple[int, int]:
        return self.pointer_at

    def motions(self) -> list[tuple[int, int]] | None:
        return None

    def arm_hotkey(self, combo: str) -> None:
        pass

    def wait(self, timeout: float) -> bool:
        time.sleep(timeout)
        return False

    def close(self) -> None:
        pass


def guard(policy: dict[str, Any] | None = None, **kwargs: Any) -> SafetyGuard:
    settings = PolicySettings(**(policy or {}))
    kwargs.setdefault("window_reader", None)
    kwargs.setdefault("watch_backend", StillDesktop)
    return SafetyGuard.from_settings(settings, SafetySettings(), **kwargs)


# ------------------------------------------------------------------- action dicts


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ({"kind": "click", "x": 1, "y": 2, "button": "left", "count": 1, "label": "OK"}, ("click", (), None, True)),
        ({"kind": "click", "x": 1, "y": 2, "button": "left", "count": 1, "hold": "ctrl"}, ("click", ("ctrl",), None, True)),
        (Click((1, 2), hold="ctrl"), ("click", ("ctrl",), None, True)),
        (Click(None, "right"), ("click", (), None, True)),
        (TypeText("hi"), ("type", (), "hi", False)),
        (KeyPress("ctrl+shift+t"), ("key", ("ctrl+shift+t",), None, False)),
        (Hold("shift", 1.0), ("hold", ("shift",), None, False)),
        (Scroll(None, dy=1), ("scroll", (), None, True)),
        (Drag((1, 2), (3, 4)), ("drag", (), None, True)),
        (MoveMouse((1, 2)), ("move", (), None, True)),
        ({"kind": "type", "text": "hi"}, ("type", (), "hi", False)),
        ({"kind": "key", "key": "ctrl+shift+t"}, ("key", ("ctrl+shift+t",), None, False)),
        ({"kind": "hold", "key": "shift", "seconds": 1}, ("hold", ("shift",), None, False)),
        ({"kind": "scroll", "dy": 1, "dx": 0, "at": "pointer"}, ("scroll", (), None, True)),
        ({"kind": "drag", "start": [1, 2], "end": [3, 4]}, ("drag", (), None, True)),
        ({"kind": "teleport"}, ("teleport", (), None, True)),
    ],
)
def test_actions_of_the_tool_layer(action: Action | dict[str, Any], expected: tuple[Any, ...]) -> None:
    request = action_request(action)
    assert request is not None
    assert (request.tool, request.keys, request.text, request.pointer) == expected


def test_observation_only_actions_are_not_checked() -> None:
    assert action_request({"kind": "zoom"}) is None
    assert action_request(Zoom(Box(1, 2, 3, 4))) is None and action_request(Wait(1.0)) is None
    assert guard().decide({"kind": "wait"}).allowed


def test_check_action_raises_policy_denied_with_the_payload() -> None:
    g = guard()
    g.check_action({"kind": "key", "key": "ctrl+c"})
    with pytest.raises(PolicyDenied) as info:
        g.check_action({"kind": "key", "key": "win+r"})
    err = info.value
    assert isinstance(err, ActionDeniedError) and err.details["rule"] == "keys.deny:win+r"
    assert err.payload["ok"] is False and err.payload["error"]["type"] == "policy_denied"
    assert err.payload["error"]["message"].startswith("key was refused by the safety policy")
    record = g.record()
    assert record["decisions"] == {"checked": 2, "allowed": 1, "denied": 1, "confirmed": 0, "would_deny": 0}
    assert record["denied"][0]["rule"] == "keys.deny:win+r"
    json.dumps(record)


def _confirming_guard(answer: str = "yes") -> tuple[SafetyGuard, Any, Any]:
    import threading

    from deskpilot.safety import KillSwitch, Policy

    asked, release = threading.Event(), threading.Event()

    def prompt(question: str) -> str:
        asked.set()
        release.wait(10)
        return answer

    g = SafetyGuard(Policy.from_config({"confirm_keys": ["ctrl+s"]}, prompt=prompt), killswitch=KillSwitch())
    return g, asked, release


def test_a_confirm_question_waits_off_the_event_loop() -> None:
    import asyncio

    g, asked, release = _confirming_guard("yes")
    ticks = []

    async def main() -> None:
        check = asyncio.ensure_future(g.check_action_async({"kind": "key", "key": "ctrl+s"}))
        while not asked.is_set():
            await asyncio.sleep(0.005)
        for _ in range(5):  # the loop runs on while nobody has answered
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)
        assert not check.done()
        release.set()
        await asyncio.wait_for(check, 5)

    asyncio.run(main())
    assert len(ticks) == 5
    assert g.counts["confirmed"] == 1 and g.counts["allowed"] == 1


def test_a_cancelled_confirm_question_is_withdrawn_and_denied() -> None:
    import asyncio

    g, asked, release = _confirming_guard("yes")

    async def main() -> None:
        check = asyncio.ensure_future(g.check_action_async({"kind": "key", "key": "ctrl+s"}))
        while not asked.is_set():
            await asyncio.sleep(0.005)
        check.cancel()  # the loop's stop cancels the mode
        with pytest.raises(asyncio.CancelledError):
            await check

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 5
    release.set()
    assert g.counts == {"checked": 1, "allowed": 0, "denied": 1, "confirmed": 0, "would_deny": 0}
    (entry,) = g.record()["denied"]
    assert entry["rule"] == "keys.confirm:ctrl+s" and "the run stopped before anyone confirmed" in entry["reason"]


def test_a_yes_after_the_kill_switch_tripped_does_not_count() -> None:
    import asyncio

    g, asked, release = _confirming_guard("yes")
    assert g.killswitch is not None

    async def main() -> None:
        check = asyncio.ensure_future(g.check_action_async({"kind": "key", "key": "ctrl+s"}))
        while not asked.is_set():
            await asyncio.sleep(0.005)
        assert g.killswitch is not None
        g.killswitch.trip("stop", source="hotkey")
        release.set()
        with pytest.raises(PolicyDenied, match=r"the run (is stopping|stopped before anyone confirmed)"):
            await asyncio.wait_for(check, 5)

    asyncio.run(main())
    assert g.counts["denied"] == 1 and g.counts["confirmed"] == 0


def test_a_kill_switch_trip_withdraws_a_blocking_terminal_question(monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers of the blocking check (stateless actions, team recovery) still get their
    terminal question withdrawn by a trip: the watcher thread sets its abort flag."""
    import threading

    import deskpilot.safety._confirm as confirm
    from deskpilot.safety import KillSwitch, Policy

    def waiting_prompt(question: str, *, timeout: float = 60.0, abort: threading.Event | None = None,
                       **_: Any) -> str:
        assert abort is not None
        abort.wait(20)
        return "yes"

    monkeypatch.setattr(confirm, "terminal_prompt", waiting_prompt)
    switch = KillSwitch()
    g = SafetyGuard(Policy.from_config({"confirm_keys": ["ctrl+s"]}), killswitch=switch)
    threading.Timer(0.1, switch.trip, args=("stop", "hotkey")).start()
    started = time.monotonic()
    decision = g.decide({"kind": "key", "key": "ctrl+s"})
    assert time.monotonic() - started < 5
    assert not decision.allowed and "the run stopped before anyone confirmed" in decision.reason
    assert g._questions == set()


def test_the_kill_hotkey_cannot_be_pressed_by_the_model() -> None:
    g = guard({"allow_keys": ("ctrl+alt+q",)})
    with pytest.raises(PolicyDenied, match="kill-switch hotkey"):
        g.check_action({"kind": "key", "key": "ctrl+alt+q"})


def test_the_whole_text_is_checked_before_chunking() -> None:
    with pytest.raises(PolicyDenied) as info:
        guard().check_action({"kind": "type", "text": "x" * 30 + " sk-" + "a" * 30})
    assert "a" * 30 not in str(info.value.payload)


def test_window_rules_read_the_window_only_when_needed() -> None:
    reader = FakeReader(WindowInfo("Passwords - KeePassXC", "KeePassXC"))
    g = SafetyGuard.from_settings(PolicySettings(), window_reader=reader, watch_backend=StillDesktop)
    with pytest.raises(PolicyDenied, match="KeePassXC"):
        g.check_action({"kind": "click", "x": 5, "y": 5})
    assert reader.reads == 1
    g.check_action({"kind": "zoom"})
    assert reader.reads == 1
    off = SafetyGuard.from_settings(PolicySettings(mode="off"), window_reader=reader, watch_backend=StillDesktop)
    off.check_action({"kind": "click", "x": 5, "y": 5})
    assert reader.reads == 1  # mode off: no window reads at all


# ------------------------------------------------------------------- guarded hands


def test_guarded_hands_announce_targets_and_refuse_input_after_a_trip() -> None:
    desk = SimulatedDesktop()
    g = guard()
    hands = g.wrap_hands(desk)
    assert g.killswitch is not None
    hands.move(0, 0)
    assert g.killswitch._agent_pointer == (0, 0)
    hands.drag((10, 10), (1919, 1079))
    assert g.killswitch._agent_pointer == (1919, 1079)
    hands.click(100.4, 200.6)
    assert g.killswitch._agent_pointer == (100, 201)
    g.killswitch.trip("user stop", source="hotkey")
    for call in (lambda: hands.key("a"), lambda: hands.type_text("x"), lambda: hands.click(1, 2),
                 lambda: hands.move(3, 4), lambda: hands.scroll(1, 1, dy=1)):
        with pytest.raises(RunInterrupted, match="user stop"):
            call()
    hands.mouse_up("left")
    hands.release_all()  # releasing always works
    assert desk.events[-1]["action"] == "release_all"
    assert hands.text == desk.text  # other attributes pass through
    with pytest.raises(PolicyDenied, match="stopping"):
        g.check_action({"kind": "key", "key": "a"})


def test_a_drag_from_a_corner_is_the_agents_own_move() -> None:
    """The watcher sees the pointer at the drag's start (a corner) while the drag presses
    there: that is the agent, not the fail-safe gesture. The user's move there later trips."""

    class Dragger(SimulatedDesktop):
        def drag(self, start: Any, end: Any = None, *, duration: float = 0.3, steps: int = 20) -> None:
            self.pointer = (int(start[0]), int(start[1]))
            time.sleep(0.1)  # several polls at the start corner
            super().drag(start, end, duration=duration, steps=steps)

    desk = Dragger()

    class Watch(StillDesktop):
        def pointer(self) -> tuple[int, int]:
            return desk.pointer

    settings = SafetySettings(poll_interval=0.01, hotkeys=())
    g = SafetyGuard.from_settings(PolicySettings(), settings, window_reader=None, watch_backend=Watch)
    hands = g.wrap_hands(desk)
    g.start()
    try:
        hands.drag((0, 0), (500, 500))
        time.sleep(0.05)
        assert g.killswitch is not None and not g.killswitch.tripped
        desk.pointer = (1919, 1079)  # now the user pushes it into a corner
        assert g.killswitch.wait_blocking(2.0) is not None
        assert g.trip is not None and g.trip.source == "corner"
    finally:
        g.close()


# ------------------------------------------------------------------- config sections


def test_sections_load_from_toml_env_and_flags(tmp_path: Path) -> None:
    path = tmp_path / "deskpilot.toml"
    path.write_text(
        '[policy]\nmode = "audit"\nallow_keys = ["alt+f4"]\ndeny_windows = ["*Terminal*"]\n'
        '[safety]\nhotkeys = ["pause"]\ncorner_margin = 5\n'
    )
    cfg = load_config(path=path, env={"AGENT_DENY_KEYS": "ctrl+w, ctrl+q"}, flags={"safety.mask_typed_text": "true"})
    policy = cfg.section(PolicySettings)
    safety = cfg.section(SafetySettings)
    assert policy.mode == "audit" and policy.allow_keys == ("alt+f4",) and policy.deny_keys == ("ctrl+w", "ctrl+q")
    assert safety.hotkeys == ("pause",) and safety.corner_margin == 5 and safety.mask_typed_text is True
    built = policy.build()
    assert built.mode == "audit" and built.keys_verdict("ctrl+w")[0] == "deny"


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[policy]\ndeny_keys = ["ctrl+nosuch"]\n', "policy.deny_keys"),
        ('[policy]\nmode = "loose"\n', "policy"),
        ('[safety]\nhotkeys = ["ctrl+alt"]\n', "hotkey needs exactly one"),
        ('[safety]\ncorner_margin = -1\n', "minimum"),
        ('[policy]\ndeny_text = ["("]\n', "invalid regular expression"),
    ],
)
def test_bad_sections_are_config_errors(tmp_path: Path, toml: str, fragment: str) -> None:
    path = tmp_path / "deskpilot.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=r"policy|safety|hotkey") as info:
        load_config(path=path, env={})
    assert fragment in str(info.value)


# ------------------------------------------------------------------- the real loop under the guard

GUARDS: dict[str, SafetyGuard] = {}


def _register_guarded_mode() -> None:
    single = get_mode("single")

    class Guarded:
        def __init__(self, config: Any) -> None:
            self.inner = single.factory(config)
            self.guard = GUARDS["current"]

        async def run(self, session: Any) -> Any:
            return await run_guarded(self.inner, session, self.guard)

    register_mode(ModeSpec("guarded-test", "single mode under a SafetyGuard (tests)", Guarded))


_register_guarded_mode()


def run_loop(tmp_path: Path, policy: Any, g: SafetyGuard, desk: SimulatedDesktop | None = None,
             flags: dict[str, Any] | None = None) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = desk or SimulatedDesktop()
    GUARDS["current"] = g
    with ModelServer(policy) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"),
                   "agent.mode": "guarded-test", **(flags or {})},
            env={}, search_default=False,
        )
        result = run_agent(cfg, "do it", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    return result, srv, desk


def tool_payloads(request: Any) -> list[dict[str, Any]]:
    return [orjson.loads(m["content"]) for m in request.messages if m.get("role") == "tool"]


def test_denied_actions_reach_the_model_as_tool_errors_and_never_the_desktop(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("press_key", {"key": "Win+R"})]),
        Reply(tool_calls=[("type_text", {"text": "password=hunter2"})]),
        Reply(tool_calls=[("press_key", {"key": "tab"})]),
        "Done.",
    ]
    g = guard()
    result, srv, desk = run_loop(tmp_path, ScriptedPolicy(script), g)
    assert result.outcome == "answered" and srv.problems == []
    payloads = tool_payloads(srv.requests[-1])
    assert [p["ok"] for p in payloads] == [False, False, True]
    for p in payloads[:2]:
        assert p["error"]["type"] == "policy_denied"
        assert "safety policy" in p["error"]["message"] or "Run dialog" in p["error"]["message"] \
            or "password" in p["error"]["message"]
    assert "hunter2" not in json.dumps(payloads)
    assert [e["action"] for e in desk.events if e["action"] in ("key", "type")] == ["key"]
    assert [e["key"] for e in desk.events if e["action"] == "key"] == ["tab"]
    assert g.counts["denied"] == 2
    assert validate_run_dir(result.run_dir) == []


def test_the_pixel_task_still_succeeds_under_the_default_guard(tmp_path: Path) -> None:
    policy = PixelPolicy(TARGET_RGB, text="Hello ✓", steps=("click", "type", "key", "done"))
    g = guard()
    result, srv, desk = run_loop(tmp_path, policy, g)
    assert result.outcome == "answered" and srv.problems == []
    assert desk.submitted == ["Hello ✓"]
    assert g.counts["denied"] == 0 and g.counts["checked"] == 3
    assert g.killswitch is not None and not g.killswitch.running  # disarmed at the end


def test_a_kill_switch_trip_stops_the_run_within_one_turn(tmp_path: Path) -> None:
    still = StillDesktop()
    g = guard(watch_backend=lambda: still)
    # A model that keeps pressing tab forever; the user slams the pointer into a corner.
    policy = ScriptedPolicy([Reply(tool_calls=[("press_key", {"key": "tab"})], delay=0.05)], on_exhausted="repeat")

    class Desk(SimulatedDesktop):
        def key(self, combo: str) -> None:
            super().key(combo)
            if sum(e["action"] == "key" for e in self.events) == 3:
                still.pointer_at = (0, 1079)

    desk = Desk()
    result, _, _ = run_loop(tmp_path, policy, g, desk=desk, flags={"agent.max_steps": 200})
    keys = [e for e in desk.events if e["action"] == "key"]
    assert 3 <= len(keys) <= 5  # stopped within about one turn of the trip
    assert desk.events[-1]["action"] == "release_all"
    assert result.outcome in ("interrupted", "error")
    assert "fail-safe" in (result.error or "")
    assert g.trip is not None and g.trip.source == "corner"
    assert validate_run_dir(result.run_dir) == []
    turns = list(iter_turns(result.run_dir))
    assert turns and load_summary(result.run_dir)["outcome"] == result.outcome
