"""A private Xvfb with a realistic picture on it, for the capture benchmarks.

An empty Xvfb screen is black: every PNG encoder compresses it to nothing and every
comparison would be meaningless. So a full-screen, undecorated Tk window shows one of
the corpus screenshots (``benchmarks/corpus/*.png`` in the repository, or
``$DESKPILOT_CORPUS``), or a synthetic UI-like picture when no corpus is around.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deskpilot.testing._xvfb import xvfb as start_xvfb

__all__ = ["corpus_images", "screen_with_picture"]

_SHOW = r"""
import sys, tkinter as tk
root = tk.Tk()
root.overrideredirect(True)
w, h = root.winfo_screenwidth(), root.winfo_screenheight()
root.geometry(f"{w}x{h}+0+0")
img = tk.PhotoImage(file=sys.argv[1])
tk.Label(root, image=img, borderwidth=0, highlightthickness=0).place(x=0, y=0)
def ready():
    if not root.winfo_viewable():
        root.after(20, ready); return
    root.update_idletasks(); root.update()
    print("ready", flush=True)
root.after(50, ready)
root.after(600_000, root.destroy)  # never outlive a forgotten benchmark
root.mainloop()
"""


def corpus_images() -> list[Path]:
    """The corpus screenshots, if the corpus is around."""
    env = os.environ.get("DESKPILOT_CORPUS")
    root = Path(env) if env else Path(__file__).resolve().parent / "corpus"
    return sorted(root.glob("*.png")) if root.is_dir() else []


def _synthetic(path: Path, width: int, height: int) -> Path:
    """A UI-like picture: flat panels, text-like strokes, a photo-like gradient."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    img = np.full((height, width, 3), 240, np.uint8)
    img[:40] = (45, 45, 48)
    img[40:, :260] = (250, 250, 252)
    for row in range(60, height - 20, 22):
        for col in range(280, width - 300, 9):
            if rng.random() < 0.7:
                img[row : row + 12, col : col + 6] = rng.integers(0, 90, 3)
    ys, xs = np.mgrid[0:300, 0:400]
    img[100:400, width - 420 : width - 20] = np.stack(
        [(xs * 255 // 400), (ys * 255 // 300), ((xs + ys) * 255 // 700)], axis=-1
    ).astype(np.uint8)
    Image.fromarray(img).save(path)
    return path


@contextmanager
def screen_with_picture(
    picture: Path | None = None, width: int = 1920, height: int = 1080
) -> Iterator[tuple[str, Path]]:
    """Start Xvfb, show ``picture`` (default: the first corpus screenshot, else a synthetic
    one) full screen and set DISPLAY; yields (display, picture)."""
    # a generous deadline: a loaded machine can be slow to start it, a hung one still fails
    with start_xvfb((width, height), timeout=60.0) as display, tempfile.TemporaryDirectory(
        prefix="deskpilot-bench-"
    ) as tmp:
        if picture is None:
            found = corpus_images()
            picture = found[0] if found else _synthetic(Path(tmp) / "synthetic.png", width, height)
        viewer = subprocess.Popen(
            [sys.executable, "-c", _SHOW, str(picture)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert viewer.stdout is not None
            if viewer.stdout.readline().strip() != "ready":
                raise RuntimeError("the picture viewer did not start")
            yield display, picture
        finally:
            viewer.kill()
            viewer.wait(timeout=5)
