"""The import rules of ARCHITECTURE.md, enforced.

Every module of ``src/deskpilot`` belongs to a room (its first package under
``deskpilot``); rooms stand on floors. A module may import its own room and the rooms
on lower floors, at the top of the file or inside a function alike (a lazy import is
still a dependency: it only moves the cost); an import under ``if TYPE_CHECKING:`` names
a type for an annotation and is no dependency. ``ctypes`` is imported only by the
platform bindings and the backends that talk to the OS through them. Inside the agent,
the model client and the tool sets stand below the session and the modes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "deskpilot"
ARCHITECTURE = Path(__file__).resolve().parents[2] / "ARCHITECTURE.md"

#: room -> floor (ARCHITECTURE.md, "Floors"). A room imports only rooms on its floor or below.
FLOORS: dict[str, int] = {
    "_errors": 0,
    "errors": 0,
    "_version": 0,
    "_untrusted": 0,
    "_extras": 0,
    "geometry": 1,
    "_native": 1,
    "_win32": 1,
    "_x11": 1,
    "_wayland": 1,
    "imaging": 2,
    "actions": 2,
    "capture": 3,
    "input": 3,
    "safety": 4,
    "panel": 4,
    "rundir": 4,
    "agent": 5,
    "testing": 6,
    "mcp": 6,
    "replay": 7,
    "report": 8,
    "eval": 9,
    "commands": 10,
    "cli": 10,
    "__main__": 10,
    "__init__": 10,  # the package's own facade re-exports lazily from any room
}

#: Modules that may import ctypes: the platform bindings and the OS backends built on them.
CTYPES_ALLOWED = (
    "_win32/",
    "_x11/",
    "_wayland/",
    "capture/_gdi.py",
    "capture/_mss.py",
    "capture/_mutter.py",
    "capture/_wlroots.py",
    "input/_xtest.py",
    "input/_sendinput.py",
    "input/_mutter.py",
    "input/_wlroots.py",
)


def _modules() -> Iterator[Path]:
    yield from sorted(p for p in SRC.rglob("*.py") if "egg-info" not in str(p))


def _room(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.name != "__init__.py" else "__init__"


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (annotations only: no runtime edge)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    type_only = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            if node.module == "deskpilot":
                for alias in node.names:
                    yield node.lineno, f"deskpilot.{alias.name}"


def test_every_room_has_a_floor() -> None:
    rooms = {_room(p) for p in _modules()}
    assert rooms <= set(FLOORS), f"rooms without a floor (add them to ARCHITECTURE.md and FLOORS): {sorted(rooms - set(FLOORS))}"


def test_no_room_imports_a_higher_floor() -> None:
    offences = []
    for path in _modules():
        room = _room(path)
        for line, name in _imports(path):
            parts = name.split(".")
            if parts[0] != "deskpilot" or len(parts) < 2:
                continue
            target = parts[1]
            if target == room or target not in FLOORS:
                continue
            if FLOORS[target] > FLOORS[room]:
                offences.append(f"{path.relative_to(SRC)}:{line}: {room} (floor {FLOORS[room]}) imports {name} (floor {FLOORS[target]})")
    assert not offences, "imports of a higher floor:\n" + "\n".join(offences)


def _private_reaches(source: str, room: str, filename: str = "<module>") -> Iterator[tuple[int, str]]:
    """Imports of another room's private module by a module of ``room``: a name
    ``deskpilot.S.a.b`` with ``S`` another room and a part after ``S`` that starts with
    ``_`` (``deskpilot.rundir._writer``), or ``from deskpilot.S import _module``. The
    room's face is ``deskpilot.S`` itself and its public submodules. Imports under
    ``TYPE_CHECKING`` count too: a type another room needs is part of the face."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            names += [f"{node.module}.{alias.name}" for alias in node.names if _is_private_module(node.module, alias.name)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "deskpilot" or len(parts) < 3 or parts[1] == room:
                continue
            if any(part.startswith("_") for part in parts[2:]):
                yield node.lineno, name


def _is_private_module(package: str, name: str) -> bool:
    """Whether ``from package import name`` names a private submodule (``_constants``)."""
    if not name.startswith("_") or not package.startswith("deskpilot"):
        return False
    folder = SRC.joinpath(*package.split(".")[1:])
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def test_no_room_imports_another_rooms_private_module() -> None:
    """A room reaches another room only through its face (ARCHITECTURE.md, "Faces"): the
    package's ``__init__`` (what users import, in ``__all__``, and the internal interface
    other rooms import, re-exported there) or a public submodule. Inside a room (the agent
    with its client, tools and modes) private modules are the room's own business."""
    offences = []
    for path in _modules():
        room = _room(path)
        offences += [
            f"{path.relative_to(SRC)}:{line}: {room} imports {name}"
            for line, name in _private_reaches(path.read_text(encoding="utf-8"), room, str(path))
        ]
    assert not offences, f"imports of another room's private module ({len(offences)}):\n" + "\n".join(offences)


