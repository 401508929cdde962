"""Can a capture of the desktop see what is on the screen? The one check, before a model
is shown anything.

On a Wayland desktop (GNOME, KDE Plasma, sway...) the ``DISPLAY`` that X11 programs get is
Xwayland: an X server for the X11 windows only. Capturing its root window returns those
windows and black everywhere else (native Wayland windows, panels, the wallpaper), and
XTest reaches the X11 windows only. A run there would show the model black screenshots and
click blind, so :func:`check_screen_visible` refuses with a :class:`ScreenNotVisibleError`.

Which X server it is comes from the RandR output names, the one signal measured to be
reliable: Xwayland names its outputs ``XWAYLAND0``, ``XWAYLAND1``...; Xvfb has one output
called ``screen``; Xorg names connectors (``HDMI-1``, ``eDP-1``, ``DUMMY0``). The vendor
string is the same everywhere, and the XWAYLAND extension exists only from Xwayland 23.1.
``WAYLAND_DISPLAY`` and ``XDG_SESSION_TYPE`` are hints, never the verdict: ssh, cron,
sudo and service units lose them inside a Wayland session, and nested or remote X11
sessions can inherit them from a Wayland one while their own display is fine. A rootful
Xwayland (a whole X desktop in one Wayland window, which capture does see) names its
output ``XWAYLAND0`` as well (measured, Xwayland 22.1): it is refused too, and
``allow_xwayland`` is the way on there.

The capture library itself (:class:`~deskpilot.capture.Capturer`) does not refuse: it
returns the X display's pixels, which is what a program that captures its own X11
windows under Xwayland wants. The agent (``run_agent``) and the ``run``, ``panel``,
``shot`` and ``doctor`` commands call this check; ``allow_xwayland`` (``--allow-xwayland``,
``DESKPILOT_ALLOW_XWAYLAND=1``) lets a user who drives X11 windows only go on.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from deskpilot._errors import CaptureError, InputError, PlatformError, ScreenNotVisibleError

__all__ = [
    "ALLOW_XWAYLAND_ENV",
    "ScreenVisibility",
    "auto_backend",
    "check_screen_visible",
    "classify_x_outputs",
    "wayland_hints",
]

#: The environment variable that allows a blind (Xwayland) desktop, like ``--allow-xwayland``.
ALLOW_XWAYLAND_ENV = "DESKPILOT_ALLOW_XWAYLAND"

_XWAYLAND_OUTPUT = re.compile(r"XWAYLAND\d+")

#: What to do, in every refusal: the Wayland backends that exist, and the ways around.
_WHAT_TO_DO = (
    "deskpilot sees a Wayland desktop through its Wayland backends (GNOME/Mutter, picked by auto: "
    "pip install \"deskpilot[wayland]\", and org.gnome.Mutter.ScreenCast must be on the session bus; "
    "wlroots: sway, Hyprland, with --capture wlroots --input wlroots; other desktops such as KDE "
    "Plasma: the xdg-desktop-portal ScreenCast, capture only), and none answered here; or log "
    'into an X11 session instead (on GNOME: "GNOME on Xorg" from the gear on the login screen; on KDE: '
    '"Plasma (X11)"). To drive X11 windows only, knowing the rest of the screen is black, pass '
    f"--allow-xwayland (or set {ALLOW_XWAYLAND_ENV}=1)."
)

#: The capture backends that see a Wayland desktop (not through Xwayland).
_WAYLAND_CAPTURE = ("mutter", "portal", "wlroots")

#: What must answer on the session bus for a Wayland capture backend, and where it does.
_ANSWERS = {"mutter": "Mutter's ScreenCast", "portal": "the xdg-desktop-portal ScreenCast (version 4 or later)"}
_DESKTOPS = {"mutter": "GNOME Wayland", "portal": "Wayland desktop with xdg-desktop-portal and its backend"}


#: What each Wayland capture backend sees the screen through (``describe``).
_WAYLAND_SOURCES = {
    "mutter": "Mutter's ScreenCast",
    "portal": "the xdg-desktop-portal ScreenCast",
    "wlroots": "wlr-screencopy",
}


@dataclass(frozen=True)
class ScreenVisibility:
    """What :func:`check_screen_visible` found.

    ``server``: ``"xwayland"``, ``"xvfb"`` (one output named ``screen``: Xvfb and servers
    like it), ``"xorg"`` (any other output names), ``"x11"`` (an X server without RandR:
    which one cannot be told), ``"windows"`` or ``"other"`` (an OS without X11, where mss
    captures). ``visible``: a capture of the desktop shows what is on the screen.
    ``allowed``: not visible, but the caller allowed it (X11 windows only).
    """

    display: str
    server: str
    outputs: tuple[str, ...]
    visible: bool
    allowed: bool
    hints: tuple[str, ...]
    #: The capture backend that sees this screen ("mutter" on GNOME Wayland; "" where the
    #: X11 or OS default does).
    backend: str = ""

    def describe(self) -> str:
        """One line for ``doctor`` and logs."""
        if self.server in ("windows", "other", "wlroots"):
            return f"{self.display}: captured directly"
        if self.server == "wayland":
            return (f"a Wayland session ({self.display}); capture sees the whole screen through the "
                    f"{self.backend} backend ({_WAYLAND_SOURCES.get(self.backend, 'the compositor')})")
        outputs = ", ".join(self.outputs) if self.outputs else "none"
        names = {
            "xwayland": "Xwayland (a Wayland session)",
            "xvfb": "a virtual X server (Xvfb)",
            "xorg": "an X server with real outputs (Xorg)",
            "x11": "an X server without RandR",
        }
        line = f"DISPLAY={self.display} is {names.get(self.server, self.server)}; RandR outputs: {outputs}"
        if self.visible:
            line += "; capture sees the whole screen"
            if self.hints:
                line += f" ({' and '.join(self.hints)} set, but the X display is not Xwayland: they are only hints)"
        elif self.allowed:
            line += "; capture sees X11 windows only, black elsewhere (allowed by --allow-xwayland / " \
                f"{ALLOW_XWAYLAND_ENV})"
        return line


def classify_x_outputs(outputs: Sequence[str] | None) -> str:
    """Which X server has these RandR output names (None: no RandR): ``"xwayland"``,
    ``"xvfb"``, ``"xorg"`` or ``"x11"`` (see :class:`ScreenVisibility`)."""
    if not outputs:  # no RandR, or RandR without outputs: which server cannot be told
        return "x11"
    if any(_XWAYLAND_OUTPUT.fullmatch(name) for name in outputs):
        return "xwayland"
    if list(outputs) == ["screen"]:
        return "xvfb"
    return "xorg"


def wayland_hints(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The environment's hints of a Wayland session (``WAYLAND_DISPLAY=...``,
    ``XDG_SESSION_TYPE=wayland``): shown in messages, never the verdict."""
    env = os.environ if environ is None else environ
    hints: list[str] = []
    if env.get("WAYLAND_DISPLAY"):
        hints.append(f"WAYLAND_DISPLAY={env['WAYLAND_DISPLAY']}")
    if env.get("XDG_SESSION_TYPE", "").lower() == "wayland":
        hints.append("XDG_SESSION_TYPE=wayland")
    return tuple(hints)


