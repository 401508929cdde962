"""An app for the eval fault tests: speaks deskpilot eval's line protocol and misbehaves once.

Run::

    python eval_fault_app.py MODE MARKER

On its first run (``MARKER`` does not exist yet; it is created) or on every run when
MODE ends in ``-always``, it does what MODE says; otherwise it behaves. Modes:
``app_dies`` (exits right after ``ready``), ``display_dies`` (SIGKILLs the session's Xvfb,
found in its own process group), ``kill_agent`` (SIGKILLs its parent, the session process
that runs the agent), ``kill_ray_actor`` (SIGKILLs the Ray actor that runs the session: the
nearest ancestor whose command line starts with ``ray::``; then SIGSTOPs its parent,
the session), ``hang`` (never answers
``state``), ``ok``. It draws no window: the
agent sees the display's empty screen. Its state is ``{"ok": true}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path


def emit(record: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def kill_xvfb() -> None:
    group = os.getpgid(0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if comm == "Xvfb" and int(fields[2]) == group:
            os.kill(int(entry.name), signal.SIGKILL)


def kill_ray_actor() -> None:
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
            os.kill(pid, signal.SIGKILL)
            return
    raise RuntimeError("no Ray actor among this app's ancestors")


def main() -> int:
    mode, marker = sys.argv[1], Path(sys.argv[2])
    misbehave = mode.endswith("-always") or not marker.exists()
    marker.touch()
    mode = mode.removesuffix("-always") if misbehave else "ok"
    emit({"type": "ready", "mode": mode, "pid": os.getpid()})
    if mode == "app_dies":
        # At once: a scripted run can end in well under a second, and must find the app gone.
        return 1
    if mode == "display_dies":
        kill_xvfb()
    if mode == "kill_agent":
        os.kill(os.getppid(), signal.SIGKILL)
    if mode == "kill_ray_actor":
        kill_ray_actor()
        # Then freeze the session (SIGSTOP to its process): orphaned, it would never end by
        # itself, and this app and its Xvfb with it; only the restarted actor, which stops
        # what its predecessor left, can end them.
        os.kill(os.getppid(), signal.SIGSTOP)
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            break
        if command == "state":
            if mode == "hang":
                threading.Event().wait()
            emit({"type": "state", "ok": True})
        elif command == "layout":
            emit({"type": "layout", "widgets": {}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
