"""Soak (slow): 500 turns on Xvfb against the test server with zero model latency.

Runs ``benchmarks/bench_soak.py`` in a child process (its own private Xvfb showing a
corpus screenshot) and checks what must not grow: resident memory after warm-up, open
file descriptors and X connections, during the run and once it is over. Timings (p95
turn overhead of the first and last 100 turns) are reported, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.x11]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_soak.py"


def test_500_turns_keep_memory_fds_and_x_connections_flat(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--turns", "500", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    print("\n" + proc.stdout)
    rows = json.loads(out.read_text())
    assert {r["workload"] for r in rows} == {"plain", "guarded"}
    for r in rows:
        assert r["turns"] >= 500
        assert r["fds_end"] == r["fds_start"], r
        assert r["x_end"] == r["x_start"], r
        before, after = (int(v) for v in r["fds_before_after"].split(" -> "))
        assert after == before, r
        x_before, x_after = (int(v) for v in r["x_before_after"].split(" -> "))
        assert x_after == x_before, r
        # flat: a leaked frame per turn would be ~1 GB over 500 turns; the conversation itself
        # (text messages are kept, images pruned) legitimately grows by a few MB
        assert r["rss_end_mb"] - r["rss_start_mb"] < 32, r
