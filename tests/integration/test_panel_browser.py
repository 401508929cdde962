"""The panel page in a real headless Chromium (Debian's), driven over the DevTools protocol
(:mod:`deskpilot.testing._chromium`: CDP over ``--remote-debugging-pipe``, no websocket
package, no browser download). The page must show the screenshot with its overlays, and
in ``--annotate browser`` mode draw the overlays itself and post the annotated PNG back.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deskpilot import imaging
from deskpilot.imaging._overlay import ActionMark, BoxMark, OverlayStyle, annotate
from deskpilot.panel import PanelServer, PanelState, style_to_ui_config
from deskpilot.testing._chromium import Chromium, find_chromium

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed: run ./dev setup (apt-get install chromium)")
    # Two names of other sites that resolve to 127.0.0.1, as an attacker's domain does
    # after DNS rebinding (or simply: a page of another site served from this machine).
    chrome = Chromium(extra_args=["--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1"])
    try:
        chrome.call("Browser.getVersion")
        yield chrome
    finally:
        chrome.close()


def grey_frame(w: int, h: int) -> np.ndarray[Any, Any]:
    frame = np.full((h, w, 3), 128, dtype=np.uint8)
    frame[:, : w // 8] = (40, 40, 40)  # a dark strip so the screenshot is not uniform
    return frame


def decode(png: bytes) -> np.ndarray[Any, Any]:
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


def canvas_to_page(browser: Chromium, session: str, ix: float, iy: float) -> tuple[int, int]:
    rect = browser.evaluate(
        session,
        "(() => { const c = document.getElementById('view'); const r = c.getBoundingClientRect();"
        " return {x: r.x, y: r.y, w: r.width, h: r.height, cw: c.width, ch: c.height}; })()",
    )
    return int(rect["x"] + ix * rect["w"] / rect["cw"]), int(
        rect["y"] + iy * rect["h"] / rect["ch"]
    )


def is_orange(rgb: np.ndarray[Any, Any]) -> bool:
    r, g, b = (int(v) for v in rgb)
    return r > 170 and r > g + 40 and g > b + 20


def test_page_shows_the_native_annotated_screenshot_and_the_story(browser: Chromium) -> None:
    w, h = 640, 360
    raw = grey_frame(w, h)
    actions = [ActionMark("click", 500, 500), ActionMark("type", detail="hello")]
    annotated = annotate(raw.copy(), actions, [BoxMark(700, 100, 900, 300, "menu")])
    state = PanelState(config={"ui": style_to_ui_config(OverlayStyle())}, annotate="native")
    state.publish(
        turn=1,
        raw_png=imaging.encode_png(raw),
        image_size=(w, h),
        observation="I clicked the middle.",
        bboxes=[{"x1": 700, "y1": 100, "x2": 900, "y2": 300, "label": "menu"}],
        actions=[{"name": "click", "x1": 500, "y1": 500}, {"name": "type", "text": "hello"}],
        vlm_json="{}",
    )
    state.set_annotated(1, imaging.encode_png(annotated))
    server = PanelServer(state, port=0)
    server.start_in_thread()
    try:
        session = browser.open(server.url + "/")
        browser.wait_for(session, "document.body.dataset.shown === '1:annotated'")
        assert (
            browser.evaluate(session, "document.getElementById('observation').textContent")
            == "I clicked the middle."
        )
        items = browser.evaluate(
            session, "[...document.querySelectorAll('#actions li')].map(li => li.textContent)"
        )
        assert items == ["1 click 500,500", '2 type "hello"']
        assert (
            browser.evaluate(session, "document.getElementById('phase').textContent") == "starting"
        )
        shot = browser.screenshot(session)
        # The page shows the engine's annotated image: orange at the click, blue in the box,
        # plain grey far away -- compared pixel for pixel with what the engine drew.
        cy, cx = h // 2, w // 2
        orange = [
            (x, y)
            for y in range(cy - 12, cy + 12)
            for x in range(cx - 12, cx + 12)
            if is_orange(annotated[y, x])
        ]
        assert orange, "the native overlay has no orange near the click"
        points = [
            orange[len(orange) // 2],
            (int(w * 0.8), int(h * 0.2)),
            (int(w * 0.3), int(h * 0.9)),
        ]
        for ix, iy in points:
            px, py = canvas_to_page(browser, session, ix + 0.5, iy + 0.5)
            assert np.abs(shot[py, px].astype(int) - annotated[iy, ix].astype(int)).max() <= 8, (
                ix,
                iy,
                shot[py, px],
                annotated[iy, ix],
            )
        ox, oy = canvas_to_page(browser, session, orange[0][0] + 0.5, orange[0][1] + 0.5)
        assert is_orange(shot[oy, ox])
        bx, by = points[1]
        assert (
            int(annotated[by, bx][2]) > int(annotated[by, bx][0]) + 10
        )  # the blue box (faint at its centre)
        state.set_phase("calling_model")
        browser.wait_for(session, "document.body.dataset.phase === 'calling_model'")
    finally:
        server.stop_thread()


def test_browser_mode_draws_the_overlays_and_posts_the_png(browser: Chromium) -> None:
    w, h = 800, 450
    raw = grey_frame(w, h)
    state = PanelState(
        config={"ui": style_to_ui_config(OverlayStyle()), "capture_width": w, "capture_height": h},
        annotate="browser",
    )
    server = PanelServer(state, port=0)
    server.start_in_thread()
    try:
        session = browser.open(server.url + "/")
        browser.wait_for(session, "document.getElementById('phase').textContent === 'starting'")
        state.publish(
            turn=4,
            raw_png=imaging.encode_png(raw),
            image_size=(w, h),
            observation="drag it",
            bboxes=[{"x1": 600, "y1": 600, "x2": 900, "y2": 900}],
            actions=[
                {"name": "drag", "x1": 200, "y1": 200, "x2": 400, "y2": 300},
                {"name": "key", "keys": "enter"},
            ],
            vlm_json='{"observation": "drag it"}',
            trail=[[{"name": "click", "x1": 800, "y1": 200}]],
        )

        async def engine() -> bytes:
            return await state.wait_annotation(4, timeout=20)

        png = asyncio.run(engine())
        img = decode(png)
        assert img.shape == (h, w, 3)
        # The page drew what the native core draws for the same turn (canvas gradients and
        # antialiased strokes differ a little): compare around each heat spot.
        native = annotate(
            raw.copy(),
            [ActionMark("drag", 200, 200, 400, 300), ActionMark("key", detail="enter")],
            [BoxMark(600, 600, 900, 900)],
            previous=[[ActionMark("click", 800, 200)]],
        )
        for x, y in ((160, 90), (320, 135), (640, 90)):  # drag start, drag end, last turn's click
            window = (slice(y - 15, y + 15), slice(x - 15, x + 15))
            diff = np.abs(img[window].astype(int) - native[window].astype(int)).mean()
            assert diff < 12, (x, y, diff)
            assert any(is_orange(p) for p in img[window].reshape(-1, 3)), (x, y)
        # The blue box fill, the legend, and an untouched pixel that stays as it was.
        by, bx = int(h * 0.85), int(w * 0.85)
        assert int(img[by, bx][2]) > int(img[by, bx][0]) + 10
        assert np.abs(img[h - 40 :, :80].astype(int) - 128).max() > 60  # "2 key enter" bottom-left
        assert img[h // 2 + 100, w // 2 - 20].tolist() == [128, 128, 128]
        browser.wait_for(
            session,
            "document.body.dataset.posted === '4' && document.body.dataset.postStatus === '200'",
        )
        snapshot = state.snapshot(images=False)
        assert snapshot["annotated_seq"] == 4 and snapshot["waiting_annotation"] is False
        # The page shows what it posted.
        shot = browser.screenshot(session)
        px, py = canvas_to_page(browser, session, 160.5, 90.5)
        assert np.abs(shot[py, px].astype(int) - img[90, 160].astype(int)).max() <= 8
    finally:
        server.stop_thread()


# -- the panel's safety, seen from a real browser ---------------------------------------------

TOKEN = "browser-test-token-0123456789"


def test_token_panel_page_works_through_its_cookie(browser: Chromium) -> None:
    """Opened as /?token=..., the page drops the token from the address bar, keeps it in
    an HttpOnly cookie, and its own polls and POSTs (inject, annotated) go through."""
    w, h = 320, 180
    state = PanelState(
        config={"ui": style_to_ui_config(OverlayStyle()), "capture_width": w, "capture_height": h},
        annotate="browser",
    )
    server = PanelServer(state, port=0, token=TOKEN)
    server.start_in_thread()
    try:
        session = browser.open(server.page_url)
        browser.wait_for(session, "document.getElementById('phase').textContent === 'starting'")
        hint_hidden = "document.getElementById('inject-hint').hidden"
        assert browser.evaluate(session, hint_hidden) is True
        state.set_phase("waiting_inject")  # what to paste, shown while the engine waits for it
        browser.wait_for(session, f"!{hint_hidden}")
        hint = browser.evaluate(session, "document.getElementById('inject-hint').textContent")
        assert '"observation"' in hint and '"actions"' in hint and "0..1000" in hint
        assert browser.evaluate(session, "location.href") == server.url + "/"
        assert browser.evaluate(session, "document.cookie") == ""  # HttpOnly: scripts cannot read it
        browser.evaluate(
            session,
            "document.getElementById('inject').value = '{\"observation\": \"from the page\"}';"
            " document.getElementById('inject-send').click(); true",
        )
        browser.wait_for(session, "document.getElementById('inject-status').textContent === 'queued'")
        assert state.take_injection() == '{"observation": "from the page"}'
        state.publish(
            turn=1,
            raw_png=imaging.encode_png(grey_frame(w, h)),
            image_size=(w, h),
            observation="",
            bboxes=[],
            actions=[{"name": "click", "x1": 500, "y1": 500}],
            vlm_json="{}",
        )

        async def engine() -> bytes:
            return await state.wait_annotation(1, timeout=20)

        assert decode(asyncio.run(engine())).shape == (h, w, 3)
    finally:
        server.stop_thread()


class _AttackerPage(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: Any) -> None:
        pass


def test_another_site_cannot_inject_or_read_and_rebinding_is_refused(browser: Chromium) -> None:
    state = PanelState(annotate="native")
    state.publish(
        turn=1,
        raw_png=imaging.encode_png(grey_frame(64, 36)),
        image_size=(64, 36),
        observation="",
        bboxes=[],
        actions=[],
        vlm_json="{}",
    )
    server = PanelServer(state, port=0)
    server.start_in_thread()
    panel = server.url
    payload = json.dumps({"vlm_text": '{"actions": [{"name": "key", "keys": "ctrl+alt+t"}]}'})
    # What a hostile page can do without any help: a no-cors text/plain POST (no
    # preflight), a JSON POST (preflighted), and embedding the screenshot as an image.
    handler = type(
        "Page",
        (_AttackerPage,),
        {
            "page": f"""<!doctype html><body><script>
