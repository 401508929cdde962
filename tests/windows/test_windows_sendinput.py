"""SendInput on real Windows: clicks, drags, wheel, keys and Unicode text into a Tk target."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from deskpilot.input._keys import resolve_key

pytestmark = [
    pytest.mark.windows,
    pytest.mark.skipif(sys.platform != "win32", reason="needs real Windows (SendInput)"),
]


def click(backend: Any, x: int, y: int, button: str = "left") -> None:
    backend.move(x, y)
    backend.sync()
    backend.button(button, True)
    backend.button(button, False)


def focus_entry(target: Any, backend: Any) -> None:
    # A click activates the window even where SetForegroundWindow would be refused.
    x, y = target.center(target.entry)
    click(backend, x, y)
    assert target.pump_until(lambda: target.root.focus_get() is target.entry), (
        "the entry did not get the focus"
    )


def test_move_lands_on_the_exact_pixel(target: Any, sendinput: Any) -> None:
    x, y, w, h = target.rect(target.pad)
    for point in [(x, y), (x + w - 1, y + h - 1), (x + 37, y + 91), (x + 1, y + 2)]:
        sendinput.move(*point)
        sendinput.sync()
        assert sendinput.position() == point


@pytest.mark.parametrize(("button", "number"), [("left", 1), ("middle", 2), ("right", 3)])
def test_click_arrives_where_it_was_sent(
    target: Any, sendinput: Any, button: str, number: int
) -> None:
    x, y, _, _ = target.rect(target.pad)
    point = (x + 23, y + 41)
    click(sendinput, *point, button=button)
    assert target.pump_until(lambda: len(target.of_type("release")) >= 1)
    press = target.of_type("press")[-1]
    assert (press["button"], press["x"], press["y"]) == (number, *point)


def test_double_click(target: Any, sendinput: Any) -> None:
    x, y = target.center(target.pad)
    click(sendinput, x, y)
    click(sendinput, x, y)
    assert target.pump_until(lambda: bool(target.of_type("double")))
    assert target.of_type("double")[0]["x"] == x


def test_press_move_release_is_a_drag(target: Any, sendinput: Any) -> None:
    x, y, _, _ = target.rect(target.pad)
    sendinput.move(x + 10, y + 10)
    sendinput.sync()
    sendinput.button("left", True)
    try:
        for step in range(1, 11):
            sendinput.move(x + 10 + 10 * step, y + 10 + 5 * step)
            sendinput.sync()
            target.pump(0.01)
    finally:
        sendinput.button("left", False)
    assert target.pump_until(lambda: bool(target.of_type("release")))
    release = target.of_type("release")[-1]
    assert (release["x"], release["y"]) == (x + 110, y + 60)
    assert len(target.of_type("drag")) >= 5  # MOVE_NOCOALESCE keeps intermediate points


def test_wheel_down_is_negative_delta_per_notch(target: Any, sendinput: Any) -> None:
    x, y = target.center(target.pad)
    click(sendinput, x, y)
    sendinput.wheel(2, 0)
    assert target.pump_until(lambda: len(target.of_type("wheel")) >= 2)
    deltas = [r["delta"] for r in target.of_type("wheel")]
    assert sum(deltas) == -240 and all(d < 0 for d in deltas)
    sendinput.wheel(-1, 0)
    assert target.pump_until(lambda: sum(r["delta"] for r in target.of_type("wheel")) == -120)


@pytest.mark.parametrize("text", ["Grüße, 世界 ✓", "plain ASCII 123 !?", "𝄞 and 😀"])
def test_type_text_arrives_exactly(target: Any, sendinput: Any, text: str) -> None:
    focus_entry(target, sendinput)
    sendinput.type_text(text)
    assert target.pump_until(lambda: target.text() == text), repr(target.text())


def test_ctrl_a_then_typing_replaces_the_text(target: Any, sendinput: Any) -> None:
    focus_entry(target, sendinput)
    sendinput.type_text("old text")
    assert target.pump_until(lambda: target.text() == "old text")
    ctrl, a = resolve_key("ctrl"), resolve_key("a")
    sendinput.key(ctrl, True)
    try:
        sendinput.key(a, True)
        sendinput.key(a, False)
    finally:
        sendinput.key(ctrl, False)
    assert target.pump_until(lambda: bool(target.of_type("select_all")))
    sendinput.type_text("new")
    assert target.pump_until(lambda: target.text() == "new"), repr(target.text())


def test_extended_navigation_keys(target: Any, sendinput: Any) -> None:
    focus_entry(target, sendinput)
    sendinput.type_text("abc")
    assert target.pump_until(lambda: target.text() == "abc")
    for name in ("home", "delete", "end", "backspace"):
        key = resolve_key(name)
        sendinput.key(key, True)
        sendinput.key(key, False)
    assert target.pump_until(lambda: target.text() == "b"), repr(target.text())
    keysyms = [r["keysym"] for r in target.of_type("key")]
    assert {"Home", "Delete", "End", "BackSpace"} <= set(keysyms)
