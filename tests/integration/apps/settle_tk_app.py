"""A Tk app for the settle tests: a click that changes a label, an entry to type into, a
spot whose click is answered 120 ms later, and a blank spot.

    python settle_tk_app.py

Full screen, undecorated, at +0+0. Prints one JSON line ``{"type": "ready", "widgets":
{name: [x, y, w, h]}}`` (root coordinates) once mapped, then one line per event. The
entry's caret does not blink (``insertofftime=0``), so two frames of a finished app are
equal. The late spot is a canvas with no pressed look: the click itself draws nothing,
the app's first drawing comes 120 ms later (``after``).
"""

from __future__ import annotations

import json
import tkinter as tk

LATE_MS = 120
COLORS = ("#dde4ee", "#f3e2c7", "#d6f0d8", "#f0d6e6")


def emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    root = tk.Tk()
    root.overrideredirect(True)
    w, h = root.winfo_screenwidth(), root.winfo_screenheight()
    root.geometry(f"{w}x{h}+0+0")
    root.configure(bg="white")
    font = ("DejaVu Sans", 20)
    count = {"n": 0, "late": 0}

    label = tk.Label(root, text="clicked 0 times", font=font, bg=COLORS[0], width=20)
    label.place(x=100, y=80)

    def pressed() -> None:
        count["n"] += 1
        label.configure(text=f"clicked {count['n']} times", bg=COLORS[count["n"] % len(COLORS)])
        emit(type="click", n=count["n"])

    button = tk.Button(root, text="Press me", font=font, command=pressed)
    button.place(x=100, y=180)
    entry = tk.Entry(root, font=font, width=30, insertofftime=0)
    entry.place(x=100, y=300)

    late = tk.Canvas(root, width=360, height=160, bg="#c8d0e0", highlightthickness=0, cursor="arrow")
    late.place(x=100, y=420)
    late_text = late.create_text(180, 80, text="late 0", font=font)

    def answer_late() -> None:
        count["late"] += 1
        late.configure(bg=COLORS[count["late"] % len(COLORS)])
        late.itemconfigure(late_text, text=f"late {count['late']}")
        emit(type="late", n=count["late"])

    late.bind("<ButtonRelease-1>", lambda _e: root.after(LATE_MS, answer_late))
    blank = tk.Frame(root, width=600, height=300, bg="white")
    blank.place(x=900, y=600)

    def ready() -> None:
        if not root.winfo_viewable():
            root.after(20, ready)
            return
        root.update_idletasks()
        root.focus_force()
        widgets = {
            name: [wd.winfo_rootx(), wd.winfo_rooty(), wd.winfo_width(), wd.winfo_height()]
            for name, wd in (("label", label), ("button", button), ("entry", entry), ("late", late), ("blank", blank))
        }
        emit(type="ready", widgets=widgets)

    root.after(50, ready)
    root.after(600_000, root.destroy)  # never outlive a forgotten test
    root.mainloop()


if __name__ == "__main__":
    main()
