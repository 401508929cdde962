"""XTest input into the real Tk target app on Xvfb: every assertion is on what the app
recorded, never on what we think we sent."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from apps.harness import TargetApp

from deskpilot.geometry import Mapping, Rect
from deskpilot.input import InputController
from deskpilot.input._xtest import XTestBackend

pytestmark = pytest.mark.x11

SAMPLE = "Grüße, 世界 ✓ 𝄞"


@pytest.fixture(scope="module")
def ctl(target_app: TargetApp) -> Iterator[InputController]:
    with InputController("xtest") as controller:
        yield controller


def presses(records: list[dict[str, Any]], kind: str = "press") -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


def test_clicks_at_normalized_points_land_on_the_pixel(target_app: TargetApp, ctl: InputController) -> None:
    mapping = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)
    rng = random.Random(3)
    points = [(0, 0), (1000, 1000), (0, 1000), (1000, 0), (500, 500), (1, 999)]
    points += [(rng.randint(0, 1000), rng.randint(0, 1000)) for _ in range(14)]
    for nx, ny in points:
        px, py = mapping.norm_to_physical(nx, ny)
        mark = target_app.mark()
        ctl.click(px, py)
        press = target_app.wait_for(lambda r: r["type"] == "press", since=mark)
        assert (press["x"], press["y"]) == (px, py), (nx, ny)
        # ... and the model coordinate of where it landed is the one it asked for, within 1 px
        back = mapping.norm_to_physical(*mapping.physical_to_norm(press["x"], press["y"]))
        assert abs(back[0] - px) <= 1 and abs(back[1] - py) <= 1


def test_clicks_hit_the_named_targets(target_app: TargetApp, ctl: InputController) -> None:
    for name in ("red", "green", "blue", "yellow", "pad", "pattern"):
        mark = target_app.mark()
        ctl.click(*target_app.center(name))
        press = target_app.wait_for(lambda r: r["type"] == "release", since=mark)
        assert press["widget"] == name


def test_double_right_and_middle_clicks(target_app: TargetApp, ctl: InputController) -> None:
    x, y = target_app.center("pad")
    mark = target_app.mark()
    ctl.click(x, y, count=2)
    ctl.click(x + 10, y, button="right")
    ctl.click(x + 20, y, button="middle", count=3)
    triple = target_app.wait_for(lambda r: r["type"] == "triple" and r["button"] == 2, since=mark)
    # the triple is reported at the third press: wait for that press's release too
    after_triple = mark + target_app.since(mark).index(triple) + 1
    target_app.wait_for(lambda r: r["type"] == "release" and r["button"] == 2, since=after_triple)
    records = target_app.since(mark)
    assert [(r["button"], r["x"]) for r in presses(records)] == [(1, x), (1, x), (3, x + 10), (2, x + 20), (2, x + 20), (2, x + 20)]
    assert [(r["button"], r["x"]) for r in presses(records, "release")] == [(1, x), (1, x), (3, x + 10), (2, x + 20), (2, x + 20), (2, x + 20)]
    assert [(r["button"]) for r in presses(records, "double")] == [1, 2]
    assert [(r["button"]) for r in presses(records, "triple")] == [2]


def test_numpy_coordinates_land_on_the_pixel(target_app: TargetApp, ctl: InputController) -> None:
    import numpy as np

    x, y = target_app.center("pad")
    point = np.array([x, y]) + np.array([7, -5])
    mark = target_app.mark()
    ctl.click(point[0], point[1])  # numpy integers (refused before)
    press = target_app.wait_for(lambda r: r["type"] == "press", since=mark)
    assert (press["x"], press["y"], press["widget"]) == (x + 7, y - 5, "pad")
    mark = target_app.mark()
    ctl.drag(point, point + np.array([40, 30]), duration=0.05, steps=np.int64(4))
    release = target_app.wait_for(lambda r: r["type"] == "release", since=mark)
    assert (release["x"], release["y"]) == (x + 47, y + 25)


def test_drag_moves_with_the_button_down(target_app: TargetApp, ctl: InputController) -> None:
    x, y = target_app.center("pad")
    start, end = (x - 150, y - 100), (x + 150, y + 120)
    mark = target_app.mark()
    ctl.drag(start, end, duration=0.2, steps=10)
    release = target_app.wait_for(lambda r: r["type"] == "release", since=mark)
    records = target_app.since(mark)
    press = presses(records)[0]
    assert (press["button"], press["x"], press["y"]) == (1, *start)
    assert (release["button"], release["x"], release["y"]) == (1, *end)
    motion = [(r["x"], r["y"]) for r in records if r["type"] == "motion"]
    assert len(motion) >= 5 and motion[-1] == end
    assert all(r["state"] & 0x100 for r in records if r["type"] == "motion")  # Button1 held throughout


def test_drag_along_a_path(target_app: TargetApp, ctl: InputController) -> None:
    x, y = target_app.center("pad")
    corner = (x + 100, y - 100)
    mark = target_app.mark()
    ctl.drag((x - 100, y - 100), (x + 100, y + 100), path=[corner], duration=0.16, steps=8)  # Tk compresses motion: give it time
    target_app.wait_for(lambda r: r["type"] == "release", since=mark)
    motion = [(r["x"], r["y"]) for r in target_app.since(mark) if r["type"] == "motion"]
    assert corner in motion and motion[-1] == (x + 100, y + 100)


def test_scroll_both_axes(target_app: TargetApp, ctl: InputController) -> None:
    x, y = target_app.center("pad")
    mark = target_app.mark()
    ctl.scroll(x, y, dy=3)
    ctl.scroll(x, y, dy=-2)
    ctl.scroll(x, y, dx=2)
    ctl.scroll(x, y, dx=-1)
    records = [r for r in target_app.since(mark) if r["type"] == "scroll"]
    while len(records) < 8:
        target_app.wait_for(lambda r: r["type"] == "scroll", since=target_app.mark() - 1)
        records = [r for r in target_app.since(mark) if r["type"] == "scroll"]
    assert [r["direction"] for r in records] == ["down"] * 3 + ["up"] * 2 + ["right"] * 2 + ["left"]
    assert all((r["x"], r["y"], r["widget"]) == (x, y, "pad") for r in records)


def type_into(app: TargetApp, ctl: InputController, widget: str, text: str) -> str:
    app.clear()
    app.focus(widget)
    mark = app.mark()
    ctl.type_text(text)
    try:
        record = app.wait_for(lambda r: r["type"] == widget and r["text"] == text, since=mark, timeout=15)
    except TimeoutError:
        seen = [r["text"] for r in app.since(mark) if r["type"] == widget]
        return seen[-1] if seen else ""
    return str(record["text"])


def test_unicode_text_arrives_exactly_every_time(target_app: TargetApp, ctl: InputController) -> None:
    # A fresh backend per run: every run maps its non-ASCII characters anew (the race
    # lives in the remapping), then one long-lived controller reusing its mappings.
    results = []
    for _ in range(20):
        with InputController("xtest") as fresh:
            results.append(type_into(target_app, fresh, "entry", SAMPLE))
    results += [type_into(target_app, ctl, "entry", SAMPLE) for _ in range(5)]
    assert results == [SAMPLE] * 25


def test_long_mixed_text_arrives_exactly(target_app: TargetApp) -> None:
    # Fresh backends each run, so every run remaps (nothing cached from earlier tests),
    # with more distinct unmapped characters than there are spare keycodes.
    alphabet = "äöüßéèêçñøåæœ€£¥©®µ¶世界你好中文字符测试日本語かなカナ한국어✓✗→←↑↓★☆♠♣♥♦𝄞😀🎉"
    rng = random.Random(11)
    for run in range(6):
        text = "".join(rng.choice(alphabet + "aZ9 ,.!?(){}~") for _ in range(80))
        with InputController("xtest") as fresh:
            assert type_into(target_app, fresh, "entry", text) == text, run


def test_multiline_text_into_the_text_box(target_app: TargetApp, ctl: InputController) -> None:
    text = "line one\n\tindented: <tag attr=\"x\"> & 'quotes'\nzwei: Grüße — 𝄞\n"
    assert type_into(target_app, ctl, "text", text) == text


def test_ctrl_a_then_typing_replaces_the_text(target_app: TargetApp, ctl: InputController) -> None:
    assert type_into(target_app, ctl, "entry", "old text here") == "old text here"
    mark = target_app.mark()
    ctl.key("ctrl+a")
    ctl.type_text("new")
    target_app.wait_for(lambda r: r["type"] == "entry" and r["text"] == "new", since=mark)
    keys = [r for r in target_app.since(mark) if r["type"] == "key"]
    assert keys[0]["keysym"] == "Control_L" and keys[1]["keysym"] == "a" and keys[1]["state"] & 4


@pytest.mark.parametrize(
    ("combo", "keysyms"),
    [
        ("shift+a", ["Shift_L", "A"]),
        ("ctrl+shift+t", ["Control_L", "Shift_L", "T"]),
        ("enter", ["Return"]),
        ("pagedown", ["Next"]),
        ("f5", ["F5"]),
        ("f13", ["F13"]),  # not in Xvfb's keymap: typed through a spare keycode
        ("f24", ["F24"]),
        ("num7", ["KP_7", "KP_Home"]),
        ("?", ["Shift_L", "question"]),
        ("rctrl", ["Control_R"]),
        ("win", ["Super_L"]),
    ],
)
def test_key_combos_arrive_as_keysyms(target_app: TargetApp, ctl: InputController, combo: str, keysyms: list[str]) -> None:
    target_app.focus("pad")
    mark = target_app.mark()
    ctl.key(combo)
    want = keysyms[:-1] if len(keysyms) > 1 and keysyms[-1].startswith("KP_") else keysyms
    target_app.wait_for(lambda r: r["type"] == "key_release" and r["keysym"] in (want[-1], keysyms[-1]), since=mark)
    got = [r["keysym"] for r in target_app.since(mark) if r["type"] == "key"]
    if combo == "num7":  # KP_7 or KP_Home depending on NumLock
        assert got[0] in keysyms
    else:
        assert got == keysyms
    # Modifiers are released after the key (in reverse order of the presses): the first key
    # pressed is the last released, so wait for it before counting the releases.
    target_app.wait_for(lambda r: r["type"] == "key_release" and r["keysym"] == got[0], since=mark)
    releases = [r["keysym"] for r in target_app.since(mark) if r["type"] == "key_release"]
    assert len(releases) == len(got)  # everything pressed was released


def test_interrupted_drag_releases_the_button_for_real(target_app: TargetApp) -> None:
    class Interrupting(XTestBackend):
        moves = 0

        def move(self, x: int, y: int) -> None:
            super().move(x, y)
            self.moves += 1
            if self.moves == 4:
                raise KeyboardInterrupt

    x, y = target_app.center("pad")
    mark = target_app.mark()
    with InputController(Interrupting()) as ctl, pytest.raises(KeyboardInterrupt):
        ctl.drag((x, y), (x + 200, y), duration=0, steps=10)
    release = target_app.wait_for(lambda r: r["type"] == "release", since=mark)
    assert release["button"] == 1
    assert ctl.pressed == ([], [])


def spare_keycodes() -> list[int]:
    """Keycodes with no keysym in the server's keymap now."""
    probe = XTestBackend()
    try:
        return sorted(kc for kc, syms in probe._read_keymap().items() if not any(syms))
    finally:
        probe.close()


