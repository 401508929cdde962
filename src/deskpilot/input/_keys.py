"""The key vocabulary: canonical names, aliases, Windows VK codes and X11 keysyms.

(Work in progress: the table is filled in by the input-backend change.)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KeySpec"]


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One key. ``vk``/``extended`` drive SendInput, ``keysym`` drives XTest."""

    name: str  # canonical lower-case name, e.g. "ctrl", "pageup", "f13", "a"
    vk: int | None  # Windows virtual-key code, None where Windows has no such key
    extended: bool  # KEYEVENTF_EXTENDEDKEY needed (right ctrl/alt, arrows, ins/del, ...)
    keysym: int | None  # X11 keysym, None where X has no such key
    modifier: bool = False
