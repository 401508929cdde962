#!/usr/bin/env python
"""Server/quirk -> outcome table: the replay corpus (tests/fixtures/servers) through the agent.

    .venv/bin/python scripts/server_corpus_table.py            # this checkout
    PYTHONPATH=/tmp/old/src .venv/bin/python scripts/server_corpus_table.py --json before.json

Each scenario serves recorded server answers byte for byte from a minimal HTTP server of
its own (no deskpilot.testing), so the same script measures any deskpilot version: run it
once against an older source tree (PYTHONPATH) and once against this one for a
before/after table. The agent runs on the simulated desktop (no display needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "servers"


def fixture(name: str) -> bytes:
    lines = (CORPUS / f"{name}.http").read_bytes().split(b"\n")
    while lines and lines[0].startswith(b"#"):
        lines.pop(0)
    return b"\n".join(lines)


def completion(content: str = "", tool_calls: list[dict[str, Any]] | None = None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                }
            ],
        }
    ).encode()
    return b"HTTP/1.1 200 OK\nContent-Type: application/json\n\n" + body


DONE = completion("Done: the task is complete.")
CLICK = completion(
    tool_calls=[
        {
            "id": "c1",
            "type": "function",
            "function": {
                "name": "click_element",
                "arguments": json.dumps({"label": "target", "box": [500, 412]}),
            },
        }
    ]
)
NATIVE_DONE = (
    b"HTTP/1.1 200 OK\nContent-Type: application/json\n\n"
    b'{"model":"m","message":{"role":"assistant","content":"Done."},"done_reason":"stop","done":true}'
)
STATELESS_DONE = completion(
    json.dumps({"observation": "Done.", "bboxes": [], "actions": [{"name": "done"}]})
)
TEAM_PLAN = completion(
    "PLAN",
    [
        {
            "id": "p1",
            "type": "function",
            "function": {
                "name": "update_execution_plan",
                "arguments": json.dumps({"instructions": "Click the target.", "reasoning": "r"}),
            },
        }
    ],
)


class RawServer:
    """Serves queued raw HTTP answers to POSTs (then closes the connection) on 127.0.0.1."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, _path = lines[0].split(" ")[:2]
                length = next(
                    (
                        int(v)
                        for k, _, v in (ln.partition(":") for ln in lines[1:])
                        if k.strip().lower() == "content-length"
                    ),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                if method == "GET":
                    payload = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                        + str(len(payload)).encode()
                        + b"\r\n\r\n"
                        + payload
                    )
                    await writer.drain()
                    continue
                self.bodies.append(json.loads(body) if body else {})
                self.times.append(time.monotonic())
                raw = self.answers.pop(0) if self.answers else DONE
                cut = min(i for i in (raw.find(b"\n\n"), len(raw)) if i >= 0)
                head_out = raw[:cut].replace(b"\r\n", b"\n").split(b"\n")
                kept = [
                    h
                    for h in head_out[1:]
                    if h.split(b":")[0].strip().lower()
                    not in (b"content-length", b"transfer-encoding", b"connection")
                ]
                writer.write(
                    b"\r\n".join([head_out[0], *kept, b"Connection: close", b"", b""])
                    + raw[cut + 2 :]
                )
                await writer.drain()
                break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def scenario(answers: list[bytes], **flags: Any) -> dict[str, Any]:
    return {"answers": answers, "flags": flags}


