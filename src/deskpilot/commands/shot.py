"""``deskpilot shot``: capture one frame to a PNG file and print how long each phase took.

Phases: ``capture`` (the backend's raw grab), ``cursor`` (reading and compositing the
pointer), ``prepare`` (crop + area-average downscale + BGRA->RGB) and ``encode`` (PNG).
With ``--repeat N`` the frame is taken N times and the median (and minimum) of each
phase is printed; the last frame is written: to ``--out FILE``, to stdout with ``--out -``,
else to a new ``deskpilot-shot-<time>-*.png`` in the system temp directory (printed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from deskpilot.commands.run import add_xwayland_option
from deskpilot.imaging import PNG_FILTERS

__all__ = ["default_out", "parse_region", "parse_size", "register"]


def parse_size(text: str) -> tuple[int, int]:
    """``"1536x864"`` -> (1536, 864)."""
    try:
        w, h = (int(v) for v in text.lower().replace("*", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WxH, e.g. 1536x864, got {text!r}") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return (w, h)


def parse_region(text: str) -> tuple[int, int, int, int]:
    """``"0,0,1280,720"`` -> (0, 0, 1280, 720): x, y, width, height on the monitor."""
    try:
        x, y, w, h = (int(v) for v in text.replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"region must be x,y,w,h, e.g. 0,0,1280,720, got {text!r}") from None
    if w <= 0 or h <= 0 or x < 0 or y < 0:
        raise argparse.ArgumentTypeError(f"region needs x, y >= 0 and a positive size, got {text!r}")
    return (x, y, w, h)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _level(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 9:
        raise argparse.ArgumentTypeError(f"PNG level must be 0..9, got {value}")
    return value


def default_out() -> str:
    """Where ``shot`` writes without ``--out``: a new file in the system temp directory."""
    import os
    import tempfile

    stamp = time.strftime("%Y%m%d-%H%M%S")
    fd, path = tempfile.mkstemp(prefix=f"deskpilot-shot-{stamp}-", suffix=".png")
    os.close(fd)
    return path


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shot",
        help="capture one frame to a PNG and print per-phase timings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", "-o", default=None,
        help="output PNG path, '-' for stdout (default: a new deskpilot-shot-<time>.png in the system temp "
        "directory, so a timing run leaves nothing in the current directory; the path is printed)",
    )
    parser.add_argument("--size", type=parse_size, help="downscale to WxH, e.g. 1536x864 (default: physical size)")
    parser.add_argument("--monitor", type=_positive, help="1-based monitor index (default: the primary)")
    parser.add_argument("--region", type=parse_region, help="x,y,w,h on the monitor, in physical pixels")
    parser.add_argument("--no-cursor", dest="cursor", action="store_false", help="leave the mouse pointer out")
    parser.add_argument("--repeat", type=_positive, default=1, help="capture N times, report medians (default: 1)")
    parser.add_argument("--level", type=_level, default=1, help="PNG deflate level 0..9 (default: 1)")
    parser.add_argument("--filter", default="adaptive", choices=PNG_FILTERS, help="PNG row filter (default: adaptive)")
    # --capture, like `deskpilot run --capture`; --backend is the older spelling, kept.
    parser.add_argument("--capture", "--backend", dest="backend", default="auto", choices=("auto", "mss", "gdi", "wlroots", "mutter", "portal"),
                        help="capture backend (same as `run --capture`; --backend is an alias)")
    parser.add_argument(
        "--scaling",
        default="native",
        choices=("native", "gdi"),
        help="native (default): our exact area average; gdi: StretchBlt HALFTONE like the seeds (gdi backend)",
    )
    parser.add_argument("--json", action="store_true", help="print the timings as one JSON object")
    add_xwayland_option(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from deskpilot import imaging
    from deskpilot.capture import Capturer, check_screen_visible

    check_screen_visible(allow_xwayland=args.allow_xwayland, capture=args.backend)
    phases: dict[str, list[float]] = {"capture": [], "cursor": [], "prepare": [], "encode": []}
    # scaling=gdi on another backend is a ConfigError: the CLI prints it, exit code 1
    capturer = Capturer(args.backend, monitor=args.monitor, region=args.region, cursor=args.cursor, scaling=args.scaling)
    with capturer as cap:
        for _ in range(args.repeat):
            frame = cap.grab(size=args.size)
            t0 = time.perf_counter()
            png = imaging.encode_png(frame.rgb, level=args.level, filter=args.filter)
            phases["encode"].append(time.perf_counter() - t0)
            for name in ("capture", "cursor", "prepare"):
                phases[name].append(frame.timings[name])
        backend = cap.backend.name
    if args.out is None:
        args.out = default_out()
    if args.out == "-":
        sys.stdout.buffer.write(png)
        sys.stdout.buffer.flush()
        report = sys.stderr
    else:
        with open(args.out, "wb") as f:
            f.write(png)
        report = sys.stdout
    medians = {name: statistics.median(values) for name, values in phases.items()}
    total = [sum(values) for values in zip(*phases.values(), strict=True)]
    if args.json:
        import orjson

        record = {
            "out": args.out,
            "backend": backend,
            "imaging": imaging.BACKEND,
            "repeat": args.repeat,
            "bytes": len(png),
            **frame.describe(),
            "median_ms": {name: round(v * 1e3, 3) for name, v in medians.items()},
            "min_ms": {name: round(min(v) * 1e3, 3) for name, v in phases.items()},
            "total_median_ms": round(statistics.median(total) * 1e3, 3),
        }
        report.write(orjson.dumps(record).decode() + "\n")
        return 0
    a = frame.area
    w, h = frame.size
    where = f"cursor at {frame.cursor}" if frame.cursor else "no cursor"
    report.write(
        f"{backend} capture of monitor {frame.monitor}: {a.width}x{a.height} at ({a.left}, {a.top})"
        f" -> {w}x{h} image, {where}; imaging core: {imaging.BACKEND}\n"
    )
    stat = "median" if args.repeat > 1 else "time"
    for name, values in phases.items():
        extra = f"  (min {min(values) * 1e3:.2f} ms over {args.repeat})" if args.repeat > 1 else ""
        if name == "encode":
            extra += f"  [level {args.level}, {args.filter}, {len(png) / 1024:.0f} KiB]"
        report.write(f"  {name:<8} {stat} {medians[name] * 1e3:8.2f} ms{extra}\n")
    report.write(f"  {'total':<8} {stat} {statistics.median(total) * 1e3:8.2f} ms\n")
    if args.out != "-":
        report.write(f"wrote {args.out}\n")
    return 0
