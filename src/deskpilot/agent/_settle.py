"""Adaptive settle: wait until the screen stops changing instead of sleeping a fixed time.

The seeds sleep 60-120 ms after every action and 0.4 s after every step whether the
screen changed or not. Here a *probe* (a cheap capture returning a frame digest and
its payload) is polled every ``poll_s`` (start to start) until two consecutive probes
match, bounded below by
``min_s`` (some apps start repainting late) and above by ``max_s`` (a video or a
blinking caret never settles). The last probe's payload is returned so the loop can
reuse that frame as the next observation instead of capturing again.

``mode="fixed"`` keeps the seeds' behaviour (sleep ``fixed_s``, then one probe) and
``mode="none"`` probes once without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = ["SettlePolicy", "SettleResult", "settle"]

T = TypeVar("T")

SettleMode = Literal["adaptive", "fixed", "none"]


@dataclass(frozen=True, slots=True)
class SettlePolicy:
    mode: SettleMode = "adaptive"
    min_s: float = 0.0
    max_s: float = 1.5
    poll_s: float = 0.01
    fixed_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "fixed", "none"):
            raise ValueError(f"settle mode {self.mode!r} is not adaptive, fixed or none")
        if min(self.min_s, self.max_s, self.poll_s, self.fixed_s) < 0:
            raise ValueError("settle times must be >= 0")
        if self.max_s < self.min_s:
            raise ValueError(f"settle max {self.max_s} s is below min {self.min_s} s")


@dataclass(frozen=True, slots=True)
class SettleResult(Generic[T]):
    payload: T
    digest: Hashable
    polls: int
    stable: bool  # two consecutive probes matched (False: timed out, or fixed/none mode)
    waited_s: float

    def as_dict(self) -> dict[str, object]:
        return {"polls": self.polls, "stable": self.stable, "waited_ms": round(self.waited_s * 1000, 3)}


Probe = Callable[[], Awaitable[tuple[Hashable, T]]]


async def settle(probe: Probe[T], policy: SettlePolicy) -> SettleResult[T]:
    """Poll ``probe`` (``-> (digest, payload)``; any comparable digest) until the screen
    is stable or ``max_s``.

    Cancellation (Ctrl+C) propagates from the sleeps and the probe immediately.
    """
    start = time.perf_counter()
    if policy.mode != "adaptive":
        if policy.mode == "fixed" and policy.fixed_s > 0:
            await asyncio.sleep(policy.fixed_s)
        digest, payload = await probe()
        return SettleResult(payload, digest, 1, False, time.perf_counter() - start)

    if policy.min_s > 0:
        # Nothing before min_s can count as settled, so do not spend probes on it; one
        # poll interval before the deadline leaves room for the first comparison.
        await asyncio.sleep(max(0.0, policy.min_s - policy.poll_s))
    probe_started = time.perf_counter()
    digest, payload = await probe()
    polls = 1
    while True:
        now = time.perf_counter()
        elapsed = now - start
        if elapsed >= policy.max_s:
            return SettleResult(payload, digest, polls, False, elapsed)
        # poll_s is the sampling period, start to start: a probe that itself takes
        # 8 ms leaves 2 ms to sleep at the default 10 ms.
        wait = min(policy.poll_s - (now - probe_started), policy.max_s - elapsed)
        if wait > 0:
            await asyncio.sleep(wait)
        probe_started = time.perf_counter()
        new_digest, new_payload = await probe()
        polls += 1
        elapsed = time.perf_counter() - start
        if new_digest == digest and elapsed >= policy.min_s:
            return SettleResult(new_payload, new_digest, polls, True, elapsed)
        digest, payload = new_digest, new_payload
