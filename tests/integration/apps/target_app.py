"""A Tk target app for input and capture tests: known targets, every event recorded.

Run::

    python target_app.py --events EVENTS.jsonl [--geometry WxH+X+Y] [--seed N]

Without ``--geometry`` the window covers the whole screen at +0+0 (undecorated, so
window and root coordinates only differ by the geometry offset). Commands arrive one
per line on stdin: ``clear`` empties the entry and the text box (answered by a
``cleared`` record), ``focus entry`` / ``focus text`` moves the keyboard focus
(answered by ``focused``), ``quit`` exits. The app also exits when stdin closes.

Layout (fractions of the window; the ``ready`` record has the exact root rectangles):
``red``, ``green``, ``blue``, ``yellow`` solid targets across the top, ``entry`` (an
Entry) and ``text`` (a Text) on the left, ``pad`` (a white Canvas for drags and
wheels) in the middle, ``pattern`` (a 480x270 image of deterministic noise from
:func:`pattern_rgb`) on the right, and ``background`` (solid #336699) elsewhere.
Ctrl+A selects all in the entry and the text box, as in most apps.

Records (JSON lines, flushed one by one; coordinates are root/screen pixels, ``t`` is
the X server time in ms, ``widget`` is one of the names above)::

    {"type": "ready", "screen": [w, h], "window": [x, y, w, h],
     "widgets": {"red": [x, y, w, h], ...}, "pattern_seed": N, "pid": N}
    {"type": "press" | "release", "button": 1..7, "x": X, "y": Y, "widget": ..., "state": N, "t": ms}
    {"type": "double" | "triple", "button": N, "x": X, "y": Y, "widget": ..., "t": ms}
    {"type": "motion", "x": X, "y": Y, "widget": ..., "state": N, "t": ms}   (only while a button is down)
    {"type": "scroll", "direction": "up" | "down" | "left" | "right", "x": X, "y": Y, "widget": ..., "t": ms}
    {"type": "wheel", "delta": N, "x": X, "y": Y, "widget": ..., "t": ms}     (a <MouseWheel> event, if Tk makes one)
    {"type": "key" | "key_release", "keysym": "a", "keysym_num": N, "char": "a", "keycode": N, "state": N, "widget": ..., "t": ms}
    {"type": "entry", "text": "..."}       (every change of the entry's text)
    {"type": "text", "text": "..."}        (every change of the text box; without Tk's trailing newline)
    {"type": "cleared"} / {"type": "focused", "widget": ...}

Buttons 4/5 are the vertical wheel (up/down) and 6/7 the horizontal one (left/right),
as X delivers them; Tk 8.6 reports 6/7 as 4/5 with the Shift bit (1) in ``state``, so
each wheel press is followed by a ``scroll`` record that names the direction. On
Windows the wheel arrives as ``wheel`` records (delta 120 per notch, horizontal with
Shift), each followed by one ``scroll`` record per notch: tests can rely on ``scroll``
records on every OS. Double
and triple clicks are recorded per button (1-3) after their ``press`` record. Text is reported as Python ``str`` with any UTF-16 surrogate pairs
from Tcl 8.6 joined into one code point.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import tkinter as tk
from typing import Any, TextIO

PATTERN_SIZE = (480, 270)
BACKGROUND = "#336699"
TARGET_COLORS = {"red": "#ff0000", "green": "#00ff00", "blue": "#0000ff", "yellow": "#ffff00"}

# name -> (relx, rely, relwidth, relheight) of the window
LAYOUT: dict[str, tuple[float, float, float, float]] = {
    "red": (0.025, 0.04, 0.1, 0.1),
    "green": (0.15, 0.04, 0.1, 0.1),
    "blue": (0.275, 0.04, 0.1, 0.1),
    "yellow": (0.4, 0.04, 0.1, 0.1),
    "entry": (0.025, 0.2, 0.3, 0.04),
    "text": (0.025, 0.28, 0.3, 0.25),
    "pad": (0.36, 0.2, 0.3, 0.4),
}


def pattern_rgb(width: int, height: int, seed: int) -> bytes:
    """Deterministic RGB noise, row-major, 3 bytes per pixel (an xorshift32 stream)."""
    state = (seed * 2654435761 + 1) & 0xFFFFFFFF or 1
    out = bytearray(width * height * 3)
    for i in range(0, len(out), 3):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        out[i] = state & 0xFF
        out[i + 1] = (state >> 8) & 0xFF
        out[i + 2] = (state >> 16) & 0xFF
    return bytes(out)


def _join_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


class TargetApp:
    def __init__(self, out: TextIO, geometry: str | None, seed: int) -> None:
        self.out = out
        self.seed = seed
        self.root = tk.Tk(className="deskpilot-target")
        self.root.configure(background=BACKGROUND, cursor="arrow" if sys.platform == "win32" else "left_ptr")
        sw, sh = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
        self.root.overrideredirect(True)
        self.root.geometry(geometry or f"{sw}x{sh}+0+0")
        self.names: dict[str, str] = {str(self.root): "background"}
        self.widgets: dict[str, tk.Widget] = {}
        for name, color in TARGET_COLORS.items():
            frame = tk.Frame(self.root, background=color, highlightthickness=0, borderwidth=0)
            self._place(name, frame)
        self.entry_var = tk.StringVar(self.root)
        self.entry = tk.Entry(self.root, textvariable=self.entry_var, font=("TkFixedFont", 16))
        self._place("entry", self.entry)
        self.text = tk.Text(self.root, font=("TkFixedFont", 14), undo=False)
        self._place("text", self.text)
        self.pad = tk.Canvas(self.root, background="#ffffff", highlightthickness=0, borderwidth=0)
        self._place("pad", self.pad)
        pw, ph = PATTERN_SIZE
        ppm = b"P6 %d %d 255\n" % (pw, ph) + pattern_rgb(pw, ph, seed)
        self.image = tk.PhotoImage(master=self.root, data=ppm, format="PPM")
        self.pattern = tk.Label(self.root, image=self.image, borderwidth=0, highlightthickness=0, padx=0, pady=0)
        self.pattern.place(relx=0.7, rely=0.2, width=pw, height=ph)
        self.names[str(self.pattern)] = "pattern"
        self.widgets["pattern"] = self.pattern

        self.entry_var.trace_add("write", lambda *_: self.emit(type="entry", text=_join_surrogates(self.entry_var.get())))
        self.text.bind("<<Modified>>", self._text_modified)
        for widget in (self.entry, self.text):
            widget.bind("<Control-a>", self._select_all)
            widget.bind("<Control-A>", self._select_all)
        # Recording bindings live on bind tags of their own, first in every widget's list:
        # Tk runs the best match of each tag, so class and "all" bindings (Tab traversal,
        # F10 menus, Ctrl+A) neither hide events from the recorder nor are changed by it.
        for seq, kind in (("<ButtonPress>", "press"), ("<ButtonRelease>", "release")):
            self.root.bind_class("Record", seq, lambda e, k=kind: self._button(k, e))
        # Tk fires one binding per bind tag (the most specific match), so multi-clicks get
        # a tag of their own; otherwise a double click would hide its press record.
        for button in (1, 2, 3):
            for seq, kind in ((f"<Double-ButtonPress-{button}>", "double"), (f"<Triple-ButtonPress-{button}>", "triple")):
                self.root.bind_class("RecordMulti", seq, lambda e, k=kind: self._multi(k, e))
        self.root.bind_class("Record", "<Motion>", self._motion)
        self.root.bind_class("Record", "<MouseWheel>", self._wheel)
        self.root.bind_class("Record", "<KeyPress>", lambda e: self._key("key", e))
        self.root.bind_class("Record", "<KeyRelease>", lambda e: self._key("key_release", e))
        for widget in (self.root, *self.widgets.values()):
            widget.bindtags(("Record", *widget.bindtags(), "RecordMulti"))

        self.commands: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_stdin, daemon=True).start()
        self.root.after(20, self._poll_commands)
        self.root.after(50, self._ready)

    def _place(self, name: str, widget: tk.Widget) -> None:
        relx, rely, relw, relh = LAYOUT[name]
        widget.place(relx=relx, rely=rely, relwidth=relw, relheight=relh)
        self.names[str(widget)] = name
        self.widgets[name] = widget

    def emit(self, **record: Any) -> None:
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def _name(self, widget: Any) -> str:
        return self.names.get(str(widget), str(widget))

    def _rect(self, widget: tk.Misc) -> list[int]:
        return [widget.winfo_rootx(), widget.winfo_rooty(), widget.winfo_width(), widget.winfo_height()]

    def _ready(self) -> None:
        if not self.root.winfo_viewable():
            self.root.after(20, self._ready)
            return
        self.root.update_idletasks()
        self.root.focus_force()
        self.entry.focus_set()
        self.emit(
            type="ready",
            screen=[self.root.winfo_screenwidth(), self.root.winfo_screenheight()],
            window=self._rect(self.root),
            widgets={name: self._rect(w) for name, w in self.widgets.items()},
            pattern_seed=self.seed,
            pid=os.getpid(),
        )

    def _button(self, kind: str, e: Any) -> None:
        self.emit(type=kind, button=e.num, x=e.x_root, y=e.y_root, widget=self._name(e.widget), state=e.state, t=e.time)
        if kind == "press" and e.num in (4, 5):
            # Tk 8.6 hands X buttons 6/7 (horizontal wheel) over as Shift + buttons 4/5.
            horizontal = bool(e.state & 1)
            direction = ("left" if e.num == 4 else "right") if horizontal else ("up" if e.num == 4 else "down")
            self.emit(type="scroll", direction=direction, x=e.x_root, y=e.y_root, widget=self._name(e.widget), t=e.time)
        elif kind == "press" and e.num in (6, 7):
            self.emit(type="scroll", direction="left" if e.num == 6 else "right", x=e.x_root, y=e.y_root,
                      widget=self._name(e.widget), t=e.time)

    def _multi(self, kind: str, e: Any) -> None:
        self.emit(type=kind, button=e.num, x=e.x_root, y=e.y_root, widget=self._name(e.widget), t=e.time)

    def _motion(self, e: Any) -> None:
        if e.state & (0x100 | 0x200 | 0x400):  # Button1..3 mask: drags only
            self.emit(type="motion", x=e.x_root, y=e.y_root, widget=self._name(e.widget), state=e.state, t=e.time)

    def _wheel(self, e: Any) -> None:
        self.emit(type="wheel", delta=e.delta, x=e.x_root, y=e.y_root, widget=self._name(e.widget), t=e.time)
        # Windows/macOS Tk: one <MouseWheel> per batch of notches (120 per notch on
        # Windows), horizontal ones as Shift-MouseWheel: one scroll record per notch.
        horizontal = bool(e.state & 1)
        if e.delta > 0:
            direction = "left" if horizontal else "up"
        else:
            direction = "right" if horizontal else "down"
        for _ in range(max(1, abs(e.delta) // 120)):
            self.emit(type="scroll", direction=direction, x=e.x_root, y=e.y_root, widget=self._name(e.widget), t=e.time)

    def _key(self, kind: str, e: Any) -> None:
        self.emit(
            type=kind, keysym=e.keysym, keysym_num=e.keysym_num, char=_join_surrogates(e.char),
            keycode=e.keycode, state=e.state, widget=self._name(e.widget), t=e.time,
        )

    def _select_all(self, e: Any) -> str:
        if e.widget is self.entry:
            self.entry.selection_range(0, "end")
            self.entry.icursor("end")
        else:
            self.text.tag_add("sel", "1.0", "end-1c")
            self.text.mark_set("insert", "end-1c")
        return "break"

    def _text_modified(self, _e: Any) -> None:
        if self.text.edit_modified():
            self.emit(type="text", text=_join_surrogates(self.text.get("1.0", "end-1c")))
            self.text.edit_modified(False)

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            self.commands.put(line.strip())
        self.commands.put("quit")

    def _poll_commands(self) -> None:
        try:
            while True:
                command = self.commands.get_nowait()
                if command == "quit":
                    self.root.destroy()
                    return
                if command == "clear":
                    self.entry_var.set("")
                    self.text.delete("1.0", "end")
                    self.text.edit_modified(False)
                    self.emit(type="cleared")
                elif command.startswith("focus "):
                    name = command.split(None, 1)[1]
                    widget = self.widgets.get(name, self.entry)
                    self.root.focus_force()
                    widget.focus_set()
                    self.root.update_idletasks()
                    self.emit(type="focused", widget=name)
        except queue.Empty:
            pass
        self.root.after(20, self._poll_commands)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", required=True, help="JSONL file the records are appended to")
    parser.add_argument("--geometry", help="WxH+X+Y (default: the whole screen)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pattern image")
    args = parser.parse_args(argv)
    with open(args.events, "a", encoding="utf-8") as out:
        app = TargetApp(out, args.geometry, args.seed)
        app.root.mainloop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
