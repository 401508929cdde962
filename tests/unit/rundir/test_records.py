"""The records' types (deskpilot.rundir._records) are the run directory's schema: every
record of every golden run fits them, and docs/run-directory.md names every declared key."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import (
    Any,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest

from deskpilot.rundir import RunInfo, Summary, TurnRecord, _records

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) in (Required, NotRequired):
        (annotation,) = get_args(annotation)
    return annotation


def _required_keys(cls: Any) -> frozenset[str]:
    # Required[...] marks the keys of a total=False TypedDict every record has (read from
    # the hints, not __required_keys__, which string annotations would leave wrong).
    hints = get_type_hints(cls, include_extras=True)
    total = cls.__total__
    return frozenset(
        k for k, a in hints.items() if get_origin(a) is Required or (total and get_origin(a) is not NotRequired)
    )


def check(value: Any, annotation: Any, where: str) -> list[str]:
    """Where ``value`` does not fit ``annotation``: undeclared or missing keys of a
    TypedDict, and the wrong JSON type for str/int/float/bool/None/list/dict."""
    annotation = _strip(annotation)
    if annotation is Any:
        return []
    if is_typeddict(annotation):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, expected an object ({annotation.__name__})"]
        hints = get_type_hints(annotation, include_extras=True)
        problems = [f"{where}.{k}: not declared in {annotation.__name__}" for k in value if k not in hints]
        problems += [f"{where}.{k}: required by {annotation.__name__}, missing" for k in _required_keys(annotation) if k not in value]
        for key, item in value.items():
            if key in hints:
                problems += check(item, hints[key], f"{where}.{key}")
        return problems
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = get_args(annotation)
        for option in options:
            if not check(value, option, where):
                return []
        return [f"{where}: {value!r:.60} fits none of {annotation}"]
    if annotation is None or annotation is type(None):
        return [] if value is None else [f"{where}: {value!r:.60}, expected null"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, expected a list"]
        (item_type,) = get_args(annotation)
        return [p for i, item in enumerate(value) for p in check(item, item_type, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, expected an object"]
        _, item_type = get_args(annotation)
        return [p for k, item in value.items() for p in check(item, item_type, f"{where}.{k}")]
    if annotation is float:  # JSON writes 2.0 as 2.0, but a computed float may be whole
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation in (str, bool):
        ok = isinstance(value, annotation)
    else:
        raise TypeError(f"{where}: the checker does not know {annotation!r}")
    return [] if ok else [f"{where}: {value!r:.60} is {type(value).__name__}, expected {annotation.__name__}"]


def _golden_runs() -> list[Path]:
    return sorted(p for p in GOLDEN.iterdir() if (p / "turns.jsonl").is_file())


@pytest.mark.parametrize("run", _golden_runs(), ids=lambda p: p.name)
def test_every_golden_record_fits_its_type(run: Path) -> None:
    problems: list[str] = []
    for number, line in enumerate((run / "turns.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            problems += check(json.loads(line), TurnRecord, f"turns.jsonl:{number}")
    problems += check(json.loads((run / "run.json").read_text(encoding="utf-8")), RunInfo, "run.json")
    problems += check(json.loads((run / "summary.json").read_text(encoding="utf-8")), Summary, "summary.json")
    assert not problems, problems


def test_the_checker_finds_an_undeclared_key_a_missing_one_and_a_wrong_type() -> None:
    """A writer that adds a key the types do not declare fails the test above."""
    line = (GOLDEN / "single_seed000" / "turns.jsonl").read_text(encoding="utf-8").splitlines()[1]
    record = json.loads(line)
    assert check(record, TurnRecord, "t") == []
    doctored = {**record, "invented": 1}
    assert check(doctored, TurnRecord, "t") == ["t.invented: not declared in TurnRecord"]
    nested = {**record, "observation": {**record["observation"], "invented": True}}
    assert check(nested, TurnRecord, "t") == ["t.observation.invented: not declared in ObservationRecord"]
    missing = {k: v for k, v in record.items() if k != "turn"}
    assert check(missing, TurnRecord, "t") == ["t.turn: required by TurnRecord, missing"]
    wrong = {**record, "turn": "3"}
    assert check(wrong, TurnRecord, "t") == ["t.turn: '3' is str, expected int"]
    assert check({**record, "final": 1}, TurnRecord, "t") == ["t.final: 1 is int, expected bool"]


def _declared_keys(cls: Any, seen: set[Any]) -> set[tuple[str, str]]:
    if cls in seen:
        return set()
    seen.add(cls)
    keys: set[tuple[str, str]] = set()
    for key, annotation in get_type_hints(cls, include_extras=True).items():
        keys.add((cls.__name__, key))
        stack = [_strip(annotation)]
        while stack:
            current = stack.pop()
            if is_typeddict(current):
                keys |= _declared_keys(current, seen)
            stack.extend(_strip(a) for a in get_args(current))
    return keys


def test_the_public_format_doc_names_every_declared_key() -> None:
    doc = (ROOT / "docs" / "run-directory.md").read_text(encoding="utf-8")
    seen: set[Any] = set()
    declared = set()
    for name in _records.__all__:
        cls = getattr(_records, name)
        if is_typeddict(cls):
            declared |= _declared_keys(cls, seen)
    missing = sorted((owner, key) for owner, key in declared if f'"{key}"' not in doc and f"`{key}`" not in doc)
    assert not missing, missing


def test_the_records_are_typeddicts() -> None:
    assert all(is_typeddict(getattr(_records, name)) for name in _records.__all__)
    assert typing.get_type_hints(TurnRecord)["turn"] is int
