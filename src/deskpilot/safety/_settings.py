"""The ``[policy]`` and ``[safety]`` config sections.

Plain frozen dataclasses with the same field metadata the agent's config loader reads
(``env``, ``help``, ``choices``, ``min``, ``max``), so they register with
``deskpilot.agent.register_section`` without this package importing the agent::

    for name, cls in SETTINGS_SECTIONS.items():
        register_section(name, cls)

List settings accept a TOML array or a comma-separated string (environment variables,
``--set policy.allow_keys=alt+f4,win+e``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from deskpilot.safety._killswitch import DEFAULT_HOTKEY
from deskpilot.safety._policy import Policy, _strings

__all__ = ["SETTINGS_SECTIONS", "PolicySettings", "SafetySettings"]


def _setting(default: Any, *, env: str | tuple[str, ...] = (), help: str = "", choices: tuple[str, ...] = (),
             minimum: float | None = None, maximum: float | None = None) -> Any:
    names = (env,) if isinstance(env, str) else tuple(env)
    if isinstance(default, tuple):
        return field(default_factory=lambda: default,
                     metadata={"env": names, "help": help, "choices": choices, "min": minimum, "max": maximum})
    return field(default=default, metadata={"env": names, "help": help, "choices": choices, "min": minimum, "max": maximum})


def _normalize_lists(obj: Any) -> None:
    for f in dataclasses.fields(obj):
        if f.type in ("tuple[str, ...]", tuple[str, ...]):
            object.__setattr__(obj, f.name, _strings(getattr(obj, f.name), f.name))


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """``[policy]``: what the model may press, type and act upon (see deskpilot.safety.Policy)."""

    mode: str = _setting("enforce", env="AGENT_POLICY", choices=("enforce", "confirm", "audit", "off"),
                         help="enforce: refuse denied actions; confirm: ask on the terminal instead; audit: log only")
    default_deny_keys: bool = _setting(True, help="deny win+r, alt+f4, ctrl+alt+delete, win+l ... unless allowed")
    deny_keys: tuple[str, ...] = _setting((), env="AGENT_DENY_KEYS", help="extra key combos to refuse")
    allow_keys: tuple[str, ...] = _setting((), env="AGENT_ALLOW_KEYS", help="combos allowed (lifts default denies)")
    confirm_keys: tuple[str, ...] = _setting((), help="combos that need a yes on the terminal")
    unmatched_keys: str = _setting("allow", choices=("allow", "deny", "confirm"),
                                   help="combos no rule names (deny = allow_keys is an allowlist)")
    secret_detectors: tuple[str, ...] = _setting(("all",), help="built-in secret detectors refusing to type secrets")
    deny_text: tuple[str, ...] = _setting((), help="regular expressions typed text must not match")
    allow_text: tuple[str, ...] = _setting((), help="secrets fully matching one of these may be typed")
    confirm_text: tuple[str, ...] = _setting((), help="regular expressions whose text needs a yes")
    default_deny_windows: bool = _setting(True, help="never act while a password manager is in front")
    deny_windows: tuple[str, ...] = _setting((), env="AGENT_DENY_WINDOWS", help="title/class globs (title:, class:)")
    allow_windows: tuple[str, ...] = _setting((), env="AGENT_ALLOW_WINDOWS", help="non-empty: act only on these windows")
    confirm_windows: tuple[str, ...] = _setting((), help="windows whose actions need a yes")
    unknown_window: str = _setting("allow", choices=("allow", "deny", "confirm"),
                                   help="when the foreground window cannot be read")
    confirm_timeout: float = _setting(60.0, minimum=0.001, help="seconds to wait for a yes, then deny")

    def __post_init__(self) -> None:
        _normalize_lists(self)
        self.build()  # invalid combos/regexes fail at load time, with the key named

    def as_table(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def build(self, **kwargs: Any) -> Policy:
        """The :class:`Policy` (``kwargs`` go to :meth:`Policy.from_config`)."""
        return Policy.from_config(self.as_table(), **kwargs)


@dataclass(frozen=True, slots=True)
class SafetySettings:
    """``[safety]``: the kill switch, the wall-clock cap and what logs keep."""

    enabled: bool = _setting(True, env="AGENT_SAFETY",
                             help="the safety layer: [policy] checks, kill switch, run budget, log redaction "
                                  "(false = all of it off; --no-safety)")
    kill_switch: bool = _setting(True, env="AGENT_KILL_SWITCH", help="watch the fail-safe corner and the hotkey")
    hotkeys: tuple[str, ...] = _setting((DEFAULT_HOTKEY,), env="AGENT_KILL_HOTKEY",
                                        help="global hotkeys that stop the run (comma-separated)")
    corner: bool = _setting(True, env="AGENT_FAILSAFE_CORNER", help="moving the pointer into a corner stops the run")
    corner_margin: int = _setting(2, minimum=0, maximum=200, help="pixels from the corner that count")
    poll_interval: float = _setting(0.05, minimum=0.005, maximum=1.0, help="seconds between pointer polls")
    hard_cap_seconds: float = _setting(3600.0, env="AGENT_HARD_CAP_SECONDS", minimum=1.0,
                                       help="wall-clock cap when agent.max_seconds is 0 (no run is unbounded)")
    mask_typed_text: bool = _setting(False, env="AGENT_MASK_TYPED_TEXT", help="replace typed text in run records")
    redact_secrets: bool = _setting(True, help="replace secrets in run records")

    def __post_init__(self) -> None:
        _normalize_lists(self)
        from deskpilot.safety._killswitch import hotkey_parts

        for combo in self.hotkeys:
            hotkey_parts(combo)


#: Section name -> settings class, for ``register_section``.
SETTINGS_SECTIONS: dict[str, type[Any]] = {"policy": PolicySettings, "safety": SafetySettings}
