"""Request building per turn, and what chunked pruning does for a server's prompt cache.

Part 1 — request body per turn (same run, same messages, same bytes):

* ``seed json``: the seeds' way — keep a list of message dicts, prune, ``json.dumps`` the
  whole payload every turn (``ensure_ascii=False`` so the output has the same content).
* ``orjson full``: the same with ``orjson.dumps`` of the whole payload every turn.
* ``History``: deskpilot's history — every message serialized once when added, images
  spliced in as bytes, the body joined from cached parts each turn.

Each turn appends an assistant message (with a ``<think>`` block and a tool call), the tool
result and a new observation with a ~1.5 MB base64 screenshot; 2 screenshots and 2 thinks are
kept. Base64 encoding is done beforehand for every variant (it is the same work everywhere).
The ``History`` body is checked byte-identical to ``orjson full``.

Part 2 — what the server must prefill, per history policy (``--policies``): a scripted
30-turn run of the real agent (loop, history, run log; the local test server; the
simulated desktop at 1536x864, the screen changing every turn so every turn sends an
image; each reply has a ``<think>`` block). llama.cpp's server, LM Studio and vLLM reuse
the longest common prefix of consecutive prompts; everything after the first changed
message is processed again, images included (the vision encoder runs once more per
image). The run summary's ``prefill`` (``deskpilot.agent.client._history.Prefill``) gives per
turn: images and their tokens (Qwen3-VL: one token per 32x32 px, 1296 per 1536x864
image), text tokens (4 bytes per token) and the most images in context. Seconds per turn
are at a stated prefill speed (``--prefill-tps``, default 1000 tokens/s, a laptop GPU
for an 8B VL model).

Part 3 — the request's round trip to a local server (``--server``): deskpilot's test server
(``deskpilot.testing.ModelServer``: asyncio ``BufferedProtocol``, validation on) against a
minimal Starlette + uvicorn app that only parses the JSON and answers, with a small (~1 KB)
and a turn-sized request (2 screenshots, ~3 MB), through one keep-alive ``ChatClient``. Plus
base64 of one screenshot: stdlib vs pybase64.

Run: ``.venv/bin/python benchmarks/bench_request.py [--turns 20] [--repeat 5] [--server]
[--policies] [--only-policies] [--policy-turns 30] [--prefill-tps 1000]``, or
``./dev bench -k request`` (parts 1 and 2).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from deskpilot.agent.client._history import History, png_data_url

IMAGE_TOKENS = 1296  # 1536x864 image, Qwen3-VL (16 px patches, 2x2 merge)

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": name,
        "description": f"{name}: " + "Detailed description of the tool for the model. " * 6,
        "parameters": {"type": "object", "properties": {
            "label": {"type": "string", "description": "Visible label of the element."},
            "box": {"type": "array", "items": {"type": "number"}, "description": "[x,y] or [x1,y1,x2,y2]"},
        }, "required": ["label", "box"]}}}
    for name in ("observe_screen", "click_element", "type_text", "press_key", "scroll_at_position")
]
SYSTEM = "You are a desktop agent. " * 120  # ~3 KB system prompt
TASK = "Open the start menu, launch Notepad and type a short note."


def fake_png(seed: int, size: int = 1_125_000) -> bytes:
    # Incompressible bytes: base64 of 1.125 MB is 1.5 MB, like a busy 1536x864 screenshot.
    rng = random.Random(seed)
    return b"\x89PNG\r\n\x1a\n" + rng.randbytes(size - 8)


def assistant(turn: int) -> dict[str, Any]:
    return {"role": "assistant",
            "content": f"<think>The button for step {turn} is at the lower left; "
                       + "I reason about it. " * 20 + f"</think>Clicking step {turn}.",
            "tool_calls": [{"id": f"call_{turn}", "type": "function", "function": {
                "name": "click_element", "arguments": orjson.dumps(
                    {"label": f"button {turn}", "box": [120 + turn, 900]}).decode()}}]}


def tool_result(turn: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{turn}", "name": "click_element",
            "content": orjson.dumps({"ok": True, "changed": True, "x": 240, "y": 970}).decode()}


def observation(url: str, turn: int) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "text", "text": f"Screenshot after step {turn}."},
        {"type": "image_url", "image_url": {"url": url}}]}


# -- the seeds' history hygiene (utils.prune_old_screenshots / prune_old_thinks) -----------
def seed_prune_screenshots(messages: list[dict[str, Any]], keep: int, labels: dict[int, str]) -> None:
    idx = [i for i, m in enumerate(messages) if isinstance(m.get("content"), list)
           and any(p.get("type") == "image_url" for p in m["content"])]
    for i in idx[: max(0, len(idx) - keep)]:
        messages[i] = {**messages[i], "content": [
            p if p.get("type") != "image_url" else {"type": "text", "text": f"[screenshot omitted: {labels[i]}]"}
            for p in messages[i]["content"]]}


def seed_prune_thinks(messages: list[dict[str, Any]], keep: int) -> None:
    from deskpilot.agent.client._toolcalls import strip_think

    idx = [i for i, m in enumerate(messages) if m["role"] == "assistant" and "think>" in (m.get("content") or "")]
    for i in idx[: max(0, len(idx) - keep)]:
        messages[i] = {**messages[i], "content": strip_think(messages[i]["content"])}


def payload(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "qwen3-vl-8b-instruct", "messages": messages, "tools": TOOLS, "tool_choice": "auto",
            "temperature": 0.6, "max_tokens": 2048}


def run_seed(urls: list[str], dumps: Callable[[dict[str, Any]], bytes]) -> tuple[list[float], list[bytes]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    labels: dict[int, str] = {}
    times, bodies = [], []
    for turn, url in enumerate(urls):
        t0 = time.perf_counter()
        if turn:
            messages.append(assistant(turn))
            seed_prune_thinks(messages, 2)
            messages.append(tool_result(turn))
        labels[len(messages)] = f"turn {turn + 1}"
        messages.append(observation(url, turn))
        seed_prune_screenshots(messages, 2, labels)
        body = dumps(payload(messages))
        times.append(time.perf_counter() - t0)
        bodies.append(body)
    return times, bodies


def run_history(url_bytes: list[bytes], *, prune_chunk: int = 1) -> tuple[list[float], list[bytes]]:
    h = History(SYSTEM, tools=TOOLS, keep_last_screenshots=2, keep_last_thinks=2, prune_chunk=prune_chunk)
    h.add_task(TASK)
    times, bodies = [], []
    for turn, url in enumerate(url_bytes):
        t0 = time.perf_counter()
        if turn:
            h.add_assistant(assistant(turn))
            h.add_tool_result(f"call_{turn}", tool_result(turn)["content"], name="click_element")
        h.add_observation(url, text=f"Screenshot after step {turn}.", label=f"turn {turn + 1}")
        body = h.build_request(model="qwen3-vl-8b-instruct", tool_choice="auto", temperature=0.6, max_tokens=2048)
        times.append(time.perf_counter() - t0)
        bodies.append(body)
    return times, bodies


#: (keep_last_screenshots, prune_chunk) pairs; (2, 1) is the seeds' keep-last-2.
POLICIES: tuple[tuple[int, int], ...] = ((2, 1), (1, 1), (3, 1), (2, 2), (2, 3), (2, 4))


def policy_run(keep: int, chunk: int, turns: int) -> dict[str, Any]:
    """One scripted run of the real agent under a history policy; its ``summary.prefill``."""
    import dataclasses
    import tempfile

    from deskpilot.agent import load_config, run_agent
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy
    from deskpilot.testing._desktop import SimulatedDesktop

    script: list[Any] = [Reply(tool_calls=[("click_element", {"label": "field", "box": [500, 583]})])]
    for turn in range(1, turns):
        script.append(Reply(content=f"<think>Step {turn}: the field shows what I typed; "
                                    + "I check it against the task. " * 8 + "</think>Typing more.",
                            tool_calls=[("type_text", {"text": f"{turn % 10}"})]))
    script.append("Done.")
    desk = SimulatedDesktop(image_size=(1536, 864))
    with tempfile.TemporaryDirectory(prefix="deskpilot-bench-prefill-") as tmp, \
            ModelServer(ScriptedPolicy(script), validate=False, keep_images=0) as server:
        cfg = load_config(
            flags={"model.endpoint": server.endpoint, "run.runs_dir": tmp, "agent.max_steps": turns + 2,
                   "screen.image_width": 1536, "screen.image_height": 864,
                   "history.prune_chunk": chunk, "run.save_screenshots": False},
            env={},
            search_default=False,
        )
        # keep set as a default would be, not as a flag: an explicit keep_last_screenshots caps
        # every request at keep (the seeds' meaning) and would hide the chunk being measured.
        cfg = dataclasses.replace(cfg, history=dataclasses.replace(cfg.history, keep_last_screenshots=keep))
        result = run_agent(cfg, "Type the digits into the field.", screen_factory=lambda: desk,
                           hands_factory=lambda: desk, handle_signals=False)
    if result.outcome != "answered":
        raise RuntimeError(f"policy run ended {result.outcome}: {result.error}")
    prefill: dict[str, Any] = result.summary["prefill"]
    if result.summary["totals"]["images_sent"] < turns:
        raise RuntimeError("the screen did not change every turn: the run would not send an image per turn")
    return prefill


def policy_table(turns: int, tps: float) -> list[dict[str, Any]]:
    rows = []
    for keep, chunk in POLICIES:
        pf = policy_run(keep, chunk, turns)
        tokens = pf["image_tokens_per_turn"] + pf["text_tokens_per_turn"]
        rows.append({"keep": keep, "chunk": chunk, "bound": keep + chunk - 1, **pf,
                     "tokens_per_turn": tokens, "seconds_per_turn": tokens / tps})
    return rows


def _uvicorn_server() -> tuple[str, Callable[[], None]]:
    """A minimal Starlette + uvicorn chat endpoint in a thread; returns (endpoint, stop)."""
    import asyncio
    import socket
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    answer = orjson.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})

    async def chat(request: Request) -> Response:
        orjson.loads(await request.body())
        return Response(answer, media_type="application/json")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
        sock.close()

    return f"http://127.0.0.1:{port}/v1/chat/completions", stop


def server_table(url_bytes: list[bytes], repeat: int) -> None:
    import asyncio
    import base64

    from deskpilot.agent.client._chat import ChatClient
    from deskpilot.agent.client._history import B64_BACKEND, b64encode
    from deskpilot.testing import ModelServer, ScriptedPolicy

    small = orjson.dumps({"model": "m", "messages": [{"role": "system", "content": SYSTEM[:800]},
                                                     {"role": "user", "content": TASK}]})
    h = History(SYSTEM, tools=TOOLS)
    h.add_task(TASK)
    # Real PNG bytes so the test server's validation passes: a corpus screenshot if present.
    corpus = os.path.join(os.path.dirname(__file__), "corpus", "05_webphoto.png")
    png = None
    if os.path.exists(corpus):
        with open(corpus, "rb") as fh:
            png = fh.read()
    for _ in range(2):
        h.add_observation(png if png is not None else url_bytes[0])
    big = h.build_request(model="m")

    async def timed(endpoint: str, body: bytes, n: int) -> float:
        async with ChatClient(endpoint, "m", max_retries=0) as client:
            for _ in range(5):
                await client.complete(body)
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                await client.complete(body)
                samples.append(time.perf_counter() - t0)
        return statistics.median(samples)

    endpoint, stop = _uvicorn_server()
    results: dict[tuple[str, str], float] = {}
    try:
        with ModelServer(ScriptedPolicy(["ok"], on_exhausted="repeat")) as server:
            for _ in range(repeat):
                for label, body, n in (("small", small, 200), ("turn", big, 30)):
                    for name, ep in (("deskpilot ModelServer", server.endpoint), ("starlette+uvicorn", endpoint)):
                        value = asyncio.run(timed(ep, body, n))
                        results[(name, label)] = min(results.get((name, label), float("inf")), value)
            problems = server.problems
    finally:
        stop()
    print(f"\nround trip through ChatClient (median, best of {repeat}); turn request = "
          f"{len(big) / 1e6:.2f} MB{'' if png else ' (fake PNGs: validation errors expected)'}:")
    print(f"{'server':<24}{'small ms':>10}{'turn ms':>10}")
    for name in ("deskpilot ModelServer", "starlette+uvicorn"):
        print(f"{name:<24}{results[(name, 'small')] * 1e3:>10.3f}{results[(name, 'turn')] * 1e3:>10.3f}")
    ours_s, ours_t = results[("deskpilot ModelServer", "small")], results[("deskpilot ModelServer", "turn")]
    print(f"{'ratio (uvicorn / ours)':<24}{results[('starlette+uvicorn', 'small')] / ours_s:>10.1f}"
          f"{results[('starlette+uvicorn', 'turn')] / ours_t:>10.1f}")
    if problems:
        print(f"  (test server validation problems: {problems[:2]})")
    raw = png if png is not None else b"x" * 1_125_000
    n = 50
    t0 = time.perf_counter()
    for _ in range(n):
        base64.b64encode(raw)
    stdlib = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        b64encode(raw)
    ours = (time.perf_counter() - t0) / n
    print(f"\nbase64 of a {len(raw) / 1e6:.2f} MB PNG: stdlib {stdlib * 1e3:.3f} ms, "
          f"{B64_BACKEND} {ours * 1e3:.3f} ms ({stdlib / ours:.0f}x)")


def minor_faults() -> int:
    """Minor page faults of this process so far (fresh memory touched for the first time)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run(turns: int = 20, repeat: int = 5) -> tuple[list[str], dict[str, float]]:
    """Parts 1 and 2: the lines to print and the figures (ms per turn, faults per turn)."""
    pngs = [fake_png(i) for i in range(turns)]
    url_bytes = [png_data_url(p) for p in pngs]
    urls = [u.decode("ascii") for u in url_bytes]
    lines = [f"{turns} turns, 2 screenshots kept, {len(url_bytes[0]) / 1e6:.2f} MB base64 each, "
             f"{os.cpu_count()} CPUs, best of {repeat} runs (median turn of each run)", ""]

    # Each variant in a process of its own: what one variant leaves in the allocator (freed
    # blocks, a raised mmap threshold) changes the next one's page faults, and with them the
    # ranking (see "Why ... trade places" above). Alone, each reaches the same steady state
    # on every invocation.
    results: dict[str, float] = {}
    faults: dict[str, float] = {}
    digests: dict[str, str] = {}
    for name in VARIANTS:
        out = subprocess.run(
            [sys.executable, __file__, "--variant", name, "--turns", str(turns), "--repeat", str(repeat)],
            capture_output=True, text=True, check=True,
        )
        record = json.loads(out.stdout.strip().splitlines()[-1])
        results[name], faults[name], digests[name] = record["ms"] / 1e3, record["faults"], record["sha256"]
    assert digests["History (cached)"] == digests["orjson full"], "spliced body differs from orjson.dumps"
    ours = results["History (cached)"]
    lines.append(f"{'request build per turn':<24}{'ms':>9}{'x History':>12}{'faults/turn':>13}")
    for name, value in results.items():
        lines.append(f"{name:<24}{value * 1e3:>9.3f}{value / ours:>12.1f}{faults[name]:>13.0f}")
    size = len(run_seed(urls[-3:], orjson.dumps)[1][-1])
    lines.append(f"\n(each variant in its own process; best of {repeat} runs and that run's page faults)")
    lines.append(f"body per turn: ~{size / 1e6:.2f} MB; History bytes == orjson bytes: yes (sha256 of the last body)\n")

    figures = {f"{name} ms": value * 1e3 for name, value in results.items()}
    figures.update({f"{name} faults/turn": value for name, value in faults.items()})
    return lines, figures


