"""The wlroots backends on headless sway next to the X11 path (Xvfb, mss + XTest), one run.

Per desktop, 1920x1080, a full-screen text view (GTK 3 native on sway, Tk on Xvfb):

* **raw grab**: the backend's ``grab_bgra`` of the monitor (wlroots: wlr-screencopy into
  the reused shm buffer, which waits for the compositor's next output frame; X11: mss's
  XShmGetImage), and ``grim`` (the usual wlroots screenshot tool, PPM to a pipe) as an
  outside reference on sway;
* **grab -> PNG**: ``Capturer.grab(size=(1536, 864)).png(level=1)``, what an agent sends;
* **action -> first frame showing it**: one character typed (wlroots virtual keyboard /
  XTest), then grabs back to back until the frame differs from the one before the key:
  from just before the key is sent to the end of the first grab that shows it (so it
  includes one grab's cost; the compositor's 60 Hz paint cycle with software rendering
  is part of it on sway).

Variants of a desktop run interleaved round by round; medians and p90 are printed.
Needs sway (skipped without) and Xvfb. Run: ``.venv/bin/python benchmarks/bench_wlroots.py
[--rounds 30]`` or ``.venv/bin/pytest benchmarks/bench_wlroots.py --benchmark-only -s``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SIZE = (1536, 864)
GTK_APP = Path(__file__).resolve().parents[1] / "tests" / "integration" / "apps" / "wayland_gtk_app.py"

_TK_TEXT = r"""
import tkinter as tk
root = tk.Tk()
root.overrideredirect(True)
w, h = root.winfo_screenwidth(), root.winfo_screenheight()
root.geometry(f"{w}x{h}+0+0")
text = tk.Text(root, font=("DejaVu Sans", 18), insertofftime=0)
text.pack(fill="both", expand=True)
text.focus_force()
def ready():
    if not root.winfo_viewable():
        root.after(20, ready); return
    root.update_idletasks(); root.update()
    print("ready", flush=True)
root.after(50, ready)
root.after(600_000, root.destroy)
root.mainloop()
"""


def measure(variants: dict[str, Callable[[], Any]], rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    for _ in range(rounds):
        order.reverse()
        for name, fn in order:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def action_to_frame(grab: Callable[[], Any], act: Callable[[], None], rounds: int, timeout: float = 2.0) -> list[float]:
    """Seconds from just before ``act()`` to the end of the first grab that differs."""
    from deskpilot import imaging

    found: list[float] = []
    for _ in range(rounds):
        time.sleep(0.1)  # the previous change is on screen and settled
        before = imaging.frame_digest(grab())
        t0 = time.perf_counter()
        act()
        while time.perf_counter() - t0 < timeout:
            if imaging.frame_digest(grab()) != before:
                found.append(time.perf_counter() - t0)
                break
    return found


def line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name:<34}{'(none)':>11}"
    med = statistics.median(values)
    p90 = sorted(values)[int(0.9 * (len(values) - 1))]
    return f"  {name:<34}{med * 1e3:11.2f}{p90 * 1e3:9.2f}{len(values):6d}"


HEADER = f"  {'variant':<34}{'median ms':>11}{'p90 ms':>9}{'n':>6}"


@contextmanager
def _sway_text_view() -> Iterator[Any]:
    from deskpilot.testing._sway import sway_session

    with sway_session((1920, 1080)) as session:
        saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "DISPLAY")}
        os.environ.update({k: v for k, v in session.env().items() if k in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY")})
        os.environ.pop("DISPLAY", None)
        env = {**os.environ, "GDK_BACKEND": "wayland"}
        app = subprocess.Popen(["/usr/bin/python3", str(GTK_APP), "text"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert app.stdout is not None
            while '"ready"' not in app.stdout.readline():
                if app.poll() is not None:
                    raise RuntimeError("the GTK app did not start")
            yield session
        finally:
            app.terminate()
            app.wait(timeout=10)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_sway(rounds: int) -> list[str]:
    from deskpilot.capture import Capturer
    from deskpilot.input import InputController

    lines = ["sway 1.7 headless (pixman), GTK 3 text view, wlroots backends:", HEADER]
    with _sway_text_view(), Capturer("wlroots", cursor=False) as cap, InputController("wlroots") as hands:
        hands.click(960, 540)
        variants: dict[str, Callable[[], Any]] = {
            "wlroots grab_bgra 1920x1080": cap.grab_bgra,
            "wlroots grab -> PNG 1536x864": lambda: cap.grab(size=SIZE).png(level=1),
        }
        if shutil.which("grim"):
            variants["grim -t ppm - (subprocess)"] = lambda: subprocess.run(
                ["grim", "-t", "ppm", "-"], stdout=subprocess.PIPE, check=True)
        times = measure(variants, rounds)
        lines += [line(name, values) for name, values in times.items()]
        lines.append(line("type 1 char -> first frame", action_to_frame(cap.grab_bgra, lambda: hands.type_text("x"),
                                                                       rounds)))
    return lines


def run_x11(rounds: int) -> list[str]:
    from deskpilot.capture import Capturer
    from deskpilot.input import InputController
    from deskpilot.testing._xvfb import xvfb

    lines = ["Xvfb 1920x1080, Tk text view, mss + XTest:", HEADER]
    saved = os.environ.get("DISPLAY")
    with xvfb((1920, 1080), timeout=60.0) as display:
        os.environ["DISPLAY"] = display
        app = subprocess.Popen([sys.executable, "-c", _TK_TEXT], stdout=subprocess.PIPE, text=True)
        try:
            assert app.stdout is not None
            app.stdout.readline()
            with Capturer("mss", cursor=False) as cap, InputController("xtest") as hands:
                hands.click(960, 540)
                times = measure({"mss grab_bgra 1920x1080": cap.grab_bgra,
                                 "mss grab -> PNG 1536x864": lambda: cap.grab(size=SIZE).png(level=1)}, rounds)
                lines += [line(name, values) for name, values in times.items()]
                lines.append(line("type 1 char -> first frame",
                                  action_to_frame(cap.grab_bgra, lambda: hands.type_text("x"), rounds)))
        finally:
            app.terminate()
            app.wait(timeout=10)
            if saved is None:
                os.environ.pop("DISPLAY", None)
            else:
                os.environ["DISPLAY"] = saved
    return lines


def run(rounds: int) -> list[str]:
    return [*run_sway(rounds), *run_x11(rounds)]


try:
    import pytest

    def test_wlroots_next_to_x11(benchmark: Any, capsys: Any) -> None:
        if shutil.which("sway") is None:
            pytest.skip("sway is not installed")
        lines = benchmark.pedantic(lambda: run(rounds=15), rounds=1, iterations=1)
        with capsys.disabled():
            print("\n" + "\n".join(lines))
except ImportError:  # pragma: no cover - running as a script without pytest
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    if shutil.which("sway") is None:
        print("sway is not installed", file=sys.stderr)
        return 1
    print("\n".join(run(args.rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
