"""Taming values a model (or a hostile server) wrote, before they reach a counter, a run
file or a terminal.

- :func:`terminal_text`: the one sanitizer for every model-written string that is printed.
  Control characters (C0 but newline/tab, DEL, C1) and bidi overrides are shown as
  ``\\x1b``-style escapes, so no escape sequence (colours, cursor moves, OSC 52 clipboard
  writes, title changes, hyperlinks) can reach the terminal while the text stays readable.
- :func:`scrub_surrogates`: lone UTF-16 surrogates (``"\\ud800"`` in JSON reads into a str
  that cannot be encoded as UTF-8) become U+FFFD, in strings nested in lists and dicts.
- :func:`token_count`: a usage count as an int >= 0 (0 for anything that is not one).
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["scrub_surrogates", "terminal_text", "token_count"]


def _escapes(newlines: bool) -> dict[int, str]:
    table = {cp: f"\\x{cp:02x}" for cp in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
    table[0x09] = "\t" if newlines else "\\t"
    if newlines:
        del table[0x0A]
    else:
        table[0x0A] = "\\n"
    # Bidi embeddings/overrides/isolates reorder what follows on the line ("Trojan source").
    for cp in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)):
        table[cp] = f"\\u{cp:04x}"
    # Python never holds a valid pair as two surrogates; a lone one cannot be encoded.
    table.update({cp: "\ufffd" for cp in range(0xD800, 0xE000)})
    return table


_MULTI_LINE = _escapes(True)
_ONE_LINE = _escapes(False)


def terminal_text(value: object, *, one_line: bool = False) -> str:
    """``value`` as text that is safe to print: no control character reaches the terminal.

    Newlines and tabs are kept unless ``one_line`` (then they are shown as ``\\n``/``\\t``);
    every other control character is shown as its escape. Linear in the length.
    """
    text = value if isinstance(value, str) else str(value)
    return text.translate(_ONE_LINE if one_line else _MULTI_LINE)


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    Returns ``value`` itself when nothing needed replacing (the common case costs one
    regex scan per string and no copies).
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        items = [scrub_surrogates(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        pairs = [(scrub_surrogates(k), scrub_surrogates(v)) for k, v in value.items()]
        changed = any(
            k is not k0 or v is not v0
            for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)
        )
        return dict(pairs) if changed else value
    return value


_MAX_COUNT = 10**15


def token_count(value: Any) -> int:
    """A ``usage`` token count as a non-negative int; 0 when it is not a count.

    Servers send ints; some send them as numeric text ("12") or floats. Anything else
    (``"lots"``, lists, booleans, NaN, infinities, negatives, absurd sizes) counts as 0 instead of
    ending the run.
    """
    if isinstance(value, bool):
        return 0
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0
    elif isinstance(value, float):
        value = int(value) if math.isfinite(value) else 0
    # Beyond any real count (and beyond what a JSON writer takes as an integer).
    return value if isinstance(value, int) and 0 <= value < _MAX_COUNT else 0
