"""The task format: what a session sets up, asks, checks and (with ``--scripted``) plays.

A :class:`Task` is data plus two optional callables:

* ``app``: the command line of the app the task runs in, started on the session's own
  display. It speaks a small line protocol on stdin/stdout: it prints one JSON line
  ``{"type": "ready", ...}`` once its window is up, answers the line ``state`` with one
  JSON line ``{"type": "state", ...}`` (what the checker reads) and ``layout`` with
  ``{"type": "layout", "widgets": {name: [x, y, w, h]}}`` (root pixels of what is on
  screen; only the scripted solution uses it), and exits on ``quit`` or the end of stdin.
* ``check``: the checker, deterministic: a Python callable ``check(state) -> bool |
  (bool, detail)`` on the app's ``state`` record (or ``"module:function"`` naming one), or
  ``check_command``: a command run after the agent with ``DESKPILOT_EVAL_STATE`` naming a
  JSON file with that state (exit status 0 = success).
* ``solution``: the scripted solution, :class:`Step`\\ s the built-in model server answers
  one per request (``--scripted``): a tool call whose box arguments may name what is on
  screen (``"@name"``: the centre of ``name`` in the app's layout at that moment, or
  ``"@name|0.9,0.5"``: a point at those fractions of its width and height; ``"$name"``: a
  text the app read, such as a web page's query), as a perfect grounding model would. The agent's tools, policy and input do the rest.

A suite is a list of tasks: the built-in ones by name (``desktop``), or a TOML file with
``[[task]]`` tables (docs/evaluation.md shows one).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskpilot._errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["SUITES", "StateCheck", "Step", "Suite", "Task", "load_suite", "resolve_args", "run_check"]

State = dict[str, Any]
Layout = Mapping[str, Sequence[int]]
#: A checker's verdict: success, or (success, what it saw).
CheckVerdict = bool | tuple[bool, str]
StateCheck = Callable[[State], CheckVerdict]


@dataclass(frozen=True, slots=True)
class Step:
    """One answer of the scripted model: ``tool`` called with ``args``.

    ``until``: repeat this call (at most ``repeat`` times) until the layout shows that
    name (scroll until a row is visible); the next step follows once it does.
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    until: str | None = None
    repeat: int = 10

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Step:
        unknown = set(data) - {"tool", "args", "until", "repeat"}
        if unknown or not isinstance(data.get("tool"), str):
            raise ConfigError(f"a solution step is {{tool, args, until, repeat}}, got {dict(data)!r}")
        return cls(str(data["tool"]), dict(data.get("args") or {}), data.get("until"), int(data.get("repeat", 10)))


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a suite (see the module docstring)."""

    name: str
    instruction: str
    app: tuple[str, ...]
    check: StateCheck | str | None = None
    check_command: tuple[str, ...] | None = None
    solution: tuple[Step, ...] = ()
    #: The scripted model's final answer once the solution is played.
    final: str = "Done."
    max_steps: int = 12
    #: The agent's wall-time limit; the session's own timeout adds start-up and checking.
    max_seconds: float = 60.0
    screen: tuple[int, int] = (1280, 800)
    toolset: str = "extended"
    #: What it exercises (click, drag, menu ...), for the list and the report.
    tags: tuple[str, ...] = ()
    #: Where ``check_command`` runs (a suite file's folder); None: the session's.
    cwd: str | None = None

    def verdict(self, state: State) -> tuple[bool, str]:
        """Run the Python checker on ``state`` (``check_command`` runs in the session)."""
        check = self.check
        if check is None:
            raise ConfigError(f"task {self.name!r} has no Python checker")
        if isinstance(check, str):
            check = _import_callable(check)
        result = check(state)
        if isinstance(result, tuple):
            return bool(result[0]), str(result[1])
        return bool(result), ""


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    tasks: tuple[Task, ...]
    description: str = ""
    #: How a session finds the suite again: a built-in name or a file path.
    ref: str = ""
    #: Why it cannot run here (a package or program missing); "" when it can.
    unavailable: str = ""

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise ConfigError(f"suite {self.name!r} has no task {name!r}")


def _import_callable(ref: str) -> StateCheck:
    module, sep, attr = ref.partition(":")
    if not sep:
        raise ConfigError(f"a checker is 'module:function', got {ref!r}")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load the checker {ref!r}: {exc}") from exc
    if not callable(found):
        raise ConfigError(f"the checker {ref!r} is not callable")
    return found  # type: ignore[no-any-return]


def run_check(task: Task, state: State, *, env: Mapping[str, str] | None = None,
              timeout: float = 30.0) -> tuple[bool, str]:
    """The task's verdict on ``state``: its Python checker, or its ``check_command``."""
    if task.check_command is None:
        return task.verdict(state)
    import json
    import os
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(state, fh, ensure_ascii=False)
    try:
        proc = subprocess.run(list(task.check_command), capture_output=True, text=True, timeout=timeout, cwd=task.cwd,
                              env={**(env or os.environ), "DESKPILOT_EVAL_STATE": fh.name}, check=False)
    finally:
        os.unlink(fh.name)
    detail = (proc.stdout.strip() or proc.stderr.strip())[-300:]
    return proc.returncode == 0, detail


