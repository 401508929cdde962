"""Loop detection and the seeds' loop-recovery action.

A *loop* is the executor making the same action (same tool, same position / text / key;
its reasoning text does not count) ``repeats`` times in a row without the screen
changing. Then the planner is called to change the approach, and, when loop recovery is
on (``team.loop_recovery``; the seeds had it on) and the cooldown allows it, the seeds'
recovery sequence runs first: ESC, pointer to the centre, pointer to the Start-button
corner ``(left + 20, bottom - 20)``, left click, ctrl+esc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deskpilot._errors import ActionDeniedError, DeskpilotError
from deskpilot.actions import from_record
from deskpilot.agent.client._toolcalls import ToolCall
from deskpilot.agent.modes.team._common import ParsedCall
from deskpilot.agent.tools._act import act
from deskpilot.agent.tools._core import ToolContext

__all__ = ["LoopDetector", "RecoveryReport", "action_signature", "recovery_actions", "run_recovery"]

#: Argument attributes that identify an action (reasoning and evidence text do not).
_IDENTITY = ("position", "start", "end", "text", "key", "goal", "state")


def action_signature(call: ToolCall | None, parsed: ParsedCall | None) -> str:
    """A key for "the same action": kind + identifying arguments; for calls that failed
    to parse, the tool name + raw arguments; for no call at all, ``"<no tool call>"``."""
    if call is None:
        return "<no tool call>"
    if parsed is None:
        return f"{call.name}|invalid|{call.raw_arguments}"
    parts: list[str] = [parsed.kind]
    for name in _IDENTITY:
        value = getattr(parsed.args, name, None)
        if value is not None:
            parts.append(f"{name}={value}")
    return "|".join(parts)


class LoopDetector:
    """Counts identical consecutive actions that left the screen unchanged."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self._signature: str | None = None
        self.count = 0

    def note(self, signature: str, changed: bool) -> bool:
        """Record one action; True when it completes a loop (the count then restarts)."""
        if self.repeats <= 0:
            return False
        if changed:
            self._signature, self.count = None, 0
            return False
        if signature == self._signature:
            self.count += 1
        else:
            self._signature, self.count = signature, 1
        if self.count >= self.repeats:
            self._signature, self.count = None, 0
            return True
        return False


@dataclass(slots=True)
class RecoveryReport:
    performed: list[dict[str, Any]]
    denied: list[dict[str, Any]]
    error: str | None = None

    def describe(self) -> str:
        done = ", ".join(_short(a) for a in self.performed) or "nothing"
        text = f"loop recovery: {done}"
        if self.denied:
            text += f"; refused by policy: {', '.join(_short(a) for a in self.denied)}"
        if self.error:
            text += f"; failed: {self.error}"
        return text


def _short(action: dict[str, Any]) -> str:
    if action["kind"] == "key":
        return f"key {action['key']}"
    if action["kind"] == "move":
        return f"move ({action['x']}, {action['y']})"
    return f"click ({action['x']}, {action['y']})"


def recovery_actions(ctx: ToolContext) -> list[dict[str, Any]]:
    """The seeds' sequence in physical pixels of the working area."""
    area = ctx.mapping.area
    cx, cy = area.left + area.width // 2, area.top + area.height // 2
    # The seeds' (20, screen_height - 20), kept inside small working areas.
    sx = area.left + min(20, area.width - 1)
    sy = area.top + max(0, area.height - 20)
    return [
        {"kind": "key", "key": "escape"},
        {"kind": "move", "x": cx, "y": cy},
        {"kind": "move", "x": sx, "y": sy},
        {"kind": "click", "x": sx, "y": sy, "button": "left", "count": 1},
        {"kind": "key", "key": "ctrl+escape"},
    ]


async def run_recovery(ctx: ToolContext) -> RecoveryReport:
    """Run the recovery sequence, each step the one path every action takes (the policy
    checks it, the input thread performs it); the policy may refuse steps, a stop ends
    the sequence, an input failure ends it with the error."""
    denied: list[dict[str, Any]] = []
    performed: list[dict[str, Any]] = []
    error = None
    for step in recovery_actions(ctx):
        if ctx.stop.is_set():
            break
        try:
            await act(ctx, from_record(step))
        except ActionDeniedError:
            denied.append(step)
            continue
        except DeskpilotError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        performed.append(step)
        await ctx.run_blocking(lambda: ctx.pause(0.3))  # the seeds' ui_settle_delay, only with seed delays on
    return RecoveryReport(performed, denied, error)
