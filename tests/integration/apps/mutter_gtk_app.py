"""A native GTK 3 window for the Mutter tier (run by the system python3 with python3-gi and
``GDK_BACKEND=wayland``): full screen on one monitor, it shows a known picture and reports
what reaches it.

    /usr/bin/python3 mutter_gtk_app.py [--monitor N] [--no-wm]

(``--no-wm``: an X server without a window manager, where nothing makes a window full
screen: the window, as large as the monitor, is ready once mapped at 0,0.)

The picture: 32x32-pixel blocks of solid colour, block (i, j) (column, row) coloured
``block_color(i, j)``, shown as an image at the monitor's logical size, so at scale 1 a
capture of the monitor must equal it pixel for pixel. A text entry sits at ``ENTRY`` (logical pixels) with
the keyboard focus.

Prints one JSON line ``{"type": "ready", "width", "height", "scale"}`` (logical size) once
drawn, then one line per event: ``click`` (button, logical x/y in the window, which is the
monitor), ``release`` (the same for a button release), ``motion`` (logical x/y), ``key`` and
``key_release`` (keyval name), ``scroll`` (direction), ``text`` (the entry's whole text
after each change). Commands on stdin, one per line: ``focus`` (the entry, emptied, gets the
focus), ``copy "json text"`` (the next F5 key copies that text, as a user would; answers ``copied``),
``clipboard`` (answers ``clipboard`` with the clipboard's text, or null).
"""

from __future__ import annotations

import json
import sys
import threading

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
gi.require_version("GdkPixbuf", "2.0")
from gi.repository import Gdk, GdkPixbuf, GLib, Gtk  # noqa: E402

BLOCK = 32
#: The entry's logical rectangle (x, y, width, height), clear of nothing: it covers blocks.
ENTRY = (40, 40, 600, 40)


def block_color(i: int, j: int) -> tuple[int, int, int]:
    """The colour (r, g, b) of block column ``i``, row ``j`` (the tests compute the same)."""
    return ((i * 37 + j * 11) % 256, (j * 53 + 7) % 256, (i * j * 5 + 101) % 256)


def picture(width: int, height: int) -> GdkPixbuf.Pixbuf:
    """The blocks as an RGB pixbuf of ``width`` x ``height`` (shown 1:1 at scale 1)."""
    rows = []
    for j in range((height + BLOCK - 1) // BLOCK):
        row = b"".join(bytes(block_color(i, j)) * BLOCK for i in range((width + BLOCK - 1) // BLOCK))
        rows.append(row[: width * 3] * min(BLOCK, height - j * BLOCK))
    data = GLib.Bytes.new(b"".join(rows))
    return GdkPixbuf.Pixbuf.new_from_bytes(data, GdkPixbuf.Colorspace.RGB, False, 8, width, height, width * 3)


def emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    monitor = int(sys.argv[sys.argv.index("--monitor") + 1]) if "--monitor" in sys.argv else 0
    settings = Gtk.Settings.get_default()
    settings.set_property("gtk-cursor-blink", False)
    settings.set_property("gtk-enable-animations", False)
    window = Gtk.Window(title="mutter gtk app")
    window.set_decorated(False)
    overlay = Gtk.Overlay()
    window.add(overlay)
    geometry = Gdk.Display.get_default().get_monitor(monitor).get_geometry()
    image = Gtk.Image.new_from_pixbuf(picture(geometry.width, geometry.height))
    area = Gtk.EventBox()
    area.add(image)
    area.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK | Gdk.EventMask.SCROLL_MASK
                    | Gdk.EventMask.SMOOTH_SCROLL_MASK | Gdk.EventMask.POINTER_MOTION_MASK)
    overlay.add(area)
    entry = Gtk.Entry()
    entry.set_halign(Gtk.Align.START)
    entry.set_valign(Gtk.Align.START)
    entry.set_margin_start(ENTRY[0])
    entry.set_margin_top(ENTRY[1])
    entry.set_size_request(ENTRY[2], ENTRY[3])
    overlay.add_overlay(entry)

    def pressed(_widget: Gtk.Widget, event: Gdk.EventButton) -> bool:
        if event.type == Gdk.EventType.BUTTON_PRESS:
            emit(type="click", button=event.button, x=event.x, y=event.y)
        return False

    def scrolled(_widget: Gtk.Widget, event: Gdk.EventScroll) -> bool:
        _ok, dx, dy = event.get_scroll_deltas()
        direction = event.direction.value_nick
        if direction == "smooth":
            direction = "down" if dy > 0 else "up" if dy < 0 else "right" if dx > 0 else "left"
        emit(type="scroll", direction=direction)
        return True

    pending: dict[str, str] = {}

    def key(_widget: Gtk.Widget, event: Gdk.EventKey) -> bool:
        name = Gdk.keyval_name(event.keyval)
        emit(type="key", name=name)
        if name == "F5" and "copy" in pending:
            # In a key handler: Wayland takes a selection only with a recent input serial.
            clipboard.set_text(pending.pop("copy"), -1)
            emit(type="copied")
        return False

    area.connect("button-press-event", pressed)
    area.connect("button-release-event",
                 lambda _w, e: emit(type="release", button=e.button, x=e.x, y=e.y) and False)
    area.connect("motion-notify-event", lambda _w, e: emit(type="motion", x=e.x, y=e.y) and False)
    area.connect("scroll-event", scrolled)
    window.connect("key-press-event", key)
    window.connect("key-release-event",
                   lambda _w, e: emit(type="key_release", name=Gdk.keyval_name(e.keyval)) and False)
    clipboard = Gtk.Clipboard.get(Gdk.SELECTION_CLIPBOARD)
    entry.connect("changed", lambda e: emit(type="text", text=e.get_text()))

    def command(line: str) -> bool:
        verb, _, arg = line.partition(" ")
        if verb == "focus":  # the entry, emptied, gets the keyboard focus
            entry.grab_focus()
            entry.set_text("")
        elif verb == "copy":  # the next F5 key copies this text (JSON string), as a user would
            pending["copy"] = json.loads(arg)
        elif verb == "clipboard":  # what a paste would get now
            clipboard.request_text(lambda _c, text: emit(type="clipboard", text=text))
        return False

    def stdin() -> None:
        for line in sys.stdin:
            GLib.idle_add(command, line.strip())

    threading.Thread(target=stdin, daemon=True).start()

    def ready() -> bool:
        gdk_window = window.get_window()
        fullscreen = gdk_window is not None and bool(gdk_window.get_state() & Gdk.WindowState.FULLSCREEN)
        size = (area.get_allocated_width(), area.get_allocated_height())
        here = Gdk.Display.get_default().get_monitor(monitor).get_geometry()
        # Ready once it covers its monitor: a window is placed first, made full screen after.
        if not window.get_mapped() or size != (here.width, here.height):
            return True
        if not fullscreen and "--no-wm" not in sys.argv:
            return True
        entry.grab_focus()
        emit(type="ready", width=area.get_allocated_width(), height=area.get_allocated_height(),
             scale=area.get_scale_factor())
        return False

    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    window.fullscreen_on_monitor(window.get_screen(), monitor)
    GLib.timeout_add(100, ready)
    GLib.timeout_add(600_000, Gtk.main_quit)  # never outlive a forgotten test
    Gtk.main()


if __name__ == "__main__":
    main()