def _allowed_by_env() -> bool:
    return os.environ.get(ALLOW_XWAYLAND_ENV, "").strip() not in ("", "0")


def _wayland_visibility(display: str, backend: str, hints: tuple[str, ...]) -> ScreenVisibility | None:
    """The result when ``backend`` (``auto`` or a Wayland backend) sees this Wayland session."""
    if backend not in ("auto", *_WAYLAND_CAPTURE):
        return None
    from deskpilot._wayland import portal_screencast_version, wayland_backend

    if backend == "portal":
        # Chosen by name: the portal runs on GNOME too, where auto would pick Mutter.
        found: str | None = "portal" if (portal_screencast_version() or 0) >= 4 else None
    else:
        found = wayland_backend("capture")
    if found is None or backend not in ("auto", found):
        return None
    return ScreenVisibility(display, "wayland", (), True, False, hints, found)


def auto_backend(purpose: Literal["capture", "input"]) -> str:
    """What ``auto`` means on this Linux/BSD desktop: the X11 backend (``mss`` / ``xtest``)
    when ``DISPLAY`` is an X server that sees the screen, else the Wayland backend the session
    offers (``mutter``, ``wlroots``; for capture also ``portal``), else the X11 one (whose own
    errors then say what is wrong). Raises :class:`InputError` for input where only the
    portal's capture answers (KDE Plasma...): deskpilot has no input there."""
    x11 = "mss" if purpose == "capture" else "xtest"
    name = os.environ.get("DISPLAY", "")
    if name:
        from deskpilot._x11 import XDisplay

        try:
            with XDisplay(CaptureError, name) as x:
                if classify_x_outputs(x.randr_output_names()) != "xwayland":
                    return x11
        except PlatformError:
            pass  # no X server there, or no RandR: ask the Wayland side
    from deskpilot._wayland import wayland_backend

    found = wayland_backend(purpose)
    if found is None and purpose == "input" and wayland_backend("capture") == "portal":
        # The screen is seen through the portal, but no Wayland input answers: XTest would
        # reach Xwayland's windows only, clicking blind on the rest; say so instead.
        from deskpilot._wayland import PORTAL_INPUT_MISSING

        raise InputError(f"{PORTAL_INPUT_MISSING}; to drive X11 windows only, pass --input xtest",
                         backend="auto", capture="portal")
    return found or x11


