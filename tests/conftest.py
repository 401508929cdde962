"""Shared test configuration."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

NATIVE_DIR = Path(__file__).resolve().parents[1] / "native"


def pytest_sessionstart(session: pytest.Session) -> None:
    # Native-vs-reference tests skip when the compiled core is missing, which is right on a
    # machine without a compiler but would hide a broken build in CI: ./dev test sets
    # DESKPILOT_REQUIRE_NATIVE=1 so a missing or stale extension fails the run instead.
    if os.environ.get("DESKPILOT_REQUIRE_NATIVE", "") in ("", "0"):
        return
    for pyx in sorted(NATIVE_DIR.glob("*.pyx")):
        name = f"deskpilot._native.{pyx.stem}"
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise pytest.UsageError(
                f"{name} is not built or is stale ({exc}); run ./dev setup"
            ) from exc
