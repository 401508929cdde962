"""The desktop agent: a vision-language model drives mouse and keyboard through tool calls.

Run a task (what ``deskpilot run`` does)::

    from deskpilot.agent import load_config, run_agent
    result = run_agent(load_config(), "Open the Start menu")
    print(result.outcome, result.answer, result.run_dir)

Pieces, for modes and tools built on the same machinery: :class:`ChatClient` (HTTP),
:class:`History` (messages, pruning, cached request bytes), :class:`ToolSet` /
:class:`Tool` (schemas, checks, payloads), :class:`Session` (the turn machinery: ask,
act with adaptive settle, observe), :class:`RunLog` (the run directory), and
:class:`ModeSpec` to add a mode.
"""

from deskpilot.agent._config import AgentConfig, load_config, register_section, setting
from deskpilot.agent._run import RunResult, run_agent, run_agent_async
from deskpilot.agent._scenarios import Scenario
from deskpilot.agent._screen import Screen, Shot
from deskpilot.agent._session import ModeResult, Observation, Session, Turn
from deskpilot.agent.client._chat import ChatClient, Completion
from deskpilot.agent.client._history import History
from deskpilot.agent.modes._registry import ModeSpec
from deskpilot.agent.tools._act import Performed, act
from deskpilot.agent.tools._core import (
    Tool,
    ToolContext,
    ToolOutcome,
    ToolSet,
    err_payload,
    make_toolset,
    ok_payload,
    toolset,
)
from deskpilot.rundir._writer import RunLog, iter_turns, load_summary, validate_run_dir

__all__ = [
    "AgentConfig",
    "ChatClient",
    "Completion",
    "History",
    "ModeResult",
    "ModeSpec",
    "Observation",
    "Performed",
    "RunLog",
    "RunResult",
    "Scenario",
    "Screen",
    "Session",
    "Shot",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolSet",
    "Turn",
    "act",
    "err_payload",
    "iter_turns",
    "load_config",
    "load_summary",
    "make_toolset",
    "ok_payload",
    "register_section",
    "run_agent",
    "run_agent_async",
    "setting",
    "toolset",
    "validate_run_dir",
]
