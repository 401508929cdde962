"""Adaptive settle: two equal consecutive probes end the wait, bounded by min and max."""

from __future__ import annotations

import asyncio
import time

import pytest

from deskpilot.agent._settle import SettlePolicy, settle


class Probe:
    """Digests from a script (the last one repeats); counts calls and their times."""

    def __init__(self, digests: list[int]) -> None:
        self.digests = digests
        self.calls: list[float] = []

    async def __call__(self) -> tuple[int, str]:
        self.calls.append(time.perf_counter())
        i = min(len(self.calls) - 1, len(self.digests) - 1)
        return self.digests[i], f"frame{len(self.calls)}"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_static_screen_settles_after_two_probes() -> None:
    probe = Probe([7])
    result = run(settle(probe, SettlePolicy("adaptive", poll_s=0.0)))
    assert result.stable and result.polls == 2 and result.digest == 7
    assert result.payload == "frame2"  # the last probe is the one to reuse


def test_changing_screen_waits_for_two_equal() -> None:
    probe = Probe([1, 2, 3, 4, 4])
    result = run(settle(probe, SettlePolicy("adaptive", poll_s=0.001)))
    assert result.stable and result.polls == 5 and result.digest == 4


def test_max_bounds_a_screen_that_never_settles() -> None:
    counter = iter(range(10**6))

    async def busy() -> tuple[int, None]:
        return next(counter), None

    started = time.perf_counter()
    result = run(settle(busy, SettlePolicy("adaptive", max_s=0.05, poll_s=0.005)))
    elapsed = time.perf_counter() - started
    assert not result.stable
    assert elapsed < 1.0  # bounded (generously: no timing assertion beyond "it ended")
    assert result.polls >= 2


def test_min_is_respected() -> None:
    probe = Probe([5])
    result = run(settle(probe, SettlePolicy("adaptive", min_s=0.05, max_s=1.0, poll_s=0.01)))
    assert result.stable and result.waited_s >= 0.05


def test_fixed_and_none_modes_probe_once() -> None:
    probe = Probe([1, 2])
    result = run(settle(probe, SettlePolicy("fixed", fixed_s=0.02)))
    assert result.polls == 1 and not result.stable and result.waited_s >= 0.02
    probe = Probe([1, 2])
    result = run(settle(probe, SettlePolicy("none")))
    assert result.polls == 1 and result.payload == "frame1"


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="below min"):
        SettlePolicy("adaptive", min_s=2.0, max_s=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        SettlePolicy("adaptive", poll_s=-1)
    with pytest.raises(ValueError, match="settle mode"):
        SettlePolicy("sometimes")  # type: ignore[arg-type]


def test_cancellation_propagates() -> None:
    async def slow() -> tuple[int, None]:
        await asyncio.sleep(10)
        return 0, None

    async def main() -> None:
        task = asyncio.ensure_future(settle(slow, SettlePolicy("adaptive")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
