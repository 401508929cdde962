"""The library example in README.md runs as written (on Xvfb)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.x11

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_capture_example_runs(xvfb: str) -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Using the capture library\s+```python\n(.*?)```", text, re.S)
    assert block, "README lost its capture example"
    scope: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), scope)
    assert bytes(scope["png"][:8]) == b"\x89PNG\r\n\x1a\n"  # type: ignore[index]
    frame = scope["frame"]
    assert frame.size == (1536, 864)  # type: ignore[attr-defined]
    x, y = scope["x"], scope["y"]
    assert 0 <= x < 1920 and 0 <= y < 1080  # type: ignore[operator]
