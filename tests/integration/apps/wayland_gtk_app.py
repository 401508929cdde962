"""A native Wayland GTK 3 app for the sway tier (run by the system python3 with python3-gi,
``GDK_BACKEND=wayland``).

    /usr/bin/python3 wayland_gtk_app.py pattern|text

Full screen. ``pattern``: a picture of 16x16 blocks whose colour is a function of the
block (:func:`block_color`, the test computes the same), shown 1:1 as a pixbuf;
every button press and scroll is reported. ``text``: a text view with the focus; every
change of its text is reported. Prints one JSON line ``{"type": "ready", "width": W,
"height": H, "scale": S}`` (logical size, GDK's integer scale) once drawn, then one line
per event: ``{"type": "click", "x": X, "y": Y, "button": N}`` (logical window
coordinates; ``release`` alike), ``{"type": "scroll", "dx": DX, "dy": DY}``, ``{"type": "text", "text": T}``,
and in pattern mode ``{"type": "enter", "x": X, "y": Y}`` at the first pointer motion over the
window after ``ready`` (the compositor routes pointer input to it from then on).
"""

from __future__ import annotations

import json
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
gi.require_version("GdkPixbuf", "2.0")
from gi.repository import Gdk, GdkPixbuf, GLib, Gtk  # noqa: E402

BLOCK = 16


def block_color(bx: int, by: int) -> tuple[int, int, int]:
    """The colour (r, g, b) of the block at block coordinates (bx, by)."""
    return ((bx * 37 + 11) % 256, (by * 59 + 23) % 256, ((bx + by) * 13 + 101) % 256)


def emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "pattern"
    settings = Gtk.Settings.get_default()
    settings.set_property("gtk-cursor-blink", False)
    settings.set_property("gtk-enable-animations", False)
    window = Gtk.Window(title=f"wayland gtk app {mode}")
    window.set_decorated(False)
    ready = {"sent": False, "announced": False}

    def after_paint(_clock: Gdk.FrameClock) -> None:
        # The first frame painted full screen (the first ones may come before sway's
        # fullscreen configure); the compositor shows it on its next cycle.
        alloc = window.get_allocation()
        area = Gdk.Display.get_default().get_monitor_at_window(window.get_window()).get_geometry()
        if not ready["sent"] and (alloc.width, alloc.height) == (area.width, area.height):
            ready["sent"] = True
            def announce() -> bool:
                emit(type="ready", width=alloc.width, height=alloc.height, scale=window.get_scale_factor())
                ready["announced"] = True
                return False

            GLib.timeout_add(150, announce)

    def mapped(_widget: Gtk.Widget, _event: Gdk.Event) -> bool:
        clock = window.get_frame_clock()
        clock.connect("after-paint", after_paint)
        clock.request_phase(Gdk.FrameClockPhase.PAINT)
        return False

    window.connect("map-event", mapped)

    if mode == "pattern":
        # The picture is a pixbuf of the monitor's logical size shown 1:1 (no cairo needed).
        geometry = Gdk.Display.get_default().get_monitor(0).get_geometry()
        width, height = geometry.width, geometry.height
        rows = []
        for by in range((height + BLOCK - 1) // BLOCK):
            row = b"".join(bytes(block_color(bx, by)) * BLOCK for bx in range((width + BLOCK - 1) // BLOCK))
            rows.append(row[: width * 3] * min(BLOCK, height - by * BLOCK))
        pixbuf = GdkPixbuf.Pixbuf.new_from_bytes(GLib.Bytes.new(b"".join(rows)), GdkPixbuf.Colorspace.RGB,
                                                 False, 8, width, height, width * 3)
        image = Gtk.Image.new_from_pixbuf(pixbuf)
        box = Gtk.EventBox()
        box.add(image)
        box.add_events(Gdk.EventMask.BUTTON_PRESS_MASK | Gdk.EventMask.BUTTON_RELEASE_MASK | Gdk.EventMask.SCROLL_MASK
                       | Gdk.EventMask.SMOOTH_SCROLL_MASK)

        def press(_widget: Gtk.Widget, event: Gdk.EventButton) -> bool:
            emit(type="click", x=event.x, y=event.y, button=event.button)
            return True

        def scroll(_widget: Gtk.Widget, event: Gdk.EventScroll) -> bool:
            if event.direction == Gdk.ScrollDirection.SMOOTH:
                _ok, dx, dy = event.get_scroll_deltas()
                emit(type="scroll", dx=dx, dy=dy)
            else:
                steps = {Gdk.ScrollDirection.UP: (0, -1), Gdk.ScrollDirection.DOWN: (0, 1),
                         Gdk.ScrollDirection.LEFT: (-1, 0), Gdk.ScrollDirection.RIGHT: (1, 0)}
                dx, dy = steps.get(event.direction, (0, 0))
                emit(type="scroll", dx=dx, dy=dy)
            return True

        def release(_widget: Gtk.Widget, event: Gdk.EventButton) -> bool:
            emit(type="release", x=event.x, y=event.y, button=event.button)
            return True

        box.connect("button-press-event", press)
        box.connect("button-release-event", release)
        box.connect("scroll-event", scroll)
        box.add_events(Gdk.EventMask.POINTER_MOTION_MASK)
        entered = {"seen": False}

        def motion(_widget: Gtk.Widget, event: Gdk.EventMotion) -> bool:
            # The first motion after "ready" only: the pointer is routed to the window in its
            # final place from now on (one before could hit it mid-way to full screen).
            if ready["announced"] and not entered["seen"]:
                entered["seen"] = True
                emit(type="enter", x=event.x, y=event.y)
            return False

        box.connect("motion-notify-event", motion)
        window.add(box)
    else:
        view = Gtk.TextView()
        css = Gtk.CssProvider()
        css.load_from_data(b"textview { font: 24px 'DejaVu Sans'; }")
        Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css,
                                                 Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
        buffer = view.get_buffer()

        def changed(buf: Gtk.TextBuffer) -> None:
            start, end = buf.get_bounds()
            emit(type="text", text=buf.get_text(start, end, True))

        buffer.connect("changed", changed)
        window.add(view)
        view.grab_focus()

    window.connect("destroy", Gtk.main_quit)
    window.fullscreen()
    window.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
