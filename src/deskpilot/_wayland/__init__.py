"""Wayland platform bindings (importable without a compositor).

The Wayland counterpart of :mod:`deskpilot._x11`: the only code that speaks to a Wayland
session's own interfaces. Two families live here, each in its own modules:

- GNOME (Mutter): the session bus's ``org.gnome.Mutter.ScreenCast`` and
  ``org.gnome.Mutter.RemoteDesktop`` (D-Bus) and the PipeWire stream they open (ctypes on
  ``libpipewire-0.3``);
- wlroots (sway, Hyprland, river, ...): the Wayland wire protocol over the compositor's
  socket (``wlr-screencopy-unstable-v1``, ``wlr-virtual-pointer-unstable-v1``,
  ``virtual-keyboard-unstable-v1``).

The capture and input backends built on them live in :mod:`deskpilot.capture` and
:mod:`deskpilot.input`.
"""

__all__: list[str] = []
