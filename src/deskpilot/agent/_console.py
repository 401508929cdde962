"""Terminal output with rich: a live phase line, one line per turn, a final table.

The live line (spinner + "turn 3 · waiting for the model") only renders on a
terminal; piped output gets the per-turn lines and the summary as plain text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from deskpilot._untrusted import terminal_text
from deskpilot.agent._timings import OVERHEAD, PHASES
from deskpilot.agent.tools._core import toolset_label

__all__ = ["ConsoleReporter", "format_action", "phase_table"]

_PHASE_WORDS = {
    "model": "waiting for the model",
    "action": "acting",
    "settle": "waiting for the screen to settle",
    "capture": "capturing",
    "encode": "encoding the screenshot",
}
_SHORT = {
    "parse": "parse",
    "action": "act",
    "settle": "settle",
    "capture": "cap",
    "encode": "enc",
    "request_build": "build",
}
#: Width of the role column: the longest role a mode reports (team variants, stateless).
_ROLE_WIDTH = max(len(r) for r in ("planner", "executor", "commander", "operator", "stateless"))
_OUTCOME_STYLE = {"answered": "green", "max_steps": "yellow", "max_time": "yellow", "interrupted": "yellow", "error": "red"}


def _ms(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    v = float(value)
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _point(values: Mapping[str, Any], x: str, y: str) -> str:
    return f"{values[x]},{values[y]}" if x in values and y in values else ""


def _seed_action(entry: Mapping[str, Any]) -> str:
    """One action of a stateless turn (``{"action": seed dict, "physical": ..., "ok": ...}``):
    ``click 500,412``, ``type 'hi'``, ``key alt+f4 ✗`` (refused or failed), ``(skipped)``."""
    action = entry.get("action")
    physical = entry.get("physical")
    if isinstance(action, Mapping):
        name = str(action.get("name") or "?")
        if name == "type":
            text = f"type {_short(repr(str(action.get('text') or '')), 30)}"
        elif name == "key":
            text = f"key {action.get('keys')}"
        else:
            where = _point(action, "x1", "y1")
            if name == "drag" and _point(action, "x2", "y2"):
                where += ">" + _point(action, "x2", "y2")
            if name == "scroll":
                where = f"dy={action.get('dy', 0)} {where}".strip()
            text = f"{name} {where}".strip()
    elif isinstance(physical, Mapping):  # a record of the physical action only
        text = f"{physical.get('kind', '?')} {_point(physical, 'x', 'y')}".strip()
    else:
        text = "?"
    if entry.get("skipped"):
        return text + " (skipped)"
    if entry.get("ok") is False:
        return text + " ✗"
    return text


def _seed_actions(actions: Any, limit: int = 90) -> str:
    entries = [a for a in actions if isinstance(a, Mapping)]
    shown: list[str] = []
    for index, entry in enumerate(entries):
        part = _seed_action(entry)
        rest = len(entries) - index - 1
        tail = f" +{rest} more" if rest else ""
        if shown and len("; ".join([*shown, part])) + len(tail) > limit:
            shown.append(f"+{len(entries) - index} more")
            break
        shown.append(part)
    return "; ".join(shown)


def format_action(record: Mapping[str, Any]) -> str:
    """``click_element 'OK' [512, 300]`` style summary of a turn's tool call; for a
    stateless turn its actions (``click 500,412; key alt+f4 ✗; type 'ok'``)."""
    actions = record.get("actions")
    ran = _seed_actions(actions) if isinstance(actions, list) and actions else ""
    if record.get("final"):
        answer = str(record.get("answer") or "")
        if ran:
            return f"{_short(ran, 60)} -> answer: {_short(answer, 40)}"
        return "answer: " + _short(answer, 70)
    if ran:
        return ran
    if isinstance(actions, list) and not record.get("tool_call"):
        return "no actions"  # a stateless turn whose reply asked for none
    call = record.get("tool_call")
    if not call:
        return "observe" if "observation" in record else "-"
    args = call.get("arguments") or {}
    shown = []
    for key in ("label", "element_name", "box", "position", "start", "end", "x", "y", "text", "key", "direction", "seconds", "instructions"):
        if key in args:
            value = args[key]
            text = repr(value) if isinstance(value, str) else str(value)
            shown.append(text if len(text) <= 40 else text[:37] + "...")
    return f"{call.get('name')} {' '.join(shown)}".strip()


def _result_text(record: Mapping[str, Any]) -> Text:
    result = record.get("result")
    if not isinstance(result, Mapping):
        return Text("")
    if not result.get("ok"):
        err = result.get("error") or {}
        count = result.get("denied") if err.get("type") == "policy_denied" else None
        return Text(terminal_text(f"✗ {err.get('type')}", one_line=True) + (f" ×{count}" if count and count > 1 else ""), style="red")
    if "changed" in result:
        if result.get("warning"):
            return Text(f"no effect ×{result.get('no_effect_repeats')}", style="yellow")
        return Text("changed" if result["changed"] else "no change", style="green" if result["changed"] else "dim")
    return Text("ok", style="green")


def phase_table(phases: Mapping[str, Mapping[str, Any]], title: str = "per-phase timings (ms)") -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("phase")
    for name in ("n", "p50", "p95", "mean", "max"):
        table.add_column(name, justify="right")
    order = [p for p in PHASES if p in phases] + [p for p in phases if p not in PHASES]
    for name in order:
        s = phases[name]
        style = "bold" if name == OVERHEAD else None
        table.add_row(
            name,
            str(s.get("count", "")),
            _ms(s.get("p50_ms")),
            _ms(s.get("p95_ms")),
            _ms(s.get("mean_ms")),
            _ms(s.get("max_ms")),
            style=style,
        )
    return table


class ConsoleReporter:
    """The :class:`~deskpilot.agent._session.Reporter` that prints with rich."""

    def __init__(self, console: Console | None = None, *, live: bool = True, model_label: str | None = None) -> None:
        self.console = console or Console(highlight=False)
        # What serves the model, in words, where the model id says nothing (the demo's built-in server).
        self.model_label = model_label
        self._status: Status | None = None
        self._live = live and self.console.is_terminal

    def start(self, info: Mapping[str, Any]) -> None:
        c = self.console
        c.print(Text.assemble(("deskpilot ", "bold"), (f"{info.get('mode')} mode", "cyan"), f" · tools {toolset_label(str(info.get('toolset')))}"))
        c.print(Text.assemble("task: ", (terminal_text(info.get("task")), "bold")))
        c.print(Text(terminal_text(f"model: {self.model_label or info.get('model')} at {info.get('endpoint')}", one_line=True)))
        screen = info.get("screen") or {}
        c.print(
            f"screen: {screen.get('physical_size')} -> image {screen.get('image_size')} · input: {info.get('input')}"
            f" · max steps {info.get('max_steps')}"
        )
        if info.get("safety"):
            # Say how to stop the run before it starts moving the user's pointer.
            c.print(f"safety: {info['safety']}", style="yellow")
        c.print(f"run directory: {info.get('run_dir')}", style="dim")
        if self._live:
            self._status = c.status("starting", spinner="dots")
            self._status.start()

    def phase(self, turn: int, phase: str) -> None:
        if self._status is not None:
            self._status.update(f"turn {turn} · {_PHASE_WORDS.get(phase, phase)}")

    def turn(self, record: Mapping[str, Any]) -> None:
        timings = record.get("timings") or {}
        parts = " ".join(
            f"{_SHORT[k]} {_ms(timings[k])}" for k in ("action", "settle", "capture", "encode", "request_build") if k in timings
        )
        line = Text.assemble(
            (f"{record.get('turn'):>3} ", "bold"),
            # Padded to the longest role name, never cut ("stateless", "commander").
            (f"{record.get('role', ''):<{_ROLE_WIDTH}} " if record.get("role") not in (None, "agent") else ""),
            # Everything in a turn line may come from the model: no control character
            # (escape sequence, OSC 52 clipboard write) reaches the terminal.
            terminal_text(format_action(record), one_line=True),
            "  ",
            _result_text(record),
        )
        line.append(f"  model {_ms(timings.get('model'))} ms" if "model" in timings else "", style="cyan")
        if OVERHEAD in timings:
            line.append(f"  overhead {_ms(timings[OVERHEAD])} ms", style="magenta")
        if parts:
            line.append(f"  ({parts})", style="dim")
        self.console.print(line)

    def finish(self, summary: Mapping[str, Any]) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        c = self.console
        outcome = str(summary.get("outcome"))
        c.print()
        c.print(Text.assemble("outcome: ", (outcome, f"bold {_OUTCOME_STYLE.get(outcome, '')}"), f" after {summary.get('steps')} steps"
                              f" in {summary.get('duration_s', 0):.1f} s"))
        if summary.get("error"):
            c.print(Text(terminal_text(f"error: {summary['error']}"), style="red"))
        if summary.get("answer"):
            c.print(Text.assemble("answer: ", (terminal_text(summary["answer"]), "bold")))
        phases = summary.get("phases") or {}
        if phases:
            c.print(phase_table(phases))
        totals = summary.get("totals") or {}
        if totals:
            c.print(
                f"requests {totals.get('requests')} · tool calls {totals.get('tool_calls')} "
                f"({totals.get('tool_errors')} refused) · images sent {totals.get('images_sent')} · "
                f"sent {totals.get('request_bytes', 0) / 1e6:.1f} MB",
                style="dim",
            )
        shots = summary.get("screenshots") or []
        c.print(f"run directory: {summary.get('run_dir')}")
        if shots:
            c.print(f"screenshots: {len(shots)} in {summary.get('screenshot_dir')}")
