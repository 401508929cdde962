"""``deskpilot report``: a recorded run as one self-contained HTML page.

    deskpilot report runs/20250101-120000                 -> runs/20250101-120000/report.html
    deskpilot report RUN --out /tmp/run.html --link       images linked, not embedded

The page needs no network: CSS and script are inline, images embedded (default) or
linked relative to the HTML file. A partial (crashed) run directory is reported as such.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from deskpilot._untrusted import terminal_text

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a recorded run",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<timestamp>)")
    parser.add_argument("--out", metavar="FILE", help="the HTML file to write (default RUN_DIR/report.html)")
    images = parser.add_mutually_exclusive_group()
    images.add_argument("--embed", dest="embed", action="store_true", default=True, help="embed the screenshots (default)")
    images.add_argument("--link", dest="embed", action="store_false", help="link the screenshots relative to the HTML file")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from deskpilot.replay import load_recording
    from deskpilot.report import write_report

    recording = load_recording(args.run_dir)  # a clear error for a path that is no run directory
    path = write_report(args.run_dir, args.out, embed=args.embed)
    size = path.stat().st_size
    state = "partial record" if recording.partial else recording.outcome or "unknown outcome"
    print(f"deskpilot report: {path} ({size / 1024:.0f} KiB, {len(recording.turns())} turns, {state})")
    prefill = (recording.summary.get("prefill") if recording.summary else None)
    if isinstance(prefill, dict):
        # What a prefix-caching server had to process anew per turn (see the report's table).
        tokens = prefill.get("image_tokens_per_turn")
        print(
            f"  prefill per turn: {prefill.get('images_per_turn')} images"
            + (f" ({tokens} image tokens)" if tokens is not None else "")
            + f" + ~{prefill.get('text_tokens_per_turn')} text tokens; "
            f"at most {prefill.get('max_images_in_context')} images in context"
        )
    if recording.partial:
        for problem in recording.problems:
            print(terminal_text(f"  partial: {problem}"), file=sys.stderr)
    return 0
