"""Install paths on Windows, for real: the Windows CPython 3.13 of the Windows tier, under Wine,
installs `./dev wheels` artefacts with its own pip.

1. The win_amd64 wheel holds what it should: tag cp313-cp313-win_amd64, the two mingw-w64
   .pyd modules (importing only DLLs every Windows has), no .so, the .pyi stubs, py.typed,
   the panel's static files, every source module, a RECORD that matches its files; nothing
   from tests or benchmarks.
2. wheel -> a fresh copy of the interpreter, its own pip offline (--no-index --find-links
   with win_amd64 dependency wheels) -> `deskpilot doctor` (the Scripts\\deskpilot.exe pip
   made, found on PATH) reports the native core, and scripts/smoke_wheel.py finds the
   compiled kernels equal to the reference on every kernel family.
3. sdist -> the same, with no compiler (there is none under Wine: setuptools' MSVC lookup
   fails) -> the install succeeds with one build message, and `python.exe -m deskpilot shot`
   writes a PNG on the reference kernels with one import warning.

The interpreter, its Wine prefix (one of its own: `wineserver -k` after each command ends only
this prefix's processes) and the dependency wheels are cached; the artefacts are built once
per source hash under build/install-checks/, as in test_install_linux.py.

Why a cached base with the dependencies preinstalled stays honest: Windows pip under Wine
needs about 20 s to unpack numpy, pillow and the rest, the same files every run. The base is
a fresh copy of the interpreter into which that same pip, offline, installed exactly the
Requires-Dist lines of the wheel under test (read from its METADATA, so the base follows the
package's declared dependencies, not a list kept here). Each check then installs the artefact
into its own copy of that base: pip still resolves the artefact's declared requirements
against what is installed (a requirement the base cannot satisfy fails the install, since
--no-index leaves nothing to fetch), it alone unpacks deskpilot, and for the sdist it builds
in an isolated environment that it fills from the wheel folder itself (setuptools, wheel,
Cython, numpy), exactly as it would for a user. The install log is checked to have installed
deskpilot and nothing else. A dependency missing from the metadata altogether is what the
Linux check (a bare venv) is there to catch.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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

MSVC_MISSING = "Microsoft Visual C++ 14.0 or greater is required"
WINE_TOOLS = ("wine", "wineserver", "Xvfb", "x86_64-w64-mingw32-gcc", "x86_64-w64-mingw32-objdump")
MISSING = [tool for tool in WINE_TOOLS if shutil.which(tool) is None]

pytestmark = [
    pytest.mark.x11,  # Xvfb (wine_tier.xvfb) for doctor's capture check and `deskpilot shot`
    pytest.mark.skipif(
        sys.platform != "linux" or bool(MISSING),
        reason=(
            "the Windows install checks run Windows CPython under Wine on Linux and need "
            f"wine, Xvfb and mingw-w64 (missing: {', '.join(MISSING) or 'none'}; "
            "apt-get install wine wine64 gcc-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64)"
        ),
    ),
]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


wine_tier = _load("wine_tier")


# --- cached artefacts ----------------------------------------------------------------------------


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def wine_cache() -> Path:
    return Path(wine_tier.cache_root())


@pytest.fixture(scope="session")
def win_artefacts(wine_cache: Path) -> Path:
    """sdist + manylinux + win_amd64 wheels from `./dev wheels`, built once per source hash."""
    key = content_hash(artefact_inputs("build_win_wheel.py", "wine_tier.py"), sys.version)
    target, ready = cache_dir(CACHE, "win-dist", key)
    if not ready:
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        proc = subprocess.run(
            ["bash", str(ROOT / "dev"), "wheels"],
            cwd=ROOT,
            env={
                **os.environ,
                "DIST": str(staging),
                "PYTHON": getattr(sys, "_base_executable", sys.executable),
                "DESKPILOT_WINE_CACHE": str(wine_cache),
                # a missing mingw-w64 must fail here, not skip the wheel under test
                "DESKPILOT_WIN_WHEEL": "1",
            },
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, f"./dev wheels failed:\n{_tail(proc.stdout + proc.stderr)}"
        target = complete(staging, target)
    return target


def the_win_wheel(artefacts: Path) -> Path:
    wheels = sorted(artefacts.glob("deskpilot-*-win_amd64.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def requires_dist(wheel: Path, extra: str = "agent") -> list[str]:
    """The wheel's runtime requirements (its METADATA): the base ones and those of ``extra``
    (`deskpilot doctor` is the agent's), its ``extra == ...`` marker taken off."""
    raw = zipfile.ZipFile(wheel).read(f"deskpilot-{__version__}.dist-info/METADATA")
    meta = email.parser.BytesHeaderParser().parsebytes(raw)
    out = []
    for req in meta.get_all("Requires-Dist", []):
        if "extra ==" not in req:
            out.append(req)
        elif re.search(rf"""extra == ['"]{re.escape(extra)}['"]""", req):
            # `x; extra == "agent"` -> `x`; `x; python_version < "3.11" and extra == "agent"`
            # -> `x; python_version < "3.11"`
            out.append(re.sub(r"""\s*(;|\band)\s*extra == ['"][^'"]+['"]""", "", req))
    return out


def build_requires() -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"])


@pytest.fixture(scope="session")
def win_wheels(win_artefacts: Path) -> Path:
    """win_amd64 cp313 wheels of the runtime dependencies and the sdist's build requirements.

    Downloaded once (this side's pip, --platform win_amd64) with the Windows tier's pins as
    constraints (numpy 2.1.x: Wine 8 lacks what numpy >= 2.2 imports); offline from then on.
    colorama and pywin32 by name: click and the MCP SDK need them on Windows only, and pip
    evaluates markers for this side.
    """
    requirements = [*requires_dist(the_win_wheel(win_artefacts)), *build_requires(), "colorama", "pywin32"]
    constraints = wine_tier.REQUIREMENTS
    key = content_hash([constraints], *requirements)
    target, ready = cache_dir(CACHE, "win-deps", key)
    if not ready:
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--platform",
                "win_amd64",
                "--python-version",
                "3.13",
                "--implementation",
                "cp",
                "--abi",
                wine_tier.PY_TAG,
                "--only-binary=:all:",
                "-c",
                str(constraints),
                "--dest",
                str(staging),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            pytest.skip(
                "win_amd64 dependency wheels are not cached and could not be downloaded:\n"
                + _tail(proc.stdout + proc.stderr, 8)
            )
        target = complete(staging, target)
    return target


# --- the Windows interpreter under Wine -----------------------------------------------------------


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def _decode(chunks: list[bytes]) -> str:
    # Python on Windows writes pipes in the ANSI code page (cp1252 in Wine's default locale),
    # as it would for a user without PYTHONUTF8
    return b"".join(chunks).decode("cp1252", "replace").replace("\r\n", "\n")


def _reader(stream: io.BufferedReader, sink: list[bytes]) -> None:
    sink.extend(stream)


@dataclass
class WinPython:
    home: Path
    prefix: Path

    @property
    def exe(self) -> Path:
        return self.home / "python.exe"

    @property
    def path(self) -> str:
        """PATH entries of a user of this interpreter: its folder and Scripts\\. The console
        scripts its pip writes start "python.exe" found on PATH: this interpreter's pip is
        WinPython's, whose script maker writes a relocatable bare name, not a full path."""
        return f"{wine_tier.winpath(self.home)};{wine_tier.winpath(self.home / 'Scripts')}"

    @property
    def site_packages(self) -> Path:
        return self.home / "Lib" / "site-packages"

    def env(self, **extra: str) -> dict[str, str]:
        """A user's environment: no pip settings or deskpilot switches from this side."""
        env = {
            k: v
            for k, v in wine_tier.wine_env(self.prefix).items()
            if not k.startswith(("PIP_", "DESKPILOT_"))
            and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CC", "CXX", "DISPLAY")
        }
        env["PIP_CONFIG_FILE"] = "nul"  # os.devnull there: no pip configuration at all
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env.update(extra)
        return env

    def run(
        self,
        *args: str | Path,
        cwd: Path,
        timeout: float = 900,
        program: str | None = None,
        **env: str,
    ) -> Result:
        """python.exe ARGS (or PROGRAM ARGS) under Wine; stdin an empty pipe (a closed or /dev/null stdin gives
        "init_sys_streams: invalid handle"), stdout/stderr pipes read in threads: Wine's own
        services inherit them and keep them open until `wineserver -k` ends the prefix."""
        full_env = self.env(**env)
        proc = subprocess.Popen(
            ["wine", program or str(self.exe), *(str(a) for a in args)],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.close()
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [
            threading.Thread(target=_reader, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_reader, args=(proc.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = 124
        finally:
            subprocess.run(["wineserver", "-k"], env=full_env, check=False, timeout=60)
            for reader in readers:
                reader.join(timeout=30)
        return Result(code, _decode(out), _decode(err))

    def pip_install(self, target: Path, wheels: Path, cwd: Path, *extra: str) -> Result:
        return self.run(
            "-m",
            "pip",
            "install",
            "-v",
            "--no-index",
            "--find-links",
            wine_tier.winpath(wheels),
            "--no-cache-dir",
            *extra,
            wine_tier.winpath(target) if target.is_absolute() else str(target),
            cwd=cwd,
        )

    def native_modules(self) -> list[str]:
        return sorted(
            p.name
            for p in (self.site_packages / "deskpilot" / "_native").iterdir()
            if p.suffix in (".so", ".pyd")
        )


@pytest.fixture(scope="session")
def install_prefix(wine_cache: Path) -> Path:
    """A Wine prefix of the install checks' own (the tier's prefix may be busy beside us)."""
    return Path(wine_tier.wine_prefix(wine_cache, "install-prefix"))


@pytest.fixture(scope="session")
def win_base(wine_cache: Path, install_prefix: Path, win_artefacts: Path, win_wheels: Path) -> Path:
    """The interpreter with the wheel's declared dependencies installed by its own pip."""
    requirements = requires_dist(the_win_wheel(win_artefacts))
    wheel_names = sorted(p.name for p in win_wheels.glob("*.whl"))
    key = content_hash(
        [], wine_tier.EMBED_VERSION, wine_tier.WINE_COPYFILE2_PTH, *requirements, *wheel_names
    )
    target, ready = cache_dir(wine_cache, "install-base", key)
    if not ready:
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        home = wine_tier.fresh_interpreter(wine_tier.interpreter(wine_cache), staging / "cp313")
        py = WinPython(home, install_prefix)
        proc = py.run(
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            wine_tier.winpath(win_wheels),
            *requirements,
            cwd=staging,
        )
        assert proc.returncode == 0, _tail(proc.stdout + proc.stderr)
        target = complete(staging, target)
    return target / "cp313"


@pytest.fixture
def win_python(win_base: Path, install_prefix: Path, tmp_path: Path) -> WinPython:
    """A fresh copy of the base: each check installs into an interpreter no check touched."""
    home = tmp_path / "cp313"
    shutil.copytree(win_base, home, symlinks=True)
    return WinPython(home, install_prefix)


@pytest.fixture
def display() -> Iterator[str]:
    with wine_tier.xvfb() as name:
        yield name


def installed_only_deskpilot(log: str) -> bool:
    done = [line for line in log.splitlines() if line.startswith("Successfully installed")]
    return done == [f"Successfully installed deskpilot-{__version__}"]


# --- 1. what the win_amd64 wheel holds ------------------------------------------------------------


def test_win_wheel_holds_the_package_and_nothing_else(win_artefacts: Path, tmp_path: Path) -> None:
    wheel = the_win_wheel(win_artefacts)
    assert wheel.name == f"deskpilot-{__version__}-cp313-cp313-win_amd64.whl"
    dist_info = f"deskpilot-{__version__}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        files = {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}

    tags = [
        line.split(":", 1)[1].strip()
        for line in files[f"{dist_info}/WHEEL"].decode().splitlines()
        if line.startswith("Tag:")
    ]
    assert tags == ["cp313-cp313-win_amd64"]
    assert "Root-Is-Purelib: false" in files[f"{dist_info}/WHEEL"].decode()

    pyds = sorted(n for n in files if n.endswith(".pyd"))
    stems = sorted(p.stem for p in (ROOT / "native").glob("*.pyx"))
    assert pyds == [f"deskpilot/_native/{s}.cp313-win_amd64.pyd" for s in stems]
    assert [n for n in files if n.endswith(".so")] == []
    for stem in stems:
        assert f"deskpilot/_native/{stem}.pyi" in files
    assert "deskpilot/py.typed" in files
    static = {
        f"deskpilot/panel/static/{p.name}" for p in (ROOT / "src/deskpilot/panel/static").iterdir()
    }
    assert static and static <= files.keys()
    sources = {str(p.relative_to(ROOT / "src")) for p in (ROOT / "src/deskpilot").rglob("*.py")}
    assert {n for n in files if n.endswith(".py")} == sources
    assert {n.split("/")[0] for n in files} == {"deskpilot", dist_info}
    leaked = [
        n
        for n in files
        if re.search(r"(^|/)(tests?|benchmarks|conftest\.py)(/|$)|\.(pyx|pxd|c|h|html?)$", n)
        and not n.startswith("deskpilot/panel/static/")
    ]
    assert leaked == []
    assert "deskpilot = deskpilot.cli:main" in files[f"{dist_info}/entry_points.txt"].decode()

    # RECORD: every file once, with its urlsafe-base64 SHA-256 and size; itself unhashed
    rows = list(csv.reader(io.StringIO(files[f"{dist_info}/RECORD"].decode())))
    record = {path: (digest, size) for path, digest, size in rows}
    assert len(record) == len(rows) and record.keys() == files.keys()
    assert record.pop(f"{dist_info}/RECORD") == ("", "")
    for path, (digest, size) in record.items():
        data = files[path]
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, size) == (f"sha256={expected}", str(len(data))), path

    # the .pyd modules import only DLLs every Windows machine has
    for name in pyds:
        pyd = tmp_path / Path(name).name
        pyd.write_bytes(files[name])
        dump = subprocess.run(
            ["x86_64-w64-mingw32-objdump", "-p", str(pyd)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        dlls = {
            line.split(":", 1)[1].strip().lower()
            for line in dump.splitlines()
            if "DLL Name:" in line
        }
        assert "python313.dll" in dlls and dlls <= wine_tier.ALLOWED_DLLS, (name, dlls)


# --- 2. wheel -> native, under Wine ---------------------------------------------------------------


def test_win_wheel_installs_offline_and_doctor_reports_the_native_core(
    win_artefacts: Path, win_wheels: Path, win_python: WinPython, display: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = win_python.pip_install(the_win_wheel(win_artefacts), win_wheels, work)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, _tail(log)
    assert installed_only_deskpilot(log), _tail(log)
    assert win_python.native_modules() == sorted(
        f"{p.stem}.cp313-win_amd64.pyd" for p in (ROOT / "native").glob("*.pyx")
    )
    assert (win_python.home / "Scripts" / "deskpilot.exe").exists()

    # From an empty folder with the core required: nothing but the installed package imports.
    # `deskpilot doctor` as a user types it: the console script pip made, found on PATH
    # (WINEPATH is what Wine adds to the Windows PATH).
    doctor = win_python.run(
        "doctor",
        "--no-model",
        program="deskpilot.exe",
        cwd=work,
        DISPLAY=display,
        DESKPILOT_REQUIRE_NATIVE="1",
        WINEPATH=win_python.path,
    )
    out = " ".join(doctor.stdout.split())
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"PASS imaging core native: compiled core {__version__}" in out, out
    assert "PASS capture" in out and "ReferenceKernelsWarning" not in doctor.stderr
    where = win_python.run(
        "-c", "import deskpilot._native.imaging as m; print(m.__file__)", cwd=work
    )
    assert where.returncode == 0, where.stderr
    expected = wine_tier.winpath(win_python.site_packages / "deskpilot" / "_native")
    assert where.stdout.strip().lower() == f"{expected}\\imaging.cp313-win_amd64.pyd".lower()

    # the cibuildwheel smoke script: every kernel family, compiled core vs reference, by hash
    smoke = win_python.run(
        wine_tier.winpath(ROOT / "scripts" / "smoke_wheel.py"),
        cwd=work,
        DESKPILOT_REQUIRE_NATIVE="1",
    )
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "compiled core == reference" in smoke.stdout, smoke.stdout
    installed = wine_tier.winpath(win_python.site_packages / "deskpilot")
    assert f"at {installed.lower()}:" in smoke.stdout.lower(), smoke.stdout


# --- 3. sdist without a compiler -> reference, under Wine ---------------------------------------


def test_sdist_installs_without_a_compiler_and_shot_runs_on_reference(
    win_artefacts: Path, win_wheels: Path, win_python: WinPython, display: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = win_python.pip_install(the_sdist(win_artefacts), win_wheels, work)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, _tail(log)
    assert MSVC_MISSING in log  # the compiler was looked for and is not there...
    assert log.count(BUILD_MESSAGE) == 1, _tail(log, 80)  # ...and that was said once
    assert installed_only_deskpilot(log), _tail(log)
    assert win_python.native_modules() == []
    assert (win_python.home / "Scripts" / "deskpilot.exe").exists()

    shot = win_python.run(
        "-m", "deskpilot", "shot", "--out", "shot.png", "--json", cwd=work, DISPLAY=display
    )
    assert shot.returncode == 0, shot.stdout + shot.stderr
    record = orjson.loads(shot.stdout)
    assert record["imaging"] == "reference"
    assert shot.stderr.count("ReferenceKernelsWarning") == 1, shot.stderr
    assert "binary wheel" in shot.stderr and "C compiler" in shot.stderr
    with Image.open(work / "shot.png") as img:
        img.load()
        assert list(img.size) == record["image_size"]
