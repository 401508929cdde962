"""The desktop suite's app: one Tk window per task ("scene"), its state and layout on request.

Run::

    python -m deskpilot.eval._tkapp SCENE

The window covers the screen (undecorated, at +0+0). Commands arrive one per line on
stdin and are answered with one JSON line on stdout:

* ``state``: ``{"type": "state", ...}`` what the scene holds now (what a checker reads);
* ``layout``: ``{"type": "layout", "widgets": {name: [x, y, w, h], ...}}``, the root
  rectangles of every named thing on screen now: widgets, listbox rows (``row:TEXT``),
  the entries of a posted menu (``menu:LABEL``), canvas items and dialog buttons (what a
  perfect grounding model would see; the scripted solutions click these);
* ``quit``: exits (so does the end of stdin).

The first line on stdout is ``{"type": "ready", "scene": NAME, "pid": N}``, once the
window is mapped. Nothing else is written to stdout.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import sys
import threading
import tkinter as tk
from collections.abc import Callable
from tkinter import ttk
from typing import Any

__all__ = ["SCENES", "main"]

BACKGROUND = "#dfe6ee"
FONT = ("DejaVu Sans", 14)
BIG = ("DejaVu Sans", 18, "bold")

State = dict[str, Any]


def _join_surrogates(text: str) -> str:
    # Tcl 8.6 hands astral characters to Python as UTF-16 surrogate pairs.
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def _record_click(clicked: list[str], name: str, _event: tk.Event[Any]) -> None:
    clicked.append(name)


def _selection(listbox: tk.Listbox) -> list[int]:
    return [int(i) for i in listbox.tk.splitlist(listbox.tk.call(str(listbox), "curselection"))]


def _select_all(event: tk.Event[Any]) -> str:
    widget = event.widget
    if isinstance(widget, tk.Text):
        widget.tag_add("sel", "1.0", "end-1c")
        widget.mark_set("insert", "end-1c")
    elif isinstance(widget, (tk.Entry, ttk.Entry, tk.Spinbox)):
        widget.tk.call(str(widget), "selection", "range", 0, "end")
        widget.icursor("end")
    return "break"


class App:
    """The window, its named things and the scene's state function."""

    def __init__(self, scene: str) -> None:
        self.root = tk.Tk(className="deskpilot-eval")
        self.root.title(f"deskpilot eval: {scene}")
        self.root.configure(background=BACKGROUND, cursor="left_ptr")
        sw, sh = self.root.winfo_screenwidth(), self.root.winfo_screenheight()
        self.root.overrideredirect(True)
        self.root.geometry(f"{sw}x{sh}+0+0")
        self.scene = scene
        self.named: dict[str, tk.Misc] = {}
        self.menus: list[tk.Menu] = []
        self.listboxes: list[tk.Listbox] = []
        self.canvases: list[tuple[tk.Canvas, tuple[str, ...]]] = []
        self.extra: list[Callable[[dict[str, list[int]]], None]] = []
        self.state_fn: Callable[[], State] = dict
        # Ctrl+A selects all, as in most apps (Tk's X11 binding moves to the line start).
        for cls in ("Entry", "TEntry", "Text", "Spinbox"):
            self.root.bind_class(cls, "<Control-a>", _select_all)
        header = tk.Label(self.root, text=scene.replace("-", " "), font=BIG, bg=BACKGROUND)
        header.place(relx=0.5, y=20, anchor="n")
        self.body = tk.Frame(self.root, background=BACKGROUND)
        self.body.place(relx=0.05, rely=0.1, relwidth=0.9, relheight=0.85)
        SCENES[scene](self)
        self._commands: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_stdin, daemon=True).start()
        self.root.after(20, self._ready)
        self.root.after(10, self._poll)

    # -- helpers the scenes use ---------------------------------------------------------
    def name(self, name: str, widget: tk.Misc) -> tk.Misc:
        self.named[name] = widget
        return widget

    def label(self, text: str, **place: Any) -> tk.Label:
        label = tk.Label(self.body, text=text, font=FONT, bg=BACKGROUND)
        label.place(**place)
        return label

    def button(self, name: str, text: str, command: Callable[[], None], **place: Any) -> tk.Button:
        button = tk.Button(self.body, text=text, font=FONT, command=command)
        button.place(**place)
        self.name(name, button)
        return button

    def entry(self, name: str, text: str = "", **place: Any) -> tk.Entry:
        entry = tk.Entry(self.body, font=FONT, insertofftime=0)
        entry.insert(0, text)
        entry.place(**place)
        self.name(name, entry)
        return entry

    # -- protocol ------------------------------------------------------------------------
    def emit(self, record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def _ready(self) -> None:
        self.root.update_idletasks()
        if not self.root.winfo_viewable():
            self.root.after(20, self._ready)
            return
        self.root.focus_force()
        self.emit({"type": "ready", "scene": self.scene, "pid": os.getpid()})

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            self._commands.put(line.strip())
        self._commands.put("quit")

    def _poll(self) -> None:
        # Tk is driven from its own thread only: the stdin reader hands commands over here.
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            if command == "quit":
                self.root.destroy()
                return
            try:
                if command == "state":
                    self.emit({"type": "state", **self.state_fn()})
                elif command == "layout":
                    self.emit({"type": "layout", "widgets": self.layout()})
                else:
                    self.emit({"type": "error", "message": f"unknown command {command!r}"})
            except Exception as exc:  # a bug in a scene: say so, keep answering
                self.emit({"type": "error", "message": f"{command}: {exc!r}"})
        self.root.after(10, self._poll)

    def layout(self) -> dict[str, list[int]]:
        self.root.update_idletasks()
        out: dict[str, list[int]] = {}
        for name, widget in self.named.items():
            if widget.winfo_exists() and widget.winfo_viewable():
                out[name] = [widget.winfo_rootx(), widget.winfo_rooty(), widget.winfo_width(), widget.winfo_height()]
        for listbox in self.listboxes:
            if not listbox.winfo_viewable():
                continue
            lx, ly = listbox.winfo_rootx(), listbox.winfo_rooty()
            for index in range(listbox.size()):
                box = listbox.bbox(index)
                # Only rows wholly inside the list count as on screen (bbox gives a cut row's full size).
                if box and box[1] >= 0 and box[1] + box[3] <= listbox.winfo_height():
                    x, y, w, h = box
                    out[f"row:{listbox.get(index)}"] = [lx + x, ly + y, max(w, listbox.winfo_width() - 2 * x), h]
        for menu in self.menus:
            if not menu.winfo_ismapped():
                continue
            mx, my = menu.winfo_rootx(), menu.winfo_rooty()
            last = menu.index("end")
            count = 0 if last is None else int(last) + 1
            for index in range(count):
                if menu.type(index) in ("separator", "tearoff"):
                    continue
                top = int(menu.yposition(index))
                bottom = int(menu.yposition(index + 1)) if index + 1 < count else menu.winfo_height()
                out[f"menu:{menu.entrycget(index, 'label')}"] = [mx, my + top, menu.winfo_width(), bottom - top]
        for canvas, tags in self.canvases:
            cx, cy = canvas.winfo_rootx(), canvas.winfo_rooty()
            for tag in tags:
                box = canvas.bbox(tag)
                if box:
                    x1, y1, x2, y2 = box
                    ox, oy = int(canvas.canvasx(0)), int(canvas.canvasy(0))
                    out[tag] = [cx + x1 - ox, cy + y1 - oy, x2 - x1, y2 - y1]
        for add in self.extra:
            add(out)
        return out

    def run(self) -> None:
        self.root.mainloop()


# ---------------------------------------------------------------------------- scenes

SCENES: dict[str, Callable[[App], None]] = {}


def scene(name: str) -> Callable[[Callable[[App], None]], Callable[[App], None]]:
    def register(build: Callable[[App], None]) -> Callable[[App], None]:
        SCENES[name] = build
        return build

    return register


@scene("click-button")
def _click_button(app: App) -> None:
    pressed: list[str] = []
    for i, name in enumerate(("Cancel", "Help", "Submit", "Reset")):
        app.button(name.lower(), name, functools.partial(pressed.append, name), x=40 + 180 * i, y=120, width=150,
                   height=50)
    app.state_fn = lambda: {"pressed": list(pressed)}


@scene("click-color")
def _click_color(app: App) -> None:
    clicked: list[str] = []
    for i, (name, colour) in enumerate((("red", "#e53935"), ("green", "#43a047"), ("blue", "#1e88e5"), ("yellow", "#fdd835"))):
        square = tk.Frame(app.body, background=colour, width=120, height=120)
        square.place(x=60 + 200 * i, y=140)
        square.bind("<Button-1>", functools.partial(_record_click, clicked, name))
        app.name(name, square)
    app.state_fn = lambda: {"clicked": list(clicked)}


@scene("checkboxes")
def _checkboxes(app: App) -> None:
    values: dict[str, tk.BooleanVar] = {}
    app.label("Notify me by:", x=40, y=60)
    for i, name in enumerate(("Email", "SMS", "Post", "Pigeon")):
        var = tk.BooleanVar(app.root, value=name == "Email")
        values[name] = var
        box = tk.Checkbutton(app.body, text=name, variable=var, font=FONT, bg=BACKGROUND)
        box.place(x=60, y=110 + 50 * i)
        app.name(name.lower(), box)
    app.state_fn = lambda: {"checked": sorted(n for n, v in values.items() if v.get())}


@scene("radio-choice")
def _radio_choice(app: App) -> None:
    size = tk.StringVar(app.root, value="M")
    app.label("T-shirt size:", x=40, y=60)
    for i, name in enumerate(("S", "M", "L", "XL")):
        radio = tk.Radiobutton(app.body, text=name, value=name, variable=size, font=FONT, bg=BACKGROUND)
        radio.place(x=60 + 120 * i, y=110)
        app.name(f"size-{name}", radio)
    app.state_fn = lambda: {"size": size.get()}


def _file_list(app: App, files: list[str], **place: Any) -> tk.Listbox:
    listbox = tk.Listbox(app.body, font=FONT, activestyle="none", exportselection=False)
    for f in files:
        listbox.insert("end", f)
    listbox.place(**place)
    app.name("list", listbox)
    app.listboxes.append(listbox)
    return listbox


@scene("double-click-open")
def _double_click_open(app: App) -> None:
    opened: list[str] = []
    listbox = _file_list(app, ["budget.xlsx", "notes.txt", "photo.png", "report.pdf"], x=40, y=80, width=400, height=220)
    shown = app.label("(nothing open)", x=500, y=80)

    def open_selected(_event: tk.Event[Any]) -> None:
        selection = _selection(listbox)
        if selection:
            name = listbox.get(selection[0])
            opened.append(name)
            shown.configure(text=f"opened {name}")

    listbox.bind("<Double-Button-1>", open_selected)
    app.state_fn = lambda: {"opened": list(opened)}


@scene("right-click-menu")
def _right_click_menu(app: App) -> None:
    files = {"photo.png": "present", "notes.txt": "present"}
    menu = tk.Menu(app.root, tearoff=False, font=FONT)
    target: list[str] = []
    labels: dict[str, tk.Label] = {}

    def act(verb: str) -> None:
        if target:
            files[target[0]] = verb
            labels[target[0]].configure(text=f"{target[0]} ({verb})")

    for verb in ("Open", "Rename", "Delete"):
        menu.add_command(label=verb, command=functools.partial(act, {"Open": "opened", "Rename": "renamed",
                                                                    "Delete": "deleted"}[verb]))
    app.menus.append(menu)
    for i, name in enumerate(files):
        label = tk.Label(app.body, text=name, font=FONT, bg="white", relief="ridge", width=16)
        label.place(x=60, y=100 + 70 * i)
        labels[name] = label
        app.name(name, label)

        def popup(event: tk.Event[Any], n: str = name) -> None:
            target[:] = [n]
            menu.tk_popup(event.x_root + 2, event.y_root + 2)

        label.bind("<Button-3>", popup)
    app.state_fn = lambda: {"files": dict(files)}


@scene("drag-drop")
def _drag_drop(app: App) -> None:
    canvas = tk.Canvas(app.body, width=900, height=420, background="white", highlightthickness=0)
    canvas.place(x=20, y=40)
    canvas.create_rectangle(600, 120, 820, 340, outline="#555", width=3, dash=(6, 4), tags=("zone",))
    canvas.create_text(710, 100, text="drop zone", font=FONT)
    canvas.create_rectangle(80, 180, 180, 280, fill="#1e88e5", outline="", tags=("block",))
    app.canvases.append((canvas, ("block", "zone")))
    grab: list[float] = []

    def press(event: tk.Event[Any]) -> None:
        if "block" in canvas.gettags("current"):
            grab[:] = [event.x, event.y]

    def motion(event: tk.Event[Any]) -> None:
        if grab:
            canvas.move("block", event.x - grab[0], event.y - grab[1])
            grab[:] = [event.x, event.y]

    canvas.bind("<ButtonPress-1>", press)
    canvas.bind("<B1-Motion>", motion)
    canvas.bind("<ButtonRelease-1>", lambda _e: grab.clear())

    def state() -> State:
        bx1, by1, bx2, by2 = canvas.coords("block")
        cx, cy = (bx1 + bx2) / 2, (by1 + by2) / 2
        return {"block_center": [cx, cy], "in_zone": 600 <= cx <= 820 and 120 <= cy <= 340}

    app.state_fn = state


@scene("slider-max")
def _slider_max(app: App) -> None:
    volume = tk.IntVar(app.root, value=30)
    app.label("Volume", x=40, y=80)
    scale = tk.Scale(app.body, from_=0, to=100, orient="horizontal", variable=volume, length=500,
                     sliderlength=40, width=30, font=FONT, bg=BACKGROUND)
    scale.place(x=160, y=60)
    app.name("volume", scale)

    def handle(out: dict[str, list[int]]) -> None:
        x, y = scale.coords()
        out["volume-handle"] = [scale.winfo_rootx() + int(x) - 10, scale.winfo_rooty() + int(y) - 10, 20, 20]

    app.extra.append(handle)
    app.state_fn = lambda: {"volume": volume.get()}


@scene("scroll-list")
def _scroll_list(app: App) -> None:
    listbox = _file_list(app, [f"Item {i}" for i in range(1, 61)], x=40, y=60, width=360, height=300)
    picked = app.label("selected: none", x=460, y=60)
    listbox.bind("<<ListboxSelect>>", lambda _e: picked.configure(text=f"selected: {listbox.get(_selection(listbox)[0])}"))

    def state() -> State:
        return {"selected": [listbox.get(i) for i in _selection(listbox)]}

    app.state_fn = state


@scene("scroll-to-button")
def _scroll_to_button(app: App) -> None:
    canvas = tk.Canvas(app.body, width=700, height=360, background="white", highlightthickness=1)
    canvas.place(x=40, y=40)
    app.name("terms", canvas)
    inner = tk.Frame(canvas, background="white")
    canvas.create_window(0, 0, window=inner, anchor="nw")
    for i in range(1, 31):
        tk.Label(inner, text=f"Term {i}: the user agrees to clause {i}.", font=FONT, bg="white").pack(anchor="w")
    accepted: list[bool] = []
    accept = tk.Button(inner, text="I accept", font=FONT, command=lambda: accepted.append(True))
    accept.pack(anchor="w", pady=10)
    app.name("accept", accept)
    inner.update_idletasks()
    canvas.configure(scrollregion=(0, 0, inner.winfo_reqwidth(), inner.winfo_reqheight()))

    def wheel(event: tk.Event[Any]) -> None:
        canvas.yview_scroll(-3 if event.num == 4 else 3, "units")

    for widget in (canvas, inner, *inner.winfo_children()):
        widget.bind("<Button-4>", wheel)
        widget.bind("<Button-5>", wheel)

    def visible(out: dict[str, list[int]]) -> None:
        # The button is "on screen" only where the canvas shows it.
        box = out.get("accept")
        top, bottom = canvas.winfo_rooty(), canvas.winfo_rooty() + canvas.winfo_height()
        if box and not (box[1] >= top and box[1] + box[3] <= bottom):
            del out["accept"]

    app.extra.append(visible)
    app.state_fn = lambda: {"accepted": bool(accepted)}


def _submit_entry(app: App, name: str, initial: str = "", *, width: int = 600) -> tuple[tk.Entry, list[str]]:
    submitted: list[str] = []
    entry = app.entry(name, initial, x=40, y=100, width=width, height=44)
    shown = app.label("", x=40, y=170)

    def submit(_event: tk.Event[Any]) -> None:
        text = _join_surrogates(entry.get())
        submitted.append(text)
        shown.configure(text=f"received: {text}")

    entry.bind("<Return>", submit)
    entry.bind("<KP_Enter>", submit)
    return entry, submitted


@scene("type-unicode")
def _type_unicode(app: App) -> None:
    app.label("Message:", x=40, y=60)
    entry, submitted = _submit_entry(app, "message")
    app.state_fn = lambda: {"submitted": list(submitted), "text": _join_surrogates(entry.get())}


@scene("type-multiline")
def _type_multiline(app: App) -> None:
    app.label("Address:", x=40, y=40)
    text = tk.Text(app.body, font=FONT, width=40, height=6, insertofftime=0)
    text.place(x=40, y=80)
    app.name("address", text)
    app.state_fn = lambda: {"text": _join_surrogates(text.get("1.0", "end-1c"))}


@scene("replace-text")
def _replace_text(app: App) -> None:
    app.label("Title:", x=40, y=60)
    entry, submitted = _submit_entry(app, "title", "draft title, do not publish")
    app.state_fn = lambda: {"submitted": list(submitted), "text": _join_surrogates(entry.get())}


@scene("copy-paste")
def _copy_paste(app: App) -> None:
    app.label("Order number:", x=40, y=40)
    source = app.entry("source", "ORD-4711-XQ", x=40, y=80, width=400, height=44)
    app.label("Paste it here:", x=40, y=160)
    target = app.entry("target", "", x=40, y=200, width=400, height=44)
    app.state_fn = lambda: {"source": source.get(), "target": target.get()}


@scene("shortcut-save")
def _shortcut_save(app: App) -> None:
    saves: list[str] = []
    text = tk.Text(app.body, font=FONT, width=50, height=8, insertofftime=0)
    text.insert("1.0", "Meeting notes: ship the release on Friday.")
    text.place(x=40, y=60)
    app.name("editor", text)
    status = app.label("unsaved changes", x=40, y=320)

    def save(_event: tk.Event[Any]) -> str:
        saves.append(text.get("1.0", "end-1c"))
        status.configure(text="saved")
        return "break"

    app.root.bind_all("<Control-s>", save)
    app.state_fn = lambda: {"saves": len(saves)}


@scene("escape-dialog")
def _escape_dialog(app: App) -> None:
    closed: list[str] = []
    dialog = tk.Toplevel(app.root, background="#fff8e1", borderwidth=2, relief="raised")
    dialog.overrideredirect(True)
    dialog.geometry("420x160+400+250")
    tk.Label(dialog, text="Tip of the day: press Escape to close me.", font=FONT, bg="#fff8e1", wraplength=380).pack(pady=30)
    app.name("dialog", dialog)

    def close(how: str) -> None:
        closed.append(how)
        dialog.withdraw()

    app.root.bind_all("<Escape>", lambda _e: close("escape"))
    app.state_fn = lambda: {"closed": list(closed)}


@scene("keyboard-spinbox")
def _keyboard_spinbox(app: App) -> None:
    app.label("Copies:", x=40, y=60)
    copies = tk.StringVar(app.root, value="5")
    spin = tk.Spinbox(app.body, from_=1, to=20, textvariable=copies, font=FONT, width=5, insertofftime=0)
    spin.place(x=160, y=60, height=40)
    app.name("copies", spin)
    app.state_fn = lambda: {"copies": copies.get()}


def _menubutton(app: App, name: str, text: str, **place: Any) -> tk.Menu:
    button = tk.Menubutton(app.body, text=text, font=FONT, relief="raised", borderwidth=2)
    button.place(**place)
    menu = tk.Menu(button, tearoff=False, font=FONT)
    button.configure(menu=menu)
    app.name(name, button)
    app.menus.append(menu)
    return menu


@scene("menu-command")
def _menu_command(app: App) -> None:
    documents: list[str] = []
    menu = _menubutton(app, "file-menu", "File", x=20, y=20, width=100, height=40)
    shown = app.label("0 documents", x=40, y=200)

    def new() -> None:
        documents.append(f"Untitled {len(documents) + 1}")
        shown.configure(text=f"{len(documents)} documents")

    menu.add_command(label="Open…", command=lambda: None)
    menu.add_command(label="New document", command=new)
    menu.add_separator()
    menu.add_command(label="Print", command=lambda: None)
    app.state_fn = lambda: {"documents": list(documents)}


@scene("menu-cascade")
def _menu_cascade(app: App) -> None:
    text = tk.StringVar(app.root, value="Quarterly Report")
    menu = _menubutton(app, "format-menu", "Format", x=20, y=20, width=120, height=40)
    tk.Label(app.body, textvariable=text, font=BIG, bg="white", width=24).place(x=40, y=200)
    case = tk.Menu(menu, tearoff=False, font=FONT)
    app.menus.append(case)
    case.add_command(label="lowercase", command=lambda: text.set(text.get().lower()))
    case.add_command(label="UPPERCASE", command=lambda: text.set(text.get().upper()))
    menu.add_command(label="Bold", command=lambda: None)
    menu.add_cascade(label="Change case", menu=case)
    app.state_fn = lambda: {"text": text.get()}


def _dialog(app: App, title: str, height: int = 180) -> tk.Toplevel:
    dialog = tk.Toplevel(app.root, background="white", borderwidth=2, relief="raised")
    dialog.overrideredirect(True)
    dialog.geometry(f"460x{height}+380+260")
    tk.Label(dialog, text=title, font=FONT, bg="white").place(x=20, y=20)
    dialog.withdraw()
    return dialog


@scene("dialog-confirm")
def _dialog_confirm(app: App) -> None:
    items = ["a.log", "b.log", "c.log"]
    shown = app.label("3 log files", x=40, y=140)
    dialog = _dialog(app, "Delete all 3 log files?")

    def answer(yes: bool) -> None:
        if yes:
            items.clear()
            shown.configure(text="0 log files")
        dialog.withdraw()

    yes = tk.Button(dialog, text="Yes", font=FONT, command=lambda: answer(True))
    yes.place(x=240, y=110, width=90)
    no = tk.Button(dialog, text="No", font=FONT, command=lambda: answer(False))
    no.place(x=350, y=110, width=90)
    app.name("dialog-yes", yes)
    app.name("dialog-no", no)
    def open_dialog() -> None:
        dialog.deiconify()
        dialog.lift()

    app.button("delete-all", "Delete all…", open_dialog, x=40, y=60, width=180, height=44)
    app.state_fn = lambda: {"items": list(items)}


@scene("dialog-input")
def _dialog_input(app: App) -> None:
    name = tk.StringVar(app.root, value="untitled")
    tk.Label(app.body, textvariable=name, font=BIG, bg=BACKGROUND).place(x=40, y=140)
    dialog = _dialog(app, "New name:", height=200)
    entry = tk.Entry(dialog, font=FONT, insertofftime=0)
    entry.place(x=20, y=60, width=410, height=40)
    app.name("dialog-entry", entry)

    def ok() -> None:
        name.set(_join_surrogates(entry.get()))
        dialog.withdraw()

    button = tk.Button(dialog, text="OK", font=FONT, command=ok)
    button.place(x=340, y=130, width=90)
    app.name("dialog-ok", button)

    def open_dialog() -> None:
        dialog.deiconify()
        dialog.lift()

    app.button("rename", "Rename…", open_dialog, x=40, y=60, width=160, height=44)
    app.state_fn = lambda: {"name": name.get()}


@scene("form-signup")
def _form_signup(app: App) -> None:
    submitted: list[dict[str, Any]] = []
    app.label("Name", x=40, y=40)
    name = app.entry("name", x=200, y=36, width=400, height=40)
    app.label("Email", x=40, y=100)
    email = app.entry("email", x=200, y=96, width=400, height=40)
    plan = tk.StringVar(app.root, value="Free")
    app.label("Plan", x=40, y=160)
    for i, choice in enumerate(("Free", "Pro", "Team")):
        radio = tk.Radiobutton(app.body, text=choice, value=choice, variable=plan, font=FONT, bg=BACKGROUND)
        radio.place(x=200 + 120 * i, y=156)
        app.name(f"plan-{choice}", radio)
    agree = tk.BooleanVar(app.root, value=False)
    box = tk.Checkbutton(app.body, text="I agree to the terms", variable=agree, font=FONT, bg=BACKGROUND)
    box.place(x=200, y=210)
    app.name("agree", box)
    message = app.label("", x=200, y=330)

    def submit() -> None:
        record = {"name": _join_surrogates(name.get()), "email": email.get(), "plan": plan.get(), "agree": agree.get()}
        submitted.append(record)
        message.configure(text="submitted" if record["agree"] else "please agree to the terms")

    app.button("submit", "Sign up", submit, x=200, y=270, width=160, height=44)
    app.state_fn = lambda: {"submitted": list(submitted)}


@scene("wizard")
def _wizard(app: App) -> None:
    result: dict[str, Any] = {"finished": False}
    pages = [tk.Frame(app.body, background=BACKGROUND) for _ in range(3)]
    for page in pages:
        page.place(x=0, y=0, relwidth=1, relheight=1)
    tk.Label(pages[0], text="Step 1 of 3: project name", font=FONT, bg=BACKGROUND).place(x=40, y=40)
    project = tk.Entry(pages[0], font=FONT, insertofftime=0)
    project.place(x=40, y=90, width=400, height=40)
    app.name("project", project)
    tk.Label(pages[1], text="Step 2 of 3: language", font=FONT, bg=BACKGROUND).place(x=40, y=40)
    language = tk.StringVar(app.root, value="")
    for i, choice in enumerate(("Python", "Rust", "Go")):
        radio = tk.Radiobutton(pages[1], text=choice, value=choice, variable=language, font=FONT, bg=BACKGROUND)
        radio.place(x=40, y=90 + 45 * i)
        app.name(f"lang-{choice}", radio)
    tk.Label(pages[2], text="Step 3 of 3: review and finish", font=FONT, bg=BACKGROUND).place(x=40, y=40)
    summary = tk.Label(pages[2], text="", font=FONT, bg=BACKGROUND)
    summary.place(x=40, y=90)

    current = [0]
    page_of: dict[str, int] = {"project": 0, **{f"lang-{c}": 1 for c in ("Python", "Rust", "Go")}}

    def show(index: int) -> None:
        current[0] = index
        pages[index].tkraise()
        summary.configure(text=f"{project.get()} in {language.get()}")

    def finish() -> None:
        result.update(finished=True, project=_join_surrogates(project.get()), language=language.get())

    for index, (page, text, command) in enumerate(((pages[0], "Next", lambda: show(1)),
                                                   (pages[1], "Next", lambda: show(2)),
                                                   (pages[2], "Finish", finish))):
        button = tk.Button(page, text=text, font=FONT, command=command)
        button.place(x=40, y=260, width=140, height=44)
        app.name(f"{text.lower()}-{index + 1}", button)
        page_of[f"{text.lower()}-{index + 1}"] = index
    show(0)

    def on_top(out: dict[str, list[int]]) -> None:
        # The pages overlap: only the raised page's widgets are on screen.
        for key, index in page_of.items():
            if index != current[0]:
                out.pop(key, None)

    app.extra.append(on_top)
    app.state_fn = lambda: dict(result)


@scene("tabs")
def _tabs(app: App) -> None:
    notebook = ttk.Notebook(app.body)
    notebook.place(x=40, y=40, width=700, height=360)
    values: dict[str, tk.BooleanVar] = {}
    for title in ("General", "Privacy", "Advanced"):
        frame = tk.Frame(notebook, background="white")
        notebook.add(frame, text=title)
        if title == "Privacy":
            var = tk.BooleanVar(app.root, value=False)
            values["telemetry_off"] = var
            box = tk.Checkbutton(frame, text="Turn off telemetry", variable=var, font=FONT, bg="white")
            box.place(x=30, y=40)
            app.name("telemetry", box)

    def tabs(out: dict[str, list[int]]) -> None:
        if not spans:
            measure()
        nx, ny = notebook.winfo_rootx(), notebook.winfo_rooty()
        for index in range(int(notebook.index("end"))):  # type: ignore[no-untyped-call]
            text = str(notebook.tab(index, "text"))  # type: ignore[no-untyped-call]
            if index in spans:
                x1, x2 = spans[index]
                out[f"tab:{text}"] = [nx + x1, ny + 2, x2 - x1 + 1, tab_height]

    # ttk tells which tab is under a point, not where a tab is: find each tab's span once.
    tab_height = 28
    spans: dict[int, tuple[int, int]] = {}

    def measure() -> None:
        notebook.update_idletasks()
        for x in range(0, notebook.winfo_width(), 2):
            found = notebook.tk.call(str(notebook), "identify", "tab", x, tab_height // 2)
            if found != "":
                first, last = spans.get(int(found), (x, x))
                spans[int(found)] = (min(first, x), max(last, x))



    app.extra.append(tabs)
    app.state_fn = lambda: {"tab": str(notebook.tab(notebook.index("current"), "text")),  # type: ignore[no-untyped-call]
                            **{k: v.get() for k, v in values.items()}}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in SCENES:
        sys.stderr.write(f"usage: python -m deskpilot.eval._tkapp SCENE (one of {', '.join(sorted(SCENES))})\n")
        return 2
    App(args[0]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