def check_screen_visible(
    display: str | None = None, *, allow_xwayland: bool = False, capture: str = "auto"
) -> ScreenVisibility:
    """Make sure a capture of the desktop would see the screen; say what was found.

    ``display``: the X display to check (default ``$DISPLAY``). Raises
    :class:`ScreenNotVisibleError` (a :class:`CaptureError`) when the X display is Xwayland,
    or when there is no X display but a Wayland one, unless ``allow_xwayland`` or
    ``DESKPILOT_ALLOW_XWAYLAND=1`` allows it (then the result has ``allowed`` set).
    ``capture``: the capture backend the caller will use; ``"wlroots"`` captures the Wayland
    outputs directly, so nothing is checked; with ``auto`` or ``mutter``, a Wayland session
    whose Mutter ScreenCast answers on the session bus is visible (``server == "wayland"``).
    Raises :class:`CaptureError` when the X display cannot be opened. One X connection,
    four round trips: about a millisecond on a local server.
    """
    if sys.platform == "win32":
        return ScreenVisibility("Windows desktop", "windows", (), True, False, ())
    hints = wayland_hints()
    if capture == "wlroots":
        # Chosen explicitly: it captures the Wayland outputs themselves (wlr-screencopy),
        # not Xwayland; whether the compositor offers it is the backend's own error.
        name = os.environ.get("WAYLAND_DISPLAY", "") or "wayland-0"
        return ScreenVisibility(f"WAYLAND_DISPLAY={name} (wlroots screencopy)", "wlroots", (), True, False, hints)
    allowed = allow_xwayland or _allowed_by_env()
    name = display if display is not None else os.environ.get("DISPLAY", "")
    if capture in _WAYLAND_CAPTURE:
        # Chosen by name: it sees the screen or nothing does; no X server is asked.
        seen = _wayland_visibility(name or "no DISPLAY", capture, hints)
        if seen is None:
            raise ScreenNotVisibleError(
                f"the {capture} capture backend was chosen, but {_ANSWERS[capture]} does not answer on the "
                f"session bus (is this a {_DESKTOPS[capture]} session, and is jeepney installed: "
                f'pip install "deskpilot[wayland]"?)', server="wayland", backend=capture)
        return seen
    if not name:
        seen = _wayland_visibility("no DISPLAY", capture, hints)
        if seen is not None:
            return seen
        if hints and not allowed:
            raise ScreenNotVisibleError(
                f"this is a Wayland session ({' and '.join(hints)}) without an X display (DISPLAY is not "
                f"set), and deskpilot captures the screen through X11: {_WHAT_TO_DO}",
                server="wayland",
                hints=list(hints),
            )
        if sys.platform != "linux" and not sys.platform.startswith(("freebsd", "openbsd", "netbsd")):
            return ScreenVisibility(sys.platform, "other", (), True, False, hints)
        raise CaptureError("no X display: is DISPLAY set?", display=None, call="XOpenDisplay")

    from deskpilot._x11 import XDisplay

    with XDisplay(CaptureError, name) as x:
        try:
            outputs = x.randr_output_names()
        except PlatformError as exc:
            # libXrandr missing: which server this is cannot be told; say so, do not guess.
            if allowed:
                return ScreenVisibility(name, "x11", (), False, True, hints)
            raise CaptureError(
                f"cannot tell whether DISPLAY={name} can see the screen: {exc} (install libxrandr2)",
                display=name,
            ) from exc
    server = classify_x_outputs(outputs)
    found = tuple(outputs or ())
    if server != "xwayland":
        return ScreenVisibility(name, server, found, True, False, hints)
    seen = _wayland_visibility(f"Xwayland DISPLAY={name}", capture, hints)
    if seen is not None:
        return seen
    if allowed:
        return ScreenVisibility(name, server, found, False, True, hints)
    raise ScreenNotVisibleError(
        f"DISPLAY={name} is Xwayland (RandR outputs {', '.join(found)}): this is a Wayland session, and "
        "through Xwayland deskpilot sees only X11 windows, black everywhere else, so a model would get "
        f"black screenshots and click blind. {_WHAT_TO_DO}",
        display=name,
        server=server,
        outputs=list(found),
        hints=list(hints),
    )
