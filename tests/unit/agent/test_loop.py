"""The whole loop (single mode) on a simulated desktop, against the real local test server.

Real parts: the HTTP client, the test server, history, tools, settle, the run directory.
Simulated: the screen and the hands (tests/integration does the same on Xvfb with real
capture and XTest input).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot._errors import PlatformError
from deskpilot.agent import (
    Scenario,
    iter_turns,
    load_config,
    load_summary,
    run_agent,
    validate_run_dir,
)
from deskpilot.geometry import Box, Mapping, Rect
from deskpilot.testing import ModelServer, PixelPolicy, Reply, ScriptedPolicy, tool_call
from deskpilot.testing._desktop import TARGET_RGB, SimulatedDesktop

TEXT = "Grüße, 世界! ✓ 🚀"


def run(
    tmp_path: Path,
    policy: Any,
    *,
    flags: dict[str, Any] | None = None,
    task: Any = "do the thing",
    desk: SimulatedDesktop | None = None,
    server: dict[str, Any] | None = None,
    handle_signals: bool = False,
) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = desk or SimulatedDesktop()
    with ModelServer(policy, **(server or {})) as srv:
        cfg = load_config(
            flags={"model.endpoint": srv.endpoint, "run.runs_dir": str(tmp_path / "runs"), **(flags or {})},
            env={},
            search_default=False,
        )
        result = run_agent(cfg, task, screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=handle_signals)
    return result, srv, desk


def tool_payloads(request: Any) -> list[dict[str, Any]]:
    return [orjson.loads(m["content"]) for m in request.messages if m.get("role") == "tool"]


def check_run_dir(result: Any) -> list[dict[str, Any]]:
    assert validate_run_dir(result.run_dir) == []
    turns = list(iter_turns(result.run_dir))
    summary = load_summary(result.run_dir)
    assert summary["outcome"] == result.outcome and summary["steps"] == result.steps
    assert (result.run_dir / "run.json").is_file() and (result.run_dir / "exchange.jsonl").is_file()
    for t in turns[1:-1]:
        assert "overhead" in t["timings"], t  # every turn but the last led to another request
    return turns


@pytest.mark.parametrize("stream", [False, True])
def test_pixel_policy_clicks_types_and_submits(tmp_path: Path, stream: bool) -> None:
    policy = PixelPolicy(TARGET_RGB, text=TEXT, steps=("click", "type", "key", "done"))
    result, srv, desk = run(tmp_path, policy, flags={"model.stream": stream})
    assert result.outcome == "answered" and result.answer.startswith("Done")
    assert srv.problems == []
    assert all(r.stream is stream for r in srv.requests)
    (x, y), = desk.target_clicks
    assert desk.target.contains(x, y)
    assert desk.text == TEXT and desk.submitted == [TEXT]
    turns = check_run_dir(result)
    assert [t["turn"] for t in turns] == [0, 1, 2, 3, 4]
    click = turns[1]
    assert click["tool_call"]["name"] == "click_element" and click["result"]["changed"] is True
    assert click["mapping"]["physical_size"] == [1920, 1080] and click["mapping"]["monitor"] == 1
    assert click["action"]["x"] == x and click["observation"]["screenshot"].startswith("screen_")
    for phase in ("model", "action", "settle", "capture", "request_build"):
        assert phase in click["timings"]
    assert turns[-1]["final"] is True and turns[-1]["answer"] == result.answer
    # Streaming: each call started as soon as it was complete, before the stream ended.
    assert [t.get("action_started_early", False) for t in turns[1:4]] == [stream] * 3
    summary = result.summary
    assert summary["totals"]["tool_calls"] == 3 and summary["totals"]["tool_errors"] == 0
    assert {"p50_ms", "p95_ms"} <= set(summary["phases"]["overhead"])
    assert all((result.run_dir / s).is_file() for s in summary["screenshots"])
    log = (result.run_dir / "exchange.jsonl").read_text()
    assert "sha256:" in log and "iVBORw0KGgo" not in log  # images summarized, never dumped


def test_every_error_payload_reaches_the_model(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("click_element", {"box": [500, 500]})]),
        Reply(tool_calls=[("click_element", {"label": "x"})]),
        Reply(tool_calls=[("click_element", {"label": "x", "box": [1, 2, 3]})]),
        Reply(tool_calls=[tool_call("click_element", '{"label": "x", "box": [1,')]),
        Reply(tool_calls=[tool_call("type_text", "[1, 2]")]),
        Reply(tool_calls=[("type_text", {"text": ""})]),
        Reply(tool_calls=[("press_key", {})]),
        Reply(tool_calls=[("press_key", {"key": "ctrl+entr"})]),
        Reply(tool_calls=[("open_browser", {"url": "x"})]),
        Reply(tool_calls=[("press_key", {"key": "tab"}), ("press_key", {"key": "enter"})]),
        "Done.",
    ]
    expected = ["missing_label", "missing_box", "invalid_box", "invalid_json", "invalid_args", "empty_text",
                "missing_key", "invalid_key", "unknown_tool"]
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), flags={"agent.max_steps": 20})
    assert result.outcome == "answered" and srv.problems == []
    payloads = tool_payloads(srv.requests[-1])
    assert [p["error"]["type"] for p in payloads[: len(expected)]] == expected
    assert payloads[len(expected)]["ok"] is True  # the tab
    assert payloads[len(expected) + 1]["error"]["type"] == "too_many_tool_calls"
    assert [e["key"] for e in desk.events if e["action"] == "key"] == ["tab"]  # enter was refused, not run
    turns = check_run_dir(result)
    assert turns[10]["extra_calls"][0]["result"]["error"]["type"] == "too_many_tool_calls"
    assert turns[4]["tool_call"]["raw_arguments"] == '{"label": "x", "box": [1,'
    assert result.summary["totals"]["tool_errors"] == len(expected) + 1


def test_many_calls_option_runs_every_call(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("press_key", {"key": "tab"}), ("press_key", {"key": "enter"})]), "Done."]
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), flags={"agent.one_tool_call": False})
    assert [e["key"] for e in desk.events if e["action"] == "key"] == ["tab", "enter"]
    assert [p["ok"] for p in tool_payloads(srv.requests[-1])] == [True, True]
    assert len(list(iter_turns(result.run_dir))[1]["more_calls"]) == 1


def test_max_steps_ends_the_run(tmp_path: Path) -> None:
    policy = ScriptedPolicy([Reply(content="<think>look</think>looking", tool_calls=[("observe_screen", {})])],
                            on_exhausted="repeat")
    result, srv, _ = run(tmp_path, policy, flags={"agent.max_steps": 3})
    assert result.outcome == "max_steps" and result.steps == 3 and len(srv.requests) == 3
    assert result.answer == "looking"
    turns = check_run_dir(result)
    assert turns[-1]["ended_by"] == "max_steps"


def test_scenario_step_budget(tmp_path: Path) -> None:
    policy = ScriptedPolicy([Reply(tool_calls=[("observe_screen", {})])], on_exhausted="repeat")
    scenario = Scenario("s", "look around", max_steps=2)
    result, srv, _ = run(tmp_path, policy, task=scenario)
    assert result.outcome == "max_steps" and len(srv.requests) == 2
    assert orjson.loads((result.run_dir / "run.json").read_bytes())["scenario"]["name"] == "s"


def test_repeated_action_without_effect_is_pointed_out(tmp_path: Path) -> None:
    click = Reply(tool_calls=[("click_element", {"label": "wall", "box": [50, 50]})])
    _, srv, _ = run(tmp_path, ScriptedPolicy([click, click, click, "Done."]))
    payloads = tool_payloads(srv.requests[-1])
    assert [p["changed"] for p in payloads] == [False, False, False]
    assert "warning" not in payloads[1] and payloads[2]["no_effect_repeats"] == 3
    assert "Do something different" in payloads[2]["warning"]
    # An unchanged screen is not sent again: a short note replaces the image.
    assert [r.image_count for r in srv.requests] == [1, 1, 1, 1]
    assert "No new screenshot" in srv.requests[1].messages[-1]["content"]


def test_zoom_maps_the_next_action_exactly(tmp_path: Path) -> None:
    box = [400, 300, 600, 500]
    script = [
        Reply(tool_calls=[("zoom", {"box": box})]),
        Reply(tool_calls=[("click_element", {"label": "zoomed", "box": [500, 500]})]),
        Reply(tool_calls=[("click_element", {"label": "full", "box": [500, 500]})]),
        "Done.",
    ]
    result, srv, desk = run(tmp_path, ScriptedPolicy(script), flags={"agent.toolset": "extended"})
    full = Mapping(Rect(0, 0, 1920, 1080), 768, 432)
    region = full.norm_box_to_physical(Box(*box))
    zoomed = full.sub_mapping(Box(*box), region.width, region.height)
    clicks = [(e["x"], e["y"]) for e in desk.events if e["action"] == "click"]
    assert clicks == [zoomed.norm_to_physical(500, 500), full.norm_to_physical(500, 500)]
    zoom_image = srv.requests[1].last_image
    assert (zoom_image.width, zoom_image.height) == (region.width, region.height)  # native resolution
    turns = check_run_dir(result)
    assert turns[1]["observation"]["zoomed"] is True and turns[1]["observation"]["screenshot"].startswith("zoom_")
    assert turns[2]["mapping"]["physical_size"] == [region.width, region.height]
    assert turns[3]["mapping"]["physical_size"] == [1920, 1080]


def test_seed001_toolset(tmp_path: Path) -> None:
    policy = PixelPolicy(TARGET_RGB, text="hello", steps=("move", "click_mouse", "type", "key", "done"))
    result, srv, desk = run(tmp_path, policy, flags={"agent.toolset": "seed001"})
    assert result.outcome == "answered" and srv.problems == []
    assert srv.requests[0].tool_names == ["take_screenshot", "move_mouse", "click_mouse", "type_text", "scroll_down"]
    assert len(desk.target_clicks) == 1 and desk.text == "hello"
    # Seed 001 has no press_key: the model is told so, nothing is pressed.
    assert tool_payloads(srv.requests[-1])[-1]["error"]["type"] == "unknown_tool"
    assert desk.submitted == []


def test_seed_behaviour_without_auto_observe(tmp_path: Path) -> None:
    policy = PixelPolicy(TARGET_RGB, text="x", steps=("click", "observe", "type", "key", "done"))
    result, srv, desk = run(tmp_path, policy, flags={"agent.observe_after_action": False})
    assert result.outcome == "answered" and desk.submitted == ["x"]
    # The click returns no image; the model's observe_screen call gets one.
    assert [r.image_count for r in srv.requests] == [1, 1, 2, 2, 2]
    observe = tool_payloads(srv.requests[2])[1]
    assert observe["ok"] is True and observe["screenshot"].startswith("screen_") and observe["screen_size"] == [1920, 1080]
    assert "automatically" not in srv.requests[0].messages[0]["content"]


def test_final_answer_has_no_think(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, ScriptedPolicy(["<think>long reasoning</think>\nAll done."]))
    assert result.answer == "All done." and load_summary(result.run_dir)["answer"] == "All done."


def test_server_down_is_a_recorded_error(tmp_path: Path) -> None:
    desk = SimulatedDesktop()
    cfg = load_config(
        flags={"model.endpoint": "http://127.0.0.1:9/v1/chat/completions", "model.retries": 0,
               "run.runs_dir": str(tmp_path)},
        env={}, search_default=False,
    )
    result = run_agent(cfg, "x", screen_factory=lambda: desk, hands_factory=lambda: desk)
    assert result.outcome == "error" and "no server at http://127.0.0.1:9" in (result.error or "")
    assert validate_run_dir(result.run_dir) == []
    assert load_summary(result.run_dir)["error_details"]["endpoint"].startswith("http://127.0.0.1:9")


class SlowTyper(SimulatedDesktop):
    def __init__(self) -> None:
        super().__init__()
        self.typing = threading.Event()

    def type_text(self, text: str) -> None:
        self.typing.set()
        time.sleep(0.05)
        super().type_text(text)


def _signal_when(condition: Any, sig: int, sent: list[float]) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 20
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.005)
        sent.append(time.monotonic())
        os.kill(os.getpid(), sig)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_sigint_during_model_wait_stops_and_records(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("press_key", {"key": "tab"})]), Reply(content="late", delay=30)]
    policy = ScriptedPolicy(script)
    desk = SimulatedDesktop()
    sent: list[float] = []
    watcher = _signal_when(lambda: policy.position >= 2, signal.SIGINT, sent)
    result, _, _ = run(tmp_path, policy, desk=desk, handle_signals=True)
    stopped = time.monotonic()
    watcher.join()
    assert result.outcome == "interrupted" and "SIGINT" in (result.error or "")
    assert stopped - sent[0] < 3.0  # stops promptly (the 30 s model answer is not awaited)
    assert desk.events[-1]["action"] == "release_all"
    turns = check_run_dir(result)
    assert turns[-1]["ended_by"] == "interrupted"


def test_sigterm_while_typing_stops_between_chunks(tmp_path: Path) -> None:
    desk = SlowTyper()
    desk.focused = True
    text = "x" * 400  # 25 chunks of 16 at 50 ms each: 1.25 s if not stopped
    sent: list[float] = []
    watcher = _signal_when(desk.typing.is_set, signal.SIGTERM, sent)
    result, _, _ = run(tmp_path, ScriptedPolicy([Reply(tool_calls=[("type_text", {"text": text})])]),
                       desk=desk, handle_signals=True)
    watcher.join()
    assert result.outcome == "interrupted" and "SIGTERM" in (result.error or "")
    assert 0 < len(desk.text) < len(text)
    assert desk.events[-1]["action"] == "release_all"
    check_run_dir(result)


def test_signal_during_setup_still_writes_the_record(tmp_path: Path) -> None:
    desk = SimulatedDesktop()

    def slow_screen() -> SimulatedDesktop:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C while the capture backend opens
        time.sleep(0.2)
        return desk

    cfg = load_config(flags={"run.runs_dir": str(tmp_path)}, env={}, search_default=False)
    result = run_agent(cfg, "x", screen_factory=slow_screen, hands_factory=lambda: desk)
    assert result.outcome == "interrupted" and "before the first request" in (result.error or "")
    assert load_summary(result.run_dir)["outcome"] == "interrupted"
    assert desk.events[-1]["action"] == "release_all"


class _ClosingHands(SimulatedDesktop):
    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1
        self._event(action="close")


def _input_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("deskpilot-input")]


@pytest.mark.parametrize("error", [PlatformError("the display went away", call="grab"), RuntimeError("a bug")])
def test_a_failing_first_grab_still_releases_and_closes_the_hands(tmp_path: Path, error: Exception) -> None:
    """Setup made the hands and the input thread, then the first grab failed: no ToolContext
    owns them yet, and they are released, closed and shut down all the same."""
    hands = _ClosingHands()

    class BrokenScreen(SimulatedDesktop):
        def grab(self) -> Any:
            raise error

    screen = BrokenScreen()
    before = set(_input_threads())
    cfg = load_config(flags={"run.runs_dir": str(tmp_path), "model.endpoint": "http://127.0.0.1:9/v1"},
                      env={}, search_default=False)
    if isinstance(error, PlatformError):
        result = run_agent(cfg, "x", screen_factory=lambda: screen, hands_factory=lambda: hands)
        assert result.outcome == "error" and "the display went away" in (result.error or "")
        assert load_summary(result.run_dir)["outcome"] == "error"
    else:
        with pytest.raises(RuntimeError, match="a bug"):
            run_agent(cfg, "x", screen_factory=lambda: screen, hands_factory=lambda: hands)
    assert [e["action"] for e in hands.events] == ["release_all", "close"]
    assert hands.closed == 1
    assert set(_input_threads()) - before == set()  # the input thread was shut down


def test_prefill_per_turn_in_the_records_and_the_summary(tmp_path: Path) -> None:
    # The screen changes every turn (typing), so every turn sends an image.
    script = [Reply(tool_calls=[("click_element", {"label": "field", "box": [500, 583]})])]
    script += [Reply(tool_calls=[("type_text", {"text": str(i)})]) for i in range(7)] + ["Done."]
    result, _, _ = run(tmp_path, ScriptedPolicy(script), flags={
        "model.model": "qwen3-vl-8b-instruct", "history.keep_last_screenshots": 2})  # default prune_chunk (3)
    assert result.outcome == "answered"
    turns = check_run_dir(result)
    prefills = [t["request"]["prefill"] for t in turns if "request" in t]
    assert len(prefills) == result.steps
    assert prefills[0]["reused_messages"] == 0
    # The simulated desktop's 768x432 images: Qwen3-VL resizes to 768x448, 24 x 14 tokens.
    assert all(p["image_tokens"] == p["images"] * 24 * 14 for p in prefills)
    assert [p["images"] for p in prefills[1:]] == [1, 1, 1, 2, 1, 1, 2, 1]  # one edit every 3 turns
    summary = result.summary["prefill"]
    assert summary["requests"] == result.steps and summary["max_images_in_context"] == 4
    assert summary["images_per_turn"] == round(10 / 8, 3) and summary["image_tokens_per_turn"] == round(10 * 336 / 8, 1)


def test_streamed_call_runs_before_the_trailing_text_arrives(tmp_path: Path) -> None:
    """A server that streams a tool call and then more text: the action runs while the
    text is still to come. The server sends the trailing text only once the simulated
    desktop has received the click (an ordering, not a timing): acting at the end of
    the reply would leave it waiting until its 10 s guard."""
    import asyncio
    import threading

    clicked = threading.Event()
    sent_after_click: list[bool] = []

    class Desk(SimulatedDesktop):
        def click(self, *a: Any, **k: Any) -> None:
            clicked.set()
            super().click(*a, **k)

    def sse(writer: asyncio.StreamWriter, delta: dict[str, Any], finish: str | None = None) -> None:
        data = b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                requests += 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                if requests == 1:
                    sse(writer, {"role": "assistant", "content": ""})
                    sse(writer, {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
                        "name": "click_element", "arguments": '{"label": "target", "box": [500, 412]}'}}]})
                    await writer.drain()
                    sent_after_click.append(await asyncio.to_thread(clicked.wait, 10.0))
                    sse(writer, {"content": " I clicked the target and will check the result."}, None)
                    sse(writer, {}, "tool_calls")
                else:
                    sse(writer, {"role": "assistant", "content": "Done."}, "stop")
                done = b"data: [DONE]\n\n"
                writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        desk = Desk()
        cfg = load_config(flags={"model.endpoint": f"http://127.0.0.1:{port}/v1/chat/completions",
                                 "model.stream": True, "run.runs_dir": str(tmp_path / "runs")},
                          env={}, search_default=False)
        result = run_agent(cfg, "click", screen_factory=lambda: desk, hands_factory=lambda: desk,
                           handle_signals=False)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.close()
    assert result.outcome == "answered", result.error
    assert sent_after_click == [True]  # the click came before the trailing text was sent
    turns = check_run_dir(result)
    assert turns[1]["action_started_early"] is True and desk.target_clicks
    assert turns[1]["model"]["content"].strip().startswith("I clicked the target")


def test_settle_signal_is_polling_without_an_x_server_and_damage_on_demand_is_an_error(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("click_element", {"label": "t", "box": [500, 412]})]), "Done."]
    result, _, _ = run(tmp_path, ScriptedPolicy(script))
    assert result.outcome == "answered" and result.summary["settle_signal"] == "poll"
    turns = check_run_dir(result)
    assert "damage" not in turns[1]["settle"]  # settled by polling probes
    result, _, _ = run(tmp_path, ScriptedPolicy(list(script)), flags={"agent.settle_signal": "damage"})
    assert result.outcome == "error" and "settle_signal = damage needs an X11 display" in (result.error or "")


class LateDesktop(SimulatedDesktop):
    """A desktop whose target turns green ``late_s`` after the click, not during it (an app
    that draws its reaction a few frames later)."""

    def __init__(self, late_s: float) -> None:
        super().__init__()
        self.late_s = late_s
        self.timers: list[threading.Timer] = []

    def click(self, x: float | None = None, y: float | None = None, button: Any = "left", count: int = 1) -> None:
        if x is not None and y is not None:
            self.pointer = (int(x), int(y))
        if self.target.contains(*self.pointer):
            timer = threading.Timer(self.late_s, super().click, kwargs={"button": button, "count": count})
            self.timers.append(timer)
            timer.start()
        else:
            super().click(button=button, count=count)


def test_the_settle_waits_for_a_late_reaction_and_a_pointer_move_is_no_reaction(tmp_path: Path) -> None:
    from deskpilot.testing._desktop import CLICKED_RGB

    desk = LateDesktop(0.08)
    t = desk.target
    on_target = [(t.left + t.width // 2) * 1000 // 1920, (t.top + t.height // 2) * 1000 // 1080]
    script = [
        Reply(tool_calls=[("click_element", {"label": "TARGET", "box": on_target})]),
        Reply(tool_calls=[("type_text", {"text": "abc"})]),  # drawn at once, during the action
        # The background: the first click takes the focus from the field (a change), the second
        # only moves the pointer.
        Reply(tool_calls=[("click_element", {"label": "background", "box": [50, 50]})]),
        Reply(tool_calls=[("click_element", {"label": "nothing", "box": [60, 60]})]),
        "Done.",
    ]
    result, _, _ = run(tmp_path, ScriptedPolicy(script), desk=desk)
    for timer in desk.timers:
        timer.join()
    assert result.outcome == "answered", result.error
    turns = check_run_dir(result)
    late, typed, nothing = turns[1], turns[2], turns[4]
    # The reaction came 80 ms after the click: waited for, and the image shows it.
    assert late["result"]["changed"] is True
    assert late["settle"]["ended"] == "quiet" and late["settle"]["first_reaction_ms"] >= 70
    from PIL import Image

    with Image.open(result.run_dir / late["observation"]["screenshot"]) as img:
        x, y = (t.left + 10) * img.width // 1920, (t.top + 10) * img.height // 1080
        assert img.convert("RGB").getpixel((x, y)) == CLICKED_RGB
    # The typing was on screen at the first look, but this app's frames came 80 ms after
    # its input: the settle gave the last character that long (and a quiet interval).
    assert typed["settle"]["first_reaction_ms"] == 0 and typed["result"]["changed"] is True
    assert typed["settle"]["waited_ms"] >= late["settle"]["first_reaction_ms"] + typed["settle"]["quiet_ms"]
    # The pointer moved, nothing else: no reaction within the bound, reported unchanged.
    assert nothing["settle"]["ended"] == "no_reaction" and nothing["settle"]["waited_ms"] >= 300
    assert nothing["result"]["changed"] is False and nothing["result"]["pointer_moved_only"] is True
