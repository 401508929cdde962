"""Client-side turn overhead: deskpilot's loop vs seed 000's loop, same run, same screen.

The model is the local test server with zero latency, so what is measured is the agent's
own time per turn: from the moment a model reply has been parsed to the moment the next
request is handed to the HTTP client (parse, action, settle, capture, encode, request
build; the seed's fixed sleeps included). Xvfb 1920x1080 shows a corpus screenshot
(benchmarks/_xvfb.py); input is real XTest in both loops.

Workloads:

* ``realistic`` (the headline): a real Tk app (``benchmarks/_tk_app.py``) that repaints
  after each action, over the corpus picture. The model clicks a button (its label and
  the panel colour change), types 15 characters of Unicode into an entry
  (``Grüße aus Köln✓``) and presses Enter (the line moves into a list, the entry
  empties), over and over. Reported per action kind (p50/p95); the app's own event log
  confirms that every click and Enter landed.
* ``static``: ``observe_screen`` / ``click_element`` on an inert spot: the screen does not
  change (deskpilot settles and reuses the last PNG).
* ``pointer``: the clicks alternate between two spots, so every screenshot differs (the
  cursor is drawn in): deskpilot grabs, downscales and encodes every turn.

* ``browser``: a real Chromium window (headed, on the Xvfb) showing the reactions page
  (:mod:`deskpilot.testing._reactions`): the model clicks into a text field (focus ring),
  types, pastes with ``ctrl+v``, ticks a checkbox, clicks a spinner arrow, opens/closes
  an accordion (a 400 ms transition that moves a button) and scrolls a list (Chromium's
  smooth scroll), over and over. Chromium draws in 16.7 ms frames, later than the input.

Per workload the settle time (the settle record's ``waited_ms``) is set against the app's
own reaction time, the floor no settle can beat: for the browser, from the page's first
input event of an action to the start of the last animation frame in which it drew
something for it (requestAnimationFrame times on the page's own clock, read while the
model "thinks"); for the Tk app of ``realistic``, from its first input event of an action
to its drawing for the last one done (its records on the machine's monotonic clock), and
``static``/``pointer`` draw nothing (their settle is the cost of "no reaction").

deskpilot sends a fresh screenshot after every action as well (the seed only on
``observe_screen``; it also drops the non-ASCII characters it cannot type), so it does
strictly more work per turn than the baseline.

Targets: realistic p50 <= 25 ms and >= 25x lower than the baseline's p50 in the same run;
static p50 <= 40 ms and >= 20x.

Run: ``.venv/bin/python benchmarks/bench_turn.py [--turns 40] [--baseline-turns 8]
[--workload realistic]`` or ``.venv/bin/pytest benchmarks/bench_turn.py --benchmark-only -s``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _tk_app import BOXES, read_events, repainting_app
from _xvfb import screen_with_picture

INERT = [40, 960]  # a spot of the picture with nothing to react to
OTHER = [60, 960]
WORKLOADS = ("realistic", "static", "pointer", "browser")
UNICODE_TEXT = "Grüße aus Köln✓"  # 15 characters, 4 of them outside ASCII


def _browser_cycle(page: Any) -> list[tuple[str, dict[str, Any]]]:
    """The browser workload's actions, at the page's elements (model coordinates)."""
    from deskpilot.geometry import Mapping, Rect

    mapping = Mapping(Rect(0, 0, 1920, 1080), 1536, 864)

    def box(element: str, part: str = "") -> list[int]:
        x, y = mapping.physical_to_norm(*page.where(element, part))
        return [x - 1, y - 1, x + 1, y + 1]

    return [
        ("click_element", {"label": "text field", "box": box("text")}),
        ("type_text", {"text": "hello"}),
        ("press_key", {"key": "ctrl+v"}),
        ("click_element", {"label": "checkbox", "box": box("check")}),
        ("click_element", {"label": "spinner up", "box": box("spin", "up")}),
        ("click_element", {"label": "Details", "box": box("acc-head")}),
        ("scroll_at_position", {"label": "list", "box": box("scroller"), "amount": 3}),
    ]


def _script(workload: str, turns: int, page: Any = None) -> list[Any]:
    from deskpilot.testing import Reply

    replies: list[Any] = []
    if workload == "browser":
        cycle = _browser_cycle(page)
        replies.extend(Reply(tool_calls=[cycle[i % len(cycle)]]) for i in range(turns))
        replies.append("Done.")
        return replies
    if workload == "realistic":
        replies.append(Reply(tool_calls=[("click_element", {"label": "entry", "box": BOXES["entry"]})]))
        cycle = [
            ("click_element", {"label": "Press me", "box": BOXES["button"]}),
            ("type_text", {"text": UNICODE_TEXT}),
            ("press_key", {"key": "Enter"}),
        ]
        for i in range(turns - 1):
            replies.append(Reply(tool_calls=[cycle[i % 3]]))
        replies.append("Done.")
        return replies
    for i in range(turns):
        if i % 2 == 0:
            replies.append(Reply(tool_calls=[("observe_screen", {})]))
        else:
            box = INERT if workload == "static" or i % 4 == 1 else OTHER
            replies.append(Reply(tool_calls=[("click_element", {"label": "inert spot", "box": box})]))
    replies.append("Done.")
    return replies


def _pct(values: list[float], q: float) -> float:
    from deskpilot.agent._timings import percentile

    return percentile(values, q)


def _policy(workload: str, turns: int, page: Any) -> Any:
    """The scripted model; on the browser page it also waits, before each answer, until
    the page has finished drawing the last action's reaction and reads that reaction's
    time (:meth:`ReactionsPage.floor_ms`): model time, outside the measured overhead."""
    from deskpilot.testing import ScriptedPolicy

    class FloorPolicy(ScriptedPolicy):
        def __init__(self) -> None:
            super().__init__(_script(workload, turns, page))
            self.floors: dict[int, float | None] = {}  # reply index -> the page's reaction ms
            self.marks: dict[int, float] = {}  # reply index -> when the next request came (monotonic ms)

        def respond(self, request: Any) -> Any:
            if self.position > 0:
                self.marks[self.position - 1] = time.monotonic() * 1000
                if page is not None:
                    page.wait_idle()
                    self.floors[self.position - 1] = page.floor_ms()
                    page.clear_log()
            return super().respond(request)

    return FloorPolicy()


def _app_floors(policy: Any, app: Any) -> None:
    """The Tk app's own reaction time per action, from its ``input``/``drawn`` records:
    first input event -> its drawing done, of the records between the request before the
    action and the one after it (one monotonic clock)."""
    records = [r for r in app.records if r.get("type") in ("input", "drawn")]
    start = 0.0
    for index in sorted(policy.marks):
        end = policy.marks[index]
        inputs = [r["t"] for r in records if r["type"] == "input" and start < r["t"] <= end]
        drawn = [r["t"] for r in records if r["type"] == "drawn" and start < r["t"] <= end]
        policy.floors[index] = max(0.0, max(drawn) - min(inputs)) if inputs and drawn else None
        start = end


def run_deskpilot(workload: str, turns: int, work: Path, settle_signal: str = "auto", page: Any = None,
                  app: Any = None) -> dict[str, Any]:
    from deskpilot.agent import iter_turns, load_config, run_agent
    from deskpilot.testing import ModelServer

    policy = _policy(workload, turns, page)
    with ModelServer(policy, validate=False, keep_images=0) as server:
        cfg = load_config(
            flags={"model.endpoint": server.endpoint, "run.runs_dir": str(work / "runs"), "agent.max_steps": turns + 2,
                   **({"agent.settle_signal": settle_signal} if settle_signal != "auto" else {})},
            env={},
            search_default=False,
        )
        result = run_agent(cfg, f"benchmark {workload}", handle_signals=False)
    if result.outcome != "answered":
        raise RuntimeError(f"deskpilot run ended {result.outcome}: {result.error}")
    records = list(iter_turns(result.run_dir))[1:-1]  # turn 0 has no reply; the last no next request
    if app is not None:
        _app_floors(policy, app)
    overhead = [r["timings"]["overhead"] for r in records]
    by_tool: dict[str, list[float]] = {}
    phases_by_tool: dict[str, dict[str, list[float]]] = {}
    settle_by_tool: dict[str, list[float]] = {}
    floor_by_tool: dict[str, list[float]] = {}
    for index, r in enumerate(records, start=1):  # turn n acts on reply n - 1
        name = r["tool_call"]["name"]
        by_tool.setdefault(name, []).append(r["timings"]["overhead"])
        if "settle" in r:
            settle_by_tool.setdefault(name, []).append(r["settle"]["waited_ms"])
        floor = policy.floors.get(index - 1)
        if floor is not None:
            floor_by_tool.setdefault(name, []).append(floor)
        for phase, ms in r["timings"].items():
            if phase not in ("model", "overhead"):
                phases_by_tool.setdefault(name, {}).setdefault(phase, []).append(ms)
    return {"overhead": overhead, "by_tool": by_tool, "phases": result.summary["phases"],
            "settle_signal": result.summary.get("settle_signal", "poll (no settle_signal recorded)"),
            "phases_by_tool": phases_by_tool, "settle_by_tool": settle_by_tool, "floor_by_tool": floor_by_tool,
            "seen": sum(f is not None for f in policy.floors.values())}


def run_baseline(workload: str, turns: int, page: Any = None) -> dict[str, Any]:
    from baselines_seed000 import run_baseline_agent
    from deskpilot.input import InputController
    from deskpilot.testing import ModelServer

    with ModelServer(_policy(workload, turns, page), validate=False, keep_images=0) as server, \
            InputController("xtest") as hands:
        result = run_baseline_agent(server.endpoint, f"benchmark {workload}", hands, max_steps=turns + 2)
    overhead = [s * 1000 for _, s in result.overheads]
    by_tool: dict[str, list[float]] = {}
    for name, s in result.overheads:
        by_tool.setdefault(name, []).append(s * 1000)
    return {"overhead": overhead, "by_tool": by_tool, "encode": [s * 1000 for s in result.encode]}


def _landed(app: Any) -> tuple[int, int]:
    """(clicks, Enters) the app saw; a run whose actions missed would measure nothing."""
    events = read_events(app)
    return sum(e["type"] == "click" for e in events), sum(e["type"] == "enter" for e in events)


def _with_app(picture: Path | None, fn: Any) -> tuple[Any, tuple[int, int]]:
    """``fn(app)``: the repainting app when there is a picture to show under it, else None."""
    if picture is None:
        return fn(None), (0, 0)
    with repainting_app(picture) as app:
        value = fn(app)
        app.kill()
        app.wait(timeout=5)
        return value, _landed(app)


def _with_page(tmp: Path, fn: Any) -> Any:
    """``fn(page)`` with the reactions page open in a headed Chromium on the Xvfb, its
    text on the clipboard (for the workload's ``ctrl+v``)."""
    from deskpilot.testing._reactions import ReactionsPage

    with ReactionsPage(tmp) as page:
        page.copy_source()
        page.reset()
        page.wait_idle()
        return fn(page)


def _floor_lines(ours: dict[str, Any], workload: str) -> list[str]:
    """Per tool: the settle's wait against the app's own reaction time (the floor)."""
    lines = ["  settle waited vs the app's reaction (ms, p50/p95): "
             + ("the page's first input event -> start of its last drawn frame" if workload == "browser" else
                "the Tk app's first input event -> its drawing done" if workload == "realistic" else
                "nothing reacts: the floor is 0")]
    for tool, waited in sorted(ours["settle_by_tool"].items()):
        floors = ours["floor_by_tool"].get(tool, [])
        floor = f"{_pct(floors, 50):6.1f}/{_pct(floors, 95):6.1f}" if floors else "     -/     -"
        lines.append(f"  {tool:<20} settle {_pct(waited, 50):6.1f}/{_pct(waited, 95):6.1f}   floor {floor}   n {len(waited)}")
    return lines


def run(turns: int, baseline_turns: int, workloads: tuple[str, ...] = WORKLOADS,
        picture: Path | None = None, settle_signal: str = "auto") -> tuple[list[str], dict[str, float]]:
    from deskpilot import imaging

    lines = [f"imaging core: {imaging.BACKEND}, PNG deflate: {imaging.DEFLATE_ENGINE}; model latency 0; "
             f"{turns} deskpilot turns and {baseline_turns} baseline turns per workload; "
             f"settle signal asked: {settle_signal}"]
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="deskpilot-bench-turn-") as tmp:
        for workload in workloads:
            app_picture = picture if workload == "realistic" else None
            if workload == "realistic" and picture is None:
                raise RuntimeError("the realistic workload needs the picture the app shows")
            if workload == "browser":
                work = Path(tmp) / workload
                work.mkdir()
                ours = _with_page(work, lambda page, w=work: run_deskpilot("browser", turns, w, settle_signal, page))
                base = _with_page(work, lambda page: run_baseline("browser", baseline_turns, page))
                if ours["seen"] != turns:
                    raise RuntimeError(f"the page saw input in {ours['seen']} of deskpilot's {turns} actions")
                ours_landed = base_landed = (0, 0)
            else:
                ours, ours_landed = _with_app(
                    app_picture, lambda app, w=workload: run_deskpilot(w, turns, Path(tmp) / w, settle_signal, app=app))
                base, base_landed = _with_app(
                    app_picture, lambda _app, w=workload: run_baseline(w, baseline_turns))
            if workload == "realistic":
                _check_landed("deskpilot", ours, ours_landed)
                _check_landed("seed 000", base, base_landed)
            p50, p95 = _pct(ours["overhead"], 50), _pct(ours["overhead"], 95)
            b50, b95 = _pct(base["overhead"], 50), _pct(base["overhead"], 95)
            ratio = b50 / p50
            ratios[f"{workload}_p50_ms"] = p50
            ratios[f"{workload}_p95_ms"] = p95
            ratios[f"{workload}_baseline_p50_ms"] = b50
            ratios[f"{workload}_ratio"] = ratio
            lines.append(f"workload {workload}: client-side turn overhead (reply -> next request), ms; "
                         f"deskpilot settled on {ours['settle_signal']}")
            lines.append(f"  {'loop':<22}{'p50':>9}{'p95':>9}{'n':>5}   per tool p50")
            for name, data, n50, n95 in (("deskpilot", ours, p50, p95), ("seed 000 baseline", base, b50, b95)):
                tools = ", ".join(f"{t} {statistics.median(v):.1f}" for t, v in sorted(data["by_tool"].items()))
                lines.append(f"  {name:<22}{n50:9.1f}{n95:9.1f}{len(data['overhead']):5d}   {tools}")
            lines.append(f"  baseline / deskpilot at p50: {ratio:.0f}x")
            lines.append("  deskpilot per phase (ms):  " + "  ".join(
                f"{ph} {s['p50_ms']:.1f}/{s['p95_ms']:.1f}" for ph, s in ours["phases"].items() if ph != "model"
            ) + "   (p50/p95)")
            if base["encode"]:
                lines.append(f"  baseline screenshot+pure-Python PNG p50: {statistics.median(base['encode']):.0f} ms")
            lines.extend(_floor_lines(ours, workload))
            for tool, waited in ours["settle_by_tool"].items():
                ratios[f"{workload}_{tool}_settle_p50_ms"] = _pct(waited, 50)
            for tool, floors in ours["floor_by_tool"].items():
                ratios[f"{workload}_{tool}_floor_p50_ms"] = _pct(floors, 50)
            if workload == "browser":
                lines.append(f"  the page saw input in {ours['seen']} of deskpilot's {turns} actions "
                             "(the seed 000 baseline has no scroll tool: its scroll turns do nothing)")
            if workload == "realistic":
                lines.append(f"  actions landed: deskpilot {ours_landed[0]} clicks / {ours_landed[1]} Enters, "
                             f"seed 000 {base_landed[0]} / {base_landed[1]}")
                for tool, per_phase in sorted(ours["phases_by_tool"].items()):
                    values = ours["by_tool"][tool]
                    lines.append(f"  {tool:<14} overhead {_pct(values, 50):6.1f}/{_pct(values, 95):6.1f}  " + "  ".join(
                        f"{ph} {_pct(v, 50):.1f}" for ph, v in per_phase.items()) + "   (p50/p95; phases p50)")
                for tool in sorted(ours["by_tool"]):
                    ratios[f"realistic_{tool}_p50_ms"] = _pct(ours["by_tool"][tool], 50)
                    ratios[f"realistic_{tool}_p95_ms"] = _pct(ours["by_tool"][tool], 95)
                lines.append(f"  target p50 <= 25 ms: {'met' if p50 <= 25 else 'NOT met'}; "
                             f"target >= 25x lower than the baseline: {'met' if ratio >= 25 else 'NOT met'}")
            if workload == "static":
                lines.append(f"  target p50 <= 40 ms: {'met' if p50 <= 40 else 'NOT met'}; "
                             f"target >= 20x lower than the baseline: {'met' if ratio >= 20 else 'NOT met'}")
    return lines, ratios