VARIANTS = ("seed json.dumps", "orjson full", "History (cached)")


def run_variant(name: str, turns: int, repeat: int) -> dict[str, Any]:
    """One variant, ``repeat`` runs in this process: the best median turn, that run's minor
    page faults per turn, and the sha256 of the last body."""
    import hashlib

    url_bytes = [png_data_url(fake_png(i)) for i in range(turns)]
    urls = [u.decode("ascii") for u in url_bytes]
    fn: Callable[[], tuple[list[float], list[bytes]]] = {
        "seed json.dumps": lambda: run_seed(urls, lambda p: json.dumps(p, ensure_ascii=False).encode()),
        "orjson full": lambda: run_seed(urls, orjson.dumps),
        "History (cached)": lambda: run_history(url_bytes),
    }[name]
    best: tuple[float, float] = (float("inf"), 0.0)
    last = b""
    for _ in range(repeat):
        before = minor_faults()
        times, bodies = fn()
        # Fresh pages touched per turn: a 3 MB body in new memory costs ~735 page faults.
        per_turn = (minor_faults() - before) / len(times)
        med = statistics.median(times[3:])  # the first 3 turns fill the history up
        if med < best[0]:
            best = (med, per_turn)
        last = bodies[-1]
        del bodies
    return {"variant": name, "ms": best[0] * 1e3, "faults": best[1], "sha256": hashlib.sha256(last).hexdigest()}


