"""deskpilot.imaging against the baselines, all in the same run, on the corpus screenshots.

Every corpus PNG (``benchmarks/corpus``) is loaded as a 1920x1080 BGRA frame (alpha 255), the
way a capture backend delivers it; timed calls cycle through the frames, so a median is
over all of them. Tables (printed at the end of the run, ratio = time / deskpilot):

* **pipeline** 1920x1080 BGRA -> 1536x864 RGB PNG: deskpilot (``prepare`` + ``encode_png``
  level 1, adaptive filter); Pillow (``frombuffer`` BGRX -> ``resize`` BOX -> PNG level 6
  and level 1; BOX gives whole source pixels weight 0 or 1, it is not an exact area
  average); OpenCV (``resize`` INTER_AREA -> BGR -> ``imencode`` default level);
  ``mss.tools.to_png`` (mss cannot resize: full 1920x1080 frame, level 6, so it encodes
  1.56x the pixels); the seeds' pure-Python path (per-pixel loop, filter 0, zlib 6; Pillow
  BOX in place of GDI's StretchBlt; one frame, few rounds: it takes ~0.5 s).
* **downscale**, **bgra_to_rgb** (vs a plain copy of the same frame), **encode** (the same
  1536x864 RGB image), **change detection** (digest and bounding box of a 1920x1080 BGRA
  frame), and **threads** (encode throughput on two threads vs one: the GIL is released).

Run: ``./dev bench -k imaging`` or ``.venv/bin/pytest benchmarks/bench_imaging.py
--benchmark-only -p no:cacheprovider``, or ``.venv/bin/python benchmarks/bench_imaging.py``.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from baselines import seed_png
from deskpilot import imaging

U8 = npt.NDArray[np.uint8]
Frames = list[tuple[str, U8]]
SIZE = (1536, 864)
ROUNDS = 12  # per cheap implementation (cycling through the corpus frames)
SLOW_ROUNDS = 4  # Pillow, mss
SEED_ROUNDS = 2  # the pure-Python path, on one frame


def _pillow(level: int) -> Callable[[U8], bytes]:
    from PIL import Image

    def run(frame: U8) -> bytes:
        h, w = frame.shape[:2]
        image = Image.frombuffer("RGB", (w, h), frame, "raw", "BGRX", 0, 1)
        small = image.resize(SIZE, Image.Resampling.BOX)
        out = io.BytesIO()
        small.save(out, "PNG", compress_level=level)
        return out.getvalue()

    return run


def _opencv(frame: U8) -> bytes:
    import cv2

    small = cv2.resize(frame, SIZE, interpolation=cv2.INTER_AREA)
    ok, png = cv2.imencode(".png", cv2.cvtColor(small, cv2.COLOR_BGRA2BGR))
    assert ok
    return bytes(png)


def _mss_to_png(frame: U8) -> bytes:
    import mss.tools
    from mss.screenshot import ScreenShot

    h, w = frame.shape[:2]
    shot = ScreenShot(bytearray(frame.tobytes()), {"left": 0, "top": 0, "width": w, "height": h})
    png = mss.tools.to_png(shot.rgb, shot.size, level=6)
    assert png is not None
    return png


def _deskpilot() -> Callable[[U8], bytes]:
    out = np.empty((SIZE[1], SIZE[0], 3), np.uint8)  # reused between grabs, as Capturer does
    return lambda frame: imaging.encode_png(imaging.prepare(frame, size=SIZE, out=out), level=1)


def _seeds(frame: U8) -> bytes:
    h, w = frame.shape[:2]
    return seed_png.capture_png(frame.tobytes(), w, h, SIZE)


PIPELINES: dict[str, tuple[Callable[[], Callable[[U8], bytes]], int]] = {
    "deskpilot": (_deskpilot, ROUNDS),
    "OpenCV INTER_AREA + imencode": (lambda: _opencv, ROUNDS),
    "Pillow BOX + PNG level 1": (lambda: _pillow(1), SLOW_ROUNDS),
    "Pillow BOX + PNG level 6": (lambda: _pillow(6), SLOW_ROUNDS),
    "mss.tools.to_png (full 1920x1080, level 6)": (lambda: _mss_to_png, SLOW_ROUNDS),
    "seeds pure Python (1 frame)": (lambda: _seeds, SEED_ROUNDS),
}


def _median(benchmark: Any) -> float | None:
    stats = getattr(benchmark, "stats", None)
    return None if stats is None else float(stats.stats.median)


def _cycle(frames: Frames) -> Callable[[], Any]:
    source = itertools.cycle([f for _, f in frames])
    return lambda: next(source)


@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipeline(benchmark: Any, comparison: Any, corpus_bgra: Frames, name: str) -> None:
    factory, rounds = PIPELINES[name]
    encode = factory()
    frames = corpus_bgra[:1] if name.startswith("seeds") else corpus_bgra
    sizes = [len(encode(frame)) for _, frame in frames]  # also checks every frame encodes
    pillow6 = [len(_pillow(6)(frame)) for _, frame in frames]
    next_frame = _cycle(frames)
    benchmark.group = "pipeline 1920x1080 BGRA -> 1536x864 PNG"
    benchmark.extra_info["png_bytes"] = sizes
    benchmark.pedantic(lambda: encode(next_frame()), rounds=rounds, warmup_rounds=1)
    median = _median(benchmark)
    if median is not None:
        comparison(
            "pipeline",
            name,
            median,
            title="Full pipeline: 1920x1080 BGRA -> 1536x864 RGB PNG (corpus frames)",
            note="Ratio = implementation time / deskpilot time (higher = slower than deskpilot).",
            **{
                "PNG KiB (mean)": f"{statistics.mean(sizes) / 1024:.0f}",
                "size x Pillow-6": f"{sum(sizes) / sum(pillow6):.2f}",
            },
        )


def _kernel_cases(frames: Frames) -> dict[str, dict[str, Callable[[], Any]]]:
    import cv2
    from PIL import Image

    frame = frames[0][1]
    h, w = frame.shape[:2]
    rgb_out = np.empty((h, w, 3), np.uint8)
    copy_out = np.empty_like(frame)
    small_out = np.empty((SIZE[1], SIZE[0], 3), np.uint8)
    cv_small = np.empty((SIZE[1], SIZE[0], 4), np.uint8)
    rgb = imaging.prepare(frame, size=SIZE)
    pil_rgb = Image.fromarray(rgb)
    other = frame.copy()
    moved = frame.copy()
    moved[500:520, 900:912] ^= 0x40  # a cursor-sized change

    def pil_save(level: int) -> Callable[[], bytes]:
        def run() -> bytes:
            out = io.BytesIO()
            pil_rgb.save(out, "PNG", compress_level=level)
            return out.getvalue()

        return run

    return {
        "downscale": {
            "deskpilot": lambda: imaging.prepare(frame, size=SIZE, out=small_out),
            "OpenCV resize INTER_AREA (BGRA)": lambda: cv2.resize(
                frame, SIZE, dst=cv_small, interpolation=cv2.INTER_AREA
            ),
            "Pillow resize BOX (BGRX)": lambda: Image.frombuffer(
                "RGB", (w, h), frame, "raw", "BGRX", 0, 1
            ).resize(SIZE, Image.Resampling.BOX),
        },
        "bgra_to_rgb": {
            "deskpilot": lambda: imaging.bgra_to_rgb(frame, out=rgb_out),
            "plain copy of the BGRA frame (np.copyto)": lambda: np.copyto(copy_out, frame),
            "OpenCV cvtColor BGRA2RGB": lambda: cv2.cvtColor(frame, cv2.COLOR_BGRA2RGB, rgb_out),
            "numpy frame[..., 2::-1] copy": lambda: np.copyto(rgb_out, frame[..., 2::-1]),
        },
        "encode": {
            "deskpilot": lambda: imaging.encode_png(rgb, level=1),
            "Pillow PNG level 1": pil_save(1),
            "Pillow PNG level 6": pil_save(6),
            "OpenCV imencode": lambda: cv2.imencode(".png", rgb),
        },
        "change detection": {
            "deskpilot": lambda: imaging.frame_digest(frame),
            "changed_region, identical frames": lambda: imaging.changed_region(frame, other),
            "changed_region, 12x20 px changed": lambda: imaging.changed_region(frame, moved),
            "np.array_equal": lambda: np.array_equal(frame, other),
            "hashlib.blake2b(frame)": lambda: hashlib.blake2b(frame).digest(),
        },
    }


KERNEL_TITLES = {
    "downscale": "Downscale 1920x1080 BGRA -> 1536x864 (deskpilot: exact area average + RGB)",
    "bgra_to_rgb": "BGRA -> RGB, 1920x1080, into a preallocated buffer",
    "encode": "PNG encode of the same 1536x864 RGB frame",
    "change detection": "Change detection on 1920x1080 BGRA (deskpilot row: frame_digest)",
}
KERNEL_CASES = [
    ("downscale", "deskpilot"),
    ("downscale", "OpenCV resize INTER_AREA (BGRA)"),
    ("downscale", "Pillow resize BOX (BGRX)"),
    ("bgra_to_rgb", "deskpilot"),
    ("bgra_to_rgb", "plain copy of the BGRA frame (np.copyto)"),
    ("bgra_to_rgb", "OpenCV cvtColor BGRA2RGB"),
    ("bgra_to_rgb", "numpy frame[..., 2::-1] copy"),
    ("encode", "deskpilot"),
    ("encode", "Pillow PNG level 1"),
    ("encode", "Pillow PNG level 6"),
    ("encode", "OpenCV imencode"),
    ("change detection", "deskpilot"),
    ("change detection", "changed_region, identical frames"),
    ("change detection", "changed_region, 12x20 px changed"),
    ("change detection", "np.array_equal"),
    ("change detection", "hashlib.blake2b(frame)"),
]


@pytest.mark.parametrize(("table", "name"), KERNEL_CASES)
def test_kernel(
    benchmark: Any, comparison: Any, corpus_bgra: Frames, table: str, name: str
) -> None:
    case = _kernel_cases(corpus_bgra)[table][name]
    slow = name.startswith("Pillow")
    benchmark.group = table
    benchmark.pedantic(case, rounds=5 if slow else 25, warmup_rounds=1)
    median = _median(benchmark)
    if median is not None:
        comparison(table, name, median, title=KERNEL_TITLES[table])


def _encode_all(images: list[U8], threads: int) -> float:
    start = time.perf_counter()
    if threads == 1:
        for img in images:
            imaging.encode_png(img, level=1)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda img: imaging.encode_png(img, level=1), images))
    return time.perf_counter() - start


def test_encode_threads(benchmark: Any, comparison: Any, corpus_bgra: Frames) -> None:
    """Two threads encoding different frames: ~2x the frames per second of one thread when
    the GIL is released (filtering in the Cython core, deflate in ISA-L), on 2 free cores."""
    images = [imaging.prepare(f, size=SIZE) for _, f in corpus_bgra] * 4
    one, two = [], []
    for _ in range(5):  # interleaved, so load from other processes hits both alike
        one.append(_encode_all(images, 1))
        two.append(_encode_all(images, 2))
    benchmark.group = "threads"
    benchmark.extra_info["speedup"] = statistics.median(one) / statistics.median(two)
    benchmark.pedantic(lambda: _encode_all(images, 2), rounds=3, warmup_rounds=0)
    per_frame_1 = statistics.median(one) / len(images)
    per_frame_2 = statistics.median(two) / len(images)
    title = f"encode_png throughput, {len(images)} frames 1536x864 (per frame)"
    note = (
        f"two threads: {per_frame_1 / per_frame_2:.2f}x the throughput of one "
        f"(deflate: {imaging.DEFLATE_ENGINE})"
    )
    comparison("threads", "deskpilot", per_frame_1, title=title, note=note)
    comparison("threads", "deskpilot, 2 threads", per_frame_2, title=title)


if __name__ == "__main__":
    raise SystemExit(
        pytest.main([__file__, "--benchmark-only", "-p", "no:cacheprovider", "-q", *sys.argv[1:]])
    )