def test_the_wall_test_catches_a_private_import() -> None:
    source = (
        "from deskpilot.rundir._writer import RunLog\n"
        "import deskpilot.agent._run\n"
        "from deskpilot._win32 import _constants\n"
        "from deskpilot.mcp._desktop import Desktop\n"  # the room's own
        "from deskpilot.agent.client import ChatClient\n"  # a public subpackage: the face
        "from deskpilot.rundir import RunLog\n"
        "from deskpilot import _win32\n"
        "if TYPE_CHECKING:\n"
        "    from deskpilot.safety._policy import Decision\n"
    )
    found = {name for _, name in _private_reaches(source, "mcp")}
    assert found == {"deskpilot.rundir._writer", "deskpilot.agent._run", "deskpilot._win32._constants", "deskpilot.safety._policy"}


def test_ctypes_only_in_platform_bindings_and_backends() -> None:
    offences = []
    for path in _modules():
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(CTYPES_ALLOWED):
            continue
        offences += [f"{rel}:{line}: {name}" for line, name in _imports(path) if name.split(".")[0] == "ctypes"]
    assert not offences, "ctypes outside the platform bindings and backends:\n" + "\n".join(offences)


def test_architecture_document_states_these_floors() -> None:
    """ARCHITECTURE.md's floor table is this test's FLOORS, room for room."""
    documented: dict[str, int] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| (\d+) \| ([^|]+) \|", line)
        if match:
            for room in re.findall(r"`([^`]+)`", match.group(2)):
                documented[room] = int(match.group(1))
    expected = {room: floor for room, floor in FLOORS.items() if room != "__init__"}
    assert documented == expected


#: Inside the agent: the model client and the tool sets never reach up into the session,
#: the run or a mode (a mode is a leaf that only the registry finds by name).
AGENT_LOWER = ("agent/client/", "agent/tools/")
AGENT_UPPER = ("deskpilot.agent._session", "deskpilot.agent._run", "deskpilot.agent.modes")


def test_the_model_client_and_tool_sets_stand_below_the_session_and_modes() -> None:
    offences = []
    for path in _modules():
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(AGENT_LOWER):
            continue
        offences += [
            f"{rel}:{line}: {name}"
            for line, name in _imports(path)
            if name.startswith(AGENT_UPPER) or name in ("deskpilot.agent", "deskpilot.agent.modes")
        ]
    assert not offences, "the client or a tool set imports the session, the run or a mode:\n" + "\n".join(offences)


#: The one path of every action (ARCHITECTURE.md, "One turn"): the only module above the
#: input and safety rooms that asks the policy or sends input.
ONE_PATH = "agent/tools/_act.py"
#: The Hands primitives that send input.
_SENDS = {"click", "move", "type_text", "key", "scroll", "drag", "hold", "mouse_down", "mouse_up"}
_ASKS = {"acheck_policy", "check_policy", "check_action", "check_action_async"}


def _names(node: ast.expr) -> Iterator[str]:
    while isinstance(node, ast.Attribute):
        yield node.attr
        node = node.value
    if isinstance(node, ast.Name):
        yield node.id


