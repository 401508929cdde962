"""Double and triple clicks through XTest into a real (headed) Chromium on Xvfb.

Chromium (and so Chrome and Electron apps) drops a click whose X timestamp equals the
previous one's; clicks sent back to back share a millisecond. What the page saw is read
over the DevTools protocol (a pipe, as in the panel tests): ``mousedown`` events with
their ``detail`` (the click count Chromium computed), ``dblclick`` events and the text
a double/triple click selected.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deskpilot.input import InputController
from deskpilot.testing._chromium import BrowserError, Chromium, find_chromium

pytestmark = pytest.mark.x11

PAGE = """<!doctype html><html><body style="margin:0;font:48px sans-serif">
<p id="words" style="margin:200px 0 0 200px">alpha beta gamma</p>
<p style="margin:40px 0 0 200px">second paragraph</p>
<textarea id="box" style="margin:20px 0 0 200px;width:700px;height:80px;font:24px sans-serif"></textarea>
<script>
window.downs = []; window.dbl = 0;
document.addEventListener("mousedown", e => window.downs.push(e.detail));
document.addEventListener("dblclick", () => { window.dbl += 1; });
window.where = id => {
  const r = document.getElementById(id).getBoundingClientRect();
  const top = window.screenY + (window.outerHeight - window.innerHeight);
  const left = window.screenX + (window.outerWidth - window.innerWidth) / 2;
  return [Math.round(left + r.left + 40), Math.round(top + r.top + r.height / 2)];
};
window.reset = () => { window.downs = []; window.dbl = 0; getSelection().removeAllRanges(); return true; };
</script></body></html>"""


class HeadedChromium(Chromium):
    """Chromium with a real X11 window on the test's Xvfb (``--app``), over the shared
    client's CDP pipe."""

    def __init__(
        self, url: str, *, width: int = 1200, height: int = 800, timeout: float = 30.0
    ) -> None:
        super().__init__(
            width=width,
            height=height,
            timeout=timeout,
            headless=False,
            url=None,
            extra_args=("--window-position=0,0", f"--app={url}"),
        )

    def page(self) -> str:
        """A session on the app window's page."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            pages = [
                t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"
            ]
            if pages:
                return str(
                    self.call(
                        "Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True}
                    )["sessionId"]
                )
            time.sleep(0.1)
        raise BrowserError("no page target")


@pytest.fixture(scope="module")
def browser(xvfb: str) -> Iterator[tuple[HeadedChromium, str]]:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed (apt-get install chromium)")
    url = "data:text/html," + urllib.parse.quote(PAGE)
    chrome = HeadedChromium(url)
    try:
        session = chrome.page()
        chrome.wait_for(
            session, "typeof window.where === 'function' && document.hasFocus() !== undefined"
        )
        yield chrome, session
    finally:
        chrome.close()


def click_and_read(
    chrome: HeadedChromium, session: str, ctl: InputController, count: int
) -> dict[str, Any]:
    x, y = chrome.evaluate(session, "window.where('words')")
    chrome.evaluate(session, "window.reset()")
    ctl.move(x + 200, y + 150)  # away first, so every round starts a new click sequence
    ctl.sync()
    time.sleep(0.6)  # longer than any double-click interval: the previous round is over
    ctl.click(x, y, count=count)
    ctl.sync()
    chrome.wait_for(session, f"window.downs.length >= {count}")
    return dict(
        chrome.evaluate(
            session, "({downs: window.downs, dbl: window.dbl, sel: getSelection().toString()})"
        )
    )


@pytest.mark.parametrize("count", [2, 3])
def test_multi_clicks_register_in_chromium(browser: tuple[HeadedChromium, str], count: int) -> None:
    chrome, session = browser
    with InputController("xtest") as ctl:
        seen = [click_and_read(chrome, session, ctl, count) for _ in range(5)]
    assert [s["downs"] for s in seen] == [list(range(1, count + 1))] * 5
    if count == 2:
        assert [s["dbl"] for s in seen] == [1] * 5
        assert [s["sel"].strip() for s in seen] == ["alpha"] * 5
    else:
        assert [s["sel"].strip() for s in seen] == ["alpha beta gamma"] * 5


def test_single_clicks_stay_single(browser: tuple[HeadedChromium, str]) -> None:
    chrome, session = browser
    with InputController("xtest") as ctl:
        seen = [click_and_read(chrome, session, ctl, 1) for _ in range(3)]
    assert [s["downs"] for s in seen] == [[1]] * 3 and [s["dbl"] for s in seen] == [0] * 3


def test_the_agents_double_click_tool_selects_a_word_in_chromium(
    browser: tuple[HeadedChromium, str], tmp_path: Path
) -> None:
    from deskpilot.agent import load_config, run_agent
    from deskpilot.geometry import Mapping, Rect
    from deskpilot.testing import ModelServer, Reply, ScriptedPolicy

    chrome, session = browser
    x, y = chrome.evaluate(session, "window.where('words')")
    mapping = Mapping(Rect(0, 0, 1920, 1080), 960, 540)
    box = list(mapping.physical_to_norm(x, y))
    seen = []
    for _ in range(3):
        chrome.evaluate(session, "window.reset()")
        time.sleep(0.6)  # the previous round's clicks are over (no timing is asserted)
        script: list[Reply | str] = [
            Reply(tool_calls=[("double_click", {"label": "alpha", "box": box})]),
            "Done.",
        ]
        with ModelServer(ScriptedPolicy(script)) as server:
            cfg = load_config(
                flags={
                    "model.endpoint": server.endpoint,
                    "run.runs_dir": str(tmp_path / "runs"),
                    "screen.image_width": 960,
                    "screen.image_height": 540,
                    "agent.toolset": "extended",
                },
                env={},
                search_default=False,
            )
            result = run_agent(cfg, "double-click alpha")
        assert result.outcome == "answered", result.error
        chrome.wait_for(session, "window.downs.length >= 2")
        seen.append(
            chrome.evaluate(
                session, "({downs: window.downs, dbl: window.dbl, sel: getSelection().toString()})"
            )
        )
    assert [(s["downs"], s["dbl"], s["sel"].strip()) for s in seen] == [([1, 2], 1, "alpha")] * 3


def test_unicode_typing_is_exact_in_chromium(browser: tuple[HeadedChromium, str]) -> None:
    import random

    chrome, session = browser
    x, y = chrome.evaluate(session, "window.where('box')")
    rng = random.Random(5)
    exotic = "äöüßéçñÅØæ€✓→←★☆♥世界中文日本語😀🎉ΩΣπЖЯ"
    got = []
    for _ in range(8):  # a fresh controller each time: its characters are bound anew
        text = "".join(rng.sample(exotic, 7) + [rng.choice("abc XYZ 123.,") for _ in range(8)])
        chrome.evaluate(session, "document.getElementById('box').value = ''")
        with InputController("xtest") as ctl:
            ctl.click(x, y)
            ctl.type_text(text)
            ctl.sync()
        value = chrome.wait_for(
            session,
            f"(v => v.length >= {len(text.encode('utf-16-le')) // 2} && v)(document.getElementById('box').value)",
        )
        got.append((value, text))
    assert [v for v, _ in got] == [t for _, t in got]