const panel = {json.dumps(panel)}, body = {json.dumps(payload)};
const results = {{}};
(async () => {{
  try {{ await fetch(panel + "/inject", {{method: "POST", mode: "no-cors",
         headers: {{"Content-Type": "text/plain"}}, body}}); results.plain = "sent"; }}
  catch (e) {{ results.plain = "failed"; }}
  try {{ const r = await fetch(panel + "/inject", {{method: "POST",
         headers: {{"Content-Type": "application/json"}}, body}}); results.json = r.status; }}
  catch (e) {{ results.json = "failed"; }}
  results.image = await new Promise((resolve) => {{
    const img = new Image(); img.onload = () => resolve("loaded " + img.naturalWidth);
    img.onerror = () => resolve("refused"); img.src = panel + "/raw.png"; }});
  document.body.dataset.results = JSON.stringify(results);
}})();
</script></body>""".encode(),
        },
    )
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=attacker.serve_forever, daemon=True)
    thread.start()
    try:
        session = browser.open(f"http://evil.test:{attacker.server_address[1]}/")
        results = json.loads(browser.wait_for(session, "document.body.dataset.results"))
        # The no-cors POST left the browser (its answer is opaque to the page) but the
        # panel refused it; the JSON one failed its preflight; the image did not load.
        assert state.take_injection() is None, "another site's page queued an action"
        assert results == {"plain": "sent", "json": "failed", "image": "refused"}, results
        # DNS rebinding: the attacker's name now resolves to 127.0.0.1, so for the browser
        # the panel is the attacker's own origin -- the panel answers for its names only.
        rebound = browser.open(f"http://rebind.test:{server.port}/")
        browser.wait_for(rebound, "document.readyState === 'complete'")
        assert "does not answer for host" in browser.evaluate(rebound, "document.body.textContent")
        status = browser.evaluate(
            rebound,
            f"fetch('/inject', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},"
            f" body: {json.dumps(payload)}}}).then(r => r.status)",
        )
        assert status == 421
        assert browser.evaluate(rebound, "fetch('/state').then(r => r.status)") == 421
        assert state.take_injection() is None
    finally:
        attacker.shutdown()
        attacker.server_close()
        server.stop_thread()
