"""Agent configuration: typed sections resolved from flags, environment, a TOML file and defaults.

Precedence, per key: **CLI flag > environment variable > TOML file > default**.

Every section is a frozen dataclass whose fields carry their environment variable
names in ``field(metadata=...)`` (see :func:`setting`). The core sections are
``[model]``, ``[screen]``, ``[agent]``, ``[history]`` and ``[run]``, plus the safety layer's
``[policy]`` and ``[safety]`` (:mod:`deskpilot.safety`, in every run); other modes add their
own with :func:`register_section` (e.g. team mode registers ``[team]`` with its planner
temperature), so one loader, one error vocabulary and one ``--set section.key=value``
flag serve every mode::

    @dataclass(frozen=True, slots=True)
    class TeamSettings:
        review_interval: int = setting(5, env="TEAM_REVIEW_INTERVAL", minimum=1)

    register_section("team", TeamSettings)
    ...
    cfg.section(TeamSettings).review_interval

The seeds' variables (LMSTUDIO_*, AGENT_*) keep their names and defaults. A TOML file
is read from ``--config PATH`` or, when present, ``./deskpilot.toml``::

    [model]
    endpoint = "http://localhost:1234/v1/chat/completions"
    model = "qwen3-vl-8b-instruct"
    [agent]
    max_steps = 20
    [[scenario]]
    name = "notes"
    task = "Open the text editor and write a note."

Invalid values raise :class:`~deskpilot.errors.ConfigError` naming the variable, the file
key or the flag they came from.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from deskpilot._errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "AgentConfig",
    "HistorySettings",
    "LoopSettings",
    "ModelSettings",
    "RunSettings",
    "ScreenSettings",
    "load_config",
    "register_section",
    "setting",
    "toolset_for_model",
]

DEFAULT_CONFIG_FILE = "deskpilot.toml"

T = TypeVar("T")

_MISSING: Any = dataclasses.MISSING


def setting(
    default: Any,
    *,
    env: str | tuple[str, ...] = (),
    help: str = "",
    choices: tuple[str, ...] = (),
    minimum: float | None = None,
    maximum: float | None = None,
    aliases: Mapping[str, str] | None = None,
    legacy_unset: tuple[float, ...] = (),
) -> Any:
    """A dataclass field with the metadata the loader needs (env names, bounds, choices).

    ``aliases`` maps other accepted spellings to a choice (a user-facing name to the
    value the run records keep, e.g. ``element`` -> ``seed000``).

    A setting typed ``X | None`` with default ``None`` means "not set: another setting
    decides" (the team's temperatures follow the variant); an empty value (``""`` or
    ``none`` from a flag or the environment) sets it back to ``None``. ``legacy_unset``
    lists the numbers that meant the same before (``0`` or ``-1``): older configs and the
    ``run.json`` of older runs still load, as ``None``."""
    names = (env,) if isinstance(env, str) else tuple(env)
    return field(
        default=default,
        metadata={"env": names, "help": help, "choices": choices, "min": minimum, "max": maximum,
                  "aliases": dict(aliases or {}), "legacy_unset": tuple(legacy_unset)},
    )


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """``[model]``: the OpenAI-compatible chat-completions server."""

    endpoint: str = setting(
        "http://localhost:1234/v1/chat/completions",
        env="LMSTUDIO_ENDPOINT",
        help="chat completions URL (LM Studio, llama.cpp, vLLM, Ollama, OpenAI)",
    )
    model: str = setting("qwen3-vl-8b-instruct", env="LMSTUDIO_MODEL", help="model identifier")
    timeout: float = setting(
        240.0, env="LMSTUDIO_TIMEOUT", minimum=0.001,
        help="seconds per request: one deadline for headers and the whole body, streamed or not",
    )
    max_response_mb: float = setting(
        32.0, env="LMSTUDIO_MAX_RESPONSE_MB", minimum=0.001, maximum=4096.0,
        help="largest answer body accepted (MiB); a bigger one ends the request with a clear error",
    )
    temperature: float = setting(0.6, env="LMSTUDIO_TEMPERATURE", minimum=0.0, maximum=2.0)
    max_tokens: int = setting(2048, env="LMSTUDIO_MAX_TOKENS", minimum=1)
    stream: bool = setting(False, env="LMSTUDIO_STREAM", help="use SSE streaming")
    retries: int = setting(2, env="LMSTUDIO_RETRIES", minimum=0, maximum=20)
    api_key: str = setting("", env=("LMSTUDIO_API_KEY", "OPENAI_API_KEY"), help="bearer token")
    tool_choice: str = setting("auto", env="LMSTUDIO_TOOL_CHOICE", choices=("auto", "required", "none"))
    num_ctx: int | None = setting(
        None, env="OLLAMA_NUM_CTX", minimum=1, legacy_unset=(0,),
        help="Ollama's native /api/chat only: the context length (options.num_ctx); unset = the server's default",
    )
    server: str = setting(
        "auto", env="LMSTUDIO_SERVER", choices=("auto", "lmstudio", "llamacpp", "ollama", "vllm", "openai"),
        help="server profile (deskpilot.agent.client._servers): auto picks one from the endpoint and learns from errors",
    )


@dataclass(frozen=True, slots=True)
class ScreenSettings:
    """``[screen]``: what the model sees and which hands act."""

    image_width: int = setting(1536, env="AGENT_IMAGE_W", minimum=16, maximum=16384)
    image_height: int = setting(864, env="AGENT_IMAGE_H", minimum=16, maximum=16384)
    monitor: int = setting(1, env="AGENT_MONITOR", minimum=1, help="1-based monitor index")
    cursor: bool = setting(True, env="AGENT_CURSOR", help="draw the pointer into screenshots")
    capture_backend: str = setting("auto", env="AGENT_CAPTURE_BACKEND",
                                   choices=("auto", "mss", "gdi", "wlroots", "mutter", "portal"))
    input_backend: str = setting(
        "auto", env="AGENT_INPUT_BACKEND", choices=("auto", "sendinput", "xtest", "wlroots", "mutter", "dry")
    )
    png_level: int = setting(1, env="AGENT_PNG_LEVEL", minimum=0, maximum=9)


@dataclass(frozen=True, slots=True)
class HistorySettings:
    """``[history]``: what stays in the conversation sent each turn."""

    keep_last_screenshots: int = setting(
        2,
        env="AGENT_KEEP_LAST_SCREENSHOTS",
        minimum=1,
        help="screenshots kept in the conversation; set explicitly, it also caps the images of any "
        "request at N (the seeds' meaning), whatever prune_chunk",
    )
    keep_last_thinks: int = setting(2, env="AGENT_KEEP_LAST_THINKS", minimum=0)
    prune_chunk: int = setting(
        3,
        env="AGENT_PRUNE_CHUNK",
        minimum=1,
        help="prune images in chunks of N so the request prefix stays stable for prompt caches: "
        "with keep 2, chunk 3 prefills 1.3 images per turn (chunk 1, the seeds' keep-last-N: 2.0) and "
        "holds at most keep + chunk - 1 = 4 images (benchmarks/bench_request.py --only-policies)",
    )


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """``[agent]``: the turn policy of the single mode and the shared loop."""

    mode: str = setting("single", env="AGENT_MODE", help="single (team/stateless when installed)")
    toolset: str = setting(
        "seed000",
        env="AGENT_TOOLSET",
        choices=("seed000", "seed001", "extended", "qwen", "uitars", "uitars-1.0", "auto"),
        # The user-facing names; run records keep the seed ids (golden runs, older runs).
        aliases={"element": "seed000", "pointer": "seed001"},
        help="element (seed000: click_element by box), pointer (seed001: move_mouse + click_mouse), "
        "extended, qwen (Qwen3-VL computer_use), uitars / uitars-1.0 (UI-TARS action text), "
        "auto (from model.model: UI-TARS ids -> uitars / uitars-1.0, Qwen3-VL ids -> qwen, "
        "others element)",
    )
    max_steps: int = setting(10, env="AGENT_MAX_STEPS", minimum=1)
    max_seconds: float | None = setting(
        None,
        env="AGENT_MAX_SECONDS",
        minimum=0.0,
        legacy_unset=(0.0,),
        help="wall-time limit; unset = the safety hard cap only ([safety] hard_cap_seconds)",
    )
    step_delay: float | None = setting(
        None,
        env="AGENT_STEP_DELAY",
        minimum=0.0,
        legacy_unset=(-1.0,),
        help="fixed sleep after each step; unset: 0 with adaptive settle, 0.4 s with --settle fixed",
    )
    settle: str = setting("adaptive", env="AGENT_SETTLE", choices=("adaptive", "fixed", "none"))
    settle_min: float = setting(
        0.0,
        env="AGENT_SETTLE_MIN",
        minimum=0.0,
        help="shortest adaptive settle (an app known to start drawing late)",
    )
    settle_max: float = setting(
        1.5,
        env="AGENT_SETTLE_MAX",
        minimum=0.0,
        help="longest adaptive settle: an animation that never stops ends here, marked still changing",
    )
    settle_poll: float = setting(
        0.01,
        env="AGENT_SETTLE_POLL",
        minimum=0.0,
        help="probe period of the polling settle, and the shortest quiet interval (no drawing) of any settle",
    )
    settle_first_reaction: float = setting(
        0.3,
        env="AGENT_SETTLE_FIRST_REACTION",
        minimum=0.0,
        help="how long to wait for an app's first visible reaction to an action; an action "
        "without visible effect costs this and is reported unchanged",
    )
    settle_frame: float = setting(
        round(1 / 60, 4),
        env="AGENT_SETTLE_FRAME",
        minimum=0.0,
        help="the app's frame interval assumed until its drawing shows its own; the quiet interval "
        "is twice the longest frame gap seen (0: only the gaps seen, for apps that draw once)",
    )
    settle_signal: str = setting(
        "auto",
        env="AGENT_SETTLE_SIGNAL",
        choices=("auto", "damage", "poll"),
        help="adaptive settle on X11 DAMAGE notifications where the server has them (auto), "
        "always (damage: an error without it) or by polling probes (poll)",
    )
    one_tool_call: bool = setting(True, env="AGENT_ONE_TOOL_CALL", help="reject extra calls per step")
    observe_after_action: bool = setting(
        True,
        env="AGENT_OBSERVE_AFTER_ACTION",
        help="attach the settled screenshot after every action (seed 000 waits for observe_screen)",
    )
    no_effect_repeats: int = setting(3, env="AGENT_NO_EFFECT_REPEATS", minimum=0, help="0 = off")
    dry_run: bool = setting(False, env="AGENT_DRY_RUN", help="record input instead of sending it")
    max_type_chars: int = setting(
        2000, env="AGENT_MAX_TYPE_CHARS", minimum=1, maximum=1_000_000,
        help="longest text one type_text call may type (single and team mode)",
    )

    @property
    def effective_step_delay(self) -> float:
        """The seed's 0.4 s under ``settle = "fixed"``, else 0, unless set explicitly."""
        if self.step_delay is not None:
            return self.step_delay
        return 0.4 if self.settle == "fixed" else 0.0


