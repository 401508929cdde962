"""What the Windows tests need to know about running under Wine (docs/wine-deviations.md)."""

from __future__ import annotations

import ctypes
import sys


def on_wine() -> bool:
    """True inside Wine (its ntdll exports wine_get_version; Windows' does not)."""
    if sys.platform != "win32":
        return False
    from win_target_app import wine_version

    return wine_version() is not None


def tk_entry_text(text: str) -> str:
    """The text a Tk Entry shows after ``text`` was typed with KEYEVENTF_UNICODE events.

    On Windows: ``text``. Under Wine each character is followed by what the keyboard layout
    gives for a virtual key equal to the character's value. Wine puts the character into the
    high word of the VK_PACKET messages' lParam (server/queue.c, queue_keyboard_message;
    Windows leaves it 0), Tk 8.6 re-posts a VK_PACKET WM_KEYDOWN with wParam = HIWORD(lParam)
    (win/tkWinX.c, Tk_TranslateWinEvent), and TranslateMessage turns that into a second
    WM_CHAR through the layout. docs/wine-deviations.md has the source lines. The prediction
    asks the layout itself (ToUnicode), so the check stays exact: any other extra, missing
    or reordered character still fails, and on Windows the text must arrive as typed.
    """
    if not on_wine():
        return text
    user32 = ctypes.WinDLL("user32")
    user32.ToUnicode.argtypes = [
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_wchar_p,
        ctypes.c_int,
        ctypes.c_uint,
    ]
    state = (ctypes.c_ubyte * 256)()
    out = []
    for unit in _utf16_units(text):
        out.append(unit)
        code = ord(unit)
        buf = ctypes.create_unicode_buffer(8)
        # wParam is a WPARAM; Wine's TranslateMessage uses its low 16 bits as the key.
        n = user32.ToUnicode(code & 0xFFFF, 0, state, buf, 8, 0) if code < 0x100 else 0
        if n > 0:
            out.append(buf.value[:n])
    return _join_surrogates("".join(out))


def _utf16_units(text: str) -> list[str]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(data), 2)]


def _join_surrogates(text: str) -> str:
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
