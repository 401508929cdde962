"""The two team variants (seeds 002 and 003) and their defaults, looked up by any name.

``--variant`` accepts the seed numbers (``002``, ``2``, ``003``, ``3``) and the seeds'
role names: ``commander``, ``operator``, ``commander/operator``, ``team-leader``,
``sof`` for seed 002; ``planner``, ``executor``, ``planner/executor`` for seed 003.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from deskpilot._errors import ConfigError
from deskpilot.agent._prompts import SECURITY_NOTE
from deskpilot.agent.team import _seed002, _seed003
from deskpilot.agent.team._common import Kind, Role, ToolSpec

__all__ = ["VARIANTS", "Variant", "resolve_variant"]


@dataclass(frozen=True, slots=True)
class Variant:
    """Everything that differs between the seeds: names, tools, prompts and defaults."""

    name: str
    title: str
    aliases: tuple[str, ...]
    planner_role: str
    executor_role: str
    planning_mode: str
    execution_mode: str
    planner_tools: tuple[ToolSpec, ...]
    executor_tools: tuple[ToolSpec, ...]
    planner_prompt: str
    executor_prompt: str
    response_format: str
    review_interval: int
    compression_threshold: int
    max_steps: int
    planner_temperature: float
    planner_max_tokens: int
    executor_temperature: float
    executor_max_tokens: int
    #: How much of the plan text the context shows (002: 500, 003: 400 characters).
    plan_excerpt_chars: int
    #: The seeds' fixed sleeps, available as options (adaptive settle is the default).
    turn_delay_s: float = 1.5
    ui_settle_delay_s: float = 0.3
    loop_recovery_cooldown: int = 3
    min_evidence_chars: int = 100
    context_actions: int = 8

    def tools(self, role: Role) -> tuple[ToolSpec, ...]:
        return self.planner_tools if role == "planner" else self.executor_tools

    def specs(self, role: Role) -> dict[str, ToolSpec]:
        return {spec.name: spec for spec in self.tools(role)}

    def tool_name(self, kind: Kind) -> str:
        """This variant's name for a tool kind (``"click"`` -> ``click_screen_element``)."""
        for spec in (*self.planner_tools, *self.executor_tools):
            if spec.kind == kind:
                return spec.name
        raise KeyError(f"variant {self.name} has no {kind!r} tool")

    def role_name(self, role: Role) -> str:
        return self.planner_role if role == "planner" else self.executor_role

    def mode_name(self, role: Role) -> str:
        return self.planning_mode if role == "planner" else self.execution_mode

    def system_prompt(self, role: Role, *, task: str, review_interval: int, threshold: int) -> str:
        template = self.planner_prompt if role == "planner" else self.executor_prompt
        return template.format(
            task=task, review_interval=review_interval, threshold=threshold, security=SECURITY_NOTE
        )


SEED_002 = Variant(
    name="002",
    title="commander/operator (seed 002)",
    aliases=(
        "002",
        "2",
        "commander",
        "operator",
        "commander/operator",
        "commander-operator",
        "team-leader",
        "sof",
    ),
    planner_role="commander",
    executor_role="operator",
    planning_mode="EVALUATION",
    execution_mode="EXECUTION",
    planner_tools=_seed002.PLANNER_TOOLS,
    executor_tools=_seed002.EXECUTOR_TOOLS,
    planner_prompt=_seed002.PLANNER_PROMPT,
    executor_prompt=_seed002.EXECUTOR_PROMPT,
    response_format="SITREP (OBJ, DOD, OBS, ACT)",
    review_interval=5,
    compression_threshold=8,
    max_steps=30,
    planner_temperature=0.35,
    planner_max_tokens=1200,
    executor_temperature=0.5,
    executor_max_tokens=1024,
    plan_excerpt_chars=500,
)

SEED_003 = Variant(
    name="003",
    title="planner/executor (seed 003)",
    aliases=("003", "3", "planner", "executor", "planner/executor", "planner-executor"),
    planner_role="planner",
    executor_role="executor",
    planning_mode="PLANNING",
    execution_mode="EXECUTION",
    planner_tools=_seed003.PLANNER_TOOLS,
    executor_tools=_seed003.EXECUTOR_TOOLS,
    planner_prompt=_seed003.PLANNER_PROMPT,
    executor_prompt=_seed003.EXECUTOR_PROMPT,
    response_format="LAST_ACTION_RESULT / CURRENT_GOAL / SUCCESS_CRITERIA / SCREEN_SHOWS / NEXT_STEP",
    review_interval=7,
    compression_threshold=12,
    max_steps=50,
    planner_temperature=0.35,
    planner_max_tokens=1800,
    executor_temperature=0.5,
    executor_max_tokens=1400,
    plan_excerpt_chars=400,
)

VARIANTS: Mapping[str, Variant] = {SEED_002.name: SEED_002, SEED_003.name: SEED_003}

_ALIASES = {alias: variant for variant in VARIANTS.values() for alias in variant.aliases}


def resolve_variant(name: str | Variant) -> Variant:
    """The variant for a seed number or role name (case and spaces ignored)."""
    if isinstance(name, Variant):
        return name
    key = "".join(str(name).split()).lower().replace("_", "-").replace("+", "/")
    variant = _ALIASES.get(key)
    if variant is not None:
        return variant
    close = difflib.get_close_matches(key, list(_ALIASES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(
        f"unknown team variant {name!r}{hint}; use 002 (commander/operator) or 003 (planner/executor)",
        variant=str(name),
    )
