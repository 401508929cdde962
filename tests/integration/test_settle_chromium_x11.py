"""The settled screenshot after each action in a real Chromium window is what the page
shows once it is done: paste, typing into a text and a date input, a focus ring, a
checkbox tick, a spinner arrow, a 400 ms transition that moves a button, a smooth wheel
scroll. An action without effect ends at the first-reaction bound and says so; one whose
reaction never ends (a busy wheel) ends at settle_max, marked as still changing.

A headed Chromium on the test's Xvfb (X11 DAMAGE and capture see its window), real input
through XTest, full agent runs with the scripted model server and default settle
settings; each settled screenshot is compared with the page's own final frame (the
screenshot after a wait, :mod:`_settle_check`). Only pixels and record fields are
asserted, never times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _settle_check import SIGNALS, Step, mismatch, norm, run_steps

from deskpilot.input import InputController
from deskpilot.testing._chromium import find_chromium
from deskpilot.testing._reactions import ReactionsPage

pytestmark = pytest.mark.x11


@pytest.fixture(params=SIGNALS)
def signal(request: pytest.FixtureRequest) -> str:
    """Every test runs on both settle drivers: X11 DAMAGE and probe polling."""
    return str(request.param)


@pytest.fixture(scope="module")
def page(xvfb: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReactionsPage]:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed (apt-get install chromium)")
    with InputController("xtest") as hands:
        where = hands.position()
    with ReactionsPage(tmp_path_factory.mktemp("reactions")) as opened:
        yield opened
    with InputController("xtest") as hands:  # later modules look at pixels where we leave it
        hands.move(*where)


@pytest.fixture
def fresh(page: ReactionsPage) -> ReactionsPage:
    page.reset()
    time.sleep(0.3)  # the reset is drawn before the run's first screenshot (not asserted)
    return page


def click(page: ReactionsPage, element: str, part: str = "") -> Step:
    return Step("click_element", {"label": element, "box": norm(*page.where(element, part))})


def _type(text: str) -> Callable[[ReactionsPage], list[Step]]:
    return lambda p: [click(p, "text"), Step("type_text", {"text": text})]


SCENARIOS: dict[str, tuple[Callable[[ReactionsPage], list[Step]], dict[str, Any]]] = {
    # click into the field (a focus ring), then type
    "type": (_type("hello settle"), {"text": "hello settle", "focused": "text"}),
    "paste": (lambda p: [click(p, "text"), Step("press_key", {"key": "ctrl+v"})], {"text": "pasted words"}),
    # the month part of the date field, then its digits
    "date": (lambda p: [click(p, "date", "month"), Step("type_text", {"text": "03152024"})], {"date": "2024-03-15"}),
    "checkbox": (lambda p: [click(p, "check")], {"check": True}),
    "spinner": (lambda p: [click(p, "spin", "up"), click(p, "spin", "up")], {"spin": "7"}),
    "accordion": (lambda p: [click(p, "acc-head")], {"open": True}),
    "scroll": (
        lambda p: [Step("scroll_at_position", {"label": "list", "box": norm(*p.where("scroller")), "amount": 3})],
        {},
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_settled_screenshot_is_the_pages_final_frame(fresh: ReactionsPage, tmp_path: Path, signal: str, name: str) -> None:
    make_steps, expected = SCENARIOS[name]
    if name == "paste":
        fresh.copy_source()
    checks = run_steps(tmp_path, signal=signal, steps=make_steps(fresh))
    state = fresh.state()
    assert {k: state[k] for k in expected} == expected, str(state)  # the actions landed
    if name == "scroll":
        assert state["scrolled"] > 0, str(state)
    problems = [m for m in map(mismatch, checks) if m]
    assert not problems, "\n".join([*problems, fresh.timeline()])


def test_an_action_without_effect_ends_at_the_first_reaction_bound(fresh: ReactionsPage, tmp_path: Path, signal: str) -> None:
    """A click on the blank part of the page draws nothing. The pointer is drawn into the
    screenshots here (the default): its move alone is no reaction of the app."""
    [check] = run_steps(tmp_path, signal=signal, steps=[Step("click_element", {"label": "blank", "box": norm(*fresh.where("blank"))}, changes=False)], cursor=True)
    assert check.record["result"]["changed"] is False or check.record["result"].get("pointer_moved_only") is True, str(check.record["result"])
    assert check.settle.get("ended") == "no_reaction", str(check.settle)
    assert "first_reaction_ms" not in check.settle, str(check.settle)
    assert mismatch(check) is None


def test_a_reaction_that_never_ends_stops_at_the_bound_and_says_so(fresh: ReactionsPage, tmp_path: Path, signal: str) -> None:
    """A busy wheel turns forever: the settle ends at settle_max, the frame marked as
    still changing (the picture is some frame of the wheel; only the record is checked)."""
    [check] = run_steps(tmp_path, signal=signal, steps=[Step("click_element", {"label": "Load", "box": norm(*fresh.where("busy"))})])
    assert fresh.state()["busy"] is True
    assert check.record["result"]["changed"] is True, str(check.record["result"])
    assert check.settle.get("ended") == "max" and check.settle.get("stable") is False, f"{check.settle}; {fresh.timeline()}"
    assert "first_reaction_ms" in check.settle, str(check.settle)

