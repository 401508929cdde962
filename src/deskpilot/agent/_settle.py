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

:func:`settle_on_damage` is the adaptive settle where the OS says when something was
drawn (X11 DAMAGE, :mod:`deskpilot._x11._damage`): instead of grabbing the screen every
``poll_s`` to see whether it still changes, it waits until no drawing has been reported
for a quiet interval (``poll_s``, the same window two equal probes span), bounded by
``min_s``/``max_s``. The one probe it needs is taken speculatively while it waits — at
once, and again after each burst of damage — so when the quiet interval ends the
settled frame is usually in hand already. A probe counts only if no damage arrived
after it started. Polling remains the fallback (no DAMAGE, Windows, a broken watcher).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from deskpilot.rundir._records import SettleRecord

__all__ = ["DamageSource", "SettlePolicy", "SettleResult", "settle", "settle_on_damage"]

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
    stable: bool  # two consecutive probes matched / a quiet interval passed (False: timed out, or fixed/none mode)
    waited_s: float
    damage: int | None = None  # damage notifications seen (None: settled by polling)

    def as_dict(self) -> SettleRecord:
        out: SettleRecord = {"polls": self.polls, "stable": self.stable, "waited_ms": round(self.waited_s * 1000, 3)}
        if self.damage is not None:
            out["damage"] = self.damage
        return out


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


class DamageSource(Protocol):
    """Drawing notifications (:class:`deskpilot._x11._damage.DamageWatcher`): ``fileno``
    becomes readable when some arrived; ``drain`` reads them without blocking and
    returns how many there were."""

    def fileno(self) -> int: ...
    def drain(self) -> int: ...


async def settle_on_damage(probe: Probe[T], policy: SettlePolicy, source: DamageSource) -> SettleResult[T]:
    """Wait until ``source`` has reported no drawing for ``policy.poll_s`` (at least
    ``min_s``, at most ``max_s`` after the call), and return a probe taken after the
    last drawing (see the module docstring). Modes other than adaptive, and a source
    that fails, fall back to :func:`settle`.

    The first probe starts half a quiet interval in (so a screen that changed without
    a notification in that time is still seen as it is after the change; a static
    screen is ready when the quiet interval ends), later ones after each burst of
    drawing. Runs on the event loop's thread (``loop.add_reader``): cancellation is
    immediate.
    """
    if policy.mode != "adaptive":
        return await settle(probe, policy)
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    quiet = policy.poll_s
    first_at = start + max(quiet, policy.min_s) - quiet / 2
    woke = asyncio.Event()
    state: dict[str, Any] = {"last": start, "events": 0, "failed": False}
    fd = source.fileno()

    def readable() -> None:
        try:
            seen = source.drain()
        except Exception:  # a dead connection: stop listening, poll instead
            state["failed"] = True
            loop.remove_reader(fd)
            woke.set()
            return
        if seen:
            state["last"] = time.perf_counter()
            state["events"] += seen
            woke.set()

    # Drawing reported before the action ended belongs to it (or to an earlier one):
    # either way it happened before ``start``, which already counts as activity.
    source.drain()
    loop.add_reader(fd, readable)
    spec: asyncio.Future[tuple[Hashable, T]] | None = None
    spec_started = 0.0
    polls = 0
    waiter: asyncio.Task[bool] | None = None
    try:
        while not state["failed"]:
            now = time.perf_counter()
            elapsed = now - start
            last = float(state["last"])
            if spec is None or (spec.done() and spec_started < last and elapsed < policy.max_s):
                if spec is not None:
                    spec.result()  # a failed probe raises here
                if spec is not None or now >= first_at or elapsed >= policy.max_s:
                    # The first look, or a new one: drawing was reported since the last began.
                    spec_started = now
                    spec = asyncio.ensure_future(probe())
                    polls += 1
                    continue
                timeout = first_at - now
            elif spec.done():
                digest, payload = spec.result()
                if spec_started >= last and elapsed >= policy.min_s and now - last >= quiet:
                    return SettleResult(payload, digest, polls, True, elapsed, int(state["events"]))
                if elapsed >= policy.max_s:  # the latest look at a screen that keeps changing
                    return SettleResult(payload, digest, polls, False, elapsed, int(state["events"]))
                # Fresh but not quiet for long enough yet: wait it out (or the next drawing).
                deadline = max(last + quiet, start + policy.min_s)
                timeout = max(0.0, min(deadline - now, policy.max_s - elapsed))
            else:
                # Nothing to decide before the probe is back (or drawing is reported).
                timeout = max(0.0, policy.max_s - elapsed)
            woke.clear()
            waiter = asyncio.ensure_future(woke.wait())
            pending: set[asyncio.Future[Any]] = {waiter}
            if spec is not None and not spec.done():
                pending.add(spec)
            await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            waiter = None
    finally:
        if waiter is not None:
            waiter.cancel()
        if not state["failed"]:
            loop.remove_reader(fd)
        if spec is not None and not spec.done():
            spec.cancel()
    # The source failed: poll for the rest of the bound.
    rest = max(0.0, policy.max_s - (time.perf_counter() - start))
    result = await settle(probe, SettlePolicy("adaptive", min(policy.min_s, rest), rest, policy.poll_s))
    return SettleResult(
        result.payload, result.digest, polls + result.polls, result.stable, time.perf_counter() - start, None
    )
