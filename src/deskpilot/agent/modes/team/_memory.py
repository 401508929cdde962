"""Team memory (seed 003's ``AgentMemory``): the action log, archives, loop-recovery turns.

Nothing is ever deleted: compression sets ``archived`` on action records and adds a
:class:`MemorySnapshot`, and the context sent to the model shows only the snapshots
(summary cut to 180 characters, patterns to 120) and the last 8 *active* actions
(result cut to 60 characters, response to 140)::

    COMPLETED_WORK:
      Archive_1: Opened the editor and typed the title...
        Patterns: none

    RECENT_ACTIONS (count=3):
      Turn_6: click_screen_element -> Clicked: Save button (screen changed)
        Response: LAST_ACTION_RESULT: the title is typed...
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AgentMemory", "CompressionResult", "MemoryEntry", "MemorySnapshot", "clip"]

SUMMARY_CHARS = 180
PATTERNS_CHARS = 120
RESULT_CHARS = 60
RESPONSE_CHARS = 140


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...`` when longer."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


@dataclass(slots=True)
class MemoryEntry:
    """One entry of the team's memory: an executor turn (or a recovery action), not the
    record of one performed action (:data:`deskpilot.actions.ActionRecord`). ``archived`` is the only mutable field
    that matters: compression flips it."""

    turn: int
    tool: str
    args: Any
    result: str
    screenshot: str
    response_text: str
    archived: bool = False
    #: Whether the call succeeded (False: refused arguments, unknown tool, no tool call).
    ok: bool = True


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    summary: str
    patterns: str
    archived_count: int
    #: The turns this archive covers (not in the seed; shown in logs, not in the context).
    turns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What :meth:`AgentMemory.apply_compression` did with the requested turns."""

    snapshot: MemorySnapshot | None
    archived_turns: tuple[int, ...]
    unknown_turns: tuple[int, ...]
    already_archived: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return self.snapshot is not None

    def describe(self) -> str:
        parts = [
            f"archived turns {list(self.archived_turns)}"
            if self.archived_turns
            else "archived nothing"
        ]
        if self.unknown_turns:
            parts.append(f"ignored turns that do not exist: {list(self.unknown_turns)}")
        if self.already_archived:
            parts.append(f"ignored turns already archived: {list(self.already_archived)}")
        return "; ".join(parts)


@dataclass(slots=True)
class AgentMemory:
    """The history manager of seed 003 (seed 002's is the same with threshold 8)."""

    compression_threshold: int = 12
    context_actions: int = 8
    recovery_cooldown: int = 3
    _history: list[MemoryEntry] = field(default_factory=list)
    _snapshots: list[MemorySnapshot] = field(default_factory=list)
    last_recovery_turn: int | None = None

    def add_action(self, record: MemoryEntry) -> None:
        self._history.append(record)

    @property
    def history(self) -> tuple[MemoryEntry, ...]:
        """Every record, archived ones included."""
        return tuple(self._history)

    @property
    def active_history(self) -> tuple[MemoryEntry, ...]:
        return tuple(r for r in self._history if not r.archived)

    @property
    def all_snapshots(self) -> tuple[MemorySnapshot, ...]:
        return tuple(self._snapshots)

    @property
    def needs_compression(self) -> bool:
        return len(self.active_history) >= self.compression_threshold

    def apply_compression(
        self, summary: str, patterns: str, archived_turns: Iterable[int]
    ) -> CompressionResult:
        """Archive the active records of ``archived_turns`` under one snapshot.

        Turns that never happened and turns already archived are ignored (and reported);
        when none of the turns can be archived no snapshot is made.
        """
        requested = sorted(set(archived_turns))
        known = {r.turn for r in self._history}
        active = {r.turn for r in self._history if not r.archived}
        unknown = tuple(t for t in requested if t not in known)
        already = tuple(t for t in requested if t in known and t not in active)
        chosen = tuple(t for t in requested if t in active)
        if not chosen:
            return CompressionResult(None, (), unknown, already)
        count = 0
        for record in self._history:
            if record.turn in chosen and not record.archived:
                record.archived = True
                count += 1
        snapshot = MemorySnapshot(summary, patterns, count, chosen)
        self._snapshots.append(snapshot)
        return CompressionResult(snapshot, chosen, unknown, already)

    def auto_compress(self, keep: int) -> CompressionResult | None:
        """Archive the oldest active turns so that at most ``keep`` active *records* remain,
        with a summary made from their results (used when the planner was asked to
        compress and did not archive enough).

        Records, not turns, are counted: a loop-recovery record shares its action's turn
        number, so one turn can hold two. Turns are archived whole, so a newest turn whose
        records do not all fit in ``keep`` is archived too. ``None`` when at most ``keep``
        records are active (nothing to do).
        """
        active = self.active_history
        keep = max(keep, 0)
        if len(active) <= keep:
            return None
        per_turn: dict[int, int] = {}
        for record in active:
            per_turn[record.turn] = per_turn.get(record.turn, 0) + 1
        kept = 0
        kept_turns: set[int] = set()
        for turn in sorted(per_turn, reverse=True):
            if kept + per_turn[turn] > keep:
                break
            kept += per_turn[turn]
            kept_turns.add(turn)
        chosen = [t for t in sorted(per_turn) if t not in kept_turns]
        records = [r for r in active if r.turn in chosen]
        failed = sum(1 for r in records if not r.ok)
        tools: dict[str, int] = {}
        for record in records:
            tools[record.tool] = tools.get(record.tool, 0) + 1
        summary = f"Turns {chosen[0]}-{chosen[-1]} (archived automatically): " + "; ".join(
            f"T{r.turn} {r.tool} -> {clip(r.result, 40)}" for r in records
        )
        patterns = ", ".join(
            f"{name} x{n}" for name, n in sorted(tools.items(), key=lambda kv: -kv[1])
        )
        if failed:
            patterns += f"; {failed} failed"
        return self.apply_compression(summary, patterns, chosen)

    def get_context_for_llm(self) -> str:
        lines = ["COMPLETED_WORK:"]
        if not self._snapshots:
            lines.append("  (none)")
        for number, snap in enumerate(self._snapshots, 1):
            lines.append(f"  Archive_{number}: {clip(snap.summary, SUMMARY_CHARS)}")
            lines.append(f"    Patterns: {clip(snap.patterns or 'none', PATTERNS_CHARS)}")
        active = self.active_history
        lines.append("")
        lines.append(f"RECENT_ACTIONS (count={len(active)}):")
        if not active:
            lines.append("  (none)")
        for record in active[-self.context_actions :] if self.context_actions > 0 else ():
            lines.append(
                f"  Turn_{record.turn}: {record.tool} -> {clip(record.result, RESULT_CHARS)}"
            )
            if record.response_text.strip():
                lines.append(f"    Response: {clip(record.response_text, RESPONSE_CHARS)}")
        return "\n".join(lines)

    def get_last_action_for_validation(self) -> MemoryEntry | None:
        active = self.active_history
        return active[-1] if active else None

    def mark_recovery(self, turn: int) -> None:
        self.last_recovery_turn = turn

    def should_recover(self, current_turn: int) -> bool:
        """More than ``recovery_cooldown`` turns since the last recovery (or none yet)."""
        if self.last_recovery_turn is None:
            return True
        return current_turn - self.last_recovery_turn > self.recovery_cooldown
