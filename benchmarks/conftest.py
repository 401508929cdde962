"""Shared benchmark setup: collect ``bench_*.py``, load the corpus, print comparison tables.

``./dev bench`` (``pytest benchmarks --benchmark-only``) collects every ``bench_*.py`` here.
Benchmarks record their figures through the ``comparison`` fixture (:func:`record`); at the
end of the run the terminal summary prints each table as markdown, with ratios against
deskpilot.

The helper modules beside the benchmarks (``_xvfb``, ``_tk_app``, ``baselines``) are imported
as top-level modules, with no ``sys.path`` edits: ``python benchmarks/bench_X.py`` puts the
script's folder first on ``sys.path``, and pytest's default (prepend) import mode does the same
for ``benchmarks/``, which is no package (no ``__init__.py``), as tests/integration does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "benchmarks" / "corpus"  # see benchmarks/corpus/README.md


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("python_files", "bench_*.py")


def load_corpus_bgra() -> list[tuple[str, npt.NDArray[np.uint8]]]:
    """``(name, 1920x1080 BGRA frame with alpha 255)`` for every corpus PNG, as the corpus
    README says; empty when the corpus is absent."""
    from PIL import Image

    frames = []
    for path in sorted(CORPUS.glob("*.png")) if CORPUS.is_dir() else []:
        with Image.open(path) as im:
            rgba = np.asarray(im.convert("RGBA"))
        bgra = np.ascontiguousarray(rgba[..., [2, 1, 0, 3]])
        bgra[..., 3] = 255
        frames.append((path.stem, bgra))
    return frames


@pytest.fixture(scope="session")
def corpus_bgra() -> list[tuple[str, npt.NDArray[np.uint8]]]:
    frames = load_corpus_bgra()
    if not frames:
        pytest.skip(f"benchmark corpus not found: expected PNG screenshots in {CORPUS.resolve()}")
    return frames


@dataclass
class Table:
    """One comparison: rows of (implementation, median ms, extra columns)."""

    title: str
    note: str = ""
    reference: str = "deskpilot"
    rows: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)


TABLES: dict[str, Table] = {}


def record(
    table: str, name: str, median_s: float, *, title: str = "", note: str = "", **extra: Any
) -> None:
    """Add one implementation's median (seconds) and extra columns to a summary table."""
    entry = TABLES.setdefault(table, Table(title or table))
    if note:
        entry.note = note
    entry.rows[name] = (median_s * 1000.0, extra)


@pytest.fixture(scope="session")
def comparison() -> Any:
    """``comparison(table, name, median_s, title=..., note=..., **columns)`` adds a row."""
    return record


def render(table: Table) -> list[str]:
    base = table.rows.get(table.reference, (0.0, {}))[0]
    extra_keys: list[str] = []
    for _, extra in table.rows.values():
        extra_keys += [k for k in extra if k not in extra_keys]
    header = ["implementation", "median ms", f"x {table.reference}", *extra_keys]
    lines = [f"### {table.title}", ""]
    if table.note:
        lines += [table.note, ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, (ms, extra) in table.rows.items():
        ratio = f"{ms / base:.1f}x" if base > 0 else "-"
        cells = [name, f"{ms:.2f}", ratio, *(str(extra.get(k, "")) for k in extra_keys)]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLES:
        return
    terminalreporter.section("comparison tables (median per call; ratio = time / deskpilot)")
    for table in TABLES.values():
        for line in render(table):
            terminalreporter.write_line(line)