def _bypasses(path: Path) -> Iterator[tuple[int, str]]:
    """Calls that send input or ask the policy: ``perform(...)`` (the input layer's), a Hands
    primitive on something named hands (``ctx.hands.click``), a policy check."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("deskpilot.input")
            and any(alias.name == "perform" for alias in node.names)
        ):
            yield node.lineno, f"imports perform from {node.module}"
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = list(_names(func.value))
            if func.attr in _SENDS and any("hands" in name for name in owner):
                yield node.lineno, f"{'.'.join(reversed(owner))}.{func.attr}(...)"
            if func.attr in _ASKS:
                yield node.lineno, f"{func.attr}(...)"


def test_every_action_takes_the_one_path() -> None:
    """Above the input and safety rooms, only the one path (``agent/tools/_act.py``) sends
    input or asks the policy: a tool set, a mode or a server builds an Action and calls
    ``deskpilot.agent.tools.act``, so no new dialect can forget the safety check. (The
    test support, ``testing``, implements Hands and is no sender.)"""
    offences = []
    for path in _modules():
        rel = path.relative_to(SRC).as_posix()
        room = _room(path)
        if rel == ONE_PATH or room == "testing" or FLOORS.get(room, FLOORS["agent"]) < FLOORS["agent"]:
            continue
        offences += [f"{rel}:{line}: {what}" for line, what in _bypasses(path)]
    assert not offences, f"input or a policy check outside {ONE_PATH}:\n" + "\n".join(offences)


def test_the_one_path_test_catches_a_bypass(tmp_path: Path) -> None:
    bypass = tmp_path / "tool.py"
    bypass.write_text(
        "from deskpilot.input import perform\n"
        "async def run(ctx, args):\n"
        "    await ctx.acheck_policy(args)\n"
        "    ctx.hands.click(1, 2)\n"
        "    self.hands.type_text('x')\n"
        "    perform(ctx.hands, args)\n"
    )
    found = {what for _, what in _bypasses(bypass)}
    assert found == {"imports perform from deskpilot.input", "acheck_policy(...)", "ctx.hands.click(...)", "self.hands.type_text(...)"}


@pytest.mark.parametrize("room", ["capture", "imaging", "geometry", "input"])
def test_the_capture_library_rooms_stand_below_the_agent(room: str) -> None:
    assert FLOORS[room] < FLOORS["agent"]


UNIT = Path(__file__).resolve().parent


def test_unit_tests_mirror_the_package_layout() -> None:
    """Each folder of tests/unit is a package or module of src/deskpilot (its tests live there); only
    the tests of the package as a whole (surface, architecture, install, release) sit at the top."""
    strays = []
    for path in sorted(UNIT.rglob("test_*.py")):
        folder = path.parent.relative_to(UNIT)
        if folder.parts and not ((SRC / folder).is_dir() or (SRC / folder).with_suffix(".py").is_file()):
            strays.append(str(path.relative_to(UNIT)))
    assert not strays, "test folders with no package or module of the same path in src/deskpilot: " + ", ".join(strays)
    folders = {p.parent for p in UNIT.rglob("test_*.py")}
    assert len(folders) > 10, "the unit tests are grouped by package"


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's top level, through ``if``/``try`` (platform branches)."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
            for handler in node.handlers:
                yield from _top_level(handler.body)
        else:
            yield node


def _type_definitions(source: str) -> Iterator[tuple[str, str]]:
    """``(name, what)`` for each class and type alias a module defines at its top level:
    ``what`` is the class's own marker, or the alias's value as written (two aliases written
    alike are one type: ``Literal["a"] == Literal["a"]``, ``dict[str, Any] == dict[str, Any]``)."""
    for node in _top_level(ast.parse(source).body):
        if isinstance(node, ast.ClassDef):
            yield node.name, "class"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if ast.unparse(node.annotation).endswith("TypeAlias"):
                yield node.target.id, ast.unparse(node.value)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            # A capitalised name bound to a type expression (``X = A | B``, ``X = Literal[...]``,
            # ``X = TypedDict(...)``) is a type alias; an ALL_CAPS name is a constant.
            if name.lstrip("_")[:1].isupper() and not name.isupper() and isinstance(node.value, (ast.BinOp, ast.Subscript, ast.Call)):
                yield name, ast.unparse(node.value)


def _second_names(source: str) -> Iterator[tuple[int, str]]:
    """``Name = Other`` at a module's top level with both capitalised: a class under a second
    name (``ToolError = ArgumentError``), which splits one concept in two words."""
    for node in _top_level(ast.parse(source).body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            value = node.value.id if isinstance(node.value, ast.Name) else node.value.attr if isinstance(node.value, ast.Attribute) else ""
            if all(word.lstrip("_")[:1].isupper() and not word.isupper() for word in (name, value)):
                yield node.lineno, f"{name} = {ast.unparse(node.value)}"


def _same_name_different_types(sources: dict[str, str]) -> dict[str, list[str]]:
    seen: dict[str, dict[str, str]] = {}
    for module, source in sources.items():
        for name, what in _type_definitions(source):
            seen.setdefault(name, {})[module] = f"class in {module}" if what == "class" else what
    return {name: sorted(where) for name, where in seen.items() if len(set(where.values())) > 1}


def test_one_name_per_concept() -> None:
    """No two different classes or type aliases share a name anywhere in the package (a
    name used twice is the same type re-exported): ``ToolError`` and ``ArgumentError`` were
    one class under two names, and ``Action``, ``ActionRecord`` and ``Policy`` each meant two
    different things."""
    sources = {path.relative_to(SRC).as_posix(): path.read_text(encoding="utf-8") for path in _modules()}
    clashes = _same_name_different_types(sources)
    assert not clashes, "one name, different types (rename one to what it is):\n" + "\n".join(
        f"{name}: {', '.join(where)}" for name, where in sorted(clashes.items())
    )
    aliases = [f"{module}:{line}: {alias}" for module, source in sources.items() for line, alias in _second_names(source)]
    assert not aliases, "one class, two names (keep one):\n" + "\n".join(aliases)


def test_the_one_name_test_catches_a_second_meaning() -> None:
    clashes = _same_name_different_types({
        "actions.py": "Action: TypeAlias = Click | Drag\nButton = Literal['left', 'right']\n",
        "agent/modes/stateless/_protocol.py": "class Action:\n    name: str\n",
        "input/_base.py": "Button = Literal['left', 'right']\n",  # the same type written again
        "safety/_policy.py": "Verdict = Literal['allow', 'deny']\n",
        "eval/_task.py": "Verdict = bool | tuple[bool, str]\nMAX = 3\n",
    })
    assert clashes == {"Action": ["actions.py", "agent/modes/stateless/_protocol.py"], "Verdict": ["eval/_task.py", "safety/_policy.py"]}
    source = "ToolError = ArgumentError\nDisplay = c_void_p\nAnswer = Reply | Fault\nPolicy = safety.Policy\n"
    assert [alias for _, alias in _second_names(source)] == ["ToolError = ArgumentError", "Policy = safety.Policy"]


#: ``getattr``/``hasattr`` with a literal attribute name, allowed only on these receivers
#: ((module, the receiver as written) -> why): everywhere else a member the code relies on
#: is declared by the protocol or class it belongs to and used directly.
DYNAMIC_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("cli.py", "args"): "argparse.Namespace: a flag exists only if the command registered it",
    ("commands/run.py", "args"): "argparse.Namespace: run and panel share this reader, with different flags",
    ("agent/modes/team/_engine.py", "args"): "argparse.Namespace: the team flags exist only on `deskpilot run`",
    ("agent/modes/stateless/__init__.py", "args"): "argparse.Namespace: `run` and `panel` register different flags",
    ("agent/modes/_registry.py", "module"): "a mode module found by name defines MODE or MODES at its top level",
    ("rundir/_writer.py", "os"): "os.O_CLOEXEC and os.O_BINARY exist on one platform each",
    ("input/_win_watchdog.py", "subprocess"): "subprocess.CREATE_NEW_PROCESS_GROUP exists on Windows only",
    ("_win32/_library.py", "arg"): "ctypes' byref() object keeps its pointee in `_obj` (ctypes' own, undeclared)",
    ("input/_controller.py", "point"): "a user's pair may be any indexable with a length (numpy arrays are no Sequence)",
    ("capture/_capturer.py", "size"): "a user's size may be any indexable with a length (numpy arrays are no Sequence)",
}


def _literal_attribute_probes(source: str, filename: str = "<module>") -> Iterator[tuple[int, str, str]]:
    """``(line, receiver, attribute)`` of each ``getattr(x, "name", ...)`` / ``hasattr(x, "name")``."""
    for node in ast.walk(ast.parse(source, filename)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node.lineno, ast.unparse(node.args[0]), node.args[1].value


def test_no_getattr_on_members_a_protocol_does_not_declare() -> None:
    """A member the code needs is declared (a Protocol's member, a class attribute's default,
    a runtime-checkable capability protocol) and read directly, so mypy checks it and a
    backend, screen or mode that lacks it fails loudly instead of being skipped in silence."""
    offences = []
    for path in _modules():
        rel = path.relative_to(SRC).as_posix()
        for line, receiver, attribute in _literal_attribute_probes(path.read_text(encoding="utf-8"), rel):
            if (rel, receiver) not in DYNAMIC_ATTRIBUTES:
                offences.append(f"{rel}:{line}: {receiver}.{attribute}")
    assert not offences, "getattr/hasattr on an undeclared member (declare it, or list why in DYNAMIC_ATTRIBUTES):\n" + "\n".join(offences)


def test_the_attribute_test_catches_a_probe() -> None:
    source = (
        "if getattr(damage, 'last_damage', 0.0) > started: pass\n"
        "closer = getattr(self._backend, 'actions', None)\n"
        "ok = hasattr(ctx, 'policy_async')\n"
        "value = getattr(module, name)\n"  # a computed name: a lookup, not a probe
    )
    found = [(receiver, attribute) for _, receiver, attribute in sorted(_literal_attribute_probes(source))]
    assert found == [("damage", "last_damage"), ("self._backend", "actions"), ("ctx", "policy_async")]


def test_test_files_have_unique_names() -> None:
    """pytest imports test modules by their file name (rootdir-relative, no packages): two
    ``test_x.py`` in different folders stop the whole collection with an import mismatch."""
    names: dict[str, list[str]] = {}
    for path in sorted((UNIT.parent).rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(UNIT.parent)))
    clashes = {name: where for name, where in names.items() if len(where) > 1}
    assert not clashes, f"test files with the same name: {clashes}"
