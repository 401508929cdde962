"""A minimal in-process Tk target for the real-Windows tests: a known pattern, every event recorded.

In-process on purpose: SendInput events go through the system input thread into this
thread's message queue, and :meth:`WinTarget.pump_until` runs Tk's event loop until the
expected record arrives, so no cross-process timing is involved.

Layout (pixels from the window's client origin; the window is undecorated-free, a normal
top-level kept on top):

* ``pattern``: a :data:`PATTERN_SIZE` image of deterministic noise at (0, 0) (exact pixel
  comparisons: any offset or scaling error changes almost every pixel);
* ``entry``: an Entry below it (Ctrl+A selects all, as in most applications);
* ``pad``: a white Canvas beside the pattern for clicks, drags and the wheel.
"""

from __future__ import annotations

import time
import tkinter as tk
from collections.abc import Callable
from typing import Any

import numpy as np

PATTERN_SIZE = (160, 120)
PAD_SIZE = (200, 160)


def pattern_rgb(width: int, height: int, seed: int = 11) -> np.ndarray:
    """HxWx3 uint8 deterministic noise."""
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)


class WinTarget:
    def __init__(self, x: int = 60, y: int = 60) -> None:
        self.root = tk.Tk(className="deskpilot-win-target")
        self.root.title("deskpilot windows target")
        self.root.configure(background="#336699")
        self.root.attributes("-topmost", True)
        self.root.geometry(f"{PATTERN_SIZE[0] + PAD_SIZE[0] + 20}x{PAD_SIZE[1] + 60}+{x}+{y}")
        self.records: list[dict[str, Any]] = []

        width, height = PATTERN_SIZE
        self.pattern = pattern_rgb(width, height)
        ppm = b"P6 %d %d 255\n" % (width, height) + self.pattern.tobytes()
        self.image = tk.PhotoImage(master=self.root, data=ppm, format="PPM")
        self.pattern_label = tk.Label(
            self.root, image=self.image, borderwidth=0, highlightthickness=0, padx=0, pady=0
        )
        self.pattern_label.place(x=0, y=0, width=width, height=height)

        self.pad = tk.Canvas(
            self.root, background="#ffffff", highlightthickness=0, borderwidth=0, cursor="arrow"
        )
        self.pad.place(x=width + 20, y=0, width=PAD_SIZE[0], height=PAD_SIZE[1])

        self.entry_var = tk.StringVar(self.root)
        self.entry = tk.Entry(self.root, textvariable=self.entry_var, font=("Segoe UI", 12))
        self.entry.place(x=0, y=height + 10, width=width, height=30)
        for sequence in ("<Control-a>", "<Control-A>"):
            self.entry.bind(sequence, self._select_all)

        self.root.bind_all("<ButtonPress>", lambda e: self._record("press", e), add="+")
        self.root.bind_all("<ButtonRelease>", lambda e: self._record("release", e), add="+")
        self.root.bind_all("<Double-ButtonPress-1>", lambda e: self._record("double", e), add="+")
        self.root.bind_all("<B1-Motion>", lambda e: self._record("drag", e), add="+")
        self.root.bind_all("<MouseWheel>", self._wheel, add="+")
        self.root.bind_all("<KeyPress>", self._key, add="+")

        self.root.update()
        self.root.lift()
        self.root.focus_force()
        self.pump(0.3)  # let the window manager show it (DWM fade-in)

    # -- geometry --------------------------------------------------------------------------
    def rect(self, widget: tk.Misc) -> tuple[int, int, int, int]:
        self.root.update_idletasks()
        return (
            widget.winfo_rootx(),
            widget.winfo_rooty(),
            widget.winfo_width(),
            widget.winfo_height(),
        )

    def center(self, widget: tk.Misc) -> tuple[int, int]:
        x, y, w, h = self.rect(widget)
        return x + w // 2, y + h // 2

    # -- events ----------------------------------------------------------------------------
    def _record(self, kind: str, event: Any) -> None:
        self.records.append(
            {"type": kind, "button": event.num, "x": event.x_root, "y": event.y_root}
        )

    def _wheel(self, event: Any) -> None:
        self.records.append(
            {"type": "wheel", "delta": event.delta, "x": event.x_root, "y": event.y_root}
        )

    def _key(self, event: Any) -> None:
        self.records.append(
            {"type": "key", "keysym": event.keysym, "char": event.char, "state": event.state}
        )

    def _select_all(self, event: Any) -> str:
        self.records.append({"type": "select_all"})
        self.entry.selection_range(0, "end")
        self.entry.icursor("end")
        return "break"

    def text(self) -> str:
        # Tcl 8.6 may hand astral characters over as surrogate pairs: join them.
        return self.entry_var.get().encode("utf-16", "surrogatepass").decode("utf-16")

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == kind]

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.root.update()
            time.sleep(0.005)

    def pump_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.root.update()
            if predicate():
                return True
            time.sleep(0.005)
        self.root.update()
        return predicate()

    def close(self) -> None:
        self.root.destroy()