@dataclass(frozen=True, slots=True)
class RunSettings:
    """``[run]``: the run directory and its artifacts."""

    runs_dir: str = setting("runs", env="AGENT_RUNS_DIR")
    dump_dir: str = setting("", env="AGENT_DUMP_DIR", help="screenshots folder; empty = the run directory")
    dump_prefix: str = setting("screen_", env="AGENT_DUMP_PREFIX")
    dump_start: int = setting(1, env="AGENT_DUMP_START", minimum=0)
    save_screenshots: bool = setting(True, env="AGENT_SAVE_SCREENSHOTS")
    exchange_log: bool = setting(True, env="AGENT_EXCHANGE_LOG", help="sanitized HTTP exchange log")
    lmstudio_logs: str = setting(
        "auto",
        env="AGENT_LMSTUDIO_LOGS",
        choices=("auto", "on", "off"),
        help="copy LM Studio's server log lines of this run (seed 001); auto = when the folder exists and the endpoint is on this machine",
    )
    lmstudio_log_dir: str = setting("", env="LMSTUDIO_LOG_DIR", help="default ~/.lmstudio/server-logs")
    quiet: bool = setting(False, env="AGENT_QUIET", help="no live terminal output")


#: Core sections in file order. Modes append theirs through :func:`register_section`.
_SECTIONS: dict[str, type[Any]] = {
    "model": ModelSettings,
    "screen": ScreenSettings,
    "agent": LoopSettings,
    "history": HistorySettings,
    "run": RunSettings,
}
#: Top-level TOML tables that are not settings sections (read by other loaders).
_FREE_TABLES = {"scenario", "scenarios"}


