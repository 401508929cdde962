"""The win_amd64 wheel for CPython 3.13, made from the Linux wheel's file set.

    python scripts/build_win_wheel.py DIST      (``./dev wheels`` runs it after the Linux wheel)

The Linux wheel in ``DIST`` (built from the sdist, so its package data rules are the ones
users get) is copied file by file, with its compiled ``.so`` modules left out, the mingw-w64
``.pyd`` modules of the Windows tier (scripts/wine_tier.py: ``build_core``, DLL imports
checked, ``-static-libgcc``) put in their place, the WHEEL file retagged
``cp313-cp313-win_amd64`` and RECORD written again for the new file set. The result lands in
``DIST`` as ``deskpilot-<version>-cp313-cp313-win_amd64.whl``.

Done here with zipfile rather than ``wheel unpack``/``wheel tags``/``wheel pack``: the whole
job is one pass over the archive, and the wheel format's two rules that matter (WHEEL tags,
RECORD with urlsafe-base64 SHA-256 and sizes, RECORD listing itself without a hash) are
written out below and checked by tests/integration/test_install_windows.py, which also has
the Windows interpreter's own pip install the result under Wine.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import re
import shutil
import sys
import zipfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
WIN_TAG = "cp313-cp313-win_amd64"


def wine_tier() -> ModuleType:
    """scripts/wine_tier.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("wine_tier", ROOT / "scripts" / "wine_tier.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("wine_tier", module)
    spec.loader.exec_module(module)
    return module


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def linux_wheel(dist: Path) -> Path:
    wheels = sorted(dist.glob("deskpilot-*-linux_*.whl")) + sorted(
        dist.glob("deskpilot-*manylinux*.whl")
    )
    wheels = sorted(set(wheels))
    if len(wheels) != 1:
        raise SystemExit(f"expected one Linux deskpilot wheel in {dist}, found {wheels}")
    return wheels[0]


def retag(wheel_text: str) -> str:
    """The WHEEL file with one Tag line, the Windows one; Root-Is-Purelib stays false."""
    # blank lines out too: auditwheel leaves one, and a Tag after it would be the message body
    lines = [line for line in wheel_text.splitlines() if line and not line.startswith("Tag:")]
    if "Root-Is-Purelib: false" not in lines:
        raise SystemExit("the Linux wheel's WHEEL file does not say Root-Is-Purelib: false")
    return "\n".join([*lines, f"Tag: {WIN_TAG}"]) + "\n"


def build(source: Path, pyds: list[Path], dist: Path) -> Path:
    match = re.fullmatch(r"(deskpilot)-([^-]+)-.+\.whl", source.name)
    if match is None:
        raise SystemExit(f"not a deskpilot wheel name: {source.name}")
    name, version = match.groups()
    dist_info = f"{name}-{version}.dist-info"
    target = dist / f"{name}-{version}-{WIN_TAG}.whl"
    if not pyds:
        raise SystemExit("no .pyd modules to put into the win_amd64 wheel")

    files: list[tuple[str, bytes]] = []
    with zipfile.ZipFile(source) as zin:
        for info in zin.infolist():
            if info.is_dir():
                continue
            path = info.filename
            if path.endswith(".so") or path.startswith(f"{name}.libs/"):
                continue  # the Linux modules and anything auditwheel vendored for them
            if path == f"{dist_info}/RECORD":
                continue  # written again below
            data = zin.read(info)
            if path == f"{dist_info}/WHEEL":
                data = retag(data.decode()).encode()
            files.append((path, data))
    for pyd in sorted(pyds):
        files.append((f"{name}/_native/{pyd.name}", pyd.read_bytes()))
    # dist-info last, RECORD at the very end (the order the wheel spec recommends)
    files.sort(key=lambda item: (item[0].startswith(dist_info), item[0]))

    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data in files:
        writer.writerow([path, record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    files.append((f"{dist_info}/RECORD", record.getvalue().encode()))

    tmp = target.with_name(target.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    tmp.replace(target)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise SystemExit("usage: build_win_wheel.py DIST")
    dist = Path(argv[0]).resolve()
    source = linux_wheel(dist)
    if shutil.which("x86_64-w64-mingw32-objdump") is None:
        # wine_tier.check_imports skips without it; a release wheel must not
        raise SystemExit("x86_64-w64-mingw32-objdump not found: cannot check the .pyd imports")
    tier = wine_tier()
    cache = tier.cache_root()
    python_home = tier.interpreter(cache)
    core = tier.build_core(cache, python_home)
    pyds = sorted(core.glob(f"*.{tier.PY_TAG}-win_amd64.pyd"))
    expected = {pyx.stem for pyx in (ROOT / "native").glob("*.pyx")}
    if {p.name.split(".")[0] for p in pyds} != expected:
        raise SystemExit(f"the cross-compiled core {core} lacks modules: {expected}")
    for pyd in pyds:
        tier.check_imports(pyd)  # again: a cached core from an older check must pass today's
    target = build(source, pyds, dist)
    print(
        f"[build_win_wheel] {target.name} ({target.stat().st_size / 1e6:.2f} MB)", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