def _check_landed(loop: str, data: dict[str, Any], landed: tuple[int, int]) -> None:
    clicks = len(data["by_tool"].get("click_element", [])) - 1  # the first click focuses the entry
    enters = len(data["by_tool"].get("press_key", []))
    if landed != (clicks, enters) or not clicks or not enters:
        raise RuntimeError(f"{loop}: the app saw {landed[0]} button clicks and {landed[1]} Enters; "
                           f"the script sent {clicks} and {enters}")


# -- pytest-benchmark entry point -------------------------------------------------------


def _screen() -> Iterator[tuple[str, Path]]:
    with screen_with_picture() as screen:
        yield screen


try:
    import pytest

    screen = pytest.fixture(scope="module")(_screen)

    def test_turn_overhead_vs_seed000(screen: tuple[str, Path], benchmark: Any, capsys: Any) -> None:
        result: dict[str, Any] = {}

        def once() -> None:
            result["lines"], result["ratios"] = run(turns=30, baseline_turns=6, picture=screen[1])

        benchmark.pedantic(once, rounds=1, iterations=1)
        benchmark.extra_info.update(result["ratios"])
        with capsys.disabled():
            print("\n" + "\n".join(result["lines"]))
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40, help="deskpilot turns per workload")
    parser.add_argument("--baseline-turns", type=int, default=8, help="baseline turns per workload (about 1 s each)")
    parser.add_argument("--workload", choices=WORKLOADS, action="append", help="default: all four")
    parser.add_argument("--settle-signal", choices=("auto", "damage", "poll"), default="auto",
                        help="what deskpilot's adaptive settle waits on (poll: the probes of the previous version)")
    args = parser.parse_args()
    with screen_with_picture() as (display, shown):
        print(f"Xvfb {display} 1920x1080 showing {shown.name}", flush=True)
        lines, _ = run(args.turns, args.baseline_turns, tuple(args.workload or WORKLOADS), picture=shown,
                       settle_signal=args.settle_signal)
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
