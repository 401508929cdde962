"""Unicode typing through XTest on a private Xvfb: the XTest backend before and after
issue 17's batching, in the same run, into a real Tk entry.

Each call types 15 mixed characters (ASCII, Latin-1, CJK, symbols, an emoji), about
half of them on no key of the US layout, so they go through spare keycodes. Two
workloads, both with a fresh controller per run:

* ``fresh``: a new controller types a new text (its characters are bound anew: an
  agent's turns type different text, further apart than the give-back delay);
* ``burst``: the same controller types the same text again right away (a long text
  cut into chunks by the agent's ``type_chunk``): bound characters are reused.

"before" is ``src/deskpilot/input/_xtest.py`` as of ``--before`` (default ``6b9405a``,
the commit issue 14/17's input work started from), loaded from git into this process;
"after" is the working tree's. Variants alternate call by call. The Tk entry's text is
checked after every call: a garbled call is counted, not timed away.

Run: ``.venv/bin/python benchmarks/bench_typing.py [--calls 30] [--before REV]``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import random
import select
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deskpilot.testing._xvfb import xvfb as start_xvfb

ROOT = Path(__file__).resolve().parent.parent

_APP = r"""
import sys, tkinter as tk
root = tk.Tk()
root.geometry("900x120+0+0")
var = tk.StringVar()
entry = tk.Entry(root, textvariable=var, font=("TkFixedFont", 16))
entry.pack(fill="both", expand=True)
# Tk 8.6 keeps astral characters as surrogate pairs: join them before reporting.
def joined():
    return var.get().encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
var.trace_add("write", lambda *_: print(repr(joined()), flush=True))
def command(*_):
    if sys.stdin.readline().strip() == "clear":
        var.set("")
root.createfilehandler(sys.stdin, tk.READABLE, command)
def ready():
    if not entry.winfo_viewable():
        root.after(20, ready); return
    entry.focus_force(); root.update()
    print("ready", flush=True)
root.after(50, ready)
root.after(600_000, root.destroy)  # never outlive a forgotten benchmark
root.mainloop()
"""

# Characters on no key of the US layout (each needs a spare keycode) and on keys.
EXOTIC = "äöüßéèêçñÅØæ€✓→←↑↓★☆♥♦世界中文日本語😀😃🎉𝄞ΩΣπλЖЯ"
PLAIN = "abc xyz 123 .,-"


def fifteen(rng: random.Random) -> str:
    """15 characters: 7 from EXOTIC (distinct), 8 from PLAIN, shuffled."""
    chars = rng.sample(EXOTIC, 7) + [rng.choice(PLAIN) for _ in range(8)]
    rng.shuffle(chars)
    return "".join(chars)


def load_before(rev: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/deskpilot/input/_xtest.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("deskpilot.input._xtest_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:_xtest.py", "exec"), module.__dict__)
    return module


class Entry:
    """The Tk entry: clear it, wait for a text."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _APP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        assert self.proc.stdout is not None
        while self.proc.stdout.readline().strip() != "ready":
            pass
        self.last = ""
        self._pending = b""

    def clear(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("clear\n")
        self.proc.stdin.flush()
        self.wait("")

    def wait(self, text: str, timeout: float = 10.0) -> str:
        """Read the app's reports (unbuffered: select() must see every byte) until the
        entry shows ``text`` or ``timeout`` passes; the last text seen."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while self.last != text and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            self._pending += os.read(fd, 1 << 16)
            *lines, self._pending = self._pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self.last = ast.literal_eval(line.decode())  # repr() written by the app
        return self.last

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run(calls: int, before_rev: str, settle: float | None = None) -> list[str]:
    from deskpilot.input import _xtest as after

    before = load_before(before_rev)
    variants: dict[str, Callable[[], Any]] = {
        "before": before.XTestBackend,
        "after": after.XTestBackend,
    }
    if settle is not None:  # the after backend with another settle (garbling study)
        variants[f"settle={settle:g}"] = lambda: after.XTestBackend(settle=settle)
    entry = Entry()
    lines: list[str] = []
    try:
        for workload in ("fresh", "burst"):
            times: dict[str, list[float]] = {name: [] for name in variants}
            garbled: dict[str, int] = dict.fromkeys(variants, 0)
            rng = random.Random(17)
            for i in range(calls):
                order = list(variants) if i % 2 == 0 else list(variants)[::-1]
                for name in order:
                    # One controller at a time: the old backend does not know the
                    # shared record, so two open side by side would fight over keycodes.
                    backend = variants[name]()
                    try:
                        text = fifteen(rng)
                        entry.clear()
                        if workload == "burst":  # bind once, then time the reuse right away
                            backend.type_text(text)
                        t0 = time.perf_counter()
                        backend.type_text(text)
                        times[name].append((time.perf_counter() - t0) * 1000)
                        want = text * 2 if workload == "burst" else text
                        got = entry.wait(want)
                        if got != want:
                            garbled[name] += 1
                            if os.environ.get("BENCH_TYPING_SHOW"):
                                print(f"{name}: {want!r} -> {got!r}", flush=True)
                    finally:
                        backend.close()
            for name in variants:
                t = sorted(times[name])
                lines.append(
                    f"{workload:6} {name:7} p50 {statistics.median(t):7.2f} ms  p95 {t[int(0.95 * (len(t) - 1))]:7.2f} ms"
                    f"  garbled {garbled[name]}/{calls}"
                )
    finally:
        entry.close()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--before", default="6b9405a")
    parser.add_argument(
        "--settle", type=float, default=None, help="also run 'after' with this settle (s)"
    )
    args = parser.parse_args()
    # this benchmark's own flags: XTEST only, and the server may reset between clients
    with start_xvfb((1920, 1080), options=("-nolisten", "tcp", "+extension", "XTEST"), timeout=60.0):
        print(
            f"Xvfb {os.environ['DISPLAY']}: 15 mixed Unicode characters per call, {args.calls} calls per variant",
            flush=True,
        )
        print("\n".join(run(args.calls, args.before, args.settle)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
