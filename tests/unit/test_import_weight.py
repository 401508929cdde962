"""The capture library installs and imports with its own few dependencies; the agent, the
panel and replay are extras, and a command whose extra is missing says which to install.

"Not installed" is played by a ``sitecustomize`` that makes importing the extras' modules
fail as they would in a venv with ``pip install deskpilot`` alone (a fresh venv per test
would cost a pip install each; tests/integration/test_install_linux.py does that once).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deskpilot._extras import EXTRA_OF_MODULE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject's tomli dependency on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]

#: What the agent, the panel and replay bring, and what those pull in themselves.
HEAVY = ("httpx", "httpcore", "h11", "anyio", "sniffio", "starlette", "uvicorn", "click",
         "rich", "pygments", "markdown_it", "PIL", "pybase64", "tomli", "mcp", "mcp_types", "pydantic",
         "httpx2")

BLOCKER = """\
import importlib.abc
import sys

BLOCKED = set({blocked!r})


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def python(
    tmp_path: Path, code: str | None = None, *, blocked: tuple[str, ...] = HEAVY, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` (or ``python -m deskpilot ARGS``) with ``blocked`` not importable."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked)), encoding="utf-8")
    command = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "deskpilot", *args]
    env = {**os.environ, "PYTHONPATH": str(site), "NO_COLOR": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower() for req in requirements}


def test_the_blocker_blocks(tmp_path: Path) -> None:
    done = python(tmp_path, "import httpx", blocked=("httpx",))
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr


#: Prints the extras' modules that importing the code before it loaded.
PRINT_HEAVY = f"print(' '.join(sorted(m for m in sys.modules if m.partition('.')[0] in {set(HEAVY)!r})))\n"


def test_capture_library_imports_and_works_without_any_extra(tmp_path: Path) -> None:
    code = """\
import sys
import numpy as np
import deskpilot.capture, deskpilot.imaging, deskpilot.geometry, deskpilot.input
from deskpilot import imaging
from deskpilot.geometry import parse_box
from deskpilot.input import InputController

png = imaging.encode_png(np.zeros((4, 6, 3), np.uint8))
assert png.startswith(b"\\x89PNG")
assert parse_box("[1, 2, 3, 4]") is not None
with InputController(backend="dry") as hands:
    hands.click(10, 20)
"""
    done = python(tmp_path, code + PRINT_HEAVY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_capture_library_pulls_none_of_the_extras_modules_even_when_installed(tmp_path: Path) -> None:
    code = "import sys\nimport deskpilot.capture, deskpilot.imaging, deskpilot.geometry, deskpilot.input\n"
    done = python(tmp_path, code + PRINT_HEAVY, blocked=())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_base_dependencies_are_the_capture_librarys_own() -> None:
    base = requirement_names(PYPROJECT["project"]["dependencies"])
    # typing_extensions only on Python 3.10 (TypedDict's Required for the typed records).
    assert base == {"numpy", "mss", "orjson", "isal", "typing_extensions"}


def test_agent_extra_includes_panel_and_replay() -> None:
    # the README's agent install is one line: `agent` brings the panel and replay too
    assert set(EXTRAS["panel"]) <= set(EXTRAS["agent"])
    assert set(EXTRAS["replay"]) <= set(EXTRAS["agent"])
    assert set(EXTRAS["mcp"]) <= set(EXTRAS["agent"])
    for suite in ("test", "bench"):
        assert "deskpilot[agent]" in EXTRAS[suite], suite


def test_the_test_extra_installs_ray_as_the_ray_extra_pins_it() -> None:
    # Listed, not "deskpilot[ray]", to add a Linux-only marker: the two pins move together.
    (pin,) = EXTRAS["ray"]
    assert f"{pin}; platform_system == 'Linux'" in EXTRAS["test"]


def test_every_module_the_cli_names_belongs_to_its_extra() -> None:
    packages = {"PIL": "pillow", "httpcore": "httpx"}  # import name -> what the extra lists
    for module, extra in EXTRA_OF_MODULE.items():
        assert packages.get(module, module).lower() in requirement_names(EXTRAS[extra]), module


def test_help_works_without_any_extra(tmp_path: Path) -> None:
    done = python(tmp_path, args=("--help",))
    assert done.returncode == 0, done.stderr
    assert "run" in done.stdout and "shot" in done.stdout


@pytest.mark.parametrize(
    ("args", "blocked", "extra"),
    [
        (("run", "--dry-run", "Open the editor"), HEAVY, "agent"),
        (("run", "--dry-run", "Open the editor"), ("httpx",), "agent"),
        (("doctor", "--no-model"), HEAVY, "agent"),
        (("panel", "--help"), HEAVY, "agent"),
        (("mcp", "--dry-run"), ("mcp",), "mcp"),
        pytest.param(("eval", "desktop", "--scripted", "--engine", "ray"), ("ray",), "ray",
                     marks=pytest.mark.skipif(sys.platform == "win32", reason="eval is not offered on Windows")),
    ],
    ids=["run-base-only", "run-no-httpx", "doctor-base-only", "panel-base-only", "mcp-no-sdk", "eval-ray-no-ray"],
)
def test_a_command_without_its_extra_names_it(
    tmp_path: Path, args: tuple[str, ...], blocked: tuple[str, ...], extra: str
) -> None:
    done = python(tmp_path, args=args, blocked=blocked)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f'pip install "deskpilot[{extra}]"' in done.stderr, done.stderr
    assert done.stderr.startswith("deskpilot: error: "), done.stderr


def test_replay_without_pillow_names_its_extra(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "golden" / "single_seed000", run_dir)
    done = python(tmp_path, args=("replay", str(run_dir)), blocked=("PIL",))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert 'pip install "deskpilot[replay]"' in done.stderr, done.stderr
