"""Time to first action: act when the streamed tool call is complete, not when the reply ends.

A model that streams its tool call and then keeps talking (a sentence of trailing text
after the call) makes the agent wait for text it does not need. With ``model.stream``
deskpilot starts the action as soon as the call's arguments are complete JSON, while the
rest of the answer is still arriving; the action, the settle, the capture and the encode
then overlap the trailing text.

The server here is a real HTTP server on 127.0.0.1 (asyncio, keep-alive) that decodes at
a fixed pace: the tool call in ``--call-chunks`` SSE chunks, then ``--text-chunks`` chunks
of trailing text, one chunk every ``--chunk-ms`` (default 25 ms, 40 tokens/s, a local 8B
model). Asked without ``stream``, it takes the same total time and answers one JSON body:
the action can only start at the end of the reply. Both runs are the real agent (single
mode, the real client, loop and history) on the simulated desktop, same script, same run
of this script. Measured per turn, all on one clock: from the moment the server has read
the request to the moment the hands receive the action (``time to action``), and the
turn's wall time (request to next request).

Run: ``.venv/bin/python benchmarks/bench_first_action.py [--turns 12] [--chunk-ms 25]
[--call-chunks 8] [--text-chunks 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

TRAILING = (
    "I clicked it; next I will look at the screen again to check that the change took effect. "
)


class PacedServer:
    """Chat completions decoded at a fixed pace; logs when each request was read."""

    def __init__(self, turns: int, chunk_s: float, call_chunks: int, text_chunks: int) -> None:
        self.turns = turns
        self.chunk_s = chunk_s
        self.call_chunks = call_chunks
        self.text_chunks = text_chunks
        self.received: list[float] = []
        self.stream_ended: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    def __enter__(self) -> PacedServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def _call(self, index: int) -> tuple[str, str]:
        if index >= self.turns:
            return "", ""
        if index % 2 == 0:
            return "click_element", orjson.dumps({"label": "field", "box": [500, 583]}).decode()
        return "type_text", orjson.dumps({"text": f"line {index}"}).decode()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = orjson.loads(await reader.readexactly(length))
                index = len(self.received)
                self.received.append(time.perf_counter())
                name, args = self._call(index)
                if body.get("stream"):
                    await self._stream(writer, index, name, args)
                else:
                    await self._json(writer, index, name, args)
                self.stream_ended.append(time.perf_counter())
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _pieces(self, text: str, n: int) -> list[str]:
        size = max(1, -(-len(text) // n))
        return [text[i : i + size] for i in range(0, len(text), size)]

    async def _stream(self, writer: asyncio.StreamWriter, index: int, name: str, args: str) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )

        def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {
                "id": f"c{index}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "paced",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            data = b"data: " + orjson.dumps(chunk) + b"\n\n"
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        send({"role": "assistant", "content": ""})
        if name:
            send(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
            for piece in self._pieces(args, self.call_chunks):
                await writer.drain()
                await asyncio.sleep(self.chunk_s)
                send({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in self._pieces(TRAILING, self.text_chunks):
                await writer.drain()
                await asyncio.sleep(self.chunk_s)
                send({"content": piece})
            send({}, "tool_calls")
        else:
            send({"content": "Done."}, "stop")
        done = b"data: [DONE]\n\n"
        writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, index: int, name: str, args: str) -> None:
        if name:
            await asyncio.sleep(self.chunk_s * (self.call_chunks + self.text_chunks))
            message: dict[str, Any] = {
                "role": "assistant",
                "content": TRAILING,
                "tool_calls": [
                    {
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Done."}, "stop"
        data = orjson.dumps(
            {
                "id": f"c{index}",
                "object": "chat.completion",
                "created": 0,
                "model": "paced",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            }
        )
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(data)).encode()
            + b"\r\n\r\n"
            + data
        )
        await writer.drain()


@contextmanager
def _desk() -> Iterator[Any]:
    from deskpilot.testing._desktop import SimulatedDesktop

    class TimedDesk(SimulatedDesktop):
        acted: list[float]

        def click(self, *a: Any, **k: Any) -> None:
            self.acted.append(time.perf_counter())
            super().click(*a, **k)

        def type_text(self, text: str) -> None:
            self.acted.append(time.perf_counter())
            super().type_text(text)

    desk = TimedDesk()
    desk.acted = []
    yield desk


def run_once(stream: bool, args: argparse.Namespace) -> dict[str, list[float]]:
    from deskpilot.agent import iter_turns, load_config, run_agent

    with (
        PacedServer(args.turns, args.chunk_ms / 1000, args.call_chunks, args.text_chunks) as server,
        _desk() as desk,
        tempfile.TemporaryDirectory(prefix="deskpilot-bench-first-") as tmp,
    ):
        cfg = load_config(
            flags={
                "model.endpoint": server.endpoint,
                "model.stream": stream,
                "run.runs_dir": tmp,
                "agent.max_steps": args.turns + 2,
                "run.save_screenshots": False,
            },
            env={},
            search_default=False,
        )
        result = run_agent(
            cfg,
            "Fill in the form.",
            screen_factory=lambda: desk,
            hands_factory=lambda: desk,
            handle_signals=False,
        )
        if result.outcome != "answered":
            raise RuntimeError(f"run ended {result.outcome}: {result.error}")
        turns = list(iter_turns(result.run_dir))
        early = sum(1 for t in turns if t.get("action_started_early"))
    if len(desk.acted) != args.turns:
        raise RuntimeError(f"{len(desk.acted)} actions for {args.turns} scripted calls")
    to_action = [(a - r) * 1000 for a, r in zip(desk.acted, server.received, strict=False)]
    # Wall time of a turn: from this request read to the next one read.
    wall = [(b - a) * 1000 for a, b in zip(server.received, server.received[1:], strict=False)][
        : args.turns
    ]
    after_reply = [
        (n - e) * 1000 for e, n in zip(server.stream_ended, server.received[1:], strict=False)
    ][: args.turns]
    return {
        "to_action": to_action,
        "wall": wall,
        "after_reply": after_reply,
        "early": [float(early)],
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--chunk-ms", type=float, default=25.0)
    parser.add_argument("--call-chunks", type=int, default=8)
    parser.add_argument("--text-chunks", type=int, default=30)
    return parser


try:
    import pytest  # noqa: F401  (only for ./dev bench)

    def test_first_action_streamed_vs_end_of_reply(benchmark: Any, capsys: Any) -> None:
        args = _parser().parse_args([])
        rows: dict[str, dict[str, list[float]]] = {}

        def once() -> None:
            rows["stream"], rows["json"] = run_once(True, args), run_once(False, args)

        benchmark.pedantic(once, rounds=1, iterations=1)
        stream, json_ = (statistics.median(rows[k]["to_action"]) for k in ("stream", "json"))
        benchmark.extra_info.update(
            to_action_stream_ms=stream, to_action_json_ms=json_, saved_ms=json_ - stream
        )
        with capsys.disabled():
            print(
                f"\ntime to action p50: streamed {stream:.1f} ms, end of reply {json_:.1f} ms, "
                f"{json_ - stream:.0f} ms sooner"
            )
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def main() -> int:
    args = _parser().parse_args()
    reply_ms = args.chunk_ms * (args.call_chunks + args.text_chunks)
    print(
        f"paced server: tool call in {args.call_chunks} chunks, then {args.text_chunks} chunks of trailing text, "
        f"one every {args.chunk_ms:g} ms (reply {reply_ms:.0f} ms); {args.turns} actions per run; simulated desktop"
    )
    rows = {
        "stream (act on the complete call)": run_once(True, args),
        "no stream (act at the end of the reply)": run_once(False, args),
    }
    print(
        f"  {'':<42}{'to action p50':>15}{'p95':>8}{'turn p50':>10}{'next request after reply end p50':>34}"
    )
    for name, r in rows.items():
        print(
            f"  {name:<42}{statistics.median(r['to_action']):>15.1f}{_p95(r['to_action']):>8.1f}"
            f"{statistics.median(r['wall']):>10.1f}{statistics.median(r['after_reply']):>34.1f}"
        )
    s, j = (
        rows["stream (act on the complete call)"],
        rows["no stream (act at the end of the reply)"],
    )
    saved = statistics.median(j["to_action"]) - statistics.median(s["to_action"])
    turn_saved = statistics.median(j["wall"]) - statistics.median(s["wall"])
    print(
        f"  early starts: {int(s['early'][0])} of {args.turns} actions; the action starts {saved:.0f} ms sooner "
        f"(p50), the turn ends {turn_saved:.0f} ms sooner (p50); trailing text lasts "
        f"{args.chunk_ms * args.text_chunks:.0f} ms"
    )
    return 0


def _p95(values: list[float]) -> float:
    from deskpilot.agent._timings import percentile

    return percentile(values, 95)


if __name__ == "__main__":
    sys.exit(main())