SCENARIOS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "thinking_length": (
        "LM Studio",
        'thinking model out of max_tokens (content "", finish length)',
        scenario([fixture("lmstudio_thinking_length"), DONE]),
    ),
    "call_in_reasoning": (
        "LM Studio",
        "tool call inside reasoning_content (#2045), SSE",
        scenario([fixture("lmstudio_toolcall_in_reasoning"), DONE], **{"model.stream": True}),
    ),
    "xml_call": (
        "LM Studio",
        "Qwen3.5/3.6 XML <function=...> call in content (#2115)",
        scenario([fixture("lmstudio_qwen35_xml_content"), DONE]),
    ),
    "no_models": (
        "LM Studio",
        "400 No models loaded",
        scenario([fixture("lmstudio_no_models_loaded")] * 4),
    ),
    "error_field": (
        "llama.cpp",
        "SSE 'error:' field at HTTP 200, then [DONE] (PR #16109)",
        scenario([fixture("llamacpp_error_field"), DONE], **{"model.stream": True}),
    ),
    "stream_call": (
        "llama.cpp",
        "streamed native tool call (--jinja)",
        scenario([fixture("llamacpp_stream_toolcall"), DONE], **{"model.stream": True}),
    ),
    "jinja_500": (
        "llama.cpp",
        "500 tools param requires --jinja flag",
        scenario([fixture("llamacpp_jinja_500")] * 4),
    ),
    "mmproj_500": (
        "llama.cpp",
        "500 image input is not supported (mmproj)",
        scenario([fixture("llamacpp_mmproj_500")] * 4),
    ),
    "cut_stream": (
        "vLLM",
        "stream ends on close: no finish_reason, no [DONE] (every attempt)",
        scenario([fixture("vllm_cut_stream")] * 4, **{"model.stream": True}),
    ),
    "noarg_call": (
        "vLLM",
        "no-argument call streamed without an arguments fragment",
        scenario([fixture("vllm_noarg_toolcall_stream"), DONE], **{"model.stream": True}),
    ),
    "one_image": (
        "vLLM",
        "400 At most 1 image(s) on turn 2 (--limit-mm-per-prompt)",
        scenario(
            [CLICK, fixture("vllm_one_image_400"), DONE], **{"history.keep_last_screenshots": 2}
        ),
    ),
    "uitars_text": (
        "vLLM",
        "UI-TARS action text with the seed000 tool set",
        scenario([fixture("vllm_uitars_action_text")] * 2 + [DONE]),
    ),
    "ollama_native": (
        "Ollama",
        "native /api/chat: NDJSON stream, object arguments, num_ctx",
        scenario(
            [fixture("ollama_native_stream"), NATIVE_DONE],
            **{
                "model.stream": True,
                "model.num_ctx": 32768,
                "endpoint_path": "/api/chat",
            },
        ),
    ),
    "ollama_call": (
        "Ollama",
        "native tool call, OpenAI API",
        scenario([fixture("ollama_object_args"), DONE]),
    ),
    "quota": (
        "OpenAI",
        "429 insufficient_quota",
        scenario([fixture("openai_insufficient_quota")] * 4),
    ),
    "ratelimit": (
        "OpenAI",
        "429 with the wait only in x-ratelimit-reset-requests (1.2s)",
        scenario([fixture("openai_ratelimit_headers"), DONE]),
    ),
    "retry_after_day": (
        "gateway",
        "429 Retry-After: 86400 (run limited to 10 s)",
        scenario([fixture("retry_after_day")] * 4, **{"agent.max_seconds": 10}),
    ),
    "max_tokens_field": (
        "OpenAI",
        "gpt-5: max_tokens refused, then temperature refused",
        scenario(
            [
                fixture("openai_max_tokens_unsupported"),
                fixture("openai_temperature_unsupported"),
                DONE,
            ],
            **{"model.model": "gpt-5-mini"},
        ),
    ),
    "stateless_reasoning": (
        "LM Studio",
        "stateless mode: JSON answer in the reasoning field",
        scenario(
            [fixture("lmstudio_stateless_json_in_reasoning"), STATELESS_DONE],
            **{
                "agent.mode": "stateless",
                "stateless.panel": "off",
                "stateless.action_delay_seconds": 0,
                "stateless.boot_vlm_output": json.dumps(
                    {
                        "observation": "start",
                        "bboxes": [],
                        "actions": [{"name": "click", "x1": 500, "y1": 412}],
                    }
                ),
            },
        ),
    ),
    "team_length": (
        "LM Studio",
        "team mode: executor out of max_tokens",
        scenario(
            [TEAM_PLAN] + [fixture("lmstudio_thinking_length")] * 12,
            **{"agent.mode": "team", "team.variant": "003"},
        ),
    ),
}


def run_one(name: str) -> dict[str, Any]:
    from deskpilot.agent import load_config, run_agent
    from deskpilot.agent.modes._registry import discover_modes
    from deskpilot.testing._desktop import SimulatedDesktop

    discover_modes()
    _, _, spec = SCENARIOS[name]
    flags = dict(spec["flags"])
    path = flags.pop("endpoint_path", "/v1/chat/completions")
    if "model.num_ctx" in flags:
        try:  # an older deskpilot has no such setting: leave it out there
            load_config(
                flags={"model.num_ctx": flags["model.num_ctx"]}, env={}, search_default=False
            )
        except Exception:
            flags.pop("model.num_ctx")
    server = RawServer(spec["answers"])
    desk = SimulatedDesktop()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = load_config(
                flags={
                    "model.endpoint": f"http://127.0.0.1:{server.port}{path}",
                    "run.runs_dir": tmp,
                    "run.quiet": True,
                    "agent.max_steps": 6,
                    "model.retries": 2,
                    **flags,
                },
                env={},
                search_default=False,
            )
            result = run_agent(
                config,
                "click the target",
                screen_factory=lambda: desk,
                hands_factory=lambda: desk,
                handle_signals=False,
            )
    finally:
        server.close()
    elapsed = time.monotonic() - started
    echoed = None
    if name == "noarg_call" and len(server.bodies) > 1:
        calls = [
            m
            for m in server.bodies[1]["messages"]
            if m.get("role") == "assistant" and m.get("tool_calls")
        ]
        echoed = calls[-1]["tool_calls"][0]["function"]["arguments"] if calls else None
    gaps = [round(b - a, 2) for a, b in zip(server.times, server.times[1:], strict=False)]
    return {
        "outcome": result.outcome,
        "requests": len(server.bodies),
        "clicks": len(desk.target_clicks),
        "typed": desk.text,
        "seconds": round(elapsed, 2),
        "gaps_s": gaps,
        "echoed_arguments": echoed,
        "error": (result.error or "")[:160],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    for name in args.names or list(SCENARIOS):
        server, quirk, _ = SCENARIOS[name]
        try:
            row = run_one(name)
        except Exception as exc:  # an old version may crash on a quirk: that is a result too
            row = {"outcome": f"crash: {type(exc).__name__}", "error": str(exc)[:160]}
        out[name] = {"server": server, "quirk": quirk, **row}
        print(
            f"{server:9} {name:20} {row['outcome']:13} req={row.get('requests')} clicks={row.get('clicks')} "
            f"typed={row.get('typed')!r} gaps={row.get('gaps_s')} echoed={row.get('echoed_arguments')!r} "
            f"t={row.get('seconds')}s {row.get('error', '')[:90]}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
