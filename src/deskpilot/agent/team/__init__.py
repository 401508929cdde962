"""Team mode: a planner that reads and an executor that sees (seeds 002 and 003).

Two roles share one model. The planner (seed 002's commander) never gets a screenshot:
it turns the task and the executor's reports into instructions and compresses the
memory. The executor (seed 002's operator) gets exactly one screenshot per turn and
makes one tool call. ``deskpilot run --mode team --variant 002|003 "task"``.

The mode registers as ``team`` through :data:`MODE` (a
:class:`deskpilot.agent._modes.ModeSpec`); the seed-specific argument dataclasses live
in :mod:`seed002 <deskpilot.agent.team._seed002>` and
:mod:`seed003 <deskpilot.agent.team._seed003>`.
"""

from deskpilot.agent._ask import ask_for_task
from deskpilot.agent.team import _seed002 as seed002
from deskpilot.agent.team import _seed003 as seed003
from deskpilot.agent.team._common import Coordinate, ParsedCall, parse_call
from deskpilot.agent.team._engine import MODE, TeamMode
from deskpilot.agent.team._execlog import ExecutionLog
from deskpilot.agent.team._memory import ActionRecord, AgentMemory
from deskpilot.agent.team._recovery import (
    LoopDetector,
    action_signature,
    recovery_actions,
    run_recovery,
)
from deskpilot.agent.team._settings import TeamParams, TeamSettings, resolve_params
from deskpilot.agent.team._state import TeamState
from deskpilot.agent.team._variants import VARIANTS, Variant, resolve_variant

__all__ = [
    "MODE",
    "VARIANTS",
    "ActionRecord",
    "AgentMemory",
    "Coordinate",
    "ExecutionLog",
    "LoopDetector",
    "ParsedCall",
    "TeamMode",
    "TeamParams",
    "TeamSettings",
    "TeamState",
    "Variant",
    "action_signature",
    "ask_for_task",
    "parse_call",
    "recovery_actions",
    "resolve_params",
    "resolve_variant",
    "run_recovery",
    "seed002",
    "seed003",
]
