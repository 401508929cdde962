"""Fixtures for the tests that run only on real Windows (marker ``windows``).

Every module here marks its tests ``windows`` and skips them off Windows: they are
collected everywhere (so they stay importable and lint-clean) and run on Windows CI. The process is made
per-monitor-v2 DPI aware once, before any Tk window exists, exactly as the library does
for its users.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def dpi_awareness() -> Any:
    from deskpilot._win32 import ensure_dpi_awareness

    return ensure_dpi_awareness()


@pytest.fixture
def target(dpi_awareness: Any) -> Iterator[Any]:
    from win_target_app import WinTarget

    app = WinTarget()
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def gdi(dpi_awareness: Any) -> Iterator[Any]:
    from deskpilot.capture._gdi import GdiBackend

    with GdiBackend() as backend:
        yield backend


@pytest.fixture
def sendinput(dpi_awareness: Any) -> Iterator[Any]:
    from deskpilot.input._sendinput import SendInputBackend

    # No watchdog per test (one Windows interpreter started and stopped each time):
    # test_windows_watchdog.py tests it on its own.
    backend = SendInputBackend(watchdog=False)
    try:
        yield backend
    finally:
        backend.close()
