"""A headless sway (wlroots) with Xwayland, for the tests of the wlroots backends: the one
place that starts one. POSIX only.

sway refuses to run as root, so under root it runs as ``nobody`` (``setpriv --reuid=65534
--regid=65534 --clear-groups``) in a private ``XDG_RUNTIME_DIR`` owned by that user; the
test process (root) reaches its Wayland and IPC sockets all the same (root passes the
socket's permission check). Its backend is ``headless`` with the ``pixman`` renderer (no
GPU, no input devices: only the virtual ones deskpilot creates). Xwayland is on; X clients
of other users need ``xhost +si:localuser:NAME`` run inside the session, which
:meth:`SwaySession.xwayland` does once and which also gives Xwayland's ``DISPLAY`` (sway
starts Xwayland on demand and says where only to its own children).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deskpilot._errors import PlatformError
from deskpilot.testing._weston import stop_process_group

__all__ = ["SwaySession", "sway_session"]

#: The unprivileged user sway runs as when the tests run as root.
NOBODY = 65534


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class SwaySession:
    """A running sway: its Wayland socket, runtime directory, IPC socket and log."""

    wayland_display: str
    runtime_dir: str
    swaysock: str
    log: Path
    _x_display: str = field(default="", repr=False)

    def env(self) -> dict[str, str]:
        """The variables a Wayland client of this session gets (as a desktop session sets them)."""
        env = {
            "XDG_RUNTIME_DIR": self.runtime_dir,
            "WAYLAND_DISPLAY": self.wayland_display,
            "XDG_SESSION_TYPE": "wayland",
            "SWAYSOCK": self.swaysock,
        }
        if self._x_display:
            env["DISPLAY"] = self._x_display
        return env

    def swaymsg(self, *args: str, timeout: float = 10.0) -> str:
        """Run ``swaymsg ARGS`` against this session; its output (raises on failure)."""
        proc = subprocess.run(["swaymsg", "-s", self.swaysock, *args], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            raise PlatformError(f"swaymsg {' '.join(args)} failed: {proc.stdout.strip()} {proc.stderr.strip()}",
                                program="swaymsg")
        return proc.stdout

    def xwayland(self, timeout: float = 20.0) -> str:
        """Xwayland's DISPLAY, with X clients of the current user allowed (started on first use)."""
        if self._x_display:
            return self._x_display
        out = Path(self.runtime_dir) / "xdisplay"
        user = pwd.getpwuid(os.geteuid()).pw_name
        # A child of sway has DISPLAY; xhost must run inside the session (as sway's user).
        self.swaymsg("exec", f"sh -c 'xhost +si:localuser:{user} >/dev/null 2>&1; echo \"$DISPLAY\" > {out}.tmp; "
                             f"mv {out}.tmp {out}'")
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                text = out.read_text().strip()
                if text:
                    self._x_display = text
                    return text
            if time.monotonic() > deadline:
                raise PlatformError(f"sway's Xwayland did not answer within {timeout:g} s: {_tail(self.log)}",
                                    program="sway")
            time.sleep(0.05)

    def set_scale(self, scale: float, output: str = "HEADLESS-1") -> None:
        """Set an output's scale (1.25, 2.0...)."""
        self.swaymsg("output", output, "scale", f"{scale:g}")


def _config(size: tuple[int, int], outputs: int) -> str:
    lines = [
        # No bar, no borders, no gaps: a fullscreen window covers the output exactly.
        "default_border none",
        "default_floating_border none",
        "focus_follows_mouse no",
        "xwayland enable",
    ]
    for n in range(outputs):
        lines.append(f"output HEADLESS-{n + 1} resolution {size[0]}x{size[1]} position {n * size[0]} 0")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def sway_session(size: tuple[int, int] = (1920, 1080), *, outputs: int = 1,
                 timeout: float = 30.0) -> Iterator[SwaySession]:
    """Start a headless sway with ``outputs`` outputs of ``size`` side by side (HEADLESS-1 at
    0,0, HEADLESS-2 at width,0...); yield the session once its Wayland socket exists; stop
    it (and its clients: Xwayland, exec'd commands) after.

    Raises :class:`~deskpilot.PlatformError` when sway is not installed or does not come up
    within ``timeout`` seconds (the message quotes its log).
    """
    if shutil.which("sway") is None:
        raise PlatformError("sway is not installed: install it (apt-get install sway)", program="sway")
    runtime = tempfile.mkdtemp(prefix="deskpilot-sway-")  # 0700, as XDG_RUNTIME_DIR must be
    root = os.geteuid() == 0
    prefix: list[str] = []
    if root:
        if shutil.which("setpriv") is None:
            raise PlatformError("sway refuses root and setpriv (util-linux) is missing", program="setpriv")
        os.chown(runtime, NOBODY, NOBODY)
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    config = Path(runtime) / "config"
    config.write_text(_config(size, outputs))
    log = Path(runtime) / "sway.log"
    socket = f"deskpilot-sway-{os.getpid()}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": runtime,
        "XDG_RUNTIME_DIR": runtime,
        "WLR_BACKENDS": "headless",
        "WLR_LIBINPUT_NO_DEVICES": "1",
        "WLR_HEADLESS_OUTPUTS": str(outputs),
        "WLR_RENDERER": "pixman",
        # sway takes its socket name from here when set (wlroots' wl_display_add_socket).
        "WAYLAND_DISPLAY": socket,
    }
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            [*prefix, "sway", "-c", str(config)],
            env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            # Its own process group: Xwayland and exec'd commands stop with it.
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            ipc = sorted(Path(runtime).glob("sway-ipc.*.sock"))
            wayland = [p for p in Path(runtime).iterdir() if p.is_socket() and not p.name.startswith("sway-ipc")]
            if ipc and wayland:
                break
            if proc.poll() is not None:
                raise PlatformError(f"sway exited with status {proc.returncode}: {_tail(log)}", program="sway")
            if time.monotonic() > deadline:
                raise PlatformError(f"sway did not start within {timeout:g} s: {_tail(log)}", program="sway")
            time.sleep(0.02)
        session = SwaySession(wayland[0].name, runtime, str(ipc[0]), log)
        # The IPC socket exists before the outputs are configured: one answered request
        # means the config (resolution, positions) has been applied.
        while True:
            try:
                session.swaymsg("-t", "get_version")
                break
            except (PlatformError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        yield session
    finally:
        stop_process_group(proc)
        shutil.rmtree(runtime, ignore_errors=True)
