"""A headless Wayland compositor (weston) with Xwayland, for the tests of what deskpilot
does on a Wayland desktop: the one place that starts one. POSIX only.

weston 10's headless backend draws into memory; ``--xwayland`` gives it an X server for
X11 clients, started on the first X connection (its DISPLAY is in weston's log: "xserver
listening on display :N"). A capture of that X server's root window sees the X11 windows
only, as on GNOME or KDE on Wayland: the blind case :func:`deskpilot.capture.check_screen_visible`
refuses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deskpilot._errors import PlatformError

__all__ = ["WestonSession", "weston_xwayland"]

#: Where X servers put their sockets; Xwayland (through weston) binds there too. A login
#: session has it (systemd-tmpfiles); a bare container may not.
X11_SOCKET_DIR = Path("/tmp/.X11-unix")

_LISTENING = re.compile(r"xserver listening on display (:\d+)")


@dataclass(frozen=True)
class WestonSession:
    """A running weston: its Wayland socket, its runtime directory and Xwayland's DISPLAY."""

    wayland_display: str
    runtime_dir: str
    x_display: str
    log: Path

    def env(self) -> dict[str, str]:
        """The variables a client of this session gets (as a desktop session sets them)."""
        return {
            "XDG_RUNTIME_DIR": self.runtime_dir,
            "WAYLAND_DISPLAY": self.wayland_display,
            "XDG_SESSION_TYPE": "wayland",
            "DISPLAY": self.x_display,
        }


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a compositor (or a daemon of its session) started in its own process group:
    SIGTERM and a wait, SIGKILL if it hangs, then SIGKILL to what is left of its group
    (Xwayland, portal helpers...)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _ensure_x11_socket_dir() -> None:
    if X11_SOCKET_DIR.is_dir():
        return
    try:
        X11_SOCKET_DIR.mkdir(mode=0o1777)
        os.chmod(X11_SOCKET_DIR, 0o1777)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass  # created meanwhile by another X server
    except OSError as exc:
        raise PlatformError(
            f"Xwayland needs {X11_SOCKET_DIR} (mode 1777, as a login session has it): {exc}",
            path=str(X11_SOCKET_DIR),
        ) from exc


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def weston_xwayland(size: tuple[int, int] = (1280, 720), *, timeout: float = 30.0) -> Iterator[WestonSession]:
    """Start weston (headless backend, one output of ``size``) with Xwayland; yield the
    session once Xwayland's display is listening; stop weston and its clients after.

    Raises :class:`~deskpilot.PlatformError` when weston or Xwayland is not installed or
    weston does not get that far within ``timeout`` seconds (the message quotes its log).
    """
    for program, package in (("weston", "weston"), ("Xwayland", "xwayland")):
        if shutil.which(program) is None:
            raise PlatformError(f"{program} is not installed: install it (apt-get install {package})",
                                program=program)
    _ensure_x11_socket_dir()
    runtime = tempfile.mkdtemp(prefix="deskpilot-weston-")  # 0700, as XDG_RUNTIME_DIR must be
    log = Path(runtime) / "weston.log"
    socket = f"deskpilot-weston-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["XDG_RUNTIME_DIR"] = runtime
    proc = subprocess.Popen(
        ["weston", "--backend=headless-backend.so", "--xwayland", f"--socket={socket}",
         f"--width={size[0]}", f"--height={size[1]}", "--idle-time=0", f"--log={log}"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own process group: weston's clients (shell, keyboard, Xwayland) stop with it.
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        display = ""
        while not display:
            if proc.poll() is not None:
                raise PlatformError(f"weston exited with status {proc.returncode}: {_tail(log)}",
                                    program="weston")
            if time.monotonic() > deadline:
                raise PlatformError(f"weston's Xwayland did not listen within {timeout:g} s: {_tail(log)}",
                                    program="weston")
            with contextlib.suppress(OSError):
                found = _LISTENING.search(log.read_text(errors="replace"))
                display = found.group(1) if found else ""
            if not display:
                time.sleep(0.05)
        yield WestonSession(socket, runtime, display, log)
    finally:
        # weston first: it stops and reaps its clients (Xwayland included) and removes its
        # X lock file; whatever of its group is left after that is killed.
        stop_process_group(proc)
        shutil.rmtree(runtime, ignore_errors=True)
