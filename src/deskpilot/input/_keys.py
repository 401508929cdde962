"""The key vocabulary: canonical names, aliases, Windows VK codes and X11 keysyms.

Every key the agent or a library user can name lives in one table here, so both
backends (SendInput on Windows, XTest on X11) agree on what ``"pageup"`` or
``"rctrl"`` means.

Names
    Lookups are case-insensitive; spaces and underscores inside a name are ignored
    (``"Page Down"``, ``"page_down"`` and ``"PAGEDOWN"`` are the same key) and, as a
    last resort, so are dashes (``"page-down"``). Single printable characters name
    the key that types them on a US layout (``","``, ``"-"``, ``"?"``). An unknown
    name raises :class:`~deskpilot._errors.UnknownKeyError` listing close matches.

Combos (:func:`parse_combo`)
    Keys are joined with ``+`` and optional whitespace: ``"ctrl+shift+t"``,
    ``"Ctrl + Shift + T"``. ``"ctrl++"`` is ctrl and the plus key. A combo that has
    no ``+`` and is not itself a key name may use ``-`` (``"ctrl-c"``, ``"ctrl--"``)
    or whitespace (``"ctrl shift t"``) as the separator. Repeated keys are dropped.
    Characters that need shift on a US layout (``"?"``, ``"plus"``, ``"("`` ...) get a
    ``shift`` inserted before them unless the combo already holds one, so
    ``parse_combo("ctrl+plus")`` presses ctrl, shift and the ``=``/``+`` key.

Windows
    ``vk`` is the virtual-key code; ``extended`` says KEYEVENTF_EXTENDEDKEY must be
    set (right ctrl/alt, the navigation cluster, arrows, numpad enter and divide,
    win/apps, printscreen, numlock, media and browser keys). Punctuation uses the
    VK_OEM_* codes of the US layout.

X11
    ``keysym`` is the X keysym (``XF86*`` keysyms for media and browser keys); the
    XTest backend looks its keycode up at run time and maps a spare keycode when the
    server's keymap has none.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from deskpilot._errors import UnknownKeyError

__all__ = [
    "KEY_NAMES",
    "SHIFTED_KEYS",
    "KeySpec",
    "key_aliases",
    "parse_combo",
    "resolve_key",
]


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One key. ``vk``/``extended`` drive SendInput, ``keysym`` drives XTest."""

    name: str  # canonical lower-case name, e.g. "ctrl", "pageup", "f13", "a"
    vk: int | None  # Windows virtual-key code, None where Windows has no such key
    extended: bool  # KEYEVENTF_EXTENDEDKEY needed (right ctrl/alt, arrows, ins/del, ...)
    keysym: int | None  # X11 keysym, None where X has no such key
    modifier: bool = False


# (canonical name, vk, extended, keysym, modifier, aliases). Aliases are written in
# their readable form and normalized with the same rule as lookups.
_Row = tuple[str, "int | None", bool, "int | None", bool, tuple[str, ...]]

_MODIFIERS: list[_Row] = [
    # The generic modifiers use the generic VK codes (Windows maps them to the left key)
    # and the left keysym on X.
    ("ctrl", 0x11, False, 0xFFE3, True, ("control", "ctl", "strg")),
    ("lctrl", 0xA2, False, 0xFFE3, True, ("leftctrl", "lcontrol", "leftcontrol")),
    ("rctrl", 0xA3, True, 0xFFE4, True, ("rightctrl", "rcontrol", "rightcontrol")),
    ("alt", 0x12, False, 0xFFE9, True, ("option", "opt")),
    ("lalt", 0xA4, False, 0xFFE9, True, ("leftalt", "lmenu", "loption")),
    ("ralt", 0xA5, True, 0xFFEA, True, ("rightalt", "rmenu", "altgr", "roption")),
    ("shift", 0x10, False, 0xFFE1, True, ()),
    ("lshift", 0xA0, False, 0xFFE1, True, ("leftshift",)),
    ("rshift", 0xA1, False, 0xFFE2, True, ("rightshift",)),
    ("win", 0x5B, True, 0xFFEB, True, ("super", "meta", "cmd", "command", "windows", "os", "winkey")),
    ("lwin", 0x5B, True, 0xFFEB, True, ("leftwin", "lsuper", "leftsuper", "lmeta", "lcmd", "leftwindows")),
    ("rwin", 0x5C, True, 0xFFEC, True, ("rightwin", "rsuper", "rightsuper", "rmeta", "rcmd", "rightwindows")),
]

