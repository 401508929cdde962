"""A GTK 3 app for the settle tests (run by the system python3 with python3-gi): a button
that changes a label, an entry to type into, a spot whose click is answered 120 ms
later, and a blank spot.

    /usr/bin/python3 settle_gtk_app.py

Full screen, undecorated, at 0,0. Prints one JSON line ``{"type": "ready", "widgets":
{name: [x, y, w, h]}}`` (root coordinates) once drawn, then one line per event. The
caret does not blink (``gtk-cursor-blink``), so two frames of a finished app are equal.
GTK draws on its frame clock (60 Hz) and Adwaita animates a button's hover and press, so
its reactions come in frames, later than the input. The late spot is an event box with
no pressed look: the click itself draws nothing, the app's first drawing comes 120 ms
later.
"""

from __future__ import annotations

import json

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402

LATE_MS = 120
COLORS = ("#dde4ee", "#f3e2c7", "#d6f0d8", "#f0d6e6")


def emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    settings = Gtk.Settings.get_default()
    settings.set_property("gtk-cursor-blink", False)
    settings.set_property("gtk-enable-animations", True)
    css = Gtk.CssProvider()
    css.load_from_data(
        b"window { background: white; } label, entry, button { font: 20px 'DejaVu Sans'; }"
        + b"".join(b" .c%d { background: %s; }" % (i, c.encode()) for i, c in enumerate(COLORS))
    )
    Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)

    window = Gtk.Window(title="settle gtk app")
    window.set_decorated(False)
    area = Gdk.Display.get_default().get_monitor(0).get_geometry()
    window.set_default_size(area.width, area.height)
    window.move(0, 0)
    fixed = Gtk.Fixed()
    window.add(fixed)
    count = {"n": 0, "late": 0}

    label = Gtk.Label(label="clicked 0 times")
    label.set_size_request(320, 40)
    label_box = Gtk.EventBox()
    label_box.add(label)
    label_box.get_style_context().add_class("c0")
    fixed.put(label_box, 100, 80)

    def restyle(widget: Gtk.Widget, n: int) -> None:
        style = widget.get_style_context()
        for i in range(len(COLORS)):
            style.remove_class(f"c{i}")
        style.add_class(f"c{n % len(COLORS)}")

    def pressed(_button: Gtk.Button) -> None:
        count["n"] += 1
        label.set_text(f"clicked {count['n']} times")
        restyle(label_box, count["n"])
        emit(type="click", n=count["n"])

    button = Gtk.Button(label="Press me")
    button.connect("clicked", pressed)
    fixed.put(button, 100, 180)
    entry = Gtk.Entry()
    entry.set_width_chars(30)
    fixed.put(entry, 100, 300)

    late_label = Gtk.Label(label="late 0")
    late_label.set_size_request(360, 160)
    late = Gtk.EventBox()
    late.add(late_label)
    late.get_style_context().add_class("c0")
    fixed.put(late, 100, 420)

    def answer_late() -> bool:
        count["late"] += 1
        late_label.set_text(f"late {count['late']}")
        restyle(late, count["late"])
        emit(type="late", n=count["late"])
        return False

    late.connect("button-release-event", lambda *_: GLib.timeout_add(LATE_MS, answer_late) and False)
    blank = Gtk.EventBox()
    blank.set_size_request(600, 300)
    fixed.put(blank, 900, 600)

    def ready() -> bool:
        gdk_window = window.get_window()
        if gdk_window is None or not window.get_mapped():
            return True
        gdk_window.focus(Gdk.CURRENT_TIME)
        ox, oy = gdk_window.get_origin()[1:]
        widgets = {}
        for name, widget in (("label", label_box), ("button", button), ("entry", entry), ("late", late), ("blank", blank)):
            alloc = widget.get_allocation()
            widgets[name] = [ox + alloc.x, oy + alloc.y, alloc.width, alloc.height]
        emit(type="ready", widgets=widgets)
        return False

    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    GLib.timeout_add(200, ready)
    GLib.timeout_add(600_000, Gtk.main_quit)  # never outlive a forgotten test
    Gtk.main()


if __name__ == "__main__":
    main()
