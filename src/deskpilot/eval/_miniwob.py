"""The ``miniwob`` suite: MiniWoB++ tasks (the ``miniwob`` package's HTML, MIT) in the system Chromium.

Each session's app is this module run as a process (``python -m deskpilot.eval._miniwob
TASK``): it serves the package's ``html`` folder on 127.0.0.1, opens the task in a real
Chromium window (``--app``, no browser UI, device scale 2) on the session's display,
seeds and starts the episode (no time limit of MiniWoB's own: the agent's limits
apply), and speaks the line protocol of :mod:`deskpilot.eval._task`: ``state`` is the
page's own reward (``WOB_RAW_REWARD_GLOBAL``; success is a positive reward), ``layout``
the screen rectangles of what the task's solver finds in the DOM (and the texts it
reads, for ``$name`` arguments): what a perfect grounding model would see.

The HTML comes from the ``miniwob`` package (``pip install "deskpilot[eval]"``), found
without importing it (its Python side needs gymnasium and selenium; nothing here does).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

from deskpilot.eval._task import Step, Suite, Task

__all__ = ["CI_TASKS", "SOLVERS", "html_dir", "main", "miniwob_suite"]

SCREEN = (640, 480)
SCALE = 2


def html_dir() -> Path | None:
    """The ``miniwob`` package's ``html`` folder, or None when it is not installed."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "html"
    return path if (path / "miniwob").is_dir() else None


# Per task: JavaScript returning {widgets: {name: Element}, texts: {name: string}}, read
# from the page as it is now; and the solution on those names.
_QUOTED = "document.querySelector('#query').textContent.match(/\"([^\"]*)\"/)[1]"

SOLVERS: dict[str, tuple[str, tuple[Step, ...]]] = {
    "click-test": ("({widgets: {button: document.querySelector('#subbtn')}})",
                   (Step("click_element", {"label": "Click Me!", "box": "@button"}),)),
    "click-test-2": ("({widgets: {one: document.querySelector('#subbtn')}})",
                     (Step("click_element", {"label": "ONE", "box": "@one"}),)),
    "click-button": (f"(() => {{ const q = {_QUOTED}; return {{widgets: {{target: [...document.querySelectorAll("
                     "'#area button')].find(b => b.textContent === q)}}; })()",
                     (Step("click_element", {"label": "the button", "box": "@target"}),)),
    "click-link": (f"(() => {{ const q = {_QUOTED}; return {{widgets: {{link: [...document.querySelectorAll("
                   "'#area .alink')].find(e => e.textContent === q)}}; })()",
                   (Step("click_element", {"label": "the link", "box": "@link"}),)),
    "click-dialog": ("({widgets: {close: document.querySelector('.ui-dialog-titlebar-close')}})",
                     (Step("click_element", {"label": "x", "box": "@close"}),)),
    "focus-text": ("({widgets: {field: document.querySelector('#tt')}})",
                   (Step("click_element", {"label": "text box", "box": "@field"}),)),
    "enter-text": ("({widgets: {field: document.querySelector('#tt'), submit: document.querySelector('#subbtn')}, "
                   "texts: {text: document.querySelector('#query .bold').textContent}})",
                   (Step("click_element", {"label": "text field", "box": "@field"}), Step("type_text", {"text": "$text"}),
                    Step("click_element", {"label": "Submit", "box": "@submit"}))),
    "enter-password": ("({widgets: {password: document.querySelector('#password'), verify: "
                       "document.querySelector('#verify'), submit: document.querySelector('#subbtn')}, "
                       "texts: {password: document.querySelector('#query .bold').textContent}})",
                       (Step("click_element", {"label": "Password", "box": "@password"}),
                        Step("type_text", {"text": "$password"}),
                        Step("click_element", {"label": "Verify password", "box": "@verify"}),
                        Step("type_text", {"text": "$password"}),
                        Step("click_element", {"label": "Submit", "box": "@submit"}))),
    "login-user": ("(() => { const q = [...document.querySelector('#query').textContent.matchAll(/\"([^\"]*)\"/g)]; "
                   "return {widgets: {username: document.querySelector('#username'), password: "
                   "document.querySelector('#password'), submit: document.querySelector('#subbtn')}, "
                   "texts: {user: q[0][1], password: q[1][1]}}; })()",
                   (Step("click_element", {"label": "Username", "box": "@username"}), Step("type_text", {"text": "$user"}),
                    Step("click_element", {"label": "Password", "box": "@password"}),
                    Step("type_text", {"text": "$password"}),
                    Step("click_element", {"label": "Login", "box": "@submit"}))),
    "click-option": ("(() => { const q = document.querySelector('#query').textContent.match(/^Select (.*) and click/)[1]; "
                     "const label = [...document.querySelectorAll('#boxes label')].find(l => l.textContent === q); "
                     "return {widgets: {option: label.querySelector('input'), submit: document.querySelector('#subbtn')}}; "
                     "})()",
                     (Step("click_element", {"label": "the option", "box": "@option"}),
                      Step("click_element", {"label": "Submit", "box": "@submit"}))),
}

