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

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.agent._ask import ask_for_task as ask_for_task
from deskpilot.agent._config import AgentConfig, load_config, register_section, setting
from deskpilot.agent._config import parse_set_option as parse_set_option
from deskpilot.agent._config import registered_sections as registered_sections
from deskpilot.agent._console import ConsoleReporter as ConsoleReporter
from deskpilot.agent._limits import resolve_limits as resolve_limits
from deskpilot.agent._run import RunResult, run_agent, run_agent_async
from deskpilot.agent._run import build_guard as build_guard
from deskpilot.agent._run import drives_desktop as drives_desktop
from deskpilot.agent._run import open_damage as open_damage
from deskpilot.agent._run import reads_x11_windows as reads_x11_windows
from deskpilot.agent._run import run_info as run_info
from deskpilot.agent._scenarios import BUILTIN_SCENARIOS as BUILTIN_SCENARIOS
from deskpilot.agent._scenarios import DEMO_TEXT as DEMO_TEXT
from deskpilot.agent._scenarios import Scenario
from deskpilot.agent._scenarios import all_scenarios as all_scenarios
from deskpilot.agent._scenarios import resolve_scenario as resolve_scenario
from deskpilot.agent._screen import CapturerScreen as CapturerScreen
from deskpilot.agent._screen import Probe as Probe
from deskpilot.agent._screen import Screen, Shot
from deskpilot.agent._screen import change_box as change_box
from deskpilot.agent._screen import expand_rect as expand_rect
from deskpilot.agent._session import ModeResult, Observation, Session, Turn
from deskpilot.agent._session import NullReporter as NullReporter
from deskpilot.agent._session import Reporter as Reporter
from deskpilot.agent._session import ThreadBound as ThreadBound
from deskpilot.agent._timings import summarize as summarize
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
from deskpilot.rundir import RunLog, iter_turns, load_summary, validate_run_dir

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