# -- pytest-benchmark entry point (`./dev bench`) -------------------------------------------

try:
    import pytest

    @pytest.mark.benchmark(group="request")
    def test_request_build_and_prompt_cache(benchmark: Any, capsys: Any) -> None:
        result: dict[str, Any] = {}

        def once() -> None:
            result["lines"], result["figures"] = run(turns=20, repeat=5)

        benchmark.pedantic(once, rounds=1, iterations=1)
        benchmark.extra_info.update(result["figures"])
        with capsys.disabled():
            print("\n" + "\n".join(result["lines"]))

    @pytest.mark.benchmark(group="request")
    def test_prefill_by_history_policy(benchmark: Any, capsys: Any) -> None:
        result: dict[str, list[dict[str, Any]]] = {}

        def once() -> None:
            result["rows"] = policy_table(30, 1000.0)

        benchmark.pedantic(once, rounds=1, iterations=1)
        for r in result["rows"]:
            benchmark.extra_info[f"keep{r['keep']}_chunk{r['chunk']}_images_per_turn"] = r["images_per_turn"]
        with capsys.disabled():
            print()
            for r in result["rows"]:
                print(f"keep {r['keep']} chunk {r['chunk']}: {r['images_per_turn']:.2f} image prefills per turn, "
                      f"{r['tokens_per_turn']:.0f} tokens, at most {r['max_images_in_context']} images")
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def print_policies(turns: int, tps: float) -> None:
    rows = policy_table(turns, tps)
    base = rows[0]
    print(f"prefill per turn, scripted {turns}-turn run, 1536x864 images (Qwen3-VL 1296 tokens each), "
          f"at {tps:.0f} prefill tokens/s:")
    header = ("keep", "chunk", "max imgs", "img prefills", "img tok", "text tok", "tok/turn", "s/turn", "saved s")
    print("".join(f"{h:>13}" for h in header))
    for r in rows:
        print(f"{r['keep']:>13}{r['chunk']:>13}{r['max_images_in_context']:>13}{r['images_per_turn']:>13.2f}"
              f"{r['image_tokens_per_turn']:>13.0f}{r['text_tokens_per_turn']:>13.0f}{r['tokens_per_turn']:>13.0f}"
              f"{r['seconds_per_turn']:>13.2f}{base['seconds_per_turn'] - r['seconds_per_turn']:>13.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--server", action="store_true", help="also time the round trip to local servers")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one variant, as JSON
    parser.add_argument("--policies", action="store_true", help="also the prefill of each history policy (part 2)")
    parser.add_argument("--only-policies", action="store_true", help="part 2 only")
    parser.add_argument("--policy-turns", type=int, default=30)
    parser.add_argument("--prefill-tps", type=float, default=1000.0, help="prefill speed for the seconds column")
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.turns, args.repeat)))
        return
    if args.only_policies:
        print_policies(args.policy_turns, args.prefill_tps)
        return
    lines, _ = run(args.turns, args.repeat)
    print("\n".join(lines))
    if args.policies:
        print_policies(args.policy_turns, args.prefill_tps)
    if args.server:
        pngs = [fake_png(i) for i in range(args.turns)]
        server_table([png_data_url(p) for p in pngs], max(1, args.repeat // 2))


if __name__ == "__main__":
    main()
