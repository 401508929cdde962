"""Scenarios: named tasks. Built-in ones from seeds 000 and 001, the demo, and user files.

``deskpilot run N`` works like the seeds' ``python main.py N``: ``N`` is the 1-based index
into the scenario list of the active tool set (seed 000's list for ``seed000`` and
``extended``, seed 001's for ``seed001``). ``seed001:3`` (or ``001:3``) names a list
explicitly, a scenario name (``start-menu``) works too, and anything else is a
free-form task.

User scenarios are TOML files (``--scenarios FILE``, the ``DESKPILOT_SCENARIOS``
variable, a list of paths separated by the OS path separator, and ``[[scenario]]``
tables in ``deskpilot.toml``)::

    [[scenario]]
    name = "notes"                      # required, unique
    task = "Open the text editor and write a note saying hello."   # required
    title = "Write a note"              # optional
    toolset = "extended"                # optional: seed000 | seed001 | extended
    max_steps = 20                      # optional
    mode = "single"                     # optional
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deskpilot._errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEMO_TEXT",
    "Scenario",
    "all_scenarios",
    "load_scenario_file",
    "resolve_scenario",
]

#: What the demo types: accents, CJK and a symbol outside Latin-1, so "typed exactly" means something.
DEMO_TEXT = "Grüße, 世界! ✓ deskpilot"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    task: str
    title: str = ""
    #: Which list it belongs to: "seed000", "seed001", "demo", "user" or "task" (free-form).
    group: str = "user"
    #: 1-based position in its group (0 for free-form tasks).
    index: int = 0
    toolset: str | None = None
    max_steps: int | None = None
    mode: str | None = None
    source: str = "built-in"

    @property
    def ref(self) -> str:
        return f"{self.group}:{self.index}" if self.index else self.name

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "group": self.group,
            "index": self.index,
            "toolset": self.toolset,
            "max_steps": self.max_steps,
            "mode": self.mode,
            "source": self.source,
            "task": self.task,
        }


_SEED000 = [
    Scenario(
        "grok-investigation",
        "Open a web browser, go to https://grok.com and start a conversation with Grok AI. Ask it a "
        "question about a topic you find interesting, read its answer on the screen, then keep the "
        "investigation going: after every answer, ask a thoughtful follow-up question based on what "
        "it said. This is a never-ending investigation loop: do not stop on your own.",
        title="Grok AI conversation (never-ending investigation loop)",
    ),
    Scenario(
        "start-menu",
        "Open the Start menu on Windows by clicking the Start button on the taskbar. Then take a new "
        "screenshot and verify that the Start menu is really open; if it is not, try again. Finish "
        "with a short message saying whether the Start menu is open.",
        title="Open the Windows Start menu (with verification)",
    ),
    Scenario(
        "notepad-plus-plus",
        "Open the Start menu, search for Notepad++ and start it. In Notepad++ create a new document "
        "(ctrl+n), type a short paragraph describing what you see on the screen, then select all the "
        "text and copy it (ctrl+a, ctrl+c). Verify every step with a screenshot and finish with a "
        "short summary.",
        title="Start menu + Notepad++ + document actions",
    ),
]

_SEED001 = [
    Scenario(
        "cursor-observation",
        "Take a screenshot and tell me where the mouse cursor is on the screen (which element it is "
        "over, and its approximate 0..1000 coordinates).",
        title="Cursor observation",
        toolset="seed001",
    ),
    Scenario(
        "center-cursor",
        "Move the mouse cursor to the centre of the screen (x=500, y=500), then take a screenshot "
        "and verify that the cursor is in the centre.",
        title="Center the cursor",
        toolset="seed001",
    ),
    Scenario(
        "click",
        "Take a screenshot, move the mouse onto the Start button of the taskbar and click it. Take "
        "another screenshot and verify that the Start menu opened.",
        title="Click (open the Start menu)",
        toolset="seed001",
    ),
    Scenario(
        "type-text",
        "Take a screenshot, find a text input field (for example the taskbar search box), move the "
        "mouse onto it, click it and type: Hello from deskpilot. Verify with a screenshot that the "
        "text appears.",
        title="Type text",
        toolset="seed001",
    ),
]

_DEMO = [
    Scenario(
        "demo",
        "A window titled 'deskpilot demo' shows a large magenta TARGET button and a text field. "
        f"Click the TARGET button, then click the text field, type exactly: {DEMO_TEXT} and press "
        "Enter. When the window says the text was received, answer with a short final message and "
        "no tool call.",
        title="Demo: click the target, type Unicode text, press Enter (Tk demo app)",
        toolset="seed000",
        max_steps=12,
    ),
]


def _numbered(group: str, items: Sequence[Scenario], toolset: str | None) -> list[Scenario]:
    return [replace(s, group=group, index=i, toolset=s.toolset or toolset) for i, s in enumerate(items, 1)]


BUILTIN_SCENARIOS: tuple[Scenario, ...] = (
    *_numbered("seed000", _SEED000, "seed000"),
    *_numbered("seed001", _SEED001, "seed001"),
    *_numbered("demo", _DEMO, "seed000"),
)

_GROUP_ALIASES = {"000": "seed000", "seed000": "seed000", "element": "seed000", "001": "seed001", "seed001": "seed001",
                  "pointer": "seed001", "demo": "demo", "user": "user"}
_TOOLSETS = ("seed000", "seed001", "extended", "qwen", "uitars", "uitars-1.0")


def _scenario_from_table(table: Mapping[str, Any], where: str, index: int) -> Scenario:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: a scenario must be a table", where=where)
    known = {"name", "task", "title", "toolset", "max_steps", "mode"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown scenario keys {unknown}; known: {sorted(known)}", where=where)
    name, task = table.get("name"), table.get("task")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: scenario needs a non-empty string 'name'", where=where)
    if not isinstance(task, str) or not task.strip():
        raise ConfigError(f"{where}: scenario {name!r} needs a non-empty string 'task'", where=where)
    toolset = table.get("toolset")
    if isinstance(toolset, str):
        toolset = {"element": "seed000", "pointer": "seed001"}.get(toolset, toolset)  # user-facing names
    if toolset is not None and toolset not in _TOOLSETS:
        raise ConfigError(f"{where}: scenario {name!r}: toolset {toolset!r} is not one of {', '.join(_TOOLSETS)}", where=where)
    max_steps = table.get("max_steps")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"{where}: scenario {name!r}: max_steps must be a positive integer", where=where)
    mode = table.get("mode")
    if mode is not None and not isinstance(mode, str):
        raise ConfigError(f"{where}: scenario {name!r}: mode must be a string", where=where)
    title = table.get("title", "")
    return Scenario(
        name.strip(),
        task.strip(),
        title=str(title),
        group="user",
        index=index,
        toolset=toolset,
        max_steps=max_steps,
        mode=mode,
        source=where,
    )


def _tables(data: Mapping[str, Any]) -> list[Any]:
    tables = data.get("scenario", [])
    if isinstance(tables, Mapping):
        tables = [tables]
    more = data.get("scenarios", [])
    if isinstance(more, Mapping):
        more = [more]
    return [*tables, *more]


def load_scenario_file(path: str | os.PathLike[str], *, start_index: int = 1) -> list[Scenario]:
    """Scenarios of one TOML file (``[[scenario]]`` tables)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"scenario file {str(p)!r} does not exist", path=str(p)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"scenario file {str(p)!r} is not valid TOML: {exc}", path=str(p)) from None
    tables = _tables(data)
    if not tables:
        raise ConfigError(f"scenario file {str(p)!r} has no [[scenario]] tables", path=str(p))
    return [_scenario_from_table(t, f"{p}[{i}]", start_index + i) for i, t in enumerate(tables)]