_EDITING: list[_Row] = [
    ("enter", 0x0D, False, 0xFF0D, False, ("return", "ret", "\n", "\r")),
    ("tab", 0x09, False, 0xFF09, False, ("\t",)),
    ("escape", 0x1B, False, 0xFF1B, False, ("esc",)),
    ("space", 0x20, False, 0x0020, False, (" ", "spacebar")),
    ("backspace", 0x08, False, 0xFF08, False, ("bksp", "backspc")),
    ("delete", 0x2E, True, 0xFFFF, False, ("del",)),
    ("insert", 0x2D, True, 0xFF63, False, ("ins",)),
    ("home", 0x24, True, 0xFF50, False, ()),
    ("end", 0x23, True, 0xFF57, False, ()),
    ("pageup", 0x21, True, 0xFF55, False, ("pgup", "prior")),
    ("pagedown", 0x22, True, 0xFF56, False, ("pgdn", "pgdown", "next")),
    ("left", 0x25, True, 0xFF51, False, ("leftarrow", "arrowleft")),
    ("up", 0x26, True, 0xFF52, False, ("uparrow", "arrowup")),
    ("right", 0x27, True, 0xFF53, False, ("rightarrow", "arrowright")),
    ("down", 0x28, True, 0xFF54, False, ("downarrow", "arrowdown")),
    ("capslock", 0x14, False, 0xFFE5, False, ("caps", "caps_lock")),
    ("numlock", 0x90, True, 0xFF7F, False, ("num_lock",)),
    ("scrolllock", 0x91, False, 0xFF14, False, ("scroll_lock", "scrlk")),
    ("printscreen", 0x2C, True, 0xFF61, False, ("print", "prtsc", "prtscr", "prtscn", "prntscrn", "snapshot", "sysrq")),
    ("pause", 0x13, False, 0xFF13, False, ("break",)),
    ("menu", 0x5D, True, 0xFF67, False, ("apps", "application", "contextmenu")),
    ("clear", 0x0C, False, 0xFF0B, False, ()),
    ("help", 0x2F, False, 0xFF6A, False, ()),
]

_NUMPAD: list[_Row] = [
    *(
        (f"num{d}", 0x60 + d, False, 0xFFB0 + d, False, (f"numpad{d}", f"kp{d}", f"keypad{d}"))
        for d in range(10)
    ),
    ("multiply", 0x6A, False, 0xFFAA, False, ("nummultiply", "numpadmultiply", "kpmultiply", "numstar", "numasterisk")),
    ("add", 0x6B, False, 0xFFAB, False, ("numadd", "numpadadd", "kpadd", "numplus", "numpadplus")),
    ("separator", 0x6C, False, 0xFFAC, False, ("numseparator", "kpseparator")),
    ("subtract", 0x6D, False, 0xFFAD, False, ("numsubtract", "numpadsubtract", "kpsubtract", "numminus", "numpadminus")),
    ("decimal", 0x6E, False, 0xFFAE, False, ("numdecimal", "numpaddecimal", "kpdecimal", "numdot", "numperiod")),
    ("divide", 0x6F, True, 0xFFAF, False, ("numdivide", "numpaddivide", "kpdivide", "numslash")),
    # Windows has no VK of its own for numpad enter: it is VK_RETURN with the extended flag.
    ("numenter", 0x0D, True, 0xFF8D, False, ("numpadenter", "kpenter", "keypadenter")),
]

_MEDIA: list[_Row] = [
    ("volumemute", 0xAD, True, 0x1008FF12, False, ("mute", "volmute", "audiomute")),
    ("volumedown", 0xAE, True, 0x1008FF11, False, ("voldown", "audiolowervolume")),
    ("volumeup", 0xAF, True, 0x1008FF13, False, ("volup", "audioraisevolume")),
    ("nexttrack", 0xB0, True, 0x1008FF17, False, ("medianext", "medianexttrack", "audionext")),
    ("prevtrack", 0xB1, True, 0x1008FF16, False, ("mediaprev", "mediaprevtrack", "previoustrack", "audioprev")),
    ("stop", 0xB2, True, 0x1008FF15, False, ("mediastop", "audiostop")),
    ("playpause", 0xB3, True, 0x1008FF14, False, ("play", "mediaplaypause", "mediaplay", "audioplay")),
    ("browserback", 0xA6, True, 0x1008FF26, False, ()),
    ("browserforward", 0xA7, True, 0x1008FF27, False, ()),
    ("browserrefresh", 0xA8, True, 0x1008FF29, False, ()),
    ("browserstop", 0xA9, True, 0x1008FF28, False, ()),
    ("browsersearch", 0xAA, True, 0x1008FF1B, False, ()),
    ("browserfavorites", 0xAB, True, 0x1008FF30, False, ()),
    ("browserhome", 0xAC, True, 0x1008FF18, False, ("homepage",)),
    ("launchmail", 0xB4, True, 0x1008FF19, False, ("mail",)),
    ("launchmedia", 0xB5, True, 0x1008FF32, False, ("mediaselect", "launchmediaselect")),
    ("launchapp1", 0xB6, True, 0x1008FF33, False, ("mycomputer",)),
    ("launchapp2", 0xB7, True, 0x1008FF1D, False, ("calculator",)),
    ("sleep", 0x5F, False, 0x1008FF2F, False, ()),
]

