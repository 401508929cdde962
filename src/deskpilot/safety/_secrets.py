"""Secret detectors: regular expressions (plus a checksum where one exists) that find
credentials in text the agent is about to type or a record it is about to write.

The same detectors serve two masters: the policy layer refuses to *type* a secret, and
the log redaction replaces secrets in run records. A detector reports the span of the
secret *value* only, so ``password=hunter2`` is redacted to ``password=[REDACTED:password]``
and the reader still sees which field held it.

Detectors are tuned for precision over recall: a false positive in the policy blocks a
legitimate action, so credit-card numbers must pass the Luhn check and start with a
known issuer prefix, and API keys need their vendor prefix and a minimum length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from deskpilot._errors import ConfigError

__all__ = [
    "DEFAULT_DETECTORS",
    "DETECTOR_NAMES",
    "SecretDetector",
    "SecretMatch",
    "custom_detector",
    "find_secrets",
    "luhn_valid",
    "select_detectors",
]


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) checksum of a string of ASCII digits."""
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# Issuer prefixes (IIN ranges) and lengths of the card networks people actually type.
_CARD_PREFIX = re.compile(
    r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|3(?:0[0-5]|[68])|6(?:011|5|4[4-9])|35"
)


_GROUP = re.compile(r"[0-9]+")


def _card_ok(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) is not None and luhn_valid(digits)


def _card_spans(run: str) -> Iterator[tuple[int, int]]:
    """Card numbers inside a run of digit groups joined by spaces/dashes.

    A card is one whole group (unbroken) or consecutive whole groups of at least three
    digits each (4-4-4-4, Amex 4-6-5, 4-4-4-4-3), so "5 4111 1111 1111 1111" and
    "4111111111111111 0" are found, while an unbroken 40-digit number (a hash, an id)
    or a list of small numbers is no card.
    """
    groups = [(m.start(), m.end()) for m in _GROUP.finditer(run)]
    i = 0
    while i < len(groups):
        best: tuple[int, int] | None = None
        digits = ""
        for j in range(i, len(groups)):
            start, end = groups[j]
            if j > i and (end - start < 3 or groups[i][1] - groups[i][0] < 3):
                break
            digits += run[start:end]
            if len(digits) > 19:
                break
            if _card_ok(digits):
                best = (groups[i][0], end)  # keep extending: the longest card wins
        if best is not None:
            yield best
            while i < len(groups) and groups[i][0] < best[1]:
                i += 1
        else:
            i += 1


@dataclass(frozen=True, slots=True)
class SecretDetector:
    """One kind of secret.

    ``pattern`` finds candidates; its group ``value`` (when present) is the secret itself,
    otherwise the whole match. ``validate`` (optional) gets the secret and may reject it.
    ``refine`` (optional) finds the secrets inside a candidate as relative spans, when one
    match can hold several or a shorter one (card numbers in a run of digits).
    ``hints`` are lower-case literals of which at least one occurs in any text the
    pattern can match: the pattern only runs when :func:`find_secrets` sees one, which
    keeps ordinary records (no "sk-", no "password") at a substring search per detector.
    """

    name: str
    description: str
    pattern: re.Pattern[str]
    validate: Callable[[str], bool] | None = None
    refine: Callable[[str], Iterable[tuple[int, int]]] | None = None
    hints: tuple[str, ...] = ()

    def finditer(self, text: str) -> Iterator[SecretMatch]:
        group = "value" if "value" in self.pattern.groupindex else 0
        for m in self.pattern.finditer(text):
            start, end = m.span(group)
            if start < 0 or start == end:
                continue
            value = text[start:end]
            if self.refine is not None:
                for rel_start, rel_end in self.refine(value):
                    yield SecretMatch(self.name, self.description, start + rel_start, start + rel_end)
                continue
            if self.validate is not None and not self.validate(value):
                continue
            yield SecretMatch(self.name, self.description, start, end)


@dataclass(frozen=True, slots=True)
class SecretMatch:
    """Where a secret is: ``text[start:end]``. The value itself is deliberately not kept,
    so a match can be logged or shown to the model without leaking it."""

    detector: str
    description: str
    start: int
    end: int


def _d(name: str, description: str, pattern: str, *, hints: tuple[str, ...],
       refine: Callable[[str], Iterable[tuple[int, int]]] | None = None) -> SecretDetector:
    return SecretDetector(name, description, re.compile(pattern), None, refine, hints)


