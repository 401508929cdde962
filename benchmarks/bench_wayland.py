"""GNOME on Wayland (headless mutter, PipeWire) next to the X11 path (Xvfb, mss), in one run.

Both desktops show the same native GTK 3 window (tests/integration/apps/mutter_gtk_app.py:
a 1920x1080 picture and a text entry with the focus) and are measured alike:

* **grab**: the backend's raw BGRA of the whole 1920x1080 monitor (``grab_bgra``): on
  Mutter a view of the newest frame PipeWire delivered (the compare-and-copy happened on
  PipeWire's thread when the frame came: reported on its own line), on X11 an XShmGetImage
  round trip;
* **grab+prepare**: ``Capturer.grab(size=(1536, 864))`` (the agent's frame, no cursor);
* **action -> first frame showing it**: a key typed into the entry (``type_text("x")``,
  backspace between rounds) until the first frame that differs from the one before: on
  Mutter the stream's next changed frame (frames come only on damage), on X11 mss grabs
  polled back to back.

Run: ``.venv/bin/python benchmarks/bench_wayland.py [--rounds 40]`` or
``.venv/bin/pytest benchmarks/bench_wayland.py --benchmark-only -s`` (skips where mutter is
not installed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "tests" / "integration" / "apps" / "mutter_gtk_app.py"
SIZE = (1536, 864)
SESSION_VARS = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY", "DISPLAY", "XAUTHORITY")


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def _p90_ms(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))] * 1e3


def _time(fn: Callable[[], Any], rounds: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _start_app(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["/usr/bin/python3", str(APP), *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if '"ready"' in line:
            return proc
    raise RuntimeError("the GTK app did not start")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def measure_mutter(rounds: int) -> dict[str, list[float]]:
    from deskpilot.capture import Capturer
    from deskpilot.capture._mutter import MutterBackend
    from deskpilot.input import InputController
    from deskpilot.testing._mutter import mutter_desktop

    with mutter_desktop() as desktop:
        env = desktop.env()
        saved = {k: os.environ.get(k) for k in SESSION_VARS}
        os.environ.update({k: env[k] for k in SESSION_VARS if k in env})
        app = _start_app({**os.environ, **env, "GDK_BACKEND": "wayland"})
        try:
            hands = InputController("mutter")
            backend = MutterBackend(cursor=False)
            cap = Capturer(backend, cursor=False)
            try:
                time.sleep(1.0)  # the window's zoom-in is over
                rect = backend.monitors()[0].rect
                grab = _time(lambda: backend.grab_bgra(rect), rounds * 5)
                prepare = _time(lambda: cap.grab(size=SIZE), rounds)
                stream = backend.session.streams[0].frames()
                frames0, copied0 = stream.frames + stream.unchanged, stream.copy_seconds
                latency = []
                for i in range(rounds + 3):
                    seen = stream.frames
                    t0 = time.perf_counter()
                    hands.type_text("x") if i % 2 == 0 else hands.key("backspace")
                    while stream.frames == seen and time.perf_counter() - t0 < 2:
                        time.sleep(0.0005)
                    if i >= 3:
                        latency.append(time.perf_counter() - t0)
                    time.sleep(0.1)
                # What a grab does not pay: each frame is compared and copied when it comes.
                frames = stream.frames + stream.unchanged - frames0
                per_frame = [(stream.copy_seconds - copied0) / max(frames, 1)]
            finally:
                cap.close()
                hands.close()
        finally:
            _stop(app)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return {"grab": grab, "grab+prepare": prepare, "action->frame": latency, "frame copy": per_frame}


def measure_x11(rounds: int) -> dict[str, list[float]]:
    from deskpilot.capture import Capturer
    from deskpilot.geometry import Rect
    from deskpilot.input import InputController
    from deskpilot.testing._xvfb import xvfb

    with xvfb((1920, 1080)) as display:
        env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XAUTHORITY")}
        app = _start_app({**env, "DISPLAY": display, "GDK_BACKEND": "x11"}, "--no-wm")
        try:
            hands = InputController("xtest")
            cap = Capturer("mss", cursor=False)
            try:
                hands.move(300, 300)  # no window manager: the keyboard follows the pointer
                time.sleep(0.5)
                rect = cap.area
                backend = cap.backend
                grab = _time(lambda: backend.grab_bgra(rect), rounds * 5)
                prepare = _time(lambda: cap.grab(size=SIZE), rounds)
                entry = Rect(0, 0, 800, 200)
                latency = []
                for i in range(rounds + 3):
                    before = np.array(backend.grab_bgra(entry))
                    t0 = time.perf_counter()
                    hands.type_text("x") if i % 2 == 0 else hands.key("backspace")
                    while np.array_equal(backend.grab_bgra(entry), before) and time.perf_counter() - t0 < 2:
                        pass
                    if i >= 3:
                        latency.append(time.perf_counter() - t0)
                    time.sleep(0.1)
            finally:
                cap.close()
                hands.close()
        finally:
            _stop(app)
    return {"grab": grab, "grab+prepare": prepare, "action->frame": latency}


def run(rounds: int) -> list[str]:
    results = {"mutter (PipeWire)": measure_mutter(rounds), "X11 (Xvfb, mss)": measure_x11(rounds)}
    lines = [f"GNOME Wayland vs X11, 1920x1080, {rounds} rounds (median / p90 ms)",
             f"  {'':<20}{'grab':>16}{'grab+prepare':>18}{'action->frame':>18}"]
    for name, times in results.items():
        cells = "".join(f"{_median_ms(times[k]):>9.2f} / {_p90_ms(times[k]):<6.2f}"
                        for k in ("grab", "grab+prepare", "action->frame"))
        lines.append(f"  {name:<20}{cells}")
    copy = results["mutter (PipeWire)"]["frame copy"][0] * 1e3
    lines.append(f"  mutter: each frame is compared and copied on PipeWire's thread when it comes: "
                 f"{copy:.2f} ms per frame (mean)")
    return lines


# -- pytest entry point ---------------------------------------------------------------------


def test_wayland_vs_x11(capsys: Any) -> None:
    import shutil

    import pytest

    if shutil.which("mutter") is None:
        pytest.skip("mutter is not installed (./dev setup installs it)")
    lines = run(10)
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    print("\n".join(run(args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
