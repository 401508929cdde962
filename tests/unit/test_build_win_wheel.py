"""scripts/build_win_wheel.py on a small Linux wheel of the real layout (no mingw-w64 needed:
the real wheel, cross-compiled, is checked in tests/integration/test_install_windows.py)."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST_INFO = "deskpilot-1.2.3.dist-info"
LINUX_WHEEL = (
    "Wheel-Version: 1.0\nGenerator: setuptools (80.0)\nRoot-Is-Purelib: false\n"
    "Tag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\n\n"
)


def _script() -> ModuleType:
    path = ROOT / "scripts" / "build_win_wheel.py"
    spec = importlib.util.spec_from_file_location("build_win_wheel_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bww = _script()


def _linux_wheel(dist: Path, *, wheel_text: str = LINUX_WHEEL) -> Path:
    path = dist / "deskpilot-1.2.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    members = {
        "deskpilot/__init__.py": b"# package\n",
        "deskpilot/py.typed": b"",
        "deskpilot/_native/__init__.py": b"",
        "deskpilot/_native/imaging.pyi": b"def f() -> None: ...\n",
        "deskpilot/_native/imaging.cpython-311-x86_64-linux-gnu.so": b"\x7fELF imaging",
        "deskpilot/_native/annotate.cpython-311-x86_64-linux-gnu.so": b"\x7fELF annotate",
        "deskpilot/panel/static/panel.js": b"console.log(1)\n",
        "deskpilot/agent/prompts/team_planner.txt": b"You are a Computer Task Planner.\n",
        "deskpilot.libs/libfoo-1234.so.1": b"\x7fELF vendored",
        f"{DIST_INFO}/METADATA": b"Metadata-Version: 2.4\nName: deskpilot\nVersion: 1.2.3\n",
        f"{DIST_INFO}/WHEEL": wheel_text.encode(),
        f"{DIST_INFO}/entry_points.txt": b"[console_scripts]\ndeskpilot = deskpilot.cli:main\n",
        f"{DIST_INFO}/RECORD": b"stale,,\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _pyds(tmp_path: Path) -> list[Path]:
    out = []
    for stem in ("annotate", "imaging"):
        pyd = tmp_path / f"{stem}.cp313-win_amd64.pyd"
        pyd.write_bytes(b"MZ " + stem.encode())
        out.append(pyd)
    return out


def test_build_swaps_the_modules_retags_and_writes_record(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    source = _linux_wheel(dist)
    assert bww.linux_wheel(dist) == source

    target = bww.build(source, _pyds(tmp_path), dist)

    assert target == dist / "deskpilot-1.2.3-cp313-cp313-win_amd64.whl"
    with zipfile.ZipFile(target) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    assert sorted(files) == sorted(
        [
            "deskpilot/__init__.py",
            "deskpilot/py.typed",
            "deskpilot/_native/__init__.py",
            "deskpilot/_native/imaging.pyi",
            "deskpilot/_native/annotate.cp313-win_amd64.pyd",
            "deskpilot/_native/imaging.cp313-win_amd64.pyd",
            "deskpilot/panel/static/panel.js",
            "deskpilot/agent/prompts/team_planner.txt",  # the prompts are package data
            f"{DIST_INFO}/METADATA",
            f"{DIST_INFO}/WHEEL",
            f"{DIST_INFO}/entry_points.txt",
            f"{DIST_INFO}/RECORD",
        ]
    )
    assert files["deskpilot/_native/imaging.cp313-win_amd64.pyd"] == b"MZ imaging"
    assert files[f"{DIST_INFO}/WHEEL"].decode() == (
        "Wheel-Version: 1.0\nGenerator: setuptools (80.0)\nRoot-Is-Purelib: false\n"
        "Tag: cp313-cp313-win_amd64\n"
    )
    # the dist-info comes last and RECORD is the final member
    assert list(files)[-1] == f"{DIST_INFO}/RECORD"
    assert all(n.startswith(DIST_INFO) for n in list(files)[-4:])

    rows = list(csv.reader(io.StringIO(files[f"{DIST_INFO}/RECORD"].decode())))
    record = {path: (digest, size) for path, digest, size in rows}
    assert len(rows) == len(record) and record.keys() == files.keys()
    assert record.pop(f"{DIST_INFO}/RECORD") == ("", "")
    for path, (digest, size) in record.items():
        raw = hashlib.sha256(files[path]).digest()
        expected = "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        assert (digest, size) == (expected, str(len(files[path]))), path


def test_build_refuses_a_pure_wheel_and_an_empty_core(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    pure = _linux_wheel(
        dist, wheel_text="Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    with pytest.raises(SystemExit, match="Root-Is-Purelib: false"):
        bww.build(pure, _pyds(tmp_path), dist)
    with pytest.raises(SystemExit, match=r"no \.pyd"):
        bww.build(_linux_wheel(dist), [], dist)
    assert list(dist.glob("*win_amd64*")) == []


def test_linux_wheel_wants_exactly_one(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="expected one Linux deskpilot wheel"):
        bww.linux_wheel(tmp_path)


def test_main_needs_a_dist_folder() -> None:
    with pytest.raises(SystemExit, match="usage"):
        bww.main([])
