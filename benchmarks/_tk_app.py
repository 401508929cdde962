"""A real Tk app that repaints after every action, for the realistic turn benchmark.

Full screen over a corpus screenshot (so PNGs have realistic sizes), with a panel of
real widgets at fixed spots:

* a button: each click increments the counter in its label and changes the panel's
  colour (a visible change of a few thousand pixels);
* an entry: typing shows the text (Unicode included) with Tk's own font rendering;
* Enter in the entry appends the line to a list box and clears the entry (a change in
  two places).

Every event is echoed as a JSON line on stdout so the benchmark can check that the
actions landed (a benchmark of clicks that miss would measure nothing). So are, with
their ``time.monotonic()`` in ms (one clock for every process of the machine), each
input event the app receives (``input``) and the moment its drawing for one is done
(``drawn``: after Tk's idle redraws), from which the benchmark reads the app's own
reaction time.

The boxes the scripted model uses are in the model's 0..1000 space (:data:`BOXES`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["BOXES", "repainting_app"]

#: name -> [x1, y1, x2, y2] in 0..1000 of the screen (panel at x 600..1000 of 1920 px etc.).
BOXES: dict[str, list[int]] = {
    "button": [330, 120, 420, 160],
    "entry": [330, 220, 620, 255],
}

_APP = r"""
import json, sys, time, tkinter as tk
root = tk.Tk()
root.overrideredirect(True)
w, h = root.winfo_screenwidth(), root.winfo_screenheight()
root.geometry(f"{w}x{h}+0+0")
img = tk.PhotoImage(file=sys.argv[1])
tk.Label(root, image=img, borderwidth=0, highlightthickness=0).place(x=0, y=0)
panel = tk.Frame(root, bg="#dde4ee", bd=2, relief="groove")
panel.place(x=int(0.30 * w), y=int(0.08 * h), width=int(0.36 * w), height=int(0.60 * h))
colors = ["#dde4ee", "#f3e2c7", "#d6f0d8", "#f0d6e6"]
state = {"n": 0}
def emit(**kw):
    print(json.dumps(kw), flush=True)
counter = tk.Label(panel, text="clicked 0 times", font=("DejaVu Sans", 16), bg=colors[0])
counter.place(relx=0.45, rely=0.07)
def clicked():
    state["n"] += 1
    counter.configure(text=f"clicked {state['n']} times")
    c = colors[state["n"] % len(colors)]
    panel.configure(bg=c); counter.configure(bg=c)
    emit(type="click", n=state["n"])
btn = tk.Button(panel, text="Press me", font=("DejaVu Sans", 16), command=clicked)
# box 330..420 x 120..160 of 1000: centre (375, 140) -> panel-relative
btn.place(x=int(0.375 * w) - int(0.30 * w), y=int(0.14 * h) - int(0.08 * h), anchor="center",
          width=int(0.08 * w), height=int(0.035 * h))
entry = tk.Entry(panel, font=("DejaVu Sans", 16))
entry.place(x=int(0.335 * w) - int(0.30 * w), y=int(0.225 * h) - int(0.08 * h),
            width=int(0.28 * w), height=int(0.03 * h))
lines = tk.Listbox(panel, font=("DejaVu Sans", 14), height=12)
lines.place(x=int(0.035 * w), y=int(0.22 * h), width=int(0.28 * w), height=int(0.30 * h))
def entered(_event):
    text = entry.get()
    lines.insert("end", text); lines.see("end")
    entry.delete(0, "end")
    emit(type="enter", text=text)
entry.bind("<Return>", entered)
# The app's own reaction time: an input event in, its drawing done (the "all" tag runs after
# the widget's own bindings, so the idle callback comes after the redraws they scheduled).
def drawn():
    root.update_idletasks()
    emit(type="drawn", t=time.monotonic() * 1000)
def received(_event):
    emit(type="input", t=time.monotonic() * 1000)
for sequence in ("<ButtonPress>", "<KeyPress>"):
    root.bind_all(sequence, received, add="+")
for sequence in ("<ButtonRelease>", "<KeyPress>"):
    root.bind_all(sequence, lambda _e: root.after_idle(drawn), add="+")
def ready():
    if not root.winfo_viewable():
        root.after(20, ready); return
    root.update_idletasks(); root.update()
    emit(type="ready")
root.after(50, ready)
root.after(900_000, root.destroy)  # never outlive a forgotten benchmark
root.mainloop()
"""


@contextmanager
def repainting_app(picture: Path) -> Iterator[subprocess.Popen[str]]:
    """Start the app on ``$DISPLAY`` over ``picture``; yields the process (its stdout
    carries the event lines) once it is mapped."""
    app = subprocess.Popen(
        [sys.executable, "-c", _APP, str(picture)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert app.stdout is not None
        line = app.stdout.readline()
        if json.loads(line or "{}").get("type") != "ready":
            raise RuntimeError(f"the repainting app did not start: {line!r}")
        # Read as it goes: a full pipe would stall the app (and its drawing).
        records: list[dict[str, Any]] = []
        stdout = app.stdout

        def read() -> None:
            records.extend(json.loads(line) for line in stdout if line.strip())

        reader = threading.Thread(target=read, name="tk-app-events", daemon=True)
        reader.start()
        app.records = records  # type: ignore[attr-defined]
        app.reader = reader  # type: ignore[attr-defined]
        yield app
    finally:
        app.kill()
        app.wait(timeout=5)


def read_events(app: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """The events the app printed so far (after it was killed: everything)."""
    if app.poll() is not None:
        app.reader.join(timeout=5)  # type: ignore[attr-defined]
    return list(app.records)  # type: ignore[attr-defined]
