"""The demo's target app: a Tk window with a magenta TARGET and a text field, events recorded.

Run::

    python -m deskpilot.testing._demo_app --events EVENTS.jsonl [--geometry WxH+X+Y]

The window covers the screen (undecorated, at +0+0) unless ``--geometry`` says
otherwise. Clicking the TARGET turns it green and gives the keyboard focus to the text
field; Enter in the field shows "received: <text>". Every event is one JSON line in
the events file, flushed as it happens (root/screen pixel coordinates)::

    {"type": "ready", "screen": [w, h], "window": [x, y, w, h],
     "widgets": {"target": [x, y, w, h], "entry": [x, y, w, h]}, "pid": N}
    {"type": "press" | "release", "button": 1, "x": X, "y": Y, "widget": "target" | "entry" | "background" | ...,
     "state": N}    (press only; X buttons 4/5 are the wheel, 6/7 the horizontal wheel, which Tk 8.6
                    reports as 4/5 with the Shift bit 1 in ``state``)
    {"type": "target_clicked", "x": X, "y": Y}
    {"type": "key" | "key_release", "keysym": "Return", "char": "\\r", "widget": "entry"}
    {"type": "entry", "text": "..."}       every change of the field's text
    {"type": "submitted", "text": "..."}    Enter pressed in the field

It ships in :mod:`deskpilot.testing` (not in tests/) because ``deskpilot demo`` runs it for
users; nothing outside the demo and the tests imports it.
The app exits when stdin closes or on the ``quit`` command (one per line on stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import tkinter as tk
from typing import Any, TextIO

__all__ = ["BACKGROUND", "CLICKED_RGB", "TARGET_RGB", "main"]

BACKGROUND = "#336699"
TARGET_RGB = (255, 0, 255)
TARGET_COLOR = "#ff00ff"
CLICKED_COLOR = "#00c800"
#: The TARGET's colour once clicked (what the team and stateless demo models look for at the end).
CLICKED_RGB = (0, 200, 0)


def _join_surrogates(text: str) -> str:
    # Tcl 8.6 hands astral characters to Python as UTF-16 surrogate pairs.
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


class DemoWindow:
    def __init__(self, out: TextIO, geometry: str | None) -> None:
        self.out = out
        self.root = tk.Tk(className="deskpilot-demo")
        self.root.title("deskpilot demo")
        self.root.configure(background=BACKGROUND, cursor="left_ptr")
        sw, sh = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
        self.root.overrideredirect(True)
        self.root.geometry(geometry or f"{sw}x{sh}+0+0")
        self.names: dict[str, str] = {str(self.root): "background"}

        self.title = tk.Label(
            self.root, text="deskpilot demo", font=("DejaVu Sans", 28, "bold"), fg="white", bg=BACKGROUND
        )
        self.title.place(relx=0.5, rely=0.08, anchor="n")
        self.target = tk.Frame(self.root, background=TARGET_COLOR, highlightthickness=0, borderwidth=0)
        self.target.place(relx=0.40, rely=0.25, relwidth=0.2, relheight=0.16)
        self.target_label = tk.Label(
            self.target, text="TARGET", font=("DejaVu Sans", 26, "bold"), fg="white", bg=TARGET_COLOR
        )
        self.target_label.place(relx=0.5, rely=0.5, anchor="center")
        self.entry_var = tk.StringVar(self.root)
        # A steady caret (insertofftime=0): a blinking one changes the screen on its own
        # every 300 ms, so whether two captures match would depend on when they were taken
        # (a real-input replay compares what it sees with the recording).
        self.entry = tk.Entry(self.root, textvariable=self.entry_var, font=("DejaVu Sans", 20), insertofftime=0)
        self.entry.place(relx=0.3, rely=0.55, relwidth=0.4, relheight=0.06)
        self.status = tk.Label(
            self.root, text="click the TARGET, type, press Enter", font=("DejaVu Sans", 18), fg="white", bg=BACKGROUND
        )
        self.status.place(relx=0.5, rely=0.68, anchor="n")
        for widget, name in (
            (self.target, "target"),
            (self.target_label, "target"),
            (self.entry, "entry"),
            (self.title, "title"),
            (self.status, "status"),
        ):
            self.names[str(widget)] = name

        self.entry_var.trace_add("write", lambda *_: self.emit(type="entry", text=_join_surrogates(self.entry_var.get())))
        self.root.bind_all("<ButtonPress>", self._press, add="+")
        self.root.bind_all("<KeyPress>", lambda e: self._key("key", e), add="+")
        self.root.bind_all("<KeyRelease>", lambda e: self._key("key_release", e), add="+")
        self.root.bind_all("<ButtonRelease>", self._release, add="+")
        self.entry.bind("<Return>", self._submit)
        self.entry.bind("<KP_Enter>", self._submit)
        threading.Thread(target=self._read_stdin, daemon=True).start()
        self.root.after(50, self._ready)

    def emit(self, **record: Any) -> None:
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def _rect(self, widget: tk.Misc) -> list[int]:
        return [widget.winfo_rootx(), widget.winfo_rooty(), widget.winfo_width(), widget.winfo_height()]

    def _ready(self) -> None:
        self.root.update_idletasks()
        if not self.root.winfo_viewable() or self.target.winfo_width() <= 1:
            self.root.after(50, self._ready)
            return
        self.emit(
            type="ready",
            screen=[self.root.winfo_screenwidth(), self.root.winfo_screenheight()],
            window=self._rect(self.root),
            widgets={"target": self._rect(self.target), "entry": self._rect(self.entry)},
            pid=os.getpid(),
        )

    def _press(self, event: tk.Event[Any]) -> None:
        name = self.names.get(str(event.widget), "other")
        self.emit(type="press", button=event.num, x=event.x_root, y=event.y_root, widget=name, state=int(event.state))
        if name == "target" and event.num == 1:
            self.target.configure(background=CLICKED_COLOR)
            self.target_label.configure(background=CLICKED_COLOR)
            self.emit(type="target_clicked", x=event.x_root, y=event.y_root)
            self.entry.focus_force()
            self.status.configure(text="target clicked: now type and press Enter")

    def _release(self, event: tk.Event[Any]) -> None:
        name = self.names.get(str(event.widget), "other")
        self.emit(type="release", button=event.num, x=event.x_root, y=event.y_root, widget=name)

    def _key(self, kind: str, event: tk.Event[Any]) -> None:
        self.emit(
            type=kind,
            keysym=event.keysym,
            char=_join_surrogates(event.char) if event.char else "",
            widget=self.names.get(str(event.widget), "other"),
        )

    def _submit(self, _event: tk.Event[Any]) -> None:
        text = _join_surrogates(self.entry_var.get())
        self.emit(type="submitted", text=text)
        self.status.configure(text=f"received: {text}")

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        self.root.after(0, self.root.destroy)

    def run(self) -> None:
        self.root.mainloop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="deskpilot's demo target app")
    parser.add_argument("--events", required=True, help="JSON-lines file the app appends its events to")
    parser.add_argument("--geometry", default=None, help="Tk geometry WxH+X+Y (default: the whole screen)")
    args = parser.parse_args(argv)
    with open(args.events, "a", encoding="utf-8") as out:
        DemoWindow(out, args.geometry).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
