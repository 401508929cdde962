"""What the Linux and Windows install checks share: the artefacts' inputs, the content hash
their cache is keyed on, and cache directories that are complete or absent."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "install-checks"
BUILD_MESSAGE = "deskpilot: the compiled core (deskpilot._native) was NOT built"


def artefact_inputs(*scripts: str) -> list[Path]:
    """Every file `./dev wheels` reads from the tree (what the sdist ships, plus the script),
    and the given ``scripts/`` files."""
    files = [ROOT / name for name in ("dev", "setup.py", "pyproject.toml", "MANIFEST.in", "README.md")]
    files += [ROOT / "scripts" / name for name in scripts]
    files += sorted(p for p in (ROOT / "native").iterdir() if p.suffix in (".pyx", ".pxd", ".h"))
    files += sorted(
        p
        for p in (ROOT / "src").rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and not any(part.endswith(".egg-info") for part in p.parts)
        and p.suffix not in (".so", ".pyd", ".pyc")
    )
    return files


def content_hash(files: list[Path], *extra: str) -> str:
    h = hashlib.sha256()
    for text in extra:
        h.update(text.encode() + b"\0")
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir(parent: Path, prefix: str, key: str) -> tuple[Path, bool]:
    """(dir, ready): ready when a previous run completed it; stale siblings are removed."""
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / f"{prefix}-{key}"
    for old in parent.glob(f"{prefix}-*"):
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    return target, (target / ".complete").exists()


def complete(staging: Path, target: Path) -> Path:
    """Mark ``staging`` complete and move it into place as ``target``."""
    (staging / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def the_sdist(artefacts: Path) -> Path:
    sdists = sorted(artefacts.glob("deskpilot-*.tar.gz"))
    assert len(sdists) == 1, sdists
    return sdists[0]
