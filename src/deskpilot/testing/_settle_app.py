"""A Tk target whose reactions to a click take time: what the settle tests click on.

Run::

    python -m deskpilot.testing._settle_app --events EVENTS.jsonl [--geometry WxH+X+Y]

The window covers the screen (undecorated, at +0+0) unless ``--geometry`` says otherwise.
Four areas, each reacting to a left click in its own way:

* ``late``: draws nothing for :data:`LATE_MS` ms, then turns from :data:`LATE_RGB` to
  :data:`LATE_DONE_RGB` in one go (an app that answers an input a few frames later: a
  settle that counts "nothing drawn since the input" as settled sends the old frame);
* ``anim``: a bar grows across its canvas in :data:`ANIM_STEPS` frames, one every
  :data:`ANIM_FRAME_MS` ms (a ~400 ms transition at 60 Hz), then turns
  :data:`ANIM_DONE_RGB` (a settle that ends between two frames sends half a bar);
* ``dead``: a label that does nothing (an action without visible effect);
* ``spin``: starts a spinner that never stops (a settle can only end at its bound).

Every event is one JSON line in the events file, flushed as it happens::

    {"type": "ready", "screen": [w, h], "window": [x, y, w, h],
     "widgets": {"late": [x, y, w, h], "anim": [...], "dead": [...], "spin": [...]}, "pid": N}
    {"type": "press", "x": X, "y": Y, "widget": "late" | "anim" | "dead" | "spin" | "background"}
    {"type": "late_drawn"} / {"type": "anim_done"} / {"type": "spin_started"}

It ships beside the demo app (:mod:`deskpilot.testing._demo_app`) so the Windows tier's
interpreter runs it as it runs the demo (``DemoApp(..., module=...)``). The app exits when
stdin closes or on the ``quit`` command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import tkinter as tk
from typing import Any, TextIO

__all__ = [
    "ANIM_DONE_RGB",
    "ANIM_FRAME_MS",
    "ANIM_RGB",
    "ANIM_STEPS",
    "BACKGROUND_RGB",
    "LATE_DONE_RGB",
    "LATE_MS",
    "LATE_RGB",
    "main",
]

BACKGROUND_RGB = (40, 40, 48)
LATE_RGB = (200, 40, 40)
LATE_DONE_RGB = (40, 180, 40)
#: Long enough that the old settle (two equal probes 10 ms apart) ended before it, short
#: enough to stay inside the first-reaction bound (0.3 s) on a loaded machine.
LATE_MS = 100
ANIM_RGB = (230, 160, 20)
ANIM_DONE_RGB = (30, 120, 230)
ANIM_STEPS = 24
ANIM_FRAME_MS = 16


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


class SettleApp:
    def __init__(self, out: TextIO, geometry: str | None) -> None:
        self.out = out
        self.root = tk.Tk(className="deskpilot-settle")
        self.root.title("deskpilot settle target")
        background = _hex(BACKGROUND_RGB)
        self.root.configure(background=background, cursor="left_ptr")
        sw, sh = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
        self.root.overrideredirect(True)
        self.root.geometry(geometry or f"{sw}x{sh}+0+0")
        # Areas are plain frames and canvases (no relief, no hover highlight): a click
        # draws nothing but what the area is made to draw.
        self.late = tk.Frame(self.root, background=_hex(LATE_RGB), highlightthickness=0, borderwidth=0)
        self.late.place(relx=0.05, rely=0.1, relwidth=0.25, relheight=0.25)
        self.anim = tk.Canvas(self.root, background=background, highlightthickness=0, borderwidth=0)
        self.anim.place(relx=0.4, rely=0.1, relwidth=0.5, relheight=0.25)
        self.bar = self.anim.create_rectangle(0, 0, 0, 0, fill=_hex(ANIM_RGB), width=0)
        self.dead = tk.Label(
            self.root, text="nothing happens here", font=("DejaVu Sans", 18), fg="white", bg=background
        )
        self.dead.place(relx=0.05, rely=0.5, relwidth=0.25, relheight=0.15)
        self.spin = tk.Canvas(self.root, background=background, highlightthickness=0, borderwidth=0)
        self.spin.place(relx=0.4, rely=0.5, relwidth=0.15, relheight=0.25)
        self.spinner = self.spin.create_arc(10, 10, 110, 110, start=0, extent=60, fill="white", width=0)
        self.names = {
            str(self.root): "background",
            str(self.late): "late",
            str(self.anim): "anim",
            str(self.dead): "dead",
            str(self.spin): "spin",
        }
        self.spinning = False
        self.root.bind_all("<ButtonPress-1>", self._press, add="+")
        threading.Thread(target=self._read_stdin, daemon=True).start()
        self.root.after(50, self._ready)

    def emit(self, **record: Any) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _rect(self, widget: tk.Misc) -> list[int]:
        return [widget.winfo_rootx(), widget.winfo_rooty(), widget.winfo_width(), widget.winfo_height()]

    def _ready(self) -> None:
        self.root.update_idletasks()
        if not self.root.winfo_viewable() or self.late.winfo_width() <= 1:
            self.root.after(50, self._ready)
            return
        self.emit(
            type="ready",
            screen=[self.root.winfo_screenwidth(), self.root.winfo_screenheight()],
            window=self._rect(self.root),
            widgets={name: self._rect(w) for name, w in (("late", self.late), ("anim", self.anim),
                                                         ("dead", self.dead), ("spin", self.spin))},
            pid=os.getpid(),
        )

    def _press(self, event: tk.Event[Any]) -> None:
        name = self.names.get(str(event.widget), "other")
        self.emit(type="press", x=event.x_root, y=event.y_root, widget=name)
        if name == "late":
            self.root.after(LATE_MS, self._late_draw)
        elif name == "anim":
            self.anim.itemconfigure(self.bar, fill=_hex(ANIM_RGB))
            self.anim.coords(self.bar, 0, 0, 0, 0)
            self.root.after(ANIM_FRAME_MS, self._anim_step, 1)
        elif name == "spin" and not self.spinning:
            self.spinning = True
            self.emit(type="spin_started")
            self.root.after(ANIM_FRAME_MS, self._spin_step, 0)

    def _late_draw(self) -> None:
        self.late.configure(background=_hex(LATE_DONE_RGB))
        self.emit(type="late_drawn")

    def _anim_step(self, step: int) -> None:
        width, height = self.anim.winfo_width(), self.anim.winfo_height()
        self.anim.coords(self.bar, 0, 0, width * step // ANIM_STEPS, height)
        if step < ANIM_STEPS:
            self.root.after(ANIM_FRAME_MS, self._anim_step, step + 1)
        else:
            self.anim.itemconfigure(self.bar, fill=_hex(ANIM_DONE_RGB))
            self.emit(type="anim_done")

    def _spin_step(self, angle: int) -> None:
        self.spin.itemconfigure(self.spinner, start=angle)
        self.root.after(ANIM_FRAME_MS, self._spin_step, (angle + 15) % 360)

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        self.root.after(0, self.root.destroy)

    def run(self) -> None:
        self.root.mainloop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="deskpilot's settle target app")
    parser.add_argument("--events", required=True, help="JSON-lines file the app appends its events to")
    parser.add_argument("--geometry", default=None, help="Tk geometry WxH+X+Y (default: the whole screen)")
    args = parser.parse_args(argv)
    with open(args.events, "a", encoding="utf-8") as out:
        SettleApp(out, args.geometry).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
