"""The replay corpus (tests/fixtures/servers): byte-exact server answers through the agent.

Real parts: the local test server (replaying each recorded answer byte for byte with
``Fault.raw``), the HTTP client, the loop of each mode, history, tools, the run
directory. Simulated: the screen and the hands. Each test names the quirk and the
outcome a user gets; the issue note's table (server/quirk -> outcome) comes from these.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from deskpilot.agent import load_config, run_agent
from deskpilot.agent.client._chat import ChatClient, classify_http_error
from deskpilot.agent.modes._registry import discover_modes
from deskpilot.agent.modes.team import VARIANTS
from deskpilot.commands.run import _EXIT_CODES
from deskpilot.errors import ModelHTTPError, ModelStreamError
from deskpilot.testing import Fault, ModelServer, Reply, ScriptedPolicy
from deskpilot.testing._desktop import SimulatedDesktop

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "servers"
TARGET = [500, 412]  # the simulated desktop's target, 0..1000 of the screen


def answer(name: str) -> bytes:
    """The recorded HTTP answer of ``name`` (comment lines dropped)."""
    raw = (CORPUS / f"{name}.http").read_bytes()
    lines = raw.split(b"\n")
    while lines and lines[0].startswith(b"#"):
        lines.pop(0)
    return b"\n".join(lines)


def raw(name: str) -> Fault:
    return Fault.raw(answer(name))


def run(
    tmp_path: Path,
    script: list[Any],
    *,
    flags: dict[str, Any] | None = None,
    task: str = "click the target",
) -> tuple[Any, ModelServer, SimulatedDesktop]:
    discover_modes()
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(script)) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.endpoint,
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "model.retries": 2,
                "agent.max_steps": 6,
                **(flags or {}),
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg, task, screen_factory=lambda: desk, hands_factory=lambda: desk, handle_signals=False
        )
    return result, srv, desk


def click_reply() -> Reply:
    return Reply(tool_calls=[("click_element", {"label": "target", "box": TARGET})])


def test_every_fixture_cites_its_source_and_parses() -> None:
    files = sorted(CORPUS.glob("*.http"))
    assert len(files) >= 15
    for path in files:
        text = path.read_bytes()
        assert text.startswith(b"# source: "), path.name
        assert b"# quirk: " in text, path.name
        fault = Fault.raw(answer(path.stem))
        assert 200 <= fault.status < 600


# -- single mode: outcomes that tell the truth ---------------------------------------------------------


def test_thinking_model_out_of_tokens_ends_truncated(tmp_path: Path) -> None:
    result, srv, desk = run(tmp_path, [raw("lmstudio_thinking_length")])
    assert result.outcome == "truncated" and _EXIT_CODES[result.outcome] == 4
    assert result.summary["finish_reason"] == "length"
    assert len(srv.requests) == 1 and not desk.target_clicks


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "fixture",
    [
        "lmstudio_toolcall_in_reasoning",
        "lmstudio_qwen35_xml_content",
        "llamacpp_stream_toolcall",
        "ollama_object_args",
    ],
)
def test_tool_calls_in_every_server_form_are_acted_on(
    tmp_path: Path, fixture: str, stream: bool
) -> None:
    result, srv, desk = run(
        tmp_path, [raw(fixture), "Done: the target is clicked."], flags={"model.stream": stream}
    )
    assert result.outcome == "answered", result.error
    assert len(desk.target_clicks) == 1
    # The call went back into the history as a proper tool call with its result.
    second = srv.requests[1].messages
    assistant = [m for m in second if m.get("role") == "assistant"][-1]
    assert assistant["tool_calls"][0]["function"]["name"] == "click_element"
    assert orjson.loads(assistant["tool_calls"][0]["function"]["arguments"])["box"] == TARGET
    assert [m for m in second if m.get("role") == "tool"]


def test_llamacpp_error_field_ends_server_error_without_retry(tmp_path: Path) -> None:
    result, srv, desk = run(tmp_path, [raw("llamacpp_error_field"), "Done."])
    assert result.outcome == "server_error" and _EXIT_CODES[result.outcome] == 6
    assert "Failed to parse input at pos 13" in (result.error or "")
    assert "ModelStreamError" in (result.error or "")
    assert len(srv.requests) == 1 and not desk.target_clicks


def test_stream_cut_on_close_is_retried_then_server_error(tmp_path: Path) -> None:
    cut = raw("vllm_cut_stream")
    result, srv, _ = run(tmp_path, [cut, cut, cut, "Done."])
    assert result.outcome == "server_error"
    assert "neither a finish_reason nor data: [DONE]" in (result.error or "")
    assert len(srv.requests) == 3  # 1 + model.retries


def test_stream_cut_once_is_retried_and_the_run_goes_on(tmp_path: Path) -> None:
    result, srv, _ = run(tmp_path, [raw("vllm_cut_stream"), "Done: all good."])
    assert result.outcome == "answered" and result.answer == "Done: all good."
    assert len(srv.requests) == 2


def test_uitars_text_under_a_native_tool_set_runs_in_its_own_language(tmp_path: Path) -> None:
    """UI-TARS answering in its trained action text under the default (element) tool set:
    the action runs through the uitars tool set (its own coordinate mapping, the one path
    of every action), its record names that tool set, the result goes back as text (the
    reply had no tool call to answer)."""
    from deskpilot.agent import iter_turns
    from deskpilot.agent.tools._uitars import to_physical
    from deskpilot.geometry import Mapping, Rect

    result, srv, desk = run(tmp_path, [raw("vllm_uitars_action_text"), "Done."])
    assert result.outcome == "answered"
    clicks = [e for e in desk.events if e["action"] == "click"]
    assert len(clicks) == 1
    turn = list(iter_turns(result.run_dir))[1]
    assert turn["tool_call"]["name"] == "click" and turn["tool_call"]["toolset"] == "uitars"
    assert turn["text_calls"][0]["source"] == "uitars"
    image = Mapping(Rect(0, 0, *turn["mapping"]["physical_size"]), *turn["mapping"]["image_size"])
    expected = to_physical(image, [960.0, 296.0], "1.5")
    assert (turn["action"]["x"], turn["action"]["y"]) == expected == (clicks[0]["x"], clicks[0]["y"])
    second = srv.requests[1].messages
    assert not [m for m in second if m.get("role") == "tool"]
    assert "Result: click: " in str(second[-1]["content"])


def test_unreadable_action_text_gets_one_reminder_then_no_action(tmp_path: Path) -> None:
    garbled = Reply(content="Thought: click it.\nAction: click(start_box='the button')")
    result, srv, desk = run(tmp_path, [garbled, garbled, "unused"])
    assert result.outcome == "no_action" and _EXIT_CODES[result.outcome] == 5
    assert len(srv.requests) == 2 and not [e for e in desk.events if e["action"] != "release_all"]
    reminder = srv.requests[1].messages[-1]
    assert reminder["role"] == "user" and "no tool call" in str(reminder["content"])


def test_after_a_uitars_action_a_native_call_runs(tmp_path: Path) -> None:
    result, _srv, desk = run(tmp_path, [raw("vllm_uitars_action_text"), click_reply(), "Done."])
    assert result.outcome == "answered" and len(desk.target_clicks) == 1


def test_no_argument_call_is_echoed_with_an_empty_object(tmp_path: Path) -> None:
    result, srv, _ = run(
        tmp_path, [raw("vllm_noarg_toolcall_stream"), "Done."], flags={"model.stream": True}
    )
    assert result.outcome == "answered"
    assistant = [m for m in srv.requests[1].messages if m.get("role") == "assistant"][-1]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


# -- retries: permanent errors, rate limits ----------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "needle"),
    [
        ("llamacpp_jinja_500", "--jinja"),
        ("llamacpp_mmproj_500", "--mmproj"),
        ("openai_insufficient_quota", "quota"),
        ("lmstudio_no_models_loaded", "No models loaded"),
    ],
)
def test_permanent_errors_are_not_retried(tmp_path: Path, fixture: str, needle: str) -> None:
    started = time.monotonic()
    result, srv, _ = run(tmp_path, [raw(fixture)] * 4, flags={"model.retries": 3})
    assert result.outcome == "error"
    assert len(srv.requests) == 1
    assert needle in (result.error or "")
    assert (
        result.summary["error_details"]["retry"] == "permanent"
        or fixture == "lmstudio_no_models_loaded"
    )
    assert (
        time.monotonic() - started < 30
    )  # no backoff sleeps happened (a bound, not a timing check)


def test_vllm_image_limit_is_learned_and_applied_to_pruning(tmp_path: Path) -> None:
    # Turn 2 carries two screenshots (keep_last_screenshots = 2): old vLLM refuses it.
    result, srv, _desk = run(
        tmp_path,
        [click_reply(), raw("vllm_one_image_400"), "Done."],
        flags={"history.keep_last_screenshots": 2},
    )
    assert result.outcome == "answered", result.error
    assert [r.image_count for r in srv.requests] == [1, 2, 1]
    assert result.summary["server"]["max_images"] == 1
    assert "at most 1 image(s)" in result.summary["server"]["learned"][0]


def test_vllm_image_limit_hint_names_the_limit_not_a_vision_model() -> None:
    result, srv = _complete([raw("vllm_one_image_400")])
    error = str(result)
    assert isinstance(result, ModelHTTPError) and len(srv.requests) == 1
    assert "at most 1 image(s) per request" in error and "--limit-mm-per-prompt" in error
    assert "load a vision model" not in error


def _complete(script: list[Any], **kwargs: Any) -> tuple[Any, ModelServer]:
    import asyncio

    async def main(srv: ModelServer) -> Any:
        async with ChatClient(srv.endpoint, "m", backoff=0.01, **kwargs) as client:
            try:
                return await client.chat([{"role": "user", "content": "hi"}])
            except Exception as exc:  # returned for the assertions
                return exc

    with ModelServer(ScriptedPolicy(script), validate=False) as srv:
        return asyncio.run(main(srv)), srv


def test_rate_limit_waits_as_the_ratelimit_headers_say() -> None:
    result, srv = _complete([raw("openai_ratelimit_headers"), "ok"])
    assert result.content == "ok" and len(srv.requests) == 2
    # x-ratelimit-remaining-requests is 0: its reset (1.2s) is the wait, not a 10 ms backoff.
    assert result.timings.retry_wait_s == pytest.approx(1.2)


def test_retry_after_beyond_the_bound_fails_at_once() -> None:
    result, srv = _complete([raw("retry_after_day"), "ok"], max_retry_after=60.0)
    assert isinstance(result, ModelHTTPError) and result.status == 429
    assert "asks to wait 86400 s" in str(result) and "not retried" in str(result)
    assert len(srv.requests) == 1


def test_retry_wait_is_bounded_by_the_run_deadline() -> None:
    import asyncio

    async def main(srv: ModelServer) -> Any:
        async with ChatClient(srv.endpoint, "m", backoff=0.01) as client:
            client.run_deadline = time.monotonic() + 0.5  # less than the 1.2 s the server asks for
            try:
                return await client.chat([{"role": "user", "content": "hi"}])
            except Exception as exc:
                return exc

    with ModelServer(
        ScriptedPolicy([raw("openai_ratelimit_headers"), "ok"]), validate=False
    ) as srv:
        result = asyncio.run(main(srv))
    assert isinstance(result, ModelHTTPError) and "run's remaining time" in str(result)
    assert len(srv.requests) == 1


def test_classification_table() -> None:
    assert (
        classify_http_error(500, answer("llamacpp_jinja_500").split(b"\n\n", 1)[1], {}).kind
        == "permanent"
    )
    assert classify_http_error(503, b'{"error": "Model is loading"}', {}).kind == "transient"
    verdict = classify_http_error(
        429, b"{}", {"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}
    )
    assert verdict.kind == "rate_limit" and verdict.wait == 360.0
    assert classify_http_error(429, b"{}", {"retry-after-ms": "250"}).wait == 0.25


# -- stream errors in the client ---------------------------------------------------------------------


def test_error_field_is_a_stream_error_in_the_client() -> None:
    result, srv = _complete([raw("llamacpp_error_field"), "ok"])
    assert isinstance(result, ModelStreamError) and len(srv.requests) == 1
    assert result.details["status"] == 200


# -- team and stateless modes ------------------------------------------------------------------------


def _plan(variant: Any) -> Reply:
    args = (
        {"operator_instructions": "Click the target.", "rationale": "r"}
        if variant.name == "002"
        else {"instructions": "Click the target.", "reasoning": "r"}
    )
    return Reply(content="PLAN", tool_calls=[(variant.tool_name("plan"), args)])


@pytest.mark.parametrize(
    ("fixture", "outcome"),
    [
        ("lmstudio_thinking_length", "truncated"),
        ("llamacpp_error_field", "server_error"),
    ],
)
def test_team_mode_outcomes(tmp_path: Path, fixture: str, outcome: str) -> None:
    variant = VARIANTS["003"]
    result, srv, _ = run(
        tmp_path,
        [_plan(variant), raw(fixture), raw(fixture), raw(fixture)],
        flags={"agent.mode": "team", "team.variant": "003", "agent.max_steps": 8},
    )
    assert result.outcome == outcome, result.error
    assert len(srv.requests) == 2


def _stateless_flags() -> dict[str, Any]:
    return {
        "agent.mode": "stateless",
        "stateless.capture_scale_percent": 50,
        "stateless.action_delay_seconds": 0,
        "stateless.panel": "off",
        "stateless.boot_vlm_output": json.dumps(
            {
                "observation": "start",
                "bboxes": [],
                "actions": [{"name": "click", "x1": 500, "y1": 412}],
            }
        ),
    }


def test_stateless_reads_the_json_answer_from_the_reasoning(tmp_path: Path) -> None:
    done = json.dumps(
        {"observation": "Typed it, done.", "bboxes": [], "actions": [{"name": "done"}]}
    )
    result, srv, desk = run(
        tmp_path, [raw("lmstudio_stateless_json_in_reasoning"), done], flags=_stateless_flags()
    )
    assert result.outcome == "answered", result.error
    assert len(srv.requests) == 2
    assert desk.target_clicks and desk.text == "hello"  # the actions read from the reasoning ran


@pytest.mark.parametrize(
    ("fixture", "outcome"),
    [
        ("lmstudio_thinking_length", "truncated"),
        ("llamacpp_error_field", "server_error"),
    ],
)
def test_stateless_mode_outcomes(tmp_path: Path, fixture: str, outcome: str) -> None:
    result, srv, _ = run(tmp_path, [raw(fixture)] * 4, flags=_stateless_flags())
    assert result.outcome == outcome, result.error
    assert len(srv.requests) == 1


# -- server profiles -----------------------------------------------------------------------------------


def test_auto_profile_learns_the_token_field_and_temperature_from_the_400s(tmp_path: Path) -> None:
    script = [raw("openai_max_tokens_unsupported"), raw("openai_temperature_unsupported"), "Done."]
    result, srv, _ = run(
        tmp_path, script, flags={"model.model": "gpt-5-mini", "model.max_tokens": 512}
    )
    assert result.outcome == "answered", result.error
    bodies = [r.body for r in srv.requests]
    assert "max_tokens" in bodies[0] and "temperature" in bodies[0]
    assert (
        "max_completion_tokens" in bodies[1]
        and "max_tokens" not in bodies[1]
        and "temperature" in bodies[1]
    )
    assert bodies[2]["max_completion_tokens"] == 512 and "temperature" not in bodies[2]
    assert len(result.summary["server"]["learned"]) == 2


@pytest.mark.parametrize(
    ("server", "model", "field", "temperature"),
    [
        ("openai", "gpt-5-mini", "max_completion_tokens", False),
        ("openai", "o4-mini", "max_completion_tokens", False),
        ("openai", "gpt-4o", "max_completion_tokens", True),
        ("ollama", "qwen2.5vl:7b", "max_tokens", True),
        ("llamacpp", "any", "max_tokens", True),
        ("vllm", "any", "max_tokens", True),
        ("lmstudio", "qwen3-vl-8b-instruct", "max_tokens", True),
    ],
)
def test_explicit_profiles_shape_the_first_request(
    tmp_path: Path, server: str, model: str, field: str, temperature: bool
) -> None:
    result, srv, _ = run(tmp_path, ["Done."], flags={"model.server": server, "model.model": model})
    assert result.outcome == "answered", result.error
    body = srv.requests[0].body
    assert field in body and ({"max_tokens", "max_completion_tokens"} - {field}).isdisjoint(body)
    assert ("temperature" in body) is temperature


def test_auto_detection_from_the_endpoint() -> None:
    from deskpilot.agent.client._servers import detect_profile

    assert detect_profile("https://api.openai.com/v1/chat/completions") == "openai"
    assert detect_profile("http://localhost:1234/v1/chat/completions") == "lmstudio"
    assert detect_profile("http://127.0.0.1:11434/v1/chat/completions") == "ollama"
    assert detect_profile("http://127.0.0.1:11434/api/chat") == "ollama"
    assert detect_profile("http://gpu:8080/v1/chat/completions") == "llamacpp"
    assert detect_profile("http://gpu:8000/v1/chat/completions") == "vllm"
    assert detect_profile("http://gpu:9999/v1/chat/completions", owned_by="llamacpp") == "llamacpp"
    assert (
        detect_profile("http://gpu:9999/v1/chat/completions", owned_by="organization_owner")
        == "lmstudio"
    )
    assert detect_profile("http://gpu:9999/v1/chat/completions") == "generic"


# -- Ollama's native /api/chat -------------------------------------------------------------------------


def run_native(
    tmp_path: Path, script: list[Any], **flags: Any
) -> tuple[Any, ModelServer, SimulatedDesktop]:
    desk = SimulatedDesktop()
    with ModelServer(ScriptedPolicy(script), validate=False) as srv:
        cfg = load_config(
            flags={
                "model.endpoint": srv.url + "/api/chat",
                "run.runs_dir": str(tmp_path / "runs"),
                "run.quiet": True,
                "model.model": "qwen2.5vl:7b",
                "agent.max_steps": 4,
                **flags,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "click the target",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
    return result, srv, desk


def native_done() -> Fault:
    body = b'{"model":"qwen2.5vl:7b","message":{"role":"assistant","content":"Done."},"done_reason":"stop","done":true}'
    return Fault.raw(b"HTTP/1.1 200 OK\nContent-Type: application/json\n\n" + body)


@pytest.mark.parametrize(
    ("fixture", "stream"), [("ollama_native_toolcall", False), ("ollama_native_stream", True)]
)
def test_ollama_native_api_sends_num_ctx_and_acts_on_the_call(
    tmp_path: Path, fixture: str, stream: bool
) -> None:
    result, srv, desk = run_native(
        tmp_path, [raw(fixture), native_done()], **{"model.num_ctx": 32768, "model.stream": stream}
    )
    assert result.outcome == "answered", result.error
    assert len(desk.target_clicks) == 1
    first, second = srv.requests[0].body, srv.requests[1].body
    assert srv.requests[0].path == "/api/chat"
    assert first["options"]["num_ctx"] == 32768 and first["options"]["num_predict"] == 2048
    assert first["stream"] is stream and "max_tokens" not in first and "stream_options" not in first
    user = [m for m in first["messages"] if m["role"] == "user" and m.get("images")]
    assert user and isinstance(user[0]["content"], str)
    assert not user[0]["images"][0].startswith("data:")  # bare base64, as Ollama wants
    # the call went back with object arguments, and its result as a tool message with its name
    assistant = [m for m in second["messages"] if m["role"] == "assistant" and m.get("tool_calls")][
        -1
    ]
    assert assistant["tool_calls"][0]["function"]["arguments"] == {
        "box": [500, 412],
        "label": "target",
    }
    tool = [m for m in second["messages"] if m["role"] == "tool"][-1]
    assert tool["tool_name"] == "click_element"


def test_ollama_native_length_is_truncated(tmp_path: Path) -> None:
    result, _, _ = run_native(tmp_path, [raw("ollama_native_length")])
    assert result.outcome == "truncated"


def test_ollama_native_unknown_model_is_a_clear_error(tmp_path: Path) -> None:
    result, srv, _ = run_native(tmp_path, [raw("ollama_native_model_missing")] * 3)
    assert result.outcome == "error" and "try pulling it first" in (result.error or "")
    assert len(srv.requests) == 1


def test_cli_flags_reach_the_config() -> None:
    from deskpilot.cli import build_parser
    from deskpilot.commands.run import config_from_args

    args = build_parser().parse_args(
        ["run", "--server", "openai", "--toolset", "uitars-1.0", "task"]
    )
    config = config_from_args(args)
    assert config.model.server == "openai" and config.agent.toolset == "uitars-1.0"
    env_config = load_config(
        flags={}, env={"LMSTUDIO_SERVER": "vllm", "OLLAMA_NUM_CTX": "16384"}, search_default=False
    )
    assert env_config.model.server == "vllm" and env_config.model.num_ctx == 16384
