"""Team mode: a planner that reads and an executor that sees (seeds 002 and 003).

Two roles share one model. The planner (seed 002's commander) never gets a screenshot:
it turns the task and the executor's reports into instructions and compresses the
memory. The executor (seed 002's operator) gets exactly one screenshot per turn and
makes one tool call. ``deskpilot run --mode team --variant 002|003 "task"``.

The mode registers as ``team`` through :data:`MODE` (a
:class:`deskpilot.agent.modes._registry.ModeSpec`). One engine runs both variants; what differs
(names, tool wording, prompt files, defaults) is data: :class:`TeamVariant`
(:data:`COMMANDER_OPERATOR` is seed 002, :data:`PLANNER_EXECUTOR` seed 003). A parsed tool
call is one of the shared argument dataclasses (:class:`PointerArgs`, :class:`PlanArgs`, ...).
"""

from deskpilot.agent._ask import ask_for_task
from deskpilot.agent.modes.team._common import (
    ArchiveArgs,
    CompletionArgs,
    Coordinate,
    DragArgs,
    KeyArgs,
    ParsedCall,
    PlanArgs,
    PointerArgs,
    ProgressArgs,
    ScrollArgs,
    TextArgs,
    parse_call,
)
from deskpilot.agent.modes.team._engine import MODE, TeamMode
from deskpilot.agent.modes.team._execlog import ExecutionLog
from deskpilot.agent.modes.team._memory import AgentMemory, MemoryEntry
from deskpilot.agent.modes.team._recovery import (
    LoopDetector,
    action_signature,
    recovery_actions,
    run_recovery,
)
from deskpilot.agent.modes.team._settings import TeamParams, TeamSettings, resolve_params
from deskpilot.agent.modes.team._state import TeamState
from deskpilot.agent.modes.team._variants import (
    COMMANDER_OPERATOR,
    PLANNER_EXECUTOR,
    VARIANTS,
    TeamVariant,
    resolve_variant,
)

__all__ = [
    "COMMANDER_OPERATOR",
    "MODE",
    "PLANNER_EXECUTOR",
    "VARIANTS",
    "AgentMemory",
    "ArchiveArgs",
    "CompletionArgs",
    "Coordinate",
    "DragArgs",
    "ExecutionLog",
    "KeyArgs",
    "LoopDetector",
    "MemoryEntry",
    "ParsedCall",
    "PlanArgs",
    "PointerArgs",
    "ProgressArgs",
    "ScrollArgs",
    "TeamMode",
    "TeamParams",
    "TeamSettings",
    "TeamState",
    "TeamVariant",
    "TextArgs",
    "action_signature",
    "ask_for_task",
    "parse_call",
    "recovery_actions",
    "resolve_params",
    "resolve_variant",
    "run_recovery",
]
