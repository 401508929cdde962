"""The tool sets a model calls: each tool checks its arguments and returns an Action.

A :class:`ToolSet` is a named list of :class:`Tool`\\ s (``make_toolset``: the seeds' sets,
``extended``, ``qwen``, ``uitars``...). A tool reads the model's arguments with the one
vocabulary of :mod:`deskpilot.actions`, maps the 0..1000 coordinates to physical pixels
through the :class:`ToolContext`'s mapping and builds a typed
:class:`deskpilot.actions.Action`, which the policy checks and
:func:`deskpilot.input.perform` sends; the :class:`ToolOutcome` carries it and the payload
the model reads back.
"""

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

__all__ = [
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolSet",
    "err_payload",
    "execute_tool_call",
    "make_toolset",
    "ok_payload",
    "toolset",
]