# Punctuation on a US layout: VK_OEM_* codes and the keysym of the character.
_PUNCTUATION: list[_Row] = [
    ("comma", 0xBC, False, 0x002C, False, (",",)),
    ("period", 0xBE, False, 0x002E, False, (".", "dot", "fullstop")),
    ("minus", 0xBD, False, 0x002D, False, ("-", "hyphen", "dash")),
    ("equal", 0xBB, False, 0x003D, False, ("=", "equals")),
    ("semicolon", 0xBA, False, 0x003B, False, (";",)),
    ("apostrophe", 0xDE, False, 0x0027, False, ("'", "quote", "singlequote")),
    ("grave", 0xC0, False, 0x0060, False, ("`", "backtick", "backquote", "graveaccent")),
    ("slash", 0xBF, False, 0x002F, False, ("/", "forwardslash")),
    ("backslash", 0xDC, False, 0x005C, False, ("\\",)),
    ("bracketleft", 0xDB, False, 0x005B, False, ("[", "lbracket", "leftbracket", "openbracket")),
    ("bracketright", 0xDD, False, 0x005D, False, ("]", "rbracket", "rightbracket", "closebracket")),
]

# Characters typed with shift on a US layout: the VK of the key that carries them and
# the keysym of the character itself. parse_combo adds the shift.
_SHIFTED: list[_Row] = [
    ("exclam", 0x31, False, 0x0021, False, ("!", "exclamation", "bang")),
    ("at", 0x32, False, 0x0040, False, ("@",)),
    ("numbersign", 0x33, False, 0x0023, False, ("#", "hash", "pound")),
    ("dollar", 0x34, False, 0x0024, False, ("$",)),
    ("percent", 0x35, False, 0x0025, False, ("%",)),
    ("caret", 0x36, False, 0x005E, False, ("^", "asciicircum", "circumflex")),
    ("ampersand", 0x37, False, 0x0026, False, ("&",)),
    ("asterisk", 0x38, False, 0x002A, False, ("*", "star")),
    ("parenleft", 0x39, False, 0x0028, False, ("(", "lparen", "leftparen")),
    ("parenright", 0x30, False, 0x0029, False, (")", "rparen", "rightparen")),
    ("underscore", 0xBD, False, 0x005F, False, ("_",)),
    ("plus", 0xBB, False, 0x002B, False, ("+",)),
    ("braceleft", 0xDB, False, 0x007B, False, ("{", "lbrace", "leftbrace")),
    ("braceright", 0xDD, False, 0x007D, False, ("}", "rbrace", "rightbrace")),
    ("bar", 0xDC, False, 0x007C, False, ("|", "pipe")),
    ("colon", 0xBA, False, 0x003A, False, (":",)),
    ("quotedbl", 0xDE, False, 0x0022, False, ('"', "doublequote", "dquote")),
    ("less", 0xBC, False, 0x003C, False, ("<", "lessthan", "lt")),
    ("greater", 0xBE, False, 0x003E, False, (">", "greaterthan", "gt")),
    ("question", 0xBF, False, 0x003F, False, ("?", "questionmark")),
    ("tilde", 0xC0, False, 0x007E, False, ("~", "asciitilde")),
]

_LETTERS: list[_Row] = [(c, ord(c.upper()), False, ord(c), False, ()) for c in "abcdefghijklmnopqrstuvwxyz"]
_DIGITS: list[_Row] = [(d, ord(d), False, ord(d), False, ()) for d in "0123456789"]
# F1..F24: VK_F1 = 0x70 ... VK_F24 = 0x87; XK_F1 = 0xFFBE ... XK_F24 = 0xFFD5.
_FUNCTION: list[_Row] = [(f"f{n}", 0x6F + n, False, 0xFFBD + n, False, ()) for n in range(1, 25)]


def _normalize(name: str) -> str:
    """The lookup form of a name: a single character as is (lower-cased), otherwise
    lower-case with surrounding whitespace and inner spaces/underscores removed."""
    if len(name) == 1:
        return name.lower()
    stripped = name.strip()
    if len(stripped) == 1:
        return stripped.lower()
    return stripped.lower().replace(" ", "").replace("_", "")


