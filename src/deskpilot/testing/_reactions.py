"""A Chromium page of reactions that take time to draw, in a real (headed) window on X11.

The settle tests and the turn benchmark's browser workload drive it with real input
(XTest) and compare the agent's settled screenshot with what the page shows once it is
done. Each reaction is one the issue of the early settle named: paste into a text field,
typing into a text and a date input, a focus ring, a checkbox tick, a number input's
spinner arrow, a 400 ms CSS transition that moves a button (an accordion), a smooth wheel
scroll, a button that starts a busy wheel which never stops, and a blank spot where a
click does nothing.

The window is Chromium's ``--app`` window at the top left of ``$DISPLAY`` (on Xvfb with no
window manager it is undecorated), talked to over the DevTools pipe of
:class:`deskpilot.testing._chromium.Chromium`. The caret is transparent (``caret-color``),
so a blinking caret never makes two frames of a finished page differ.

The page logs, on its own clock (``performance``), every input event and every animation
frame in which something it shows changed (:meth:`ReactionsPage.floor_ms`): the time
from the first input event of an action to the start of the last frame it drew for it is
the app's own reaction time, the floor no settle can beat.
"""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path
from typing import Any

from deskpilot._errors import BrowserError
from deskpilot.testing._chromium import Chromium

__all__ = ["PAGE", "HeadedChromium", "ReactionsPage"]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>reactions</title><style>
html, body { margin: 0; height: 100%; overflow: hidden; background: #fff; }
body, input, button { font: 22px "DejaVu Sans", sans-serif; }
input { caret-color: transparent; }
.at { position: absolute; }
#text { left: 80px; top: 60px; width: 420px; }
#date { left: 80px; top: 140px; }
#spin { left: 80px; top: 220px; width: 160px; }
#check { left: 80px; top: 300px; width: 28px; height: 28px; margin: 0; }
#source { left: 80px; top: 380px; }
#acc { left: 640px; top: 60px; width: 520px; }
#acc-head { width: 100%; }
#acc-body { max-height: 0; overflow: hidden; transition: max-height 400ms linear; background: #dfe8f6; }
#acc.open #acc-body { max-height: 240px; }
#acc-body p { margin: 0; padding: 12px; height: 216px; }
#submit { margin-top: 12px; width: 200px; }
#scroller { left: 1280px; top: 60px; width: 520px; height: 400px; overflow-y: scroll; border: 1px solid #888; }
#scroller div { height: 40px; line-height: 40px; padding-left: 12px; }
#scroller div:nth-child(odd) { background: #eef2e0; }
#blank { left: 80px; top: 640px; width: 600px; height: 300px; }
#busy { left: 1280px; top: 560px; }
#wheel { left: 1480px; top: 540px; width: 80px; height: 80px; border: 10px solid #ccd; border-top-color: #36c; border-radius: 50%; box-sizing: border-box; visibility: hidden; }
#wheel.on { visibility: visible; animation: turn 1s linear infinite; }
@keyframes turn { to { transform: rotate(360deg); } }
</style></head><body>
<input id="text" class="at" type="text" autocomplete="off" spellcheck="false">
<input id="date" class="at" type="date">
<input id="spin" class="at" type="number" value="5">
<input id="check" class="at" type="checkbox">
<span id="source" class="at">pasted words</span>
<div id="acc" class="at"><button id="acc-head">Details</button>
  <div id="acc-body"><p>More about this: the panel opens over 400 ms and pushes the button down.</p></div>
  <button id="submit">Submit</button></div>
<div id="scroller" class="at"></div>
<div id="blank" class="at"></div>
<button id="busy" class="at">Load</button><div id="wheel" class="at"></div>
<script>
const scroller = document.getElementById("scroller");
for (let i = 1; i <= 200; i++) {
  const row = document.createElement("div"); row.textContent = "row " + i; scroller.appendChild(row);
}
document.getElementById("acc-head").addEventListener("click", () =>
  document.getElementById("acc").classList.toggle("open"));
document.getElementById("busy").addEventListener("click", () =>
  document.getElementById("wheel").classList.add("on"));  // a busy wheel that never stops
// What the page drew, on its own clock: input events, and the animation frames in which
// something it shows changed (an event marked it dirty, or a transition is running).
window.log = []; window.drawn = [];
let dirty = false, running = 0;
const mark = (type, stamp) => { window.log.push([type, stamp]); dirty = true; };
for (const type of ["keydown", "mousedown", "wheel", "paste", "input", "change", "focusin", "scroll"])
  document.addEventListener(type, e => mark(type, e.timeStamp), {capture: true, passive: true});
document.addEventListener("transitionrun", e => { running++; mark("transitionrun", e.timeStamp); }, true);
document.addEventListener("transitionend", e => { running = Math.max(0, running - 1); mark("transitionend", e.timeStamp); }, true);
function frame(stamp) {
  if (dirty || running > 0) { window.drawn.push(stamp); dirty = false; }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
window.where = (id, part) => {
  const r = document.getElementById(id).getBoundingClientRect();
  const top = window.screenY + (window.outerHeight - window.innerHeight);
  const left = window.screenX + (window.outerWidth - window.innerWidth) / 2;
  // "up": the number input's spin-up arrow (its right edge, upper half); "month": the
  // first part of a date input
  const x = part === "up" ? r.right - 9 : part === "month" ? r.left + 22 : r.left + r.width / 2;
  const y = part === "up" ? r.top + r.height / 4 + 1 : r.top + r.height / 2;
  return [Math.round(left + x), Math.round(top + y)];
};
window.reset = () => {
  if (document.activeElement) document.activeElement.blur();
  getSelection().removeAllRanges();
  for (const id of ["text", "date"]) document.getElementById(id).value = "";
  document.getElementById("spin").value = "5";
  document.getElementById("check").checked = false;
  const body = document.getElementById("acc-body");
  body.style.transition = "none";
  document.getElementById("acc").classList.remove("open");
  body.getBoundingClientRect();  // apply the closed state now, without animating it
  body.style.transition = "";
  scroller.style.scrollBehavior = "auto"; scroller.scrollTop = 0; scroller.style.scrollBehavior = "";
  document.getElementById("wheel").classList.remove("on");
  window.log = []; window.drawn = [];
  return true;
};
window.copySource = () => {
  const range = document.createRange();
  range.selectNodeContents(document.getElementById("source"));
  getSelection().removeAllRanges(); getSelection().addRange(range);
  const copied = document.execCommand("copy");
  getSelection().removeAllRanges();
  return copied;
};
window.state = () => ({
  text: document.getElementById("text").value, date: document.getElementById("date").value,
  spin: document.getElementById("spin").value, check: document.getElementById("check").checked,
  open: document.getElementById("acc").classList.contains("open"), scrolled: scroller.scrollTop,
  focused: document.activeElement ? document.activeElement.id : "",
  busy: document.getElementById("wheel").classList.contains("on"),
});
window.ready = true;
</script></body></html>"""


class HeadedChromium(Chromium):
    """Chromium with a real X11 window (``--app``) at the top left of ``$DISPLAY``, over
    the shared client's DevTools pipe."""

    def __init__(self, url: str, *, width: int = 1920, height: int = 1080, timeout: float = 30.0) -> None:
        super().__init__(
            width=width,
            height=height,
            timeout=timeout,
            headless=False,
            url=None,
            # smooth wheel scrolling on, whatever the build's default: the scroll reaction
            # must be an animation
            extra_args=("--window-position=0,0", "--enable-smooth-scrolling", f"--app={url}"),
        )

    def page(self) -> str:
        """A session on the app window's page."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            pages = [t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
            if pages:
                return str(self.call("Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True})["sessionId"])
            time.sleep(0.1)
        raise BrowserError("no page target")

    def gesture(self, session: str, expression: str) -> Any:
        """Evaluate ``expression`` as if the user had acted (what ``execCommand('copy')``
        needs)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True, "userGesture": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"page error: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")


class ReactionsPage:
    """The reactions page (:data:`PAGE`) in a :class:`HeadedChromium` window::

        with ReactionsPage(tmp_dir) as page:
            x, y = page.where("check")
            ...
            page.state()["check"]
    """

    def __init__(self, work: Path, *, width: int = 1920, height: int = 1080) -> None:
        path = work / "reactions.html"
        path.write_text(PAGE, encoding="utf-8")
        self.url = "file://" + urllib.parse.quote(str(path.resolve()))
        self.browser = HeadedChromium(self.url, width=width, height=height)
        try:
            self.session = self.browser.page()
            self.browser.wait_for(self.session, "window.ready === true && document.readyState === 'complete'")
        except BaseException:
            self.browser.close()
            raise

    def where(self, element: str, part: str = "") -> tuple[int, int]:
        """The screen pixel of ``element``'s centre (``part="up"``: a number input's
        spin-up arrow; ``"month"``: a date input's first part)."""
        x, y = self.browser.evaluate(self.session, f"window.where({element!r}, {part!r})")
        return int(x), int(y)

    def reset(self) -> None:
        """Back to the loaded state: nothing focused, fields empty, accordion shut,
        list at the top, logs empty."""
        self.browser.evaluate(self.session, "window.reset()")

    def copy_source(self) -> None:
        """Put "pasted words" on the clipboard (Chromium then owns the X CLIPBOARD)."""
        if not self.browser.gesture(self.session, "window.copySource()"):
            raise BrowserError("the page could not copy its text to the clipboard")

    def state(self) -> dict[str, Any]:
        return dict(self.browser.evaluate(self.session, "window.state()"))

    def clear_log(self) -> None:
        self.browser.evaluate(self.session, "window.log = []; window.drawn = []; true")

    def wait_idle(self, quiet_ms: float = 300.0, timeout: float = 3.0) -> bool:
        """Wait until the page has drawn nothing and seen no event for ``quiet_ms`` (its
        own clock); False when it was still busy after ``timeout`` seconds."""
        expression = (
            "(() => { const last = Math.max(0, ...window.drawn, ...window.log.map(e => e[1]));"
            f" return performance.now() - last > {quiet_ms}; }})()"
        )
        deadline = time.monotonic() + timeout
        while not self.browser.evaluate(self.session, expression):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def floor_ms(self) -> float | None:
        """The page's own reaction time since :meth:`clear_log`: from its first input
        event to the start of the last animation frame in which it drew something (its
        own clock). None when it saw no input."""
        log, drawn = self.browser.evaluate(self.session, "[window.log, window.drawn]")
        inputs = [float(stamp) for kind, stamp in log if kind in ("keydown", "mousedown", "wheel")]
        if not inputs or not drawn:
            return None
        return max(0.0, max(float(d) for d in drawn) - min(inputs))

    def timeline(self) -> str:
        """What the page saw and drew since :meth:`clear_log`, in ms after its first input
        event (its own clock): for a failure message."""
        log, drawn = self.browser.evaluate(self.session, "[window.log, window.drawn]")
        inputs = [float(stamp) for kind, stamp in log if kind in ("keydown", "mousedown", "wheel")]
        if not inputs:
            return "the page saw no input"
        zero = min(inputs)
        events = " ".join(f"{kind}@{float(stamp) - zero:.0f}" for kind, stamp in log)
        frames = " ".join(f"{float(d) - zero:.0f}" for d in drawn)
        return f"page events (ms): {events}; frames drawn at (ms): {frames}"

    def close(self) -> None:
        self.browser.close()

    def __enter__(self) -> ReactionsPage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
