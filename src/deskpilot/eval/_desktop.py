"""The ``desktop`` suite: tasks on the Tk app the package ships (:mod:`deskpilot.eval._tkapp`).

Each task is one scene of the app, an instruction, a checker on the scene's state and a
scripted solution (tool calls of the ``extended`` tool set on what the layout shows). They
cover clicks, double and right clicks, drags, scrolling, Unicode text, shortcuts, menus,
dialogs and multi-step forms.
"""

from __future__ import annotations

import sys
from typing import Any

from deskpilot.eval._task import Step, Suite, Task

__all__ = ["desktop_suite"]

State = dict[str, Any]

UNICODE_TEXT = "Grüße, 世界! ✓ naïve café"
MULTILINE = ("221B Baker Street", "London NW1 6XE")
NEW_TITLE = "Release notes 2.0"
NEW_NAME = "Budget 2026 – final"
FORM = {"name": "Zoë Müller", "email": "zoe@example.org", "plan": "Pro", "agree": True}


def _app(scene: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "deskpilot.eval._tkapp", scene)


def click(ref: str, label: str) -> Step:
    return Step("click_element", {"label": label, "box": f"@{ref}"})


def type_text(text: str) -> Step:
    return Step("type_text", {"text": text})


def key(combo: str) -> Step:
    return Step("press_key", {"key": combo})


def _last(state: State, key_: str) -> Any:
    values = state.get(key_) or [None]
    return values[-1]


# ------------------------------------------------------------------------- checkers
# Each reads the app's state record; a tuple's text says what it saw (in the results).


def check_click_button(s: State) -> tuple[bool, str]:
    return s["pressed"] == ["Submit"], f"pressed {s['pressed']}"


def check_click_color(s: State) -> tuple[bool, str]:
    return s["clicked"] == ["green"], f"clicked {s['clicked']}"


def check_checkboxes(s: State) -> tuple[bool, str]:
    return s["checked"] == ["Post", "SMS"], f"ticked {s['checked']}"


def check_radio(s: State) -> tuple[bool, str]:
    return s["size"] == "L", f"size {s['size']}"


def check_double_click(s: State) -> tuple[bool, str]:
    return s["opened"] == ["notes.txt"], f"opened {s['opened']}"


def check_right_click(s: State) -> tuple[bool, str]:
    return s["files"] == {"photo.png": "present", "notes.txt": "deleted"}, f"files {s['files']}"


def check_drag_drop(s: State) -> tuple[bool, str]:
    return bool(s["in_zone"]), f"block centre {s['block_center']}"


def check_slider(s: State) -> tuple[bool, str]:
    return s["volume"] == 100, f"volume {s['volume']}"


def check_scroll_list(s: State) -> tuple[bool, str]:
    return s["selected"] == ["Item 55"], f"selected {s['selected']}"


def check_scroll_button(s: State) -> tuple[bool, str]:
    return bool(s["accepted"]), f"accepted {s['accepted']}"


def check_unicode(s: State) -> tuple[bool, str]:
    return _last(s, "submitted") == UNICODE_TEXT, f"submitted {s['submitted']!r}"


def check_multiline(s: State) -> tuple[bool, str]:
    return s["text"] == "\n".join(MULTILINE), f"text {s['text']!r}"


def check_replace(s: State) -> tuple[bool, str]:
    return _last(s, "submitted") == NEW_TITLE, f"submitted {s['submitted']!r}"


def check_copy_paste(s: State) -> tuple[bool, str]:
    return s["target"] == s["source"] == "ORD-4711-XQ", f"target {s['target']!r}"


def check_save(s: State) -> tuple[bool, str]:
    return s["saves"] >= 1, f"{s['saves']} saves"


def check_escape(s: State) -> tuple[bool, str]:
    return s["closed"] == ["escape"], f"closed {s['closed']}"


def check_spinbox(s: State) -> tuple[bool, str]:
    return s["copies"] == "8", f"copies {s['copies']!r}"


def check_menu_command(s: State) -> tuple[bool, str]:
    return s["documents"] == ["Untitled 1"], f"documents {s['documents']}"


def check_menu_cascade(s: State) -> tuple[bool, str]:
    return s["text"] == "QUARTERLY REPORT", f"text {s['text']!r}"


def check_dialog_confirm(s: State) -> tuple[bool, str]:
    return s["items"] == [], f"items {s['items']}"


def check_dialog_input(s: State) -> tuple[bool, str]:
    return s["name"] == NEW_NAME, f"name {s['name']!r}"


def check_form(s: State) -> tuple[bool, str]:
    return _last(s, "submitted") == FORM, f"submitted {s['submitted']}"


def check_wizard(s: State) -> tuple[bool, str]:
    ok = s.get("finished") is True and s.get("project") == "skyline" and s.get("language") == "Rust"
    return ok, f"state {s}"


def check_tabs(s: State) -> tuple[bool, str]:
    return s["tab"] == "Privacy" and s["telemetry_off"] is True, f"tab {s['tab']!r}, telemetry off {s['telemetry_off']}"


# --------------------------------------------------------------------------- tasks


