"""A headless GNOME compositor (mutter) on a private session bus, for the Mutter tier: the one
place that starts one. POSIX only; runs as root (mutter allows it, unlike sway).

Everything lives in a private ``XDG_RUNTIME_DIR`` (0700) with its own ``HOME`` and ``XDG_*``
directories (mutter writes dconf and caches): a ``dbus-daemon --session``, ``pipewire`` and
``wireplumber`` on that bus (the screencast streams are PipeWire nodes), then
``mutter --headless --wayland --virtual-monitor WxH`` (one per monitor: Meta-0 at (0, 0),
Meta-1 to its right). It is ready when ``org.gnome.Mutter.ScreenCast`` and
``org.gnome.Mutter.RemoteDesktop`` are owned on the bus (0.3-0.6 s measured). Its Xwayland
(for Tk apps) starts on demand; its DISPLAY is in mutter's log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from deskpilot._errors import PlatformError
from deskpilot.testing._weston import stop_process_group

__all__ = ["MutterDesktop", "mutter_desktop", "set_monitor_scale"]

_X_DISPLAY = re.compile(r"Using public X11 display (:\d+)")
_READY_NAMES = ("org.gnome.Mutter.ScreenCast", "org.gnome.Mutter.RemoteDesktop")


@dataclass(frozen=True)
class MutterDesktop:
    """A running headless mutter: its sockets, directories, Xwayland DISPLAY and log."""

    wayland_display: str
    runtime_dir: str
    bus_address: str
    home: str
    x_display: str
    log: Path
    monitors: tuple[tuple[int, int], ...]

    def env(self) -> dict[str, str]:
        """The variables a client of this session gets (as a GNOME login sets them)."""
        env = {
            "XDG_RUNTIME_DIR": self.runtime_dir,
            "DBUS_SESSION_BUS_ADDRESS": self.bus_address,
            "WAYLAND_DISPLAY": self.wayland_display,
            "XDG_SESSION_TYPE": "wayland",
            "XDG_CURRENT_DESKTOP": "GNOME",
            "HOME": self.home,
            "XDG_CONFIG_HOME": f"{self.home}/.config",
            "XDG_DATA_HOME": f"{self.home}/.local/share",
            "XDG_CACHE_HOME": f"{self.home}/.cache",
            "XDG_STATE_HOME": f"{self.home}/.local/state",
            "DISPLAY": self.x_display,
        }
        auth = sorted(Path(self.runtime_dir).glob(".mutter-Xwaylandauth.*"))
        if auth:
            env["XAUTHORITY"] = str(auth[0])
        return env


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _missing() -> list[str]:
    return [p for p in ("mutter", "pipewire", "wireplumber", "dbus-daemon") if shutil.which(p) is None]


@contextlib.contextmanager
def mutter_desktop(
    monitors: Sequence[tuple[int, int]] = ((1920, 1080),),
    *,
    fractional_scaling: bool = False,
    timeout: float = 60.0,
) -> Iterator[MutterDesktop]:
    """Start a private bus, PipeWire, WirePlumber and headless mutter with one virtual monitor
    per ``monitors`` entry; yield once Mutter's ScreenCast and RemoteDesktop are on the bus;
    stop everything after. ``fractional_scaling`` turns on mutter's
    ``scale-monitor-framebuffer`` feature (scales like 1.25) in the private dconf first.

    Raises :class:`~deskpilot.PlatformError` when a program is not installed (the message
    says so: "not installed") or mutter does not get ready within ``timeout`` seconds.
    """
    missing = _missing()
    if missing:
        raise PlatformError(f"{', '.join(missing)} not installed: install them (apt-get install mutter "
                            "pipewire wireplumber dbus)", programs=missing)
    from deskpilot._wayland import SessionBus

    runtime = tempfile.mkdtemp(prefix="deskpilot-mutter-")  # 0700, as XDG_RUNTIME_DIR must be
    home = os.path.join(runtime, "home")
    os.makedirs(home, mode=0o700)
    bus_address = f"unix:path={runtime}/bus"
    socket = f"deskpilot-mutter-{os.getpid()}"
    log = Path(runtime) / "mutter.log"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS")}
    env.update({
        "XDG_RUNTIME_DIR": runtime,
        "DBUS_SESSION_BUS_ADDRESS": bus_address,
        "HOME": home,
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_STATE_HOME": f"{home}/.local/state",
        "XDG_SESSION_TYPE": "wayland",
        "XDG_CURRENT_DESKTOP": "GNOME",
        "NO_AT_BRIDGE": "1",  # no accessibility bus activation in the apps
    })
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], out: Path | None = None) -> subprocess.Popen[bytes]:
        sink = open(out, "wb") if out else subprocess.DEVNULL  # noqa: SIM115 - the child owns it
        try:
            proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                                    start_new_session=True)
        finally:
            if out and not isinstance(sink, int):
                sink.close()
        procs.append(proc)
        return proc

    try:
        deadline = time.monotonic() + timeout
        start(["dbus-daemon", "--session", "--nofork", f"--address={bus_address}"])
        while not os.path.exists(f"{runtime}/bus"):
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise PlatformError("the private dbus-daemon did not start", program="dbus-daemon")
            time.sleep(0.02)
        settings = []
        if fractional_scaling:
            settings.append(("org.gnome.mutter", "experimental-features", "['scale-monitor-framebuffer']"))
        for schema, key, value in settings:
            subprocess.run(["gsettings", "set", schema, key, value], env=env, check=True, timeout=30,
                           capture_output=True)
        start(["pipewire"], Path(runtime) / "pipewire.log")
        start(["wireplumber"], Path(runtime) / "wireplumber.log")
        args = ["mutter", "--headless", "--wayland", "--wayland-display", socket]
        for width, height in monitors:
            args += ["--virtual-monitor", f"{width}x{height}"]
        mutter = start(args, log)
        bus = SessionBus(bus_address)
        try:
            while not all(bus.name_has_owner(name) for name in _READY_NAMES):
                if mutter.poll() is not None:
                    raise PlatformError(f"mutter exited with status {mutter.returncode}: {_tail(log)}",
                                        program="mutter")
                if time.monotonic() > deadline:
                    raise PlatformError(f"mutter was not ready within {timeout:g} s: {_tail(log)}",
                                        program="mutter")
                time.sleep(0.05)
        finally:
            bus.close()
        display = ""
        while not display and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                found = _X_DISPLAY.search(log.read_text(errors="replace"))
                display = found.group(1) if found else ""
            if not display:
                time.sleep(0.05)
        yield MutterDesktop(socket, runtime, bus_address, home, display, log, tuple(monitors))
    finally:
        for proc in reversed(procs):  # mutter first, the bus last
            stop_process_group(proc)
        shutil.rmtree(runtime, ignore_errors=True)


def set_monitor_scale(desktop: MutterDesktop, scale: float) -> None:
    """Give every monitor of ``desktop`` the display scale ``scale`` (1.0, 1.25, 2.0...),
    side by side left to right, through ``org.gnome.Mutter.DisplayConfig.ApplyMonitorsConfig``
    (method 1: temporary, no confirmation dialog). Fractional scales need
    ``mutter_desktop(fractional_scaling=True)``."""
    from deskpilot._wayland import SessionBus

    dest, path, iface = "org.gnome.Mutter.DisplayConfig", "/org/gnome/Mutter/DisplayConfig", \
        "org.gnome.Mutter.DisplayConfig"
    bus = SessionBus(desktop.bus_address)
    try:
        serial, monitors, _logical, properties = bus.call(dest, path, iface, "GetCurrentState")
        layout_mode = properties.get("layout-mode", ("u", 1))[1]  # 1 logical, 2 physical
        logical: list[tuple[int, int, float, int, bool, list[tuple[str, str, dict[str, object]]]]] = []
        x = 0
        applied = float(scale)
        for (connector, _vendor, _product, _serial), modes, _props in sorted(monitors, key=lambda m: m[0][0]):
            mode_id, width, supported = next(
                ((m[0], m[1], m[5]) for m in modes if m[6].get("is-current", ("b", False))[1]),
                (modes[0][0], modes[0][1], modes[0][5]))
            # Mutter takes only the exact scales it lists for the mode (1.25 is 1.2484...).
            applied = min(supported, key=lambda s: abs(s - scale)) if supported else float(scale)
            if abs(applied - scale) > 0.02:
                raise PlatformError(f"{connector} does not offer scale {scale} (offers {list(supported)}); "
                                    "fractional scales need mutter_desktop(fractional_scaling=True)",
                                    scale=scale)
            logical.append((x, 0, applied, 0, x == 0, [(connector, mode_id, {})]))
            # Logical layout: the next monitor starts where this one ends in logical pixels.
            x += round(width / applied) if layout_mode == 1 else width
        bus.call(dest, path, iface, "ApplyMonitorsConfig", "uua(iiduba(ssa{sv}))a{sv}",
                 (serial, 1, logical, {}))
    finally:
        bus.close()