#: The subset CI runs (the whole suite is one command away: deskpilot eval miniwob --scripted).
CI_TASKS = ("click-test", "click-button", "click-dialog", "enter-text", "login-user")


def _check_reward(state: dict[str, Any]) -> tuple[bool, str]:
    reward = state.get("raw_reward")
    ok = bool(state.get("done")) and isinstance(reward, (int, float)) and reward > 0
    return ok, f"reward {reward} ({state.get('reason') or 'no reason given'})"


def miniwob_suite() -> Suite:
    tasks = tuple(
        Task(name=name, instruction="Solve the task shown in the yellow box at the top of the page.",
             app=(sys.executable, "-m", "deskpilot.eval._miniwob", name), check=_check_reward,
             solution=solution, max_steps=len(solution) + 4, max_seconds=60.0, screen=SCREEN, tags=("web",))
        for name, (_, solution) in SOLVERS.items()
    )
    try:
        from deskpilot.testing import find_chromium
    except ImportError:  # no fcntl (Windows): eval does not run there anyway
        chromium = None
    else:
        chromium = find_chromium()
    missing = []
    if html_dir() is None:
        missing.append('the miniwob package (pip install "deskpilot[eval]")')
    if chromium is None:
        missing.append("Chromium (apt-get install chromium)")
    unavailable = f"the miniwob suite needs {' and '.join(missing)}" if missing else ""
    return Suite("miniwob", tasks, "MiniWoB++ web tasks in Chromium (the miniwob package's HTML; "
                 "success is the page's own reward)", ref="miniwob", unavailable=unavailable)


# ---------------------------------------------------------------------------- the app


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


_RECTS = """(() => {{ const found = {solver}; const out = {{}};
  for (const [name, el] of Object.entries(found.widgets || {{}})) {{
    if (!el) continue; const r = el.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) out[name] = [r.left, r.top, r.width, r.height]; }}
  return {{widgets: out, texts: found.texts || {{}}, dpr: window.devicePixelRatio,
           origin: [window.screenX + (window.outerWidth - window.innerWidth) / 2,
                    window.screenY + window.outerHeight - window.innerHeight]}}; }})()"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a MiniWoB++ task in Chromium, speaking deskpilot eval's protocol")
    parser.add_argument("task", choices=sorted(SOLVERS))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    root = html_dir()
    if root is None:
        sys.stderr.write('the miniwob package is not installed: pip install "deskpilot[eval]"\n')
        return 2
    from deskpilot._errors import BrowserError
    from deskpilot.testing import Chromium

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/miniwob/{args.task}.html"
    width, height = SCREEN
    browser = Chromium(headless=False, width=width, height=height, url=None,
                       extra_args=(f"--app={url}", "--window-position=0,0", f"--force-device-scale-factor={SCALE}",
                                   "--disable-features=Translate", "--disable-background-networking"))
    try:
        session = _attach(browser, url)
        browser.wait_for(session, "document.readyState === 'complete' && typeof core !== 'undefined' "
                                  "&& core.cover_div !== null")
        browser.evaluate(session, f"Math.seedrandom({args.seed}); core.EPISODE_MAX_TIME = 3600 * 1000; "
                                  "core.startEpisodeReal(); true")
        _emit({"type": "ready", "task": args.task, "url": url})
        solver = SOLVERS[args.task][0]
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            try:
                if command == "state":
                    state = browser.evaluate(session, "({raw_reward: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL, "
                                                      "done: WOB_DONE_GLOBAL, reason: WOB_REWARD_REASON})")
                    _emit({"type": "state", **state})
                elif command == "layout":
                    found = browser.evaluate(session, _RECTS.format(solver=solver))
                    _emit({"type": "layout", "widgets": _to_screen(found), "texts": found["texts"]})
                else:
                    _emit({"type": "error", "message": f"unknown command {command!r}"})
            except BrowserError as exc:  # the page or a solver failed: say so, keep answering
                _emit({"type": "error", "message": f"{command}: {exc}"})
    finally:
        with contextlib.suppress(Exception):
            browser.close()
        server.shutdown()
    return 0


def _attach(browser: Any, url: str) -> str:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for target in browser.call("Target.getTargets")["targetInfos"]:
            if target.get("type") == "page" and str(target.get("url", "")).startswith(url):
                session = browser.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
                return str(session["sessionId"])
        time.sleep(0.05)
    raise RuntimeError(f"Chromium did not open {url}")


def _to_screen(found: dict[str, Any]) -> dict[str, list[int]]:
    # CSS pixels -> root pixels: (the window's content origin + the rectangle) x the scale.
    dpr = float(found.get("dpr") or 1)
    ox, oy = (float(v) for v in found.get("origin") or (0, 0))
    return {name: [round((ox + x) * dpr), round((oy + y) * dpr), max(1, round(w * dpr)), max(1, round(h * dpr))]
            for name, (x, y, w, h) in found["widgets"].items()}


if __name__ == "__main__":
    sys.exit(main())