def _tasks() -> list[Task]:
    def task(name: str, instruction: str, check: Any, solution: list[Step], tags: tuple[str, ...],
             scene: str | None = None) -> Task:
        return Task(name=name, instruction=instruction, app=_app(scene or name), check=check,
                    solution=tuple(solution), max_steps=len(solution) + 6, tags=tags)

    return [
        task("click-button", "Click the Submit button (and no other button).", check_click_button,
             [click("submit", "Submit button")], ("click",)),
        task("click-color", "Click the green square.", check_click_color,
             [click("green", "green square")], ("click",)),
        task("checkboxes", "Set the notification options so that exactly SMS and Post are ticked.",
             check_checkboxes,
             [click("email", "Email checkbox"), click("sms", "SMS checkbox"), click("post", "Post checkbox")],
             ("click", "form")),
        task("radio-choice", "Choose the T-shirt size L.", check_radio,
             [click("size-L", "size L")], ("click",)),
        task("double-click-open", "Open notes.txt by double-clicking it in the file list.", check_double_click,
             [Step("double_click", {"label": "notes.txt", "box": "@row:notes.txt"})], ("double-click",)),
        task("right-click-menu", "Delete notes.txt using its right-click menu.", check_right_click,
             [Step("right_click", {"label": "notes.txt", "box": "@notes.txt"}), click("menu:Delete", "Delete")],
             ("right-click", "menu")),
        task("drag-drop", "Drag the blue block into the drop zone.", check_drag_drop,
             [Step("drag", {"label": "blue block", "start": "@block", "end": "@zone"})], ("drag",)),
        task("slider-max", "Turn the volume slider all the way up to 100.", check_slider,
             [Step("drag", {"label": "volume slider", "start": "@volume-handle", "end": "@volume|0.99,0.75"})],
             ("drag",)),
        task("scroll-list", "Scroll the list down and select Item 55.", check_scroll_list,
             [Step("scroll", {"label": "list", "box": "@list", "direction": "down", "amount": 5},
                   until="row:Item 55"),
              click("row:Item 55", "Item 55")], ("scroll", "click")),
        task("scroll-to-button", "Scroll the terms to the end and click 'I accept'.", check_scroll_button,
             [Step("scroll", {"label": "terms", "box": "@terms", "direction": "down", "amount": 5}, until="accept"),
              click("accept", "I accept")], ("scroll", "click")),
        task("type-unicode", f"Type exactly '{UNICODE_TEXT}' into the message field and press Enter.",
             check_unicode, [click("message", "message field"), type_text(UNICODE_TEXT), key("enter")],
             ("text", "unicode")),
        task("type-multiline", f"Write the address in two lines: '{MULTILINE[0]}', then '{MULTILINE[1]}'.",
             check_multiline,
             [click("address", "address box"), type_text(MULTILINE[0]), key("enter"), type_text(MULTILINE[1])],
             ("text",)),
        task("replace-text", f"Replace the whole title with '{NEW_TITLE}' and press Enter.", check_replace,
             [click("title", "title field"), key("ctrl+a"), type_text(NEW_TITLE), key("enter")],
             ("text", "shortcut")),
        task("copy-paste", "Copy the order number into the field below it with the clipboard.", check_copy_paste,
             [click("source", "order number"), key("ctrl+a"), key("ctrl+c"), click("target", "paste field"),
              key("ctrl+v")], ("shortcut", "clipboard")),
        task("shortcut-save", "Save the notes with the keyboard shortcut Ctrl+S.", check_save,
             [click("editor", "notes"), key("ctrl+s")], ("shortcut",)),
        task("escape-dialog", "Close the tip of the day with the Escape key.", check_escape,
             [key("escape")], ("shortcut", "dialog")),
        task("keyboard-spinbox", "Raise the number of copies from 5 to 8 with the Up arrow key.", check_spinbox,
             [click("copies", "copies"), key("up"), key("up"), key("up")], ("keyboard",)),
        task("menu-command", "Create a new document with the File menu.", check_menu_command,
             [click("file-menu", "File menu"), click("menu:New document", "New document")], ("menu",)),
        task("menu-cascade", "Make the heading upper case with Format > Change case > UPPERCASE.",
             check_menu_cascade,
             [click("format-menu", "Format menu"), click("menu:Change case", "Change case"),
              click("menu:UPPERCASE", "UPPERCASE")], ("menu",)),
        task("dialog-confirm", "Delete all the log files and confirm.", check_dialog_confirm,
             [click("delete-all", "Delete all"), click("dialog-yes", "Yes")], ("dialog",)),
        task("dialog-input", f"Rename the document to '{NEW_NAME}'.", check_dialog_input,
             [click("rename", "Rename"), click("dialog-entry", "name field"), key("ctrl+a"), type_text(NEW_NAME),
              click("dialog-ok", "OK")], ("dialog", "text", "unicode")),
        task("form-signup", f"Sign up as {FORM['name']} with {FORM['email']} on the Pro plan, agreeing to the terms.",
             check_form,
             [click("name", "Name"), type_text(str(FORM["name"])), click("email", "Email"),
              type_text(str(FORM["email"])), click("plan-Pro", "Pro"), click("agree", "I agree"),
              click("submit", "Sign up")], ("form", "multi-step")),
        task("wizard", "Create the project 'skyline' in Rust with the wizard and finish it.", check_wizard,
             [click("project", "project name"), type_text("skyline"), click("next-1", "Next"),
              click("lang-Rust", "Rust"), click("next-2", "Next"), click("finish-3", "Finish")],
             ("form", "multi-step")),
        task("tabs", "In the Privacy tab, turn off telemetry.", check_tabs,
             [click("tab:Privacy", "Privacy tab"), click("telemetry", "Turn off telemetry")], ("click", "tabs")),
    ]


def desktop_suite() -> Suite:
    return Suite("desktop", tuple(_tasks()),
                 "Tk tasks: clicks, double/right clicks, drags, scrolling, Unicode text, shortcuts, menus, "
                 "dialogs and multi-step forms", ref="desktop")
