"""One MCP step over stdio: ``deskpilot mcp`` vs a server built like the popular ones, same run.

A step is what a client does over and over: call ``click`` and get the screenshot after it
back. Measured in the client (the official SDK's stdio client), from the call to the
result in hand. Xvfb 1920x1080 shows a corpus screenshot with the repainting Tk app of
bench_turn.py on it: each click on its button changes its label and colour, so every
step's screenshot is new. Both servers click through XTest.

* deskpilot: ``deskpilot mcp`` (adaptive settle, native PNG encoder, the image at the
  screen's 1920x1080), the default settings a client gets.
* baseline: ``benchmarks/baselines/mcp_screenshot_server.py``: mss + Pillow PNG at full
  resolution, a fixed 1 s wait after the click.

Also reported: the bytes of a screenshot result (the serialized tool result, image
included) for each. Targets: deskpilot's step p50 >= 10x lower than the baseline's, and
a 1080p screenshot result under 1 MB.

Run: ``.venv/bin/python benchmarks/bench_mcp.py [--steps 30] [--baseline-steps 6]`` or
``.venv/bin/pytest benchmarks/bench_mcp.py --benchmark-only -s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _tk_app import BOXES, read_events, repainting_app
from _xvfb import screen_with_picture

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baselines" / "mcp_screenshot_server.py"


def _pct(values: list[float], q: float) -> float:
    from deskpilot.agent._timings import percentile

    return percentile(values, q)


def _button_pixel(width: int, height: int) -> tuple[int, int]:
    x1, y1, x2, y2 = BOXES["button"]
    return (x1 + x2) // 2 * width // 1000, (y1 + y2) // 2 * height // 1000


async def _steps(command: list[str], steps: int, cwd: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ), cwd=cwd)
    times: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        shot = await session.call_tool("screenshot", {})
        shot_bytes = len(shot.model_dump_json(by_alias=True, exclude_none=True).encode())
        x, y = _button_pixel(1920, 1080)  # both send 1920x1080 images of a 1920x1080 screen
        for _ in range(steps):
            started = time.perf_counter()
            result = await session.call_tool("click", {"x": x, "y": y})
            times.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                raise RuntimeError(f"{command}: click failed: {result.content}")
        step_bytes = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
    return {"ms": times, "screenshot_bytes": shot_bytes, "step_bytes": step_bytes}


def run(steps: int, baseline_steps: int, picture: Path) -> tuple[list[str], dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="deskpilot-bench-mcp-") as work:
        ours_cmd = [sys.executable, "-m", "deskpilot", "mcp", "--runs-dir", str(Path(work) / "runs")]
        base_cmd = [sys.executable, str(BASELINE)]
        results: dict[str, Any] = {}
        for name, command, n in (("deskpilot", ours_cmd, steps), ("baseline", base_cmd, baseline_steps)):
            with repainting_app(picture) as app:
                results[name] = asyncio.run(_steps(command, n, work))
            # Read once the app has ended (its stdout is complete then).
            results[name]["landed"] = sum(1 for e in read_events(app) if e.get("type") == "click")
    ours, base = results["deskpilot"], results["baseline"]
    p50, p95 = _pct(ours["ms"], 50), _pct(ours["ms"], 95)
    b50, b95 = _pct(base["ms"], 50), _pct(base["ms"], 95)
    ratio = b50 / p50
    lines = [
        "one MCP step over stdio (click + the screenshot after it, in the client), ms",
        f"  {'server':<34}{'p50':>9}{'p95':>9}{'n':>5}{'clicks seen':>13}{'screenshot result':>19}",
        f"  {'deskpilot mcp':<34}{p50:9.1f}{p95:9.1f}{len(ours['ms']):5d}{ours['landed']:13d}"
        f"{ours['screenshot_bytes'] / 1e6:16.3f} MB",
        f"  {'baseline (mss+Pillow, 1 s sleep)':<34}{b50:9.1f}{b95:9.1f}{len(base['ms']):5d}{base['landed']:13d}"
        f"{base['screenshot_bytes'] / 1e6:16.3f} MB",
        f"  baseline / deskpilot at p50: {ratio:.1f}x (target >= 10x: {'met' if ratio >= 10 else 'NOT met'}); "
        f"1080p screenshot result under 1 MB: {'met' if ours['screenshot_bytes'] < 1_000_000 else 'NOT met'}",
    ]
    ratios = {
        "mcp_step_p50_ms": p50, "mcp_step_p95_ms": p95, "baseline_step_p50_ms": b50, "baseline_step_p95_ms": b95,
        "ratio": ratio, "screenshot_bytes": ours["screenshot_bytes"], "baseline_screenshot_bytes": base["screenshot_bytes"],
    }
    return lines, ratios


def _screen() -> Iterator[tuple[str, Path]]:
    with screen_with_picture() as screen:
        yield screen


try:
    import pytest

    screen = pytest.fixture(scope="module")(_screen)

    def test_mcp_step_vs_popular_server(screen: tuple[str, Path], benchmark: Any, capsys: Any) -> None:
        result: dict[str, Any] = {}

        def once() -> None:
            result["lines"], result["ratios"] = run(steps=20, baseline_steps=5, picture=screen[1])

        benchmark.pedantic(once, rounds=1, iterations=1)
        benchmark.extra_info.update(result["ratios"])
        with capsys.disabled():
            print("\n" + "\n".join(result["lines"]))
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="deskpilot steps")
    parser.add_argument("--baseline-steps", type=int, default=6, help="baseline steps (about 1.1 s each)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    with screen_with_picture() as (display, shown):
        print(f"Xvfb {display} 1920x1080 showing {shown.name}", flush=True)
        lines, ratios = run(args.steps, args.baseline_steps, shown)
    print("\n".join(lines), flush=True)
    if args.json:
        print(json.dumps(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