def test_close_restores_the_spare_keycodes(target_app: TargetApp) -> None:
    spares_before = set(spare_keycodes())  # (the module's controller may still hold some)
    with InputController(XTestBackend(remap_guard=1.0)) as ctl:
        type_into(target_app, ctl, "entry", "ÿ€世")
        used = set(ctl.backend._mine)  # type: ignore[attr-defined]
    assert set(spare_keycodes()) >= spares_before | used  # all empty again


def test_spare_keycodes_are_given_back_soon_after_typing(target_app: TargetApp) -> None:
    spares_before = spare_keycodes()
    with InputController("xtest") as ctl:
        assert type_into(target_app, ctl, "entry", "ÿ€世✓") == "ÿ€世✓"
        deadline = time.monotonic() + 10
        while spare_keycodes() != spares_before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spare_keycodes() == spares_before  # given back without close()
        assert type_into(target_app, ctl, "entry", "€ and ✓ again") == "€ and ✓ again"


def test_every_key_of_the_vocabulary_arrives_as_its_keysym(target_app: TargetApp, ctl: InputController) -> None:
    from deskpilot.input import KEY_NAMES, parse_combo

    target_app.focus("pad")
    wrong: list[tuple[str, list[int | None], list[int]]] = []
    for name in KEY_NAMES:
        want = [s.keysym for s in parse_combo(name)]
        # keypad digits arrive as KP_Insert..KP_Prior while NumLock is off: the same key
        alternatives = {want[-1], *(range(0xFF95, 0xFFA0) if name[:3] == "num" and name[3:].isdigit() else ())}
        mark = target_app.mark()
        ctl.key(name)
        target_app.wait_for(lambda r, alt=alternatives: r["type"] == "key_release" and r["keysym_num"] in alt, since=mark)
        got = [r["keysym_num"] for r in target_app.since(mark) if r["type"] == "key"]
        if name in ("capslock", "numlock", "scrolllock"):
            # Toggle the lock back off, and wait for that too: a press arriving after the
            # next key's mark would be counted as that key's.
            again = target_app.mark()
            ctl.key(name)
            target_app.wait_for(lambda r, alt=alternatives: r["type"] == "key_release" and r["keysym_num"] in alt,
                                since=again)
        if got[:-1] != want[:-1] or got[-1] not in alternatives:
            wrong.append((name, want, got))
        if name == "tab":
            target_app.focus("pad")
    assert not wrong
    assert ctl.pressed == ([], [])
