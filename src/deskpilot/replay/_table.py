"""The replay's readable output: one row per turn, then every divergence in full."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll, TypeText, from_record
from deskpilot.replay._runner import ReplayResult

__all__ = ["describe_action", "describe_call", "format_result"]


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_call(record: Mapping[str, Any]) -> str:
    """``click_element {"label": "OK", "box": [1, 2]}``; ``3 actions`` (stateless); ``-``."""
    call = record.get("tool_call")
    if isinstance(call, Mapping):
        args = call.get("arguments")
        shown = args if args is not None else call.get("raw_arguments")
        more = len(record.get("more_calls") or []) + len(record.get("extra_calls") or [])
        return f"{call.get('name')} {_short(shown, 60)}" + (f" (+{more})" if more else "")
    actions = record.get("actions")
    if isinstance(actions, list):
        names = [str((a.get("action") or {}).get("name") or (a.get("physical") or {}).get("kind")) for a in actions if isinstance(a, Mapping)]
        return f"{len(names)} action(s): {', '.join(names)}" if names else "no actions"
    if record.get("final"):
        return "final answer"
    model = record.get("model")
    if isinstance(model, Mapping):
        return "text only"
    return "-"


def describe_action(record: Mapping[str, Any]) -> str:
    """The physical action of a turn (``click 960,444``), or ``-``."""
    action = record.get("action")
    if isinstance(action, Mapping):
        return _physical(action)
    actions = record.get("actions")
    if isinstance(actions, list):
        return "; ".join(_physical(a.get("physical") or {}) for a in actions if isinstance(a, Mapping)) or "-"
    return "-"


def _physical(action: Mapping[str, Any]) -> str:
    """``click 960,444``: a recorded action (:func:`deskpilot.actions.from_record`) in short."""
    try:
        typed = from_record(action)
    except ValueError:
        return str(action.get("kind") or "?")
    if isinstance(typed, (Click, Scroll, MoveMouse)) and typed.point is not None:
        x, y = typed.point
        return f"{typed.kind} {x},{y}"
    if isinstance(typed, Drag) and typed.start is not None:
        return f"drag {list(typed.start)}->{list(typed.end)}"
    if isinstance(typed, TypeText):
        return f"type {_short(typed.text, 24)}"
    if isinstance(typed, KeyPress):
        return f"key {typed.combo}"
    return typed.kind


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header).rstrip(), "  ".join("-" * w for w in widths)]
    out.extend(line.format(*r).rstrip() for r in rows)
    return out


def format_result(result: ReplayResult, *, max_details: int = 50) -> str:
    """The text ``deskpilot replay`` prints."""
    by_turn: dict[int, list[str]] = {}
    for d in result.divergences:
        by_turn.setdefault(d.turn, []).append(d.path)
    checks = {c.turn: c for c in result.screen_checks if c.turn is not None}
    recorded = {int(r["turn"]): r for r in result.recorded_turns}
    replayed = {int(r["turn"]): r for r in result.replayed_turns}
    rows: list[list[str]] = []
    for turn in sorted(set(recorded) | set(replayed)):
        if result.last_turn is not None and turn > result.last_turn:
            continue
        # A turn only one side has reads as an empty record on the other.
        rec: Mapping[str, Any] = recorded.get(turn) or {}
        rep: Mapping[str, Any] = replayed.get(turn) or {}
        paths = by_turn.get(turn, [])
        if paths:
            status = "DIFF " + _short(", ".join(dict.fromkeys(p.split("[")[0] for p in paths)), 48)
        else:
            status = "ok"
        check = checks.get(turn)
        if check is not None:
            status += f"; screen {check.differing:.1%}" + ("" if check.ok else " DIFFERENT")
        rows.append(
            [
                str(turn),
                str(rec.get("role") or rep.get("role") or ""),
                _short(describe_call(rec or rep), 44),
                _short(describe_action(rec) if rec else "(not recorded)", 30),
                _short(describe_action(rep) if rep else "(not replayed)", 30),
                status,
            ]
        )
    lines = [
        f"replay of {result.run_dir} ({result.mode} mode, {result.input} input): "
        f"{result.answers_replayed} of {result.answers_recorded} recorded answers replayed",
        "",
        *_table(rows, ["turn", "role", "call", "recorded action", "replayed action", "status"]),
        "",
    ]
    if result.divergences:
        first = result.first_divergence
        lines.append(f"{len(result.divergences)} divergence(s), first at turn {first.turn if first else '?'}:")
        for d in result.divergences[:max_details]:
            lines.append(f"  {d.describe()}")
        if len(result.divergences) > max_details:
            lines.append(f"  ... and {len(result.divergences) - max_details} more")
    if result.screen_checks:
        lines.append("screens:")
        lines.extend(f"  {c.describe()}" for c in result.screen_checks)
    if result.stopped:
        lines.append(f"stopped: {result.stopped}")
    for note in result.notes:
        lines.append(f"note: {note}")
    verdict = "OK: the replay matches the recording" if result.ok else "DIVERGED: the replay does not match the recording"
    lines.append(verdict + (f" (replay run directory: {result.replay_dir})" if result.replay_dir else ""))
    return "\n".join(lines)
