"""The tool sets a model calls: each tool checks its arguments and returns an Action.

A :class:`ToolSet` is a named list of :class:`Tool`\\ s (``make_toolset``: the seeds' sets,
``extended``, ``qwen``, ``uitars``...). A tool reads the model's arguments with the one
vocabulary of :mod:`deskpilot.actions`, maps the 0..1000 coordinates to physical pixels
through the :class:`ToolContext`'s mapping and builds a typed
:class:`deskpilot.actions.Action`; it never touches the hands. :func:`act` is the one path
every action takes to the desktop (the tool calls through :func:`execute_tool_call`, the
stateless protocol, team's recovery, the MCP server): the policy checks exactly that
action, the input thread performs it, and the :class:`Performed` it returns is what the
record keeps. The :class:`ToolOutcome` carries the action as sent and the payload the
model reads back.
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.agent.tools._act import Performed, act
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSet,
    err_payload,
    execute_tool_call,
    make_toolset,
    ok_payload,
    toolset,
)
from deskpilot.agent.tools._core import key_names as key_names

__all__ = [
    "Performed",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolSet",
    "act",
    "err_payload",
    "execute_tool_call",
    "make_toolset",
    "ok_payload",
    "toolset",
]
