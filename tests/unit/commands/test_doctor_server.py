"""``deskpilot doctor``'s server checks (profile, context) against the real local test server."""

from __future__ import annotations

import asyncio
from typing import Any

from deskpilot.agent import load_config
from deskpilot.commands.doctor import OLLAMA_DEFAULT_CTX, _model_checks, request_tokens
from deskpilot.testing import ModelServer, Reply, ScriptedPolicy


def checks(flags: dict[str, Any]) -> dict[str, Any]:
    policy = ScriptedPolicy([Reply(tool_calls=[("report_color", {"color": "red"})])])
    with ModelServer(policy, model="qwen2.5vl:7b") as server:
        config = load_config(
            flags={"model.endpoint": server.endpoint, "model.model": "qwen2.5vl:7b", **flags},
            env={},
            search_default=False,
        )
        found = asyncio.run(_model_checks(config, probe="red"))
    return {c.name: c for c in found}


def test_ollama_profile_warns_about_the_default_context_with_the_fix() -> None:
    found = checks({"model.server": "ollama"})
    assert found["server"].status == "PASS" and "ollama" in found["server"].detail
    context = found["context"]
    assert context.status == "WARN" and str(OLLAMA_DEFAULT_CTX) in context.detail
    assert "OLLAMA_CONTEXT_LENGTH" in context.detail and "num_ctx" in context.detail
    # the probes still ran: images and tools
    assert found["images"].status == "PASS" and found["tools"].status == "PASS"


def test_small_requests_fit_ollamas_default() -> None:
    flags = {
        "model.server": "ollama",
        "screen.image_width": 448,
        "screen.image_height": 252,
        "history.keep_last_screenshots": 1,
        "model.max_tokens": 512,
    }
    found = checks(flags)
    assert found["context"].status == "PASS"


def test_generic_server_detected_from_the_url_and_context_unknown() -> None:
    found = checks({})
    assert found["server"].status == "PASS" and found["server"].detail.startswith("generic")
    assert found["context"].status == "SKIP"


def test_request_token_estimate() -> None:
    config = load_config(flags={}, env={}, search_default=False)
    # 1536x864 -> 55 x 31 patches of 28 px per image, two images, text, max_tokens
    assert request_tokens(config) == 55 * 31 * 2 + 1500 + 2048
