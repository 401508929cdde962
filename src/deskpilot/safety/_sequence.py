"""What one action means after the ones before it (the policy checks actions one by one).

Two sequences defeat per-action rules:

- **Launchers.** A lone ``win`` (``super``), ``alt+f1`` or ``ctrl+escape`` opens a
  launcher or start menu; typing ``terminal`` and Enter there runs a program, exactly what
  the ``win+r`` deny stops. After a launcher key, Enter (a key, or a newline in typed
  text) is denied until the launcher is dismissed (``escape``) or the pointer is used.
- **Secrets typed in pieces.** ``sk-proj-Zq8w`` + ``Er4t...`` + ``...Xc3v`` pass a
  per-call secret scan. The tail of the text typed so far is kept, and each new text is
  scanned joined to it: a secret that only exists across calls is denied like a whole
  one, and its pieces are remembered so records written from then on redact them.

:class:`ActionSequence` is per run and thread-safe; :class:`~deskpilot.safety.SafetyGuard`
asks it for findings before the policy decides and tells it what was allowed after.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from deskpilot._errors import UnknownKeyError
from deskpilot.safety._combos import combo_keys, format_combo
from deskpilot.safety._secrets import SecretDetector, find_secrets

__all__ = ["LAUNCHER_KEYS", "ActionSequence", "Finding"]

#: ``(verdict, rule, reason, category)`` as :meth:`Policy.evaluate` returns them.
Finding = tuple[str, str, str, str]

#: Keys that open a launcher where typing a name and Enter starts a program.
LAUNCHER_KEYS: tuple[frozenset[str], ...] = (
    frozenset({"win"}),
    frozenset({"alt", "f1"}),
    frozenset({"ctrl", "escape"}),
)
_ENTER = (frozenset({"enter"}), frozenset({"numenter"}))
_DISMISS = frozenset({"escape"})
#: How much typed text is kept to find a secret split across calls (secrets are shorter).
TAIL_CHARS = 512


def _keysets(combos: Sequence[str]) -> list[frozenset[str]]:
    out = []
    for combo in combos:
        try:
            out.append(combo_keys(combo))
        except UnknownKeyError:
            continue  # the policy denies an unparsable combo itself
    return out


class ActionSequence:
    """The state one run's actions leave for the next check (see the module doc)."""

    def __init__(
        self,
        detectors: Sequence[SecretDetector],
        *,
        allowed_secret: Callable[[str], bool] = lambda value: False,
    ) -> None:
        self.detectors = tuple(detectors)
        self.allowed_secret = allowed_secret
        self._lock = threading.Lock()
        self._launcher: str | None = None
        self._tail = ""
        #: Texts typed (or asked to be typed) that together form a secret: redact them.
        self.secret_pieces: list[str] = []
        self._pieces_of: list[tuple[int, str]] = []  # (offset in the tail, text) of recent typing

    # -- before the decision ---------------------------------------------------------------

    def findings(self, keys: Sequence[str], text: str | None) -> list[Finding]:
        """Denials this action earns from what came before it."""
        found: list[Finding] = []
        with self._lock:
            launcher, tail, pieces = self._launcher, self._tail, list(self._pieces_of)
        sets = _keysets(keys)
        if launcher is not None and (
            any(s in _ENTER for s in sets) or (text and ("\n" in text or "\r" in text))
        ):
            found.append(
                (
                    "deny",
                    "keys.sequence:launcher",
                    f"{launcher} opened a launcher before this: a name typed there and Enter start a program, "
                    "which is what the win+r / alt+f2 denies stop",
                    "keys",
                )
            )
        if text and self.detectors:
            joined = tail + text
            for match in find_secrets(joined, self.detectors):
                if not (match.start < len(tail) < match.end):
                    continue  # wholly old (already judged) or wholly new (the policy's own scan)
                if self.allowed_secret(joined[match.start : match.end]):
                    continue
                found.append(
                    (
                        "deny",
                        f"text.secret_split:{match.detector}",
                        f"together with the text typed just before, this types {match.description}",
                        "text",
                    )
                )
                self._remember_pieces(match.start, pieces, text)
                break
        return found

    def _remember_pieces(self, start: int, pieces: list[tuple[int, str]], text: str) -> None:
        with self._lock:
            for offset, piece in pieces:
                if offset + len(piece) > start:
                    self.secret_pieces.append(piece)
            self.secret_pieces.append(text)

    # -- after it --------------------------------------------------------------------------

    def done(self, keys: Sequence[str], text: str | None, pointer: bool) -> None:
        """Note an action that was allowed (a denied one did not happen)."""
        sets = _keysets(keys)
        with self._lock:
            if pointer:
                self._launcher = None
            for keyset in sets:
                if keyset in LAUNCHER_KEYS:
                    self._launcher = format_combo(keyset)
                elif keyset == _DISMISS or keyset in _ENTER:
                    self._launcher = None
                if keyset in _ENTER:
                    self._append("\n")
                elif keyset == frozenset({"tab"}):
                    self._append("\t")
            if text:
                if "\n" in text or "\r" in text:
                    self._launcher = None
                self._pieces_of.append((len(self._tail), text))
                self._append(text)

    def _append(self, text: str) -> None:
        joined = self._tail + text
        cut = max(0, len(joined) - TAIL_CHARS)
        self._tail = joined[cut:]
        self._pieces_of = [
            (offset - cut, piece)
            for offset, piece in self._pieces_of
            if offset - cut + len(piece) > 0
        ]