def register_section(name: str, cls: type[Any]) -> None:
    """Add a settings section (a frozen dataclass built with :func:`setting`) for a mode."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    existing = _SECTIONS.get(name)
    if existing is not None and existing is not cls:
        raise ValueError(f"config section [{name}] is already registered by {existing.__name__}")
    _SECTIONS[name] = cls


def registered_sections() -> dict[str, type[Any]]:
    return dict(_SECTIONS)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The resolved configuration: core sections as attributes, the others by type."""

    model: ModelSettings = field(default_factory=ModelSettings)
    screen: ScreenSettings = field(default_factory=ScreenSettings)
    agent: LoopSettings = field(default_factory=LoopSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    run: RunSettings = field(default_factory=RunSettings)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: ``"section.key" -> where the value came from`` ("default", "env LMSTUDIO_MODEL", ...)
    sources: Mapping[str, str] = field(default_factory=dict)
    #: The TOML file read, if any, and its raw content (scenario tables live there too).
    file: Path | None = None
    file_data: Mapping[str, Any] = field(default_factory=dict)

    def section(self, cls: type[T]) -> T:
        """The instance of a registered section class (core or mode-specific)."""
        values: tuple[Any, ...] = (self.model, self.screen, self.agent, self.history, self.run, *self.extra.values())
        for value in values:
            if type(value) is cls:
                return value  # type(value) is cls narrows to T
        raise KeyError(f"section {cls.__name__} is not registered")

    def replace(self, **sections: Any) -> AgentConfig:
        return dataclasses.replace(self, **sections)

    def as_dict(self) -> dict[str, Any]:
        """Every setting, secrets masked (recorded in the run directory)."""
        out: dict[str, Any] = {}
        for name in _SECTIONS:
            value = getattr(self, name, None) if name in _CORE else self.extra.get(name)
            if value is None:
                continue
            values = dataclasses.asdict(value)
            for key in values:
                if _is_secret_setting(key):
                    values[key] = "***" if values[key] else ""
            out[name] = values
        return out


_CORE = ("model", "screen", "agent", "history", "run")


def _is_secret_setting(name: str) -> bool:
    """``api_key``, ``*_token``, ``*password*``: masked in run.json. Lists of key combos
    (``policy.deny_keys``, ``safety.hotkeys``) are not credentials and stay readable."""
    # "max_tokens" counts tokens; only a setting *named* token/secret/password is a credential.
    return (
        name in ("key", "token", "secret")
        or name.endswith(("_key", "_token", "_secret"))
        or "password" in name
    )


# --------------------------------------------------------------------------- coercion

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


def _base_type(annotation: Any) -> Any:
    """``int | None`` -> ``int``; plain types unchanged."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation


def _optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    kind = _base_type(annotation)
    if _optional(annotation) and (value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))):
        return None
    from_text = isinstance(value, str)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if from_text and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"{where}: {value!r} is not a boolean (use true/false, 1/0, on/off)", where=where)
    if kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: {value!r} is not an integer", where=where)
        if isinstance(value, int):
            return value
        if from_text:
            try:
                return int(value.strip())
            except ValueError:
                pass
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{where}: {value!r} is not an integer", where=where)
    if kind is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: {value!r} is not a number", where=where)
        try:
            number = float(value.strip()) if from_text else float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: {value!r} is not a number", where=where) from None
        if not math.isfinite(number):
            raise ConfigError(f"{where}: {value!r} is not a finite number", where=where)
        return number
    if kind is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__}", where=where)
        return str(value)
    return value  # pragma: no cover - sections use str/int/float/bool only


def unset_legacy(meta: Mapping[str, Any], value: Any) -> Any:
    """``None`` for a number that meant "not set" before the setting became optional (a
    flag, variable or file value, or an older run's ``run.json``); ``value`` otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value in meta.get("legacy_unset", ()):
        return None
    return value


def _check(value: Any, meta: Mapping[str, Any], where: str) -> None:
    choices = meta.get("choices") or ()
    if choices and value not in choices:
        aliases = meta.get("aliases") or {}
        named = [f"{a} ({c})" for a, c in aliases.items()] + [c for c in choices if c not in aliases.values()]
        accepted = named if aliases else list(choices)
        close = difflib.get_close_matches(str(value), [*choices, *aliases], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"{where}: {value!r} is not one of {', '.join(accepted)}{hint}", where=where, choices=list(choices)
        )
    low, high = meta.get("min"), meta.get("max")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if low is not None and value < low:
            raise ConfigError(f"{where}: {value!r} is below the minimum {low}", where=where)
        if high is not None and value > high:
            raise ConfigError(f"{where}: {value!r} is above the maximum {high}", where=where)


# --------------------------------------------------------------------------- loading


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}", path=str(path)) from None


def _unknown(name: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{where}: unknown setting {name!r}{hint}; known: {', '.join(known)}", where=where)


def _build_section(
    name: str,
    cls: type[Any],
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    table: Mapping[str, Any],
    file_label: str,
    sources: dict[str, str],
) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in table:
        if key not in fields:
            raise _unknown(key, sorted(fields), f"{file_label} [{name}]")
    values: dict[str, Any] = {}
    for fname, fdef in fields.items():
        meta = fdef.metadata
        dotted = f"{name}.{fname}"
        raw: Any = _MISSING
        where = ""
        if dotted in flags and flags[dotted] is not None:
            raw, where = flags[dotted], f"flag {dotted}"
        else:
            for var in meta.get("env", ()):
                if var in env:
                    raw, where = env[var], f"environment variable {var}"
                    break
            else:
                if fname in table:
                    raw, where = table[fname], f"{file_label} [{name}] {fname}"
        if raw is _MISSING:
            sources[dotted] = "default"
            continue
        value = unset_legacy(meta, _coerce(raw, hints[fname], where))
        if isinstance(value, str):
            value = (meta.get("aliases") or {}).get(value, value)
        _check(value, meta, where)
        values[fname] = value
        sources[dotted] = where
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[{name}]: {exc}", section=name) from None


#: Seed 001 ran with its own defaults (its README's environment block): a 1344x756
#: screenshot and temperature 0.2. They apply with the seed001 tool set wherever the
#: setting was left at its default (a flag, variable or file value still wins).
TOOLSET_DEFAULTS: dict[str, dict[str, Any]] = {
    "seed001": {"screen.image_width": 1344, "screen.image_height": 756, "model.temperature": 0.2},
}


# UI-TARS ids: ByteDance-Seed/UI-TARS-1.5-7B, ui-tars-1.5-7b (LM Studio), bytedance-research/
# UI-TARS-7B-DPO, hf.co/.../UI-TARS-7B-SFT-GGUF (Ollama). The version follows the name; a number
# followed by "b" is the size (UI-TARS-7B, UI-TARS-72B-DPO: the 1.0 releases name no version).
_UITARS_ID = re.compile(r"ui[-_ ]?tars", re.IGNORECASE)
_UITARS_VERSION = re.compile(r"ui[-_ ]?tars[-_ :/]*v?(\d+(?:\.\d+)?)(?![\d.]*b)", re.IGNORECASE)
# Qwen3-VL ids: qwen3-vl-8b-instruct, qwen/qwen3-vl-4b, Qwen/Qwen3-VL-8B-Instruct, qwen3-vl:8b
# (Ollama). Not Qwen2.5-VL: it was trained on absolute pixels of its resized image (ByteDance's
# parser: "Qwen2.5vl output absolute coordinates"), while the qwen tool set's grid is Qwen3-VL's
# 0..1000, so a Qwen2.5-VL id keeps the default tool set, whose prompt states the 0..1000 contract.
_QWEN_VL_ID = re.compile(r"qwen[-_ ]?3[-_ .]?vl", re.IGNORECASE)


def toolset_for_model(model: str, default: str = "seed000") -> str:
    """The tool set a model id names (``--toolset auto``; the table is in the README).

    UI-TARS ids -> ``uitars`` (1.5 and later: absolute pixels on the smart-resized image) or
    ``uitars-1.0`` (no version or 1.0: relative 0..1000); Qwen3-VL ids -> ``qwen``
    (``computer_use`` on its 0..1000 grid); any other id (Qwen2.5-VL included) -> ``default``.
    """
    if _UITARS_ID.search(model):
        version = _UITARS_VERSION.search(model)
        if version is not None and float(version.group(1)) >= 1.5:
            return "uitars"
        return "uitars-1.0"
    if _QWEN_VL_ID.search(model):
        return "qwen"
    return default


def _resolve_auto_toolset(built: dict[str, Any], sources: dict[str, str]) -> None:
    """``agent.toolset = "auto"``: the tool set the model id names, resolved once here so the
    run, its records and a replay all see the concrete one."""
    loop: LoopSettings = built["agent"]
    if loop.toolset != "auto":
        return
    model = built["model"].model
    chosen = toolset_for_model(model)
    built["agent"] = dataclasses.replace(loop, toolset=chosen)
    sources["agent.toolset"] = f"{sources.get('agent.toolset', 'default')} (auto: {chosen} for model {model!r})"


def _apply_toolset_defaults(built: dict[str, Any], sources: dict[str, str]) -> None:
    toolset = built["agent"].toolset
    for key, value in TOOLSET_DEFAULTS.get(toolset, {}).items():
        if sources.get(key, "default") != "default":
            continue
        section, name = key.split(".", 1)
        built[section] = dataclasses.replace(built[section], **{name: value})
        sources[key] = f"toolset {toolset}"


def load_config(
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    path: str | os.PathLike[str] | None = None,
    search_default: bool = True,
) -> AgentConfig:
    """Resolve every registered section.

    ``flags`` maps ``"section.key"`` to a value (``None`` = flag not given); ``env``
    defaults to ``os.environ``; ``path`` is the TOML file, else ``./deskpilot.toml`` is
    read when it exists and ``search_default`` is true.
    """
    flags = dict(flags or {})
    env = os.environ if env is None else env
    file_path: Path | None = None
    data: dict[str, Any] = {}
    if path is not None:
        file_path = Path(path)
        data = _read_file(file_path)
    elif search_default and Path(DEFAULT_CONFIG_FILE).is_file():
        file_path = Path(DEFAULT_CONFIG_FILE)
        data = _read_file(file_path)
    label = f"config file {str(file_path)!r}" if file_path else "config file"

    known_tables = sorted([*_SECTIONS, *_FREE_TABLES])
    for key, value in data.items():
        if key in _FREE_TABLES:
            continue
        if key not in _SECTIONS:
            raise _unknown(key, known_tables, label)
        if not isinstance(value, dict):
            raise ConfigError(f"{label}: [{key}] must be a table", where=key)

    known_flags = {f"{s}.{f.name}" for s, c in _SECTIONS.items() for f in dataclasses.fields(c)}
    for key in flags:
        if key not in known_flags:
            raise _unknown(key, sorted(known_flags), "flag")

    sources: dict[str, str] = {}
    built = {
        name: _build_section(name, cls, flags, env, data.get(name, {}), label, sources)
        for name, cls in _SECTIONS.items()
    }
    _resolve_auto_toolset(built, sources)
    _apply_toolset_defaults(built, sources)
    loop: LoopSettings = built["agent"]
    if loop.settle_max < loop.settle_min:
        raise ConfigError(
            f"agent.settle_max ({loop.settle_max}) is below agent.settle_min ({loop.settle_min})",
            where="agent.settle_max",
        )
    return AgentConfig(
        model=built["model"],
        screen=built["screen"],
        agent=loop,
        history=built["history"],
        run=built["run"],
        extra={k: v for k, v in built.items() if k not in _CORE},
        sources=sources,
        file=file_path,
        file_data=data,
    )


def parse_set_option(text: str) -> tuple[str, str]:
    """``--set section.key=value`` -> ``("section.key", "value")``."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or "." not in key:
        raise ConfigError(f"--set expects section.key=value, got {text!r}", where="--set")
    return key, value


def settings_table() -> list[tuple[str, str, str, str]]:
    """``(section.key, env vars, default, help)`` for every registered setting (docs, --help)."""
    rows: list[tuple[str, str, str, str]] = []
    for name, cls in _SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f.default is not _MISSING:
                default = f.default
            elif f.default_factory is not _MISSING:
                factory: Any = f.default_factory
                default = factory()
            else:
                default = ""
            rows.append((f"{name}.{f.name}", ", ".join(f.metadata.get("env", ())), repr(default), f.metadata.get("help", "")))
    return rows



# The safety layer's [policy] and [safety] sections belong to every run, whatever the
# mode. deskpilot.safety never imports the agent, so registering here makes no cycle.
from deskpilot.safety import PolicySettings, SafetySettings  # noqa: E402

register_section("policy", PolicySettings)
register_section("safety", SafetySettings)
