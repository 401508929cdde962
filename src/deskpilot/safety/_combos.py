"""Key combos as order-free sets of canonical key names, for matching policy rules.

``parse_combo`` (the input vocabulary) already folds case, aliases and separators
(``"Win+R"``, ``"super+r"``, ``"win + r"``). Rules need two more folds so that one rule
covers every way to press the same keys:

- sided modifiers become generic: ``lctrl``/``rctrl`` -> ``ctrl``, ``rwin`` -> ``win``
  (a rule against ``win+r`` must also stop ``rwin+r``);
- shifted characters become their base key: ``"?"`` -> ``slash``, ``"plus"`` -> ``equal``
  (``parse_combo`` already inserted the shift they need), so ``ctrl+?`` and
  ``ctrl+shift+/`` are the same combo.
"""

from __future__ import annotations

from deskpilot._errors import UnknownKeyError
from deskpilot.input import SHIFTED_KEYS, KeySpec, parse_combo, resolve_key

__all__ = ["combo_keys", "format_combo"]

_GENERIC = {
    "lctrl": "ctrl",
    "rctrl": "ctrl",
    "lalt": "alt",
    "ralt": "alt",
    "lshift": "shift",
    "rshift": "shift",
    "lwin": "win",
    "rwin": "win",
}
_MODIFIER_ORDER = ("ctrl", "alt", "shift", "win")


def _base_of_shifted() -> dict[str, str]:
    """Shifted character name -> the name of the unshifted key on the same VK (US layout)."""
    by_vk: dict[int, str] = {}
    for ch in "0123456789,.-=;'`/\\[]":
        spec = resolve_key(ch)
        if spec.vk is not None:
            by_vk[spec.vk] = spec.name
    out: dict[str, str] = {}
    for name in SHIFTED_KEYS:
        spec = resolve_key(name)
        if spec.vk is not None and spec.vk in by_vk:
            out[name] = by_vk[spec.vk]
    return out


_SHIFTED_BASE = _base_of_shifted()


def _canonical(spec: KeySpec) -> str:
    name = _GENERIC.get(spec.name, spec.name)
    return _SHIFTED_BASE.get(name, name)


def combo_keys(combo: str) -> frozenset[str]:
    """The canonical key set of ``combo``; raises UnknownKeyError for a bad name."""
    if not isinstance(combo, str):
        raise UnknownKeyError(repr(combo))
    return frozenset(_canonical(spec) for spec in parse_combo(combo))


def format_combo(keys: frozenset[str]) -> str:
    """A stable, readable spelling: modifiers first in ctrl/alt/shift/win order."""
    mods = [k for k in _MODIFIER_ORDER if k in keys]
    rest = sorted(k for k in keys if k not in _MODIFIER_ORDER)
    return "+".join(mods + rest)
