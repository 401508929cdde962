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

from deskpilot.agent._client import ChatClient, Completion
from deskpilot.agent._config import (
    AgentConfig,
    HistorySettings,
    LoopSettings,
    ModelSettings,
    RunSettings,
    ScreenSettings,
    load_config,
    register_section,
    setting,
)
from deskpilot.agent._exchange_log import ExchangeLog
from deskpilot.agent._history import History
from deskpilot.agent._modes import ModeSpec, discover_modes, get_mode
from deskpilot.agent._prompts import system_prompt
from deskpilot.agent._run import RunResult, run_agent, run_agent_async
from deskpilot.agent._runlog import RunLog, iter_turns, load_summary, validate_run_dir
from deskpilot.agent._scenarios import Scenario, all_scenarios, resolve_scenario
from deskpilot.agent._screen import Screen, Shot
from deskpilot.agent._session import ModeResult, Observation, Session, Turn
from deskpilot.agent._settle import SettlePolicy, settle
from deskpilot.agent._toolcalls import ToolCall, strip_think
from deskpilot.agent._tools import (
    ERROR_TYPES,
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
    "ERROR_TYPES",
    "AgentConfig",
    "ChatClient",
    "Completion",
    "ExchangeLog",
    "History",
    "HistorySettings",
    "LoopSettings",
    "ModeResult",
    "ModeSpec",
    "ModelSettings",
    "Observation",
    "RunLog",
    "RunResult",
    "RunSettings",
    "Scenario",
    "Screen",
    "ScreenSettings",
    "Session",
    "SettlePolicy",
    "Shot",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolOutcome",
    "ToolSet",
    "Turn",
    "all_scenarios",
    "discover_modes",
    "err_payload",
    "execute_tool_call",
    "get_mode",
    "iter_turns",
    "load_config",
    "load_summary",
    "make_toolset",
    "ok_payload",
    "register_section",
    "resolve_scenario",
    "run_agent",
    "run_agent_async",
    "setting",
    "settle",
    "strip_think",
    "system_prompt",
    "toolset",
    "validate_run_dir",
]