def all_scenarios(
    *,
    files: Iterable[str | os.PathLike[str]] = (),
    config_data: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Scenario]:
    """Built-ins, then user scenarios from the config file, ``DESKPILOT_SCENARIOS`` and ``files``."""
    env = os.environ if env is None else env
    user: list[Scenario] = []
    if config_data:
        for i, table in enumerate(_tables(config_data)):
            user.append(_scenario_from_table(table, f"config [[scenario]] {i + 1}", len(user) + 1))
    paths = [p for p in env.get("DESKPILOT_SCENARIOS", "").split(os.pathsep) if p.strip()]
    for path in [*paths, *files]:
        user.extend(load_scenario_file(path, start_index=len(user) + 1))
    names: dict[str, Scenario] = {s.name: s for s in BUILTIN_SCENARIOS}
    for s in user:
        if s.name in names:
            raise ConfigError(
                f"scenario name {s.name!r} from {s.source} is already used by {names[s.name].source} ({names[s.name].ref})",
                name=s.name,
            )
        names[s.name] = s
    return [*BUILTIN_SCENARIOS, *user]


def resolve_scenario(ref: str, scenarios: Sequence[Scenario], *, toolset: str = "seed000") -> Scenario:
    """A scenario from ``N``, ``group:N``, a name, or a free-form task text."""
    text = ref.strip()
    if not text:
        raise ConfigError("the task is empty: give a scenario number, a scenario name or a task text")
    group_of_toolset = "seed001" if toolset == "seed001" else "seed000"
    group, sep, number = text.partition(":")
    if sep and group.strip().lower() in _GROUP_ALIASES and number.strip().isdigit():
        return _by_index(_GROUP_ALIASES[group.strip().lower()], int(number), scenarios)
    if text.isdigit():
        return _by_index(group_of_toolset, int(text), scenarios)
    for s in scenarios:
        if s.name == text:
            return s
    return Scenario("task", text, title=text if len(text) <= 60 else text[:57] + "...", group="task", source="command line")


def _by_index(group: str, index: int, scenarios: Sequence[Scenario]) -> Scenario:
    members = [s for s in scenarios if s.group == group]
    for s in members:
        if s.index == index:
            return s
    listing = ", ".join(f"{s.index} ({s.name})" for s in members) or "none"
    raise ConfigError(
        f"there is no scenario {index} in {group}; it has: {listing} (see `deskpilot scenarios`)",
        group=group,
        index=index,
    )
