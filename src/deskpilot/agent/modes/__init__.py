"""The agent's modes: prompts + a tool set + a turn policy over one :class:`~deskpilot.agent.Session`.

Each public module or subpackage here is a mode, found by name (:func:`discover_modes`):
``single`` (one model, one tool call per turn), ``team`` (a planner that reads and an
executor that sees; its variants are data) and ``stateless`` (one JSON answer per turn, the
local panel). A mode uses only the session's public operations.
"""

from deskpilot.agent.modes._registry import Mode, ModeSpec, discover_modes, get_mode, register_mode

__all__ = ["Mode", "ModeSpec", "discover_modes", "get_mode", "register_mode"]
