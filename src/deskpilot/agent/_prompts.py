"""System prompts of the single mode, one per tool set (seed 000's protocol and rules).

A prompt is built from the tool set it describes: the tool list, the coordinate notes and
the rules name only tools the set has (seed 001's set has no press_key and takes x/y, not
boxes), so a mode with its own tools gets a matching description by calling
:func:`system_prompt` with its :class:`ToolSet` (or writes its own). The security note
(screen text is data, not instructions) is part of every prompt.

The texts live in ``deskpilot/agent/prompts/*.txt`` (package data, every mode's prompts),
read once by :func:`load_prompt`; the code here only chooses and joins them. The rule
sentences stay below: each one is kept or dropped by the tools it names.
"""

from __future__ import annotations

import functools
from importlib import resources

from deskpilot.agent.tools._core import Tool, ToolSet

__all__ = ["SECURITY_NOTE", "load_prompt", "observation_text", "system_prompt"]


@functools.cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt``, read once.

    The file's last newline is the file's, not the prompt's (editors add one): it is dropped,
    so a prompt that ends in a newline ends in a blank line in its file. Text mode reads
    CRLF as LF, so a checkout with Windows line endings sends the same bytes."""
    text = resources.files("deskpilot.agent").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")
    return text.removesuffix("\n")


SECURITY_NOTE = load_prompt("security_note")

_COORDINATES_HEAD = load_prompt("single_coordinates")
_COORDINATES_BOX = load_prompt("single_coordinates_box")
_PROTOCOL_ONE_CALL = load_prompt("single_protocol")

_PROTOCOL_MANY = _PROTOCOL_ONE_CALL.replace(
    "2. Call exactly ONE tool per reply. Extra calls in the same reply are rejected.",
    "2. Prefer one tool call per reply so you can verify each action.",
)

_POSITION_PARAMS = frozenset({"box", "start", "end"})  # point/box arguments (_BOX_SCHEMA)


def _tool_lines(tools: ToolSet) -> str:
    lines = []
    for tool in tools.tools.values():
        params = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", []))
        args = ", ".join(name if name in required else f"{name}?" for name in params)
        lines.append(f"- {tool.name}({args}): {tool.description}")
    return "\n".join(lines)


def _params(tool: Tool) -> set[str]:
    return set(tool.parameters.get("properties", {}))


def _observe_tool(tools: ToolSet) -> str | None:
    return next((t.name for t in tools.tools.values() if t.kind == "observe"), None)


def _coordinates(tools: ToolSet) -> str:
    """The coordinate notes for the argument shapes this set actually takes."""
    parts = [_COORDINATES_HEAD]
    if any(_params(t) & _POSITION_PARAMS for t in tools.tools.values()):
        parts.append(_COORDINATES_BOX)
    xy = [t.name for t in tools.tools.values() if {"x", "y"} <= _params(t)]
    if xy:
        verb = "takes" if len(xy) == 1 else "take"
        parts.append(
            f"- {', '.join(xy)} {verb} the position as two numbers, x and y (normalized coords 0-1000)."
        )
    return "\n".join(parts)


def _rules(tools: ToolSet) -> str:
    """seed 000's rules, each kept only when the tools it names are in the set."""
    has = tools.tools.__contains__
    rules = ["One action per step; always verify."]
    if has("move_mouse") and has("click_mouse"):
        # seed 001: click_mouse left-clicks at the current cursor position.
        rules.append(
            "To click something: move_mouse to its centre, then click_mouse (it left-clicks at the current cursor position)."
        )
    if has("type_text"):
        if has("move_mouse") and has("click_mouse"):
            rules.append("Click a text field (move_mouse, then click_mouse) before typing into it.")
        else:
            rules.append("Click a text field before typing into it.")
    if has("press_key"):
        rules.append("Use press_key for Enter, Tab, shortcuts.")
    elif has("type_text"):
        rules.append(
            "There is no tool for special keys (Enter, Tab, shortcuts): type_text types text only, so use the buttons on the screen to confirm."
        )
    if has("scroll_down") and has("move_mouse"):
        rules.append(
            "scroll_down scrolls one wheel notch at the current mouse position: move_mouse over the area first."
        )
    rules.append("If something does not work twice, change approach.")
    rules.append(SECURITY_NOTE)
    return "RULES\n" + "\n".join(f"- {rule}" for rule in rules)


def system_prompt(
    tools: ToolSet, *, one_call_per_step: bool = True, auto_observe: bool = True
) -> str:
    """The system prompt for a tool set: every tool it names is in ``tools``."""
    look = _observe_tool(tools)
    if auto_observe:
        after = (
            "After every action you automatically receive a new screenshot of the settled screen."
        )
    elif look:
        after = f"Actions do not return a screenshot: call {look} to see the result."
    else:
        after = "Actions do not return a screenshot."
    return "\n\n".join(
        [
            load_prompt("single_intro"),
            f"TOOLS\n{_tool_lines(tools)}\n{after}",
            _coordinates(tools),
            _PROTOCOL_ONE_CALL if one_call_per_step else _PROTOCOL_MANY,
            _rules(tools),
        ]
    )


def observation_text(index: int, *, zoomed: bool = False, changed: bool | None = None) -> str:
    """The text part of a screenshot message."""
    if zoomed:
        return (
            f"Screenshot {index} (ZOOMED: shows only the region you asked for, at native resolution; "
            "coordinates 0..1000 are over this zoomed image)."
        )
    if changed is False:
        return f"Screenshot {index} (the screen did not change)."
    return f"Screenshot {index} of the current screen."
