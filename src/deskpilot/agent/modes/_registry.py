"""Agent modes: discovery and lookup.

A mode is *prompts + a tool set + a turn policy* over the shared machinery of
:class:`~deskpilot.agent._session.Session`. Modes live in modules named
``deskpilot/agent/modes/<name>.py`` or subpackages ``deskpilot/agent/modes/<name>/``
whose top level defines ``MODE = ModeSpec(...)`` (or ``MODES = [...]``); they are found
by name, so adding a mode touches no existing file::

    # deskpilot/agent/modes/team/__init__.py
    @dataclass(frozen=True, slots=True)
    class TeamSettings:
        variant: str = setting("003", env="TEAM_VARIANT", choices=("002", "003"))

    class TeamMode:
        def __init__(self, config: AgentConfig) -> None: ...
        async def run(self, session: Session) -> ModeResult: ...

    MODE = ModeSpec(
        "team", "planner + executor (seeds 002/003)", TeamMode,
        sections={"team": TeamSettings},              # -> [team] in TOML, cfg.section(TeamSettings)
        add_arguments=lambda p: p.add_argument("--variant", choices=("002", "003")),
        flags=lambda args: {"team.variant": args.variant},
    )

Before each model request a mode checks ``session.step_limit()`` and returns it when it
is not None (the run's ``max_steps`` ending, a value); a mode with a step bound of its
own exposes it as a ``max_steps`` attribute, which the run's limits take
(:mod:`._limits`).

``deskpilot run --mode`` offers every discovered mode; ``add_arguments`` adds the mode's
own flags to ``deskpilot run`` (use names no other mode uses) and ``flags`` maps them to
``section.key`` config flags (``None`` = not given).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from deskpilot._errors import ConfigError
from deskpilot.agent._config import AgentConfig, register_section

if TYPE_CHECKING:
    from deskpilot.agent._session import ModeResult, Session
    from deskpilot.agent.tools._protocol import TextParser

__all__ = ["Mode", "ModeSpec", "StepBounded", "TextCallMode", "discover_modes", "get_mode"]


class Mode(Protocol):
    async def run(self, session: Session) -> ModeResult: ...


@runtime_checkable
class StepBounded(Protocol):
    """A mode with its own bound on steps (team: its variant's, ``team.max_steps``, or an
    explicit ``agent.max_steps``, resolved by the mode): its session counts against it."""

    max_steps: int


@runtime_checkable
class TextCallMode(Protocol):
    """A mode whose tool set may write its calls as text (single with UI-TARS): the
    redaction reads what a reply types before any call has run."""

    @property
    def text_protocol(self) -> TextParser | None: ...


@dataclass(frozen=True, slots=True)
class ModeSpec:
    name: str
    description: str
    factory: Callable[[AgentConfig], Mode]
    sections: Mapping[str, type[Any]] = field(default_factory=dict)
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    flags: Callable[[argparse.Namespace], Mapping[str, Any]] | None = None


_MODES: dict[str, ModeSpec] = {}
_BROKEN: dict[str, str] = {}
_DISCOVERED = False


def discover_modes() -> dict[str, ModeSpec]:
    """Import every mode of :mod:`deskpilot.agent.modes` once; returns name -> spec.

    A mode is a public module (``modes/single.py``) or subpackage (``modes/team/``) whose
    top level defines ``MODE`` (or ``MODES``); its name is the module's. A mode module
    that fails to import does not break the others: it is reported when that mode is
    asked for.
    """
    global _DISCOVERED
    if not _DISCOVERED:
        _DISCOVERED = True
        import deskpilot.agent.modes as package

        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue  # the registry itself, and private helpers
            try:
                module = importlib.import_module(f"deskpilot.agent.modes.{info.name}")
            except Exception as exc:
                _BROKEN[info.name] = f"{type(exc).__name__}: {exc}"
                continue
            specs = getattr(module, "MODES", None) or [getattr(module, "MODE", None)]
            for spec in specs:
                if isinstance(spec, ModeSpec):
                    register_mode(spec)
    return dict(_MODES)


def register_mode(spec: ModeSpec) -> None:
    """Add a mode (discovery does this; tests and plugins may call it directly)."""
    _MODES[spec.name] = spec
    for section, cls in spec.sections.items():
        register_section(section, cls)


def get_mode(name: str) -> ModeSpec:
    modes = discover_modes()
    spec = modes.get(name)
    if spec is not None:
        return spec
    if name in _BROKEN:
        raise ConfigError(f"mode {name!r} failed to load: {_BROKEN[name]}", mode=name)
    raise ConfigError(f"unknown mode {name!r}; available: {', '.join(sorted(modes)) or 'none'}", mode=name)
