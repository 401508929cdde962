"""Capture pipelines on Xvfb 1920x1080 showing a corpus screenshot, all in the same run.

End to end (screen -> PNG bytes an agent can send):

* ``deskpilot``: ``Capturer("mss").grab(size=(1536, 864)).png(level=1)``: XShmGetImage,
  XFixes cursor composited, fused crop + area-average + BGRA->RGB, native PNG encoder.
* ``mss+to_png``: ``mss.grab(monitor)`` + ``mss.tools.to_png`` at mss's default level 6
  (full resolution: mss cannot resize; no cursor), and the same at level 1.
* ``ImageGrab+save``: Pillow's ``ImageGrab.grab()`` + ``Image.save(PNG)`` (default level).
* ``mss+cv2``: a strong hand-made baseline with the same output as deskpilot:
  ``mss.grab`` + ``cv2.resize(INTER_AREA)`` to 1536x864 + ``cv2.imencode(PNG, level 1)``.

Raw grab (what the facade costs on top of the backend): ``Capturer.grab_bgra()`` vs a
bare ``mss.MSS().grab(monitor)``.

Variants run interleaved round by round, in alternating order (so drift and cache
effects hit all of them alike); medians are
reported with the ratio of each baseline to deskpilot. Targets: end to end >= 5x faster
than ``mss+to_png``; raw grab overhead <= 1.2x bare mss.

Run: ``.venv/bin/python benchmarks/bench_capture.py [--rounds 30] [--all]`` or
``.venv/bin/pytest benchmarks/bench_capture.py --benchmark-only -s``.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _xvfb import corpus_images, screen_with_picture

SIZE = (1536, 864)
Pipeline = Callable[[], Any]


def pipelines() -> tuple[dict[str, Pipeline], dict[str, Pipeline], Callable[[], None]]:
    """(end-to-end pipelines, raw grabs, close) on the current DISPLAY."""
    import mss
    import mss.tools

    from deskpilot.capture import Capturer

    cap = Capturer("mss", cursor=True)
    sct = mss.MSS()
    monitor = sct.monitors[1]

    end_to_end: dict[str, Pipeline] = {
        "deskpilot": lambda: cap.grab(size=SIZE).png(level=1),
        "mss+to_png(6)": lambda: _mss_png(sct, monitor, 6),
        "mss+to_png(1)": lambda: _mss_png(sct, monitor, 1),
    }
    try:
        from PIL import ImageGrab

        def pillow() -> bytes:
            buf = io.BytesIO()
            ImageGrab.grab().save(buf, "PNG")
            return buf.getvalue()

        end_to_end["ImageGrab+save"] = pillow
    except ImportError:  # pragma: no cover - Pillow is a test/bench dependency
        pass
    try:
        import cv2
        import numpy as np

        def opencv() -> bytes:
            shot = sct.grab(monitor)
            bgra = np.frombuffer(shot.raw, np.uint8).reshape(shot.height, shot.width, 4)
            small = cv2.resize(bgra[..., :3], SIZE, interpolation=cv2.INTER_AREA)
            _ok, png = cv2.imencode(".png", small, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            return bytes(png)

        end_to_end["mss+cv2(area,1)"] = opencv
    except ImportError:  # pragma: no cover
        pass
    raw: dict[str, Pipeline] = {
        "deskpilot grab_bgra": cap.grab_bgra,
        "bare mss.grab": lambda: sct.grab(monitor),
    }

    def close() -> None:
        cap.close()
        sct.close()

    return end_to_end, raw, close


def _mss_png(sct: Any, monitor: Any, level: int) -> bytes:
    import mss.tools

    shot = sct.grab(monitor)
    return mss.tools.to_png(shot.rgb, shot.size, level=level)  # type: ignore[no-any-return]


def measure(variants: dict[str, Pipeline], rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    for _ in range(rounds):
        order.reverse()  # alternate the order: no variant always runs right after another
        for name, fn in order:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def report(title: str, times: dict[str, list[float]], reference: str, sizes: dict[str, int] | None = None) -> list[str]:
    ref = statistics.median(times[reference])
    lines = [title, f"  {'variant':<22}{'median ms':>11}{'p90 ms':>9}{'x deskpilot':>13}{'PNG KiB':>9}"]
    for name, values in times.items():
        med = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        size = f"{sizes[name] / 1024:9.0f}" if sizes and name in sizes else ""
        lines.append(f"  {name:<22}{med * 1e3:11.2f}{p90 * 1e3:9.2f}{med / ref:12.2f}x{size}")
    return lines


def run(rounds: int) -> tuple[list[str], dict[str, float]]:
    from deskpilot import imaging

    end_to_end, raw, close = pipelines()
    try:
        sizes = {name: len(fn()) for name, fn in end_to_end.items()}
        e2e = measure(end_to_end, rounds)
        raws = measure(raw, rounds * 3)
    finally:
        close()
    med = {name: statistics.median(v) for name, v in {**e2e, **raws}.items()}
    speedup = med["mss+to_png(6)"] / med["deskpilot"]
    overhead = med["deskpilot grab_bgra"] / med["bare mss.grab"]
    lines = [f"imaging core: {imaging.BACKEND}, PNG deflate: {imaging.DEFLATE_ENGINE}, {rounds} rounds"]
    lines += report("end to end, screen -> PNG bytes (deskpilot at 1536x864 with cursor):", e2e, "deskpilot", sizes)
    lines += report("raw grab 1920x1080 BGRA:", raws, "deskpilot grab_bgra")
    lines.append(f"  deskpilot vs mss+to_png: {speedup:.1f}x faster (target >= 5x: {'met' if speedup >= 5 else 'NOT met'})")
    lines.append(f"  raw grab overhead vs bare mss: {overhead:.2f}x (target <= 1.2x: {'met' if overhead <= 1.2 else 'NOT met'})")
    ratios = {"speedup_vs_mss_to_png": speedup, "raw_overhead_vs_mss": overhead,
              **{f"median_ms[{k}]": v * 1e3 for k, v in med.items()}}
    return lines, ratios


# -- pytest-benchmark entry point -------------------------------------------------------


def _screen() -> Iterator[tuple[str, Path]]:
    with screen_with_picture() as screen:
        yield screen


try:
    import pytest

    screen = pytest.fixture(scope="module")(_screen)

    def test_capture_pipelines_vs_baselines(screen: tuple[str, Path], benchmark: Any, capsys: Any) -> None:
        lines, ratios = run(rounds=15)
        benchmark.extra_info.update(ratios)
        from deskpilot.capture import Capturer

        with Capturer("mss") as cap:
            benchmark.pedantic(lambda: cap.grab(size=SIZE).png(level=1), rounds=20, warmup_rounds=3)
        with capsys.disabled():
            print("\n" + "\n".join(lines))
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--all", action="store_true", help="every corpus screenshot, not just the first")
    args = parser.parse_args()
    pictures: list[Path | None] = list(corpus_images()) if args.all else [None]
    for picture in pictures or [None]:
        with screen_with_picture(picture) as (display, shown):
            print(f"Xvfb {display} 1920x1080 showing {shown.name}", flush=True)
            lines, _ = run(args.rounds)
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
