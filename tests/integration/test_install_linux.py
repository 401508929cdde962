"""Install paths on Linux, for real: `./dev wheels` artefacts installed by pip into fresh venvs.

1. The manylinux wheel holds exactly what it should (compiled modules, .pyi, py.typed, the
   panel's static files, every source module; nothing from tests or benchmarks).
2. wheel -> fresh venv, offline -> the capture library alone: only its own dependencies are
   installed, the cibuildwheel smoke script (scripts/smoke_wheel.py) passes against it and
   `deskpilot doctor` names the missing agent extra; with the agent extra added, `deskpilot
   doctor` reports the native core.
3. sdist (with the agent extra) -> fresh venv with CC pointing at a compiler that always fails -> the install
   succeeds with one build message, and `deskpilot shot` runs on the reference kernels
   with one import warning; with DESKPILOT_REQUIRE_NATIVE=1 the same install fails; an
   editable install of the checkout (`pip install -e .`) falls back the same way.
4. README's Linux install block, run as written (its apt line aside; pip offline on the
   cached wheels), puts `deskpilot` on PATH and `deskpilot doctor` passes.

Speed and offline use: building the artefacts (sdist + compile + auditwheel) is the slow
part, so they are cached under build/install-checks/ keyed on a hash of every file that goes
into the sdist; a source change rebuilds them. The dependency wheels (runtime dependencies
and the sdist's build requirements) are downloaded once with the developer's pip settings
and then installed with `--no-index --find-links` only, pip configuration off.

Why a fresh venv with --find-links rather than --system-site-packages: the wheel's own
metadata must bring every runtime dependency. A venv that sees the developer's site-packages
would hide a dependency missing from pyproject.toml (the import would still work); with
`--no-index --find-links` pip resolves exactly what the wheel declares, offline.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest
from _install import (
    BUILD_MESSAGE,
    CACHE,
    ROOT,
    artefact_inputs,
    cache_dir,
    complete,
    content_hash,
    the_sdist,
)
from PIL import Image

from deskpilot._version import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pyproject's tomli dependency on 3.10
    import tomli as tomllib

pytestmark = [
    pytest.mark.x11,
    pytest.mark.skipif(
        sys.platform != "linux", reason="the Linux install paths (Wine covers Windows)"
    ),
]

BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
FAKE_CC_ERROR = "fake-cc: error: this compiler always fails"


# --- cached artefacts --------------------------------------------------------------------------


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 40) -> str:
    return "\n".join((proc.stdout + proc.stderr).splitlines()[-lines:])


@pytest.fixture(scope="session")
def artefacts() -> Path:
    """sdist + manylinux wheel from `./dev wheels`, built once per source hash."""
    target, ready = cache_dir(CACHE, "dist", content_hash(artefact_inputs(), sys.version))
    if not ready:
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        proc = subprocess.run(
            ["bash", str(ROOT / "dev"), "wheels"],
            cwd=ROOT,
            # the interpreter running the tests builds them, so its venvs can install them
            env={**os.environ, "DIST": str(staging), "PYTHON": BASE_PYTHON},
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, f"./dev wheels failed:\n{_tail(proc)}"
        target = complete(staging, target)
    return target


def the_wheel(artefacts: Path) -> Path:
    # the manylinux one (./dev wheels also makes the win_amd64 wheel)
    wheels = sorted(artefacts.glob("deskpilot-*linux*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session")
def dependency_wheels(artefacts: Path) -> Path:
    """A wheel folder with the runtime dependencies (the agent extra's included) and the sdist's
    build requirements.

    Filled once from the package index with the developer's own pip settings; every install
    below uses it with --no-index, so the checks run offline from then on.
    """
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [
        *pyproject["project"]["dependencies"],
        *pyproject["project"]["optional-dependencies"]["agent"],
        *pyproject["build-system"]["requires"],
    ]
    key = content_hash([], sys.version, sys.platform, *requirements)
    target, ready = cache_dir(CACHE, "deps", key)
    if not ready:
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        # `pip download` of the wheel itself resolves what its metadata declares
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--only-binary=:all:",
                "--dest",
                str(staging),
                f"{the_wheel(artefacts)}[agent]",
                *pyproject["build-system"]["requires"],
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            pytest.skip(
                f"dependency wheels are not cached and could not be downloaded:\n{_tail(proc, 8)}"
            )
        for own in staging.glob("deskpilot-*"):
            own.unlink()  # the artefacts under test come from `artefacts` only
        target = complete(staging, target)
    return target


# --- fresh venvs ---------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no pip settings, no source tree on sys.path, no
    deskpilot switches from the test run (DESKPILOT_REQUIRE_NATIVE from ./dev test)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "DESKPILOT_"))
        and k not in ("PYTHONPATH", "VIRTUAL_ENV", "CC", "CXX", "LDSHARED")
    }
    # no index mirrors, constraints or find-links from the machine's pip configuration
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = path / "bin" / "python"
        self.deskpilot = path / "bin" / "deskpilot"
        subprocess.run([BASE_PYTHON, "-m", "venv", str(path)], check=True, timeout=300)

    def pip_install(
        self,
        target: Path,
        wheels: Path,
        env: dict[str, str],
        *,
        editable: bool = False,
        extras: str = "",
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(self.python),
                "-m",
                "pip",
                "install",
                "-v",
                "--no-index",
                "--find-links",
                str(wheels),
                "--no-cache-dir",
                *(["-e"] if editable else []),
                f"{target}[{extras}]" if extras else str(target),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=self.path,
        )

    def run(
        self, *args: str | Path, env: dict[str, str], cwd: Path
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
        )

    def native_modules(self) -> list[str]:
        site = next(self.path.glob("lib/python3*/site-packages"))
        return sorted(
            p.name
            for p in (site / "deskpilot" / "_native").iterdir()
            if p.suffix in (".so", ".pyd")
        )


@pytest.fixture
def fake_cc(tmp_path: Path) -> Path:
    """A C compiler that prints an error and fails, as a machine without a working one would."""
    cc = tmp_path / "fake-cc"
    cc.write_text(f"#!/bin/sh\necho '{FAKE_CC_ERROR}' >&2\nexit 1\n")
    cc.chmod(0o755)
    return cc


# --- 1. what the artefacts hold --------------------------------------------------------------------


def test_wheel_holds_the_package_and_nothing_else(artefacts: Path) -> None:
    wheel = the_wheel(artefacts)
    assert re.fullmatch(
        rf"deskpilot-{re.escape(__version__)}-(cp3\d+)-\1-(manylinux\w+\.)*manylinux_2_\d+_x86_64\.whl",
        wheel.name,
    ), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    files = {n for n in names if not n.endswith("/")}

    for pyx in sorted((ROOT / "native").glob("*.pyx")):
        compiled = [
            n
            for n in files
            if re.fullmatch(rf"deskpilot/_native/{pyx.stem}\.cpython-3\d+-x86_64-linux-gnu\.so", n)
        ]
        assert len(compiled) == 1, (pyx.stem, sorted(files))
        assert f"deskpilot/_native/{pyx.stem}.pyi" in files
    assert "deskpilot/py.typed" in files
    static = {
        f"deskpilot/panel/static/{p.name}" for p in (ROOT / "src/deskpilot/panel/static").iterdir()
    }
    assert static and static <= files
    sources = {str(p.relative_to(ROOT / "src")) for p in (ROOT / "src/deskpilot").rglob("*.py")}
    assert {n for n in files if n.endswith(".py")} == sources

    tops = {n.split("/")[0] for n in files}
    # no deskpilot.libs: auditwheel had nothing to vendor
    assert tops == {"deskpilot", f"deskpilot-{__version__}.dist-info"}, tops
    leaked = [
        n
        for n in files
        if re.search(r"(^|/)(tests?|benchmarks|conftest\.py)(/|$)|\.(pyx|pxd|c|h|html?)$", n)
        and not n.startswith("deskpilot/panel/static/")
    ]
    assert leaked == []
    entry_points = (
        zipfile.ZipFile(wheel).read(f"deskpilot-{__version__}.dist-info/entry_points.txt").decode()
    )
    assert "deskpilot = deskpilot.cli:main" in entry_points


def test_sdist_ships_the_native_sources_but_no_build_output(artefacts: Path) -> None:
    import tarfile

    sdist = the_sdist(artefacts)
    prefix = f"deskpilot-{__version__}/"
    with tarfile.open(sdist) as tar:
        names = {m.name.removeprefix(prefix) for m in tar.getmembers() if m.isfile()}
    native = {
        f"native/{p.name}"
        for p in (ROOT / "native").iterdir()
        if p.suffix in (".pyx", ".pxd", ".h")
    }
    assert native and native <= names
    assert {
        "setup.py",
        "pyproject.toml",
        "MANIFEST.in",
        "README.md",
        "src/deskpilot/py.typed",
    } <= names
    assert [
        n for n in names if n.endswith((".so", ".pyd", ".c", ".pyc")) or n.startswith("build/")
    ] == []


# --- 2. wheel -> native ---------------------------------------------------------------------------


def test_wheel_installs_offline_and_doctor_reports_the_native_core(
    artefacts: Path, dependency_wheels: Path, xvfb: str, tmp_path: Path
) -> None:
    venv = Venv(tmp_path / "venv")
    proc = venv.pip_install(the_wheel(artefacts), dependency_wheels, clean_env())
    assert proc.returncode == 0, _tail(proc)
    # `pip install deskpilot` is the capture library: its own dependencies and nothing more
    installed = re.search(r"^Successfully installed (.*)$", proc.stdout, re.M)
    assert installed, _tail(proc)
    names = {re.sub(r"-[^-]+$", "", dist).lower() for dist in installed.group(1).split()}
    assert names == {"deskpilot", "numpy", "mss", "orjson", "isal"}, names
    # the console script: `deskpilot` is on PATH in an activated venv
    assert venv.deskpilot.exists()
    assert len(venv.native_modules()) == len(list((ROOT / "native").glob("*.pyx")))

    # From an empty folder, with the core required: the source tree cannot be what imports.
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(DISPLAY=xvfb, DESKPILOT_REQUIRE_NATIVE="1")
    smoke = venv.run(venv.python, ROOT / "scripts" / "smoke_wheel.py", env=env, cwd=work)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert f"at {venv.path}" in smoke.stdout and "compiled core == reference" in smoke.stdout

    # the agent's commands say which extra they need...
    bare = venv.run(venv.deskpilot, "doctor", "--no-model", env=env, cwd=work)
    assert bare.returncode == 1, bare.stdout + bare.stderr
    assert 'pip install "deskpilot[agent]"' in bare.stderr and "Traceback" not in bare.stderr

    # ...and run once it is there
    proc = venv.pip_install(the_wheel(artefacts), dependency_wheels, clean_env(), extras="agent")
    assert proc.returncode == 0, _tail(proc)
    doctor = venv.run(venv.deskpilot, "doctor", "--no-model", env=env, cwd=work)
    out = " ".join(doctor.stdout.split())
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"PASS imaging core native: compiled core {__version__}" in out, out
    assert "PASS capture" in out and "ReferenceKernelsWarning" not in doctor.stderr


# --- 3. sdist without a working compiler -> reference ------------------------------------------------


def test_sdist_with_a_failing_compiler_installs_and_shot_runs_on_reference(
    artefacts: Path, dependency_wheels: Path, fake_cc: Path, xvfb: str, tmp_path: Path
) -> None:
    venv = Venv(tmp_path / "venv")
    build_env = clean_env(CC=str(fake_cc), CXX=str(fake_cc), LDSHARED=f"{fake_cc} -shared")
    # with the agent extra: `deskpilot doctor` below is the agent's
    proc = venv.pip_install(the_sdist(artefacts), dependency_wheels, build_env, extras="agent")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, _tail(proc)
    assert FAKE_CC_ERROR in log  # the compiler was really tried...
    assert log.count(BUILD_MESSAGE) == 1, log  # ...and its failure said once, clearly
    assert venv.native_modules() == []

    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(DISPLAY=xvfb)
    shot = venv.run(venv.deskpilot, "shot", "--out", "shot.png", "--json", env=env, cwd=work)
    assert shot.returncode == 0, shot.stdout + shot.stderr
    record = orjson.loads(shot.stdout)
    assert record["imaging"] == "reference"
    assert shot.stderr.count("ReferenceKernelsWarning") == 1, shot.stderr
    assert "binary wheel" in shot.stderr and "C compiler" in shot.stderr
    with Image.open(work / "shot.png") as img:
        assert img.size == (1920, 1080)

    doctor = venv.run(venv.deskpilot, "doctor", "--no-model", env=env, cwd=work)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert re.search(
        r"^WARN\s+imaging core\s+reference: deskpilot's compiled core is not installed",
        doctor.stdout,
        re.M,
    )

    # DESKPILOT_PURE=1 is a deliberate choice: the same install says nothing on stderr
    quiet = venv.run(
        venv.deskpilot,
        "shot",
        "--out",
        "quiet.png",
        "--json",
        env={**env, "DESKPILOT_PURE": "1"},
        cwd=work,
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_editable_checkout_with_a_failing_compiler_installs_on_reference(
    artefacts: Path, dependency_wheels: Path, fake_cc: Path, tmp_path: Path
) -> None:
    """`pip install -e .` in a checkout without a compiler (setuptools copies built modules
    into src/ there, and used to fail on the one that was not built)."""
    import tarfile

    with tarfile.open(the_sdist(artefacts)) as tar:
        tar.extractall(tmp_path / "checkout", filter="data")
    tree = tmp_path / "checkout" / f"deskpilot-{__version__}"
    venv = Venv(tmp_path / "venv")
    build_env = clean_env(CC=str(fake_cc), CXX=str(fake_cc), LDSHARED=f"{fake_cc} -shared")
    proc = venv.pip_install(tree, dependency_wheels, build_env, editable=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, _tail(proc)
    assert FAKE_CC_ERROR in log and log.count(BUILD_MESSAGE) == 1
    assert list((tree / "src/deskpilot/_native").glob("*.so")) == []
    code = "from deskpilot import imaging; print(imaging.BACKEND, imaging.__file__)"
    check = venv.run(venv.python, "-c", code, env=clean_env(), cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    backend, where = check.stdout.split()
    assert backend == "reference" and Path(where).is_relative_to(tree / "src")
    assert check.stderr.count("ReferenceKernelsWarning") == 1


def test_sdist_with_a_failing_compiler_fails_under_require_native(
    artefacts: Path, dependency_wheels: Path, fake_cc: Path, tmp_path: Path
) -> None:
    venv = Venv(tmp_path / "venv")
    build_env = clean_env(
        CC=str(fake_cc),
        CXX=str(fake_cc),
        LDSHARED=f"{fake_cc} -shared",
        DESKPILOT_REQUIRE_NATIVE="1",
    )
    proc = venv.pip_install(the_sdist(artefacts), dependency_wheels, build_env)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, _tail(proc)
    assert FAKE_CC_ERROR in log and BUILD_MESSAGE not in log
    check = venv.run(venv.python, "-c", "import deskpilot", env=clean_env(), cwd=tmp_path)
    assert check.returncode != 0 and "ModuleNotFoundError" in check.stderr


# --- 4. README's Install section ---------------------------------------------------------------


def readme_linux_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Install\n(.*?)^## ", text, re.S | re.M)
    assert section, "README lost its Install section"
    block = re.search(r"\*\*Linux\*\*.*?```bash\n(.*?)```", section.group(1), re.S)
    assert block, "README's Install section lost its Linux block"
    return block.group(1)


def test_readme_linux_install_puts_deskpilot_on_path(
    artefacts: Path, dependency_wheels: Path, xvfb: str, tmp_path: Path
) -> None:
    lines = readme_linux_block().replace("\\\n", " ").splitlines()
    # the system packages are this machine's already (./dev setup); the rest runs as written
    assert lines[0].startswith("sudo apt-get install python3-venv libx11-6 libxtst6 libxfixes3")
    script = "\n".join(["set -e", *lines[1:], "command -v deskpilot"])
    assert 'pip install "deskpilot[agent]"' in script and "deskpilot doctor" in script
    # `python3` is the interpreter the wheel was built for; `pip install deskpilot` resolves
    # offline to the wheel under test (PIP_FIND_LINKS), as it would from the index.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(BASE_PYTHON)
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(
        HOME=str(home),
        DISPLAY=xvfb,
        PATH=f"{bindir}:{os.environ['PATH']}",
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=f"{artefacts} {dependency_wheels}",
        PIP_NO_CACHE_DIR="1",
    )
    proc = subprocess.run(
        ["bash", "-c", script], env=env, cwd=home, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, _tail(proc)
    out = " ".join(proc.stdout.split())
    assert "PASS imaging core native" in out and "all checks passed" in out, out
    assert proc.stdout.splitlines()[-1] == str(home / ".venvs/deskpilot/bin/deskpilot")