# Patterns start with their literal prefix so the regex engine can skip ahead to it;
# the "not glued to a longer word" checks come right after it as look-behinds ("\b" would
# split "sk-abc" at the dash and miss keys glued to punctuation or JSON quotes).
DEFAULT_DETECTORS: tuple[SecretDetector, ...] = (
    _d(
        "private_key",
        "a private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?",
        hints=("-----begin",),
    ),
    _d(
        "openai_api_key",
        "an OpenAI/Anthropic-style API key (sk-...)",
        r"sk-(?<![A-Za-z0-9_-]sk-)(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_-]{20,}",
        hints=("sk-",),
    ),
    _d(
        "aws_access_key_id",
        "an AWS access key id (AKIA...)",
        r"A(?:KIA|SIA|GPA|IDA|ROA)(?<![A-Z0-9]A...)[0-9A-Z]{16}(?![0-9A-Z])",
        hints=("akia", "asia", "agpa", "aida", "aroa"),
    ),
    _d(
        "aws_secret_access_key",
        "an AWS secret access key",
        r"(?i:aws_?secret_?(?:access_?)?key)[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        hints=("aws",),
    ),
    _d(
        "github_token",
        "a GitHub token (ghp_/gho_/ghs_/github_pat_...)",
        r"g(?:h[pousr]_(?<![A-Za-z0-9_]g..._)[A-Za-z0-9]{30,}|ithub_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,})",
        hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _d(
        "slack_token",
        "a Slack token (xox...-)",
        r"xox(?<![A-Za-z0-9]xox)[abposr]-[A-Za-z0-9-]{10,}",
        hints=("xox",),
    ),
    _d(
        "google_api_key",
        "a Google API key (AIza...)",
        r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        hints=("aiza",),
    ),
    _d(
        "jwt",
        "a JSON web token",
        r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        hints=("eyj",),
    ),
    _d(
        "password",
        "a password or secret in a key=value form",
        # key, optional closing quote of a JSON/INI key, separator, optional opening quote,
        # then the value up to whitespace or a closing quote/brace/comma.
        r"(?i:(?<![A-Za-z0-9])(?:pass(?:word|wd|phrase)?|pwd|secret|client_secret|api[_-]?key|access[_-]?token|auth[_-]?token))"
        r"[\"']?\s*[:=]\s*[\"']?(?P<value>[^\s\"',;}&]{1,200})",
        hints=("pass", "pwd", "secret", "api", "token"),
    ),
    _d(
        "credit_card",
        "a payment card number",
        # a run of digits joined by spaces/dashes; _card_spans finds the cards inside it
        r"[0-9][0-9 -]{11,}[0-9]",
        hints=(),
        refine=_card_spans,
    ),
)

DETECTOR_NAMES: tuple[str, ...] = tuple(d.name for d in DEFAULT_DETECTORS)
_BY_NAME = {d.name: d for d in DEFAULT_DETECTORS}


def custom_detector(pattern: str, *, name: str = "custom") -> SecretDetector:
    """A detector from a user regex (config ``deny_text``); a bad regex is a ConfigError."""
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"secret pattern must be a non-empty string, got {pattern!r}", pattern=repr(pattern))
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"invalid regular expression {pattern!r}: {exc}", pattern=pattern) from None
    return SecretDetector(name, f"text matching {pattern!r}", compiled)


def select_detectors(names: Iterable[str] | None) -> tuple[SecretDetector, ...]:
    """Built-in detectors by name (``None`` or ``["all"]`` = all of them, ``[]`` = none)."""
    if names is None:
        return DEFAULT_DETECTORS
    chosen: list[SecretDetector] = []
    for name in names:
        if name == "all":
            return DEFAULT_DETECTORS
        detector = _BY_NAME.get(name)
        if detector is None:
            raise ConfigError(
                f"unknown secret detector {name!r}; known: all, {', '.join(DETECTOR_NAMES)}",
                detector=name,
            )
        if detector not in chosen:
            chosen.append(detector)
    return tuple(chosen)


def find_secrets(text: str, detectors: Sequence[SecretDetector] = DEFAULT_DETECTORS) -> list[SecretMatch]:
    """Every secret in ``text``, sorted by position, overlapping matches merged into the
    earliest (then longest) one."""
    if not text:
        return []
    lowered: str | None = None
    found: list[SecretMatch] = []
    for detector in detectors:
        if detector.hints:
            if lowered is None:
                lowered = text.lower()
            if not any(h in lowered for h in detector.hints):
                continue
        found.extend(detector.finditer(text))
    if not found:
        return found
    found.sort(key=lambda m: (m.start, -m.end))
    merged: list[SecretMatch] = []
    for match in found:
        if merged and match.start < merged[-1].end:
            last = merged[-1]
            if match.end > last.end:
                merged[-1] = SecretMatch(last.detector, last.description, last.start, match.end)
            continue
        merged.append(match)
    return merged
