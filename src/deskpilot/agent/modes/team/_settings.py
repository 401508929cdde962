"""``[team]`` settings and the parameters a run uses once the variant's defaults apply.

Every numeric setting the variants tune is unset (``None``) by default: "the variant's
value", so ``--variant 002`` alone gives seed 002's numbers and any single value can still
be overridden by flag, environment (``TEAM_*``), or the TOML file::

    [team]
    variant = "002"          # or "commander", "planner/executor", ...
    review_interval = 4
    loop_recovery = true

Where a core setting was given explicitly it is honoured too: ``agent.max_steps``
(``--max-steps``, AGENT_MAX_STEPS) caps the turns, and ``model.temperature`` /
``model.max_tokens`` (LMSTUDIO_TEMPERATURE / LMSTUDIO_MAX_TOKENS, the seeds' operator
values) set the executor's. :func:`resolve_params` is the one place that decides.

Older configs and runs wrote "unset" as 0 (counts) or -1 (temperatures, the turn delay);
the loader still reads those as ``None`` (``legacy_unset``), and new ``run.json`` files
record ``null``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from deskpilot.agent._config import AgentConfig, setting
from deskpilot.agent.modes.team._variants import TeamVariant, resolve_variant

__all__ = ["TeamParams", "TeamSettings", "resolve_params"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TeamSettings:
    """``[team]``: the planner/executor mode (seeds 002 and 003)."""

    variant: str = setting(
        "003",
        env="TEAM_VARIANT",
        help="planner/executor (003, default) or commander/operator (002); seed numbers and one role name work too",
    )
    review_interval: int | None = setting(
        None,
        env="TEAM_REVIEW_INTERVAL",
        minimum=1,
        legacy_unset=(0,),
        help="planner review every N turns; unset = the variant's (5 / 7)",
    )
    compression_threshold: int | None = setting(
        None,
        env="TEAM_COMPRESSION_THRESHOLD",
        minimum=1,
        legacy_unset=(0,),
        help="active actions that trigger compression; unset = the variant's (8 / 12)",
    )
    max_steps: int | None = setting(
        None,
        env="TEAM_MAX_STEPS",
        minimum=1,
        legacy_unset=(0,),
        help="turns (model requests); unset = agent.max_steps when given, else the variant's (30 / 50)",
    )
    planner_temperature: float | None = setting(
        None,
        env="TEAM_PLANNER_TEMPERATURE",
        minimum=0.0,
        maximum=2.0,
        legacy_unset=(-1.0,),
        help="unset = the variant's (0.35)",
    )
    planner_max_tokens: int | None = setting(
        None,
        env="TEAM_PLANNER_MAX_TOKENS",
        minimum=1,
        legacy_unset=(0,),
        help="unset = the variant's (1200 / 1800)",
    )
    executor_temperature: float | None = setting(
        None,
        env="TEAM_EXECUTOR_TEMPERATURE",
        minimum=0.0,
        maximum=2.0,
        legacy_unset=(-1.0,),
        help="unset = model.temperature when given, else the variant's (0.5)",
    )
    executor_max_tokens: int | None = setting(
        None,
        env="TEAM_EXECUTOR_MAX_TOKENS",
        minimum=1,
        legacy_unset=(0,),
        help="unset = model.max_tokens when given, else the variant's (1024 / 1400)",
    )
    turn_delay: float | None = setting(
        None,
        env="TEAM_TURN_DELAY",
        minimum=0.0,
        legacy_unset=(-1.0,),
        help="seconds slept after every turn; unset = none with adaptive settle, the seeds' 1.5 s with agent.settle=fixed",
    )
    loop_repeats: int = setting(
        3,
        env="TEAM_LOOP_REPEATS",
        minimum=0,
        help="identical actions without visible effect that count as a loop; 0 = off",
    )
    loop_recovery: bool = setting(
        False,
        env="TEAM_LOOP_RECOVERY",
        help="on a loop also press ESC, move to the centre, click the Start-button corner, press ctrl+esc (the seeds' recovery)",
    )
    loop_recovery_cooldown: int = setting(
        3, env="TEAM_LOOP_RECOVERY_COOLDOWN", minimum=0, help="turns between two recoveries"
    )
    min_evidence: int = setting(
        100,
        env="TEAM_MIN_EVIDENCE",
        minimum=0,
        help="characters of evidence a completion report needs",
    )
    context_actions: int = setting(
        8, env="TEAM_CONTEXT_ACTIONS", minimum=1, help="active actions shown in the context"
    )
    planner_attempts: int = setting(
        3,
        env="TEAM_PLANNER_ATTEMPTS",
        minimum=1,
        help="planner answers without a plan before the run stops (before the first plan only)",
    )


@dataclass(frozen=True, slots=True)
class TeamParams:
    """The numbers one team run uses (settings resolved against the variant)."""

    variant: TeamVariant
    review_interval: int
    compression_threshold: int
    max_steps: int
    planner_temperature: float
    planner_max_tokens: int
    executor_temperature: float
    executor_max_tokens: int
    turn_delay: float
    loop_repeats: int
    loop_recovery: bool
    loop_recovery_cooldown: int
    min_evidence: int
    context_actions: int
    planner_attempts: int

    def as_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant.name,
            "variant_title": self.variant.title,
            "review_interval": self.review_interval,
            "compression_threshold": self.compression_threshold,
            "max_steps": self.max_steps,
            "planner": {
                "temperature": self.planner_temperature,
                "max_tokens": self.planner_max_tokens,
            },
            "executor": {
                "temperature": self.executor_temperature,
                "max_tokens": self.executor_max_tokens,
            },
            "turn_delay": self.turn_delay,
            "loop_repeats": self.loop_repeats,
            "loop_recovery": self.loop_recovery,
            "loop_recovery_cooldown": self.loop_recovery_cooldown,
            "min_evidence": self.min_evidence,
            "context_actions": self.context_actions,
            "planner_attempts": self.planner_attempts,
        }


def _explicit(config: AgentConfig, key: str) -> bool:
    return config.sources.get(key, "default") != "default"


def _first(*values: T | None, default: T) -> T:
    return next((value for value in values if value is not None), default)


def resolve_params(config: AgentConfig, settings: TeamSettings | None = None) -> TeamParams:
    """The numbers of one team run: each unset team setting takes the core setting it
    follows (when that was given explicitly), else the variant's value."""
    team = settings if settings is not None else _team_settings(config)
    v = resolve_variant(team.variant)

    def given(key: str, value: T) -> T | None:
        return value if _explicit(config, key) else None

    seeds_delay = v.turn_delay_s if config.agent.settle == "fixed" else 0.0
    return TeamParams(
        variant=v,
        review_interval=_first(team.review_interval, default=v.review_interval),
        compression_threshold=_first(team.compression_threshold, default=v.compression_threshold),
        max_steps=_first(
            team.max_steps, given("agent.max_steps", config.agent.max_steps), default=v.max_steps
        ),
        planner_temperature=_first(team.planner_temperature, default=v.planner_temperature),
        planner_max_tokens=_first(team.planner_max_tokens, default=v.planner_max_tokens),
        executor_temperature=_first(
            team.executor_temperature,
            given("model.temperature", config.model.temperature),
            default=v.executor_temperature,
        ),
        executor_max_tokens=_first(
            team.executor_max_tokens,
            given("model.max_tokens", config.model.max_tokens),
            default=v.executor_max_tokens,
        ),
        turn_delay=_first(team.turn_delay, default=seeds_delay),
        loop_repeats=team.loop_repeats,
        loop_recovery=team.loop_recovery,
        loop_recovery_cooldown=team.loop_recovery_cooldown,
        min_evidence=team.min_evidence,
        context_actions=team.context_actions,
        planner_attempts=team.planner_attempts,
    )


def _team_settings(config: AgentConfig) -> TeamSettings:
    try:
        return config.section(TeamSettings)
    except KeyError:
        # The section is registered with the mode; a config loaded before that (a
        # library caller building AgentConfig by hand) gets the defaults.
        return TeamSettings()
