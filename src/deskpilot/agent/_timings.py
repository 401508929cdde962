"""Per-phase turn timings and their p50/p95 summary.

A turn is split into the phases of design.md's turn diagram. Each phase is timed with
``perf_counter_ns`` and stored in milliseconds; the client-side **overhead** of a turn
is the time from the model's reply to the next request leaving (parse, action, settle,
capture, encode, request build), i.e. everything except ``model``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = [
    "OVERHEAD",
    "PHASES",
    "PhaseStats",
    "TurnTimer",
    "percentile",
    "summarize",
]

#: Phases in the order a turn runs them (extra phases a mode adds are kept after these).
PHASES: tuple[str, ...] = ("parse", "action", "settle", "capture", "encode", "request_build", "model")
#: The synthetic phase: reply received -> next request sent.
OVERHEAD = "overhead"


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    frac = pos - lo
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * frac)


@dataclass(slots=True)
class TurnTimer:
    """Accumulates milliseconds per phase for one turn (a phase may run several times)."""

    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.add(name, (time.perf_counter_ns() - start) / 1e6)

    def add(self, name: str, ms: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + ms

    def overhead_ms(self) -> float:
        """Client-side time of this turn: everything but waiting for the model."""
        return sum(v for k, v in self.phases.items() if k != "model")

    def as_dict(self) -> dict[str, float]:
        out = {k: round(v, 3) for k, v in self.phases.items()}
        out[OVERHEAD] = round(self.overhead_ms(), 3)
        return out


@dataclass(frozen=True, slots=True)
class PhaseStats:
    phase: str
    count: int
    p50: float
    p95: float
    mean: float
    max: float
    total: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "p50_ms": round(self.p50, 3),
            "p95_ms": round(self.p95, 3),
            "mean_ms": round(self.mean, 3),
            "max_ms": round(self.max, 3),
            "total_ms": round(self.total, 3),
        }


def summarize(turns: Iterable[dict[str, float]]) -> list[PhaseStats]:
    """p50/p95/mean/max per phase over turn timing dicts (``TurnTimer.as_dict()`` records)."""
    samples: dict[str, list[float]] = {}
    for turn in turns:
        for name, ms in turn.items():
            samples.setdefault(name, []).append(float(ms))
    order = [p for p in PHASES if p in samples]
    order += sorted(p for p in samples if p not in PHASES and p != OVERHEAD)
    if OVERHEAD in samples:
        order.append(OVERHEAD)
    stats = []
    for name in order:
        values = samples[name]
        stats.append(
            PhaseStats(
                phase=name,
                count=len(values),
                p50=percentile(values, 50),
                p95=percentile(values, 95),
                mean=sum(values) / len(values),
                max=max(values),
                total=sum(values),
            )
        )
    return stats