# ---------------------------------------------------------------------- coordinates


def _norm(pixel: float, size: int) -> int:
    # The geometry contract: the centre of screen pixel p -> round((p + 0.5) * 1000 / size).
    return max(0, min(1000, round((pixel + 0.5) * 1000 / size)))


def resolve_args(args: Mapping[str, Any], layout: Layout, screen: tuple[int, int],
                 texts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``args`` with every ``"@name[|fx,fy]"`` value replaced by ``[x, y]`` in 0..1000 and
    every ``"$name"`` by the text the app read under that name (a web page's query).

    Raises :class:`KeyError` naming what the layout does not show."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, str) and value.startswith("$") and len(value) > 1:
            if texts is None or value[1:] not in texts:
                raise KeyError(value[1:])
            out[key] = texts[value[1:]]
        elif isinstance(value, str) and value.startswith("@"):
            name, _, where = value[1:].partition("|")
            if name not in layout:
                raise KeyError(name)
            x, y, w, h = layout[name]
            fx, fy = (float(v) for v in where.split(",")) if where else (0.5, 0.5)
            out[key] = [_norm(x + fx * (w - 1), screen[0]), _norm(y + fy * (h - 1), screen[1])]
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------------- suites

#: Built-in suites: name -> "module:attribute" of a function returning the Suite.
SUITES: dict[str, str] = {
    "desktop": "deskpilot.eval._desktop:desktop_suite",
    "miniwob": "deskpilot.eval._miniwob:miniwob_suite",
}


def load_suite(ref: str) -> Suite:
    """A built-in suite by name, or a TOML suite file by path."""
    if ref in SUITES:
        module, _, attr = SUITES[ref].partition(":")
        suite: Suite = getattr(importlib.import_module(module), attr)()
        return suite
    path = Path(ref)
    if path.suffix == ".toml" and path.is_file():
        return _load_toml(path)
    raise ConfigError(f"no suite {ref!r}: use one of {', '.join(SUITES)} or a .toml suite file",
                      where="SUITE")


_TASK_KEYS = {"name", "instruction", "app", "check", "check_command", "solution", "final", "max_steps",
              "max_seconds", "screen", "toolset", "tags"}


def _load_toml(path: Path) -> Suite:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the suite file {str(path)!r}: {exc}") from exc
    head = data.get("suite", {})
    # A checker module next to the suite file imports by name (check = "my_checks:done").
    if any("check" in item for item in data.get("task", [])) and str(path.parent.resolve()) not in sys.path:
        sys.path.append(str(path.parent.resolve()))
    tasks = []
    for i, item in enumerate(data.get("task", []), 1):
        where = f"{path}: task {i}"
        unknown = set(item) - _TASK_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_TASK_KEYS)}")
        for key in ("name", "instruction", "app"):
            if key not in item:
                raise ConfigError(f"{where}: {key!r} is required")
        if ("check" in item) == ("check_command" in item):
            raise ConfigError(f"{where}: give one of 'check' (module:function) or 'check_command'")
        app = [item["app"]] if isinstance(item["app"], str) else list(item["app"])
        # A relative app or checker path is relative to the suite file.
        app = [str(path.parent / a) if a.startswith("./") else a for a in app]
        command = item.get("check_command")
        if isinstance(command, str):
            command = ["sh", "-c", command]
        tasks.append(Task(
            name=str(item["name"]),
            instruction=str(item["instruction"]),
            app=tuple(app),
            check=item.get("check"),
            check_command=tuple(command) if command else None,
            solution=tuple(Step.from_data(s) for s in item.get("solution", [])),
            final=str(item.get("final", "Done.")),
            max_steps=int(item.get("max_steps", 12)),
            max_seconds=float(item.get("max_seconds", 60.0)),
            screen=tuple(item.get("screen", (1280, 800))),  # type: ignore[arg-type]
            toolset=str(item.get("toolset", "extended")),
            tags=tuple(item.get("tags", ())),
            cwd=str(path.parent.resolve()),
        ))
    names = [t.name for t in tasks]
    if len(set(names)) != len(names) or not tasks:
        raise ConfigError(f"{path}: a suite needs tasks with unique names, got {names}")
    return Suite(str(head.get("name", path.stem)), tuple(tasks), str(head.get("description", "")),
                 ref=str(path.resolve()))