def _build() -> tuple[dict[str, KeySpec], dict[str, tuple[str, ...]]]:
    table: dict[str, KeySpec] = {}
    aliases: dict[str, tuple[str, ...]] = {}
    for group in (_MODIFIERS, _EDITING, _NUMPAD, _MEDIA, _PUNCTUATION, _SHIFTED, _LETTERS, _DIGITS, _FUNCTION):
        for name, vk, extended, keysym, modifier, extra in group:
            spec = KeySpec(name, vk, extended, keysym, modifier)
            aliases[name] = extra
            for key in (name, *extra):
                norm = _normalize(key)
                if norm in table and table[norm] != spec:  # a table bug: fails at import
                    raise RuntimeError(f"key name {key!r} defined twice ({table[norm].name}, {name})")
                table[norm] = spec
    return table, aliases


_TABLE, _ALIASES = _build()

#: Every canonical key name, in table order.
KEY_NAMES: tuple[str, ...] = tuple(_ALIASES)

#: Canonical names of keys whose character needs shift on a US layout.
SHIFTED_KEYS: frozenset[str] = frozenset(row[0] for row in _SHIFTED)

_SHIFT = _TABLE["shift"]
_SHIFT_NAMES = frozenset({"shift", "lshift", "rshift"})


def key_aliases(name: str) -> tuple[str, ...]:
    """The aliases of a key (the canonical name resolved first)."""
    return _ALIASES[resolve_key(name).name]


def _lookup(name: str, *, dashes: bool = True) -> KeySpec | None:
    norm = _normalize(name)
    spec = _TABLE.get(norm)
    if spec is None and dashes and len(norm) > 1 and "-" in norm:
        spec = _TABLE.get(norm.replace("-", ""))
    return spec


def _suggest(name: str) -> list[str]:
    norm = _normalize(name)
    found: list[str] = []
    for match in difflib.get_close_matches(norm, list(_TABLE), n=8, cutoff=0.6):
        canonical = _TABLE[match].name
        if canonical not in found:
            found.append(canonical)
    return found[:3]


def resolve_key(name: str) -> KeySpec:
    """The key called ``name`` (case-insensitive, any alias).

    Raises :class:`UnknownKeyError` (with up to three close matches) for anything else.
    """
    if not isinstance(name, str):
        raise UnknownKeyError(repr(name))
    spec = _lookup(name)
    if spec is None:
        raise UnknownKeyError(name, _suggest(name))
    return spec


def _split(text: str, sep: str) -> list[str] | None:
    """Split on ``sep`` where a separator right after another (or at the start) is the
    key itself: ``"ctrl++"`` -> ``["ctrl", "+"]``. None when a separator dangles."""
    parts: list[str] = []
    current = ""
    for ch in text:
        if ch == sep and current.strip():
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if not current.strip():
        return None
    parts.append(current.strip())
    return parts


def _names(text: str) -> list[str]:
    """The key names of a stripped, non-empty combo text (see the module doc)."""
    if _lookup(text, dashes=False) is not None:
        return [text]
    if "+" in text:
        plus_parts = _split(text, "+")
        if plus_parts is None:
            raise UnknownKeyError(text)
        return plus_parts
    # "-" and whitespace are separators only when every part is a key, so that a
    # misspelt single name still gets its close-match suggestions.
    dash_parts = _split(text, "-") if "-" in text else None
    if dash_parts is not None and len(dash_parts) > 1 and all(_lookup(p, dashes=False) for p in dash_parts):
        return dash_parts
    space_parts = text.split()
    if len(space_parts) > 1 and all(_lookup(p) for p in space_parts):
        return space_parts
    return [text]


def parse_combo(combo: str) -> list[KeySpec]:
    """Parse ``"ctrl+shift+t"`` into the keys to press, in order (see the module doc)."""
    if not isinstance(combo, str):
        raise UnknownKeyError(repr(combo))
    if len(combo) == 1 and _lookup(combo) is not None:  # " ", "\t", "\n" name keys too
        names = [combo]
    elif not combo.strip():
        raise UnknownKeyError(combo)
    else:
        names = _names(combo.strip())
    specs: list[KeySpec] = []
    for part in names:
        spec = resolve_key(part)
        if spec not in specs:
            specs.append(spec)
    if not any(s.name in _SHIFT_NAMES for s in specs):
        for i, spec in enumerate(specs):
            if spec.name in SHIFTED_KEYS:
                specs.insert(i, _SHIFT)
                break
    return specs
