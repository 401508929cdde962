"""The InputController facade over the dry backend (and a faulty one): composition,
clamping, validation and the guarantee that nothing stays pressed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deskpilot._errors import DeskpilotError, InputError, UnknownKeyError
from deskpilot.geometry import Rect
from deskpilot.input import DryBackend, InputArgumentError, InputController, KeySpec, make_backend
from deskpilot.input._base import Button


def events(ctl: InputController, *kinds: str) -> list[dict[str, Any]]:
    return [a for a in ctl.actions if not kinds or a["action"] in kinds]


def keys(ctl: InputController) -> list[tuple[str, bool]]:
    return [(a["key"], a["down"]) for a in events(ctl, "key")]


@pytest.fixture
def ctl() -> InputController:
    return InputController("dry")


def test_dry_backend_records_clicks_with_physical_coordinates(ctl: InputController) -> None:
    ctl.click(100, 200)
    ctl.click(300, 400, button="right", count=2)
    assert ctl.actions == [
        {"action": "move", "x": 100, "y": 200},
        {"action": "button", "button": "left", "down": True, "x": 100, "y": 200},
        {"action": "button", "button": "left", "down": False, "x": 100, "y": 200},
        {"action": "move", "x": 300, "y": 400},
        {"action": "button", "button": "right", "down": True, "x": 300, "y": 400},
        {"action": "button", "button": "right", "down": False, "x": 300, "y": 400},
        {"action": "button", "button": "right", "down": True, "x": 300, "y": 400},
        {"action": "button", "button": "right", "down": False, "x": 300, "y": 400},
    ]


def test_click_without_point_clicks_where_the_pointer_is(ctl: InputController) -> None:
    ctl.move(5, 6)
    ctl.click(button="middle", count=3)
    presses = events(ctl, "button")
    assert len(presses) == 6 and all((a["x"], a["y"], a["button"]) == (5, 6, "middle") for a in presses)


def test_points_are_clamped_onto_the_desktop() -> None:
    ctl = InputController(DryBackend(Rect(-1920, -200, 3840, 1280)))
    assert ctl.move(-5000, 99999) == (-1920, 1079)
    assert ctl.move(1000.6, -200.4) == (1001, -200)
    assert ctl.move(1919.6, 0) == (1919, 0)  # the right edge is exclusive
    assert ctl.position() == (1919, 0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.click(1, 2, count=4), "count"),
        (lambda c: c.click(1, 2, count=0), "count"),
        (lambda c: c.click(1, 2, count=True), "count"),
        (lambda c: c.click(1, 2, button="side"), "button"),
        (lambda c: c.click(1, None), "both"),
        (lambda c: c.move(float("nan"), 1), "finite"),
        (lambda c: c.move("3", 1), "number"),
        (lambda c: c.move(True, 1), "number"),
        (lambda c: c.scroll(1, 1, dy=1.5), "dy"),
        (lambda c: c.drag((0, 0), (1, 1), steps=0), "steps"),
        (lambda c: c.drag((0, 0), (1, 1), duration=-1), "duration"),
        (lambda c: c.drag((0, 0)), "end point"),
        (lambda c: c.drag((0, 0, 0), (1, 1)), "pair"),
        (lambda c: c.type_text(b"abc"), "string"),
        (lambda c: c.key("ctrl", repeat=0), "repeat"),
    ],
)
def test_bad_arguments_raise_a_typed_error(ctl: InputController, call: Any, message: str) -> None:
    with pytest.raises(InputArgumentError, match=message) as info:
        call(ctl)
    assert isinstance(info.value, ValueError) and isinstance(info.value, DeskpilotError)
    assert not events(ctl, "button", "key")


def test_unknown_backend_and_key() -> None:
    with pytest.raises(InputArgumentError, match="unknown input backend"):
        make_backend("uinput")
    with pytest.raises(UnknownKeyError, match="ctrl"):
        InputController("dry").key("ctlr+c")


def test_key_combo_presses_in_order_and_releases_in_reverse(ctl: InputController) -> None:
    ctl.key("Ctrl + Shift + T")
    assert keys(ctl) == [("ctrl", True), ("shift", True), ("t", True), ("t", False), ("shift", False), ("ctrl", False)]
    assert ctl.pressed == ([], [])


def test_key_repeat(ctl: InputController) -> None:
    ctl.key("down", repeat=3)
    assert keys(ctl) == [("down", True), ("down", False)] * 3


def test_hold_keeps_keys_down_and_combos_do_not_release_them(ctl: InputController) -> None:
    with ctl.hold("shift", "ctrl"):
        ctl.key("shift+a")
        ctl.click(10, 10)
        assert ctl.pressed == (["shift", "ctrl"], [])
    assert keys(ctl) == [("shift", True), ("ctrl", True), ("a", True), ("a", False), ("ctrl", False), ("shift", False)]


def test_drag_presses_moves_and_releases(ctl: InputController) -> None:
    ctl.drag((0, 0), (100, 50), duration=0, steps=4)
    assert [(a["action"], a.get("x"), a.get("y"), a.get("down")) for a in ctl.actions] == [
        ("move", 0, 0, None),
        ("button", 0, 0, True),
        ("move", 25, 12, None),
        ("move", 50, 25, None),
        ("move", 75, 38, None),
        ("move", 100, 50, None),
        ("button", 100, 50, False),
    ]


def test_drag_along_a_path_visits_every_waypoint(ctl: InputController) -> None:
    ctl.drag((0, 0), (0, 100), path=[(100, 0), (100, 100)], duration=0, steps=6, button="right")
    moves = [(a["x"], a["y"]) for a in events(ctl, "move")]
    assert moves[0] == (0, 0) and moves[-1] == (0, 100)
    assert (100, 0) in moves and (100, 100) in moves
    assert len(moves) == 1 + 6
    buttons = events(ctl, "button")
    assert [(b["button"], b["down"]) for b in buttons] == [("right", True), ("right", False)]


def test_scroll_at_a_point(ctl: InputController) -> None:
    ctl.scroll(10, 20, dy=3, dx=-2)
    ctl.scroll(dy=0)
    assert ctl.actions == [
        {"action": "move", "x": 10, "y": 20},
        {"action": "wheel", "vertical": 3, "horizontal": -2, "x": 10, "y": 20},
    ]


def test_mouse_down_up_and_release_all(ctl: InputController) -> None:
    ctl.mouse_down("left")
    ctl.mouse_down("left")  # already down: not pressed twice
    with ctl.hold("alt"):
        assert ctl.pressed == (["alt"], ["left"])
        ctl.release_all()
        assert ctl.pressed == ([], [])
    downs = [a for a in ctl.actions if a.get("down") is True]
    ups = [a for a in ctl.actions if a.get("down") is False]
    assert len(downs) == 2 and len(ups) == 2


def test_mouse_up_releases_even_an_untracked_button(ctl: InputController) -> None:
    ctl.mouse_up("right")
    assert events(ctl, "button") == [{"action": "button", "button": "right", "down": False, "x": 960, "y": 540}]


def test_type_text_passes_unicode_through(ctl: InputController) -> None:
    ctl.type_text("Grüße, 世界 ✓ 𝄞")
    ctl.type_text("")
    assert ctl.actions == [{"action": "type", "text": "Grüße, 世界 ✓ 𝄞"}]


class Faulty(DryBackend):
    """A dry backend that raises ``exc`` on the ``fail_at``-th pressing event."""

    def __init__(self, fail_at: int, exc: BaseException) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.exc = exc
        self.count = 0

    def _tick(self) -> None:
        self.count += 1
        if self.count == self.fail_at:
            raise self.exc

    def key(self, key: KeySpec, down: bool) -> None:
        super().key(key, down)
        if down:
            self._tick()

    def button(self, button: Button, down: bool) -> None:
        super().button(button, down)
        if down:
            self._tick()

    def move(self, x: int, y: int) -> None:
        super().move(x, y)
        self._tick()

    def type_text(self, text: str) -> None:
        self._tick()
        super().type_text(text)


def held_after(backend: DryBackend) -> set[str]:
    """Keys/buttons whose last recorded event is a press."""
    state: dict[str, bool] = {}
    for a in backend.actions:
        if a["action"] in ("key", "button"):
            state[a.get("key") or a["button"]] = a["down"]
    return {k for k, down in state.items() if down}


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), InputError("boom"), RuntimeError("bug")])
@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_interrupted_combo_releases_every_key(exc: BaseException, fail_at: int) -> None:
    backend = Faulty(fail_at, exc)
    ctl = InputController(backend)
    with pytest.raises(type(exc)):
        ctl.key("ctrl+shift+t")
    assert held_after(backend) == set()
    assert ctl.pressed == ([], [])


@pytest.mark.parametrize("fail_at", [2, 3, 5])
def test_interrupted_drag_releases_the_button(fail_at: int) -> None:
    backend = Faulty(fail_at, KeyboardInterrupt())
    ctl = InputController(backend)
    with pytest.raises(KeyboardInterrupt):
        ctl.drag((0, 0), (100, 100), duration=0, steps=10)
    assert held_after(backend) == set()
    assert backend.actions[-1]["action"] == "button" and backend.actions[-1]["down"] is False


def test_interrupted_typing_inside_hold_releases_the_held_keys() -> None:
    backend = Faulty(3, KeyboardInterrupt())  # shift, ctrl, then the typing
    ctl = InputController(backend)
    with pytest.raises(KeyboardInterrupt), ctl.hold("shift", "ctrl"):
        ctl.type_text("abc")
    assert held_after(backend) == set()
    assert ctl.pressed == ([], [])


def test_exception_in_a_hold_block_releases() -> None:
    ctl = InputController("dry")
    with pytest.raises(ZeroDivisionError), ctl.hold("win"):
        ctl.mouse_down("left")
        1 / 0  # noqa: B018
    assert ctl.pressed == ([], ["left"])  # the hold is released; mouse_down was explicit
    ctl.close()
    assert ctl.pressed == ([], [])


def test_close_releases_everything_and_is_idempotent() -> None:
    backend = DryBackend()
    ctl = InputController(backend)
    ctl.mouse_down("right")
    with ctl.hold("alt"):
        ctl.close()
        ctl.close()
    assert backend.closed and held_after(backend) == set()
    with pytest.raises(InputError, match="closed"):
        ctl.click(1, 1)


def test_context_manager_closes() -> None:
    with InputController("dry") as ctl:
        ctl.mouse_down()
    assert isinstance(ctl.backend, DryBackend) and ctl.backend.closed
    assert held_after(ctl.backend) == set()


def test_numpy_numbers_are_coordinates(ctl: InputController) -> None:
    point = np.array([100, 200])
    assert ctl.move(point[0], point[1]) == (100, 200) and type(ctl.move(*point)[0]) is int
    ctl.click(np.int64(300), np.int32(400), count=np.int64(2))  # type: ignore[arg-type]
    ctl.drag(point, np.array([150, 250]), duration=0, steps=np.int64(1))  # type: ignore[arg-type]
    ctl.move(np.float32(10.4), np.float64(20.6))
    ctl.scroll(np.uint16(5), np.int8(6), dy=np.int64(2))  # type: ignore[arg-type]
    moves = [(a["x"], a["y"]) for a in events(ctl, "move")]
    assert moves == [(100, 200), (100, 200), (300, 400), (100, 200), (150, 250), (10, 21), (5, 6)]
    assert all(type(v) is int for m in moves for v in m)
    assert [a["down"] for a in events(ctl, "button")] == [True, False] * 3


@pytest.mark.parametrize("bad", [np.float64("nan"), np.array([1, 2]), "7", np.bool_(True)])
def test_non_numbers_are_refused_as_coordinates(ctl: InputController, bad: Any) -> None:
    with pytest.raises(InputArgumentError, match="x must be"):
        ctl.click(bad, 5)
    with pytest.raises(InputArgumentError, match="count must be an integer"):
        ctl.click(1, 2, count=np.float64(2.0))  # type: ignore[arg-type]
