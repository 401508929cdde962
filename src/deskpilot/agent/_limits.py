"""Every limit of one run, resolved in one place from the config, the scenario and the mode.

A run is bounded by model requests (``max_steps``) and by wall time. The step bound
comes from, in order: the mode's own bound (team mode resolves its variant's 30 / 50,
``team.max_steps`` or an explicit ``agent.max_steps``; see ``team._settings``), an
explicit ``agent.max_steps``, the scenario's ``max_steps``, the core default. The wall
time is ``agent.max_seconds``, or the ``[safety] hard_cap_seconds`` when that is unset
(read even with the safety layer off: the loop's own timer always bounds a run).

Unset settings (``None``) are resolved here and nowhere else in the run's wiring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deskpilot.agent._config import AgentConfig
from deskpilot.agent._scenarios import Scenario
from deskpilot.safety import SafetySettings

__all__ = ["RunLimits", "resolve_limits", "wall_time_limit"]


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The bounds one run runs under."""

    #: Model requests the run may make (the session ends the mode with ``max_steps``).
    max_steps: int
    #: Seconds the loop's own timer allows (``max_time`` when it fires).
    wall_seconds: float
    #: ``agent.max_seconds`` as configured (None: the safety layer's hard cap applies);
    #: the kill switch's budget takes it as given.
    max_seconds: float | None
    #: Actions without visible effect in a row before the model is warned.
    no_effect_repeats: int


def wall_time_limit(config: AgentConfig) -> float:
    """Seconds the loop's own timer allows the run: ``agent.max_seconds``, or the
    ``[safety] hard_cap_seconds`` when that is unset (read even with the safety layer off)."""
    if config.agent.max_seconds is not None:
        return float(config.agent.max_seconds)
    return float(config.section(SafetySettings).hard_cap_seconds)


def _explicit(config: AgentConfig, key: str) -> bool:
    return config.sources.get(key, "default") != "default"


def _max_steps(config: AgentConfig, scenario: Scenario | None, mode: Any) -> int:
    # A mode with its own bound (team: its variant's, or team.max_steps, or an explicit
    # agent.max_steps, resolved by the mode) is what its session counts against.
    from deskpilot.agent.modes._registry import StepBounded

    if isinstance(mode, StepBounded) and isinstance(mode.max_steps, int) and mode.max_steps > 0:
        return mode.max_steps
    if _explicit(config, "agent.max_steps"):
        return config.agent.max_steps
    if scenario is not None and scenario.max_steps:
        return scenario.max_steps
    return config.agent.max_steps


def resolve_limits(config: AgentConfig, scenario: Scenario | None = None, mode: Any = None) -> RunLimits:
    """The limits of a run of ``mode`` (an object built by a mode's factory) on ``scenario``."""
    return RunLimits(
        max_steps=_max_steps(config, scenario, mode),
        wall_seconds=wall_time_limit(config),
        max_seconds=config.agent.max_seconds,
        no_effect_repeats=config.agent.no_effect_repeats,
    )
