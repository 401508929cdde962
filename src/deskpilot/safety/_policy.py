"""The policy layer between the model and the hands.

Every action the model asks for is described as an :class:`ActionRequest` (the keys it
presses, the text it types, whether it uses the pointer) and checked against a
:class:`Policy` before the input backend sees it. The answer is a :class:`Decision`:
allowed, or denied with the rule that matched and a sentence a person (and the model)
can act on. :func:`policy_denied_payload` turns a denial into the tool error the model
receives, ``{"ok": false, "error": {"type": "policy_denied", "message": ...}}``.

Rules, from the ``[policy]`` table of the TOML config (all keys optional)::

    [policy]
    mode = "enforce"            # enforce | confirm (ask instead of deny) | audit (log only) | off
    allow_keys = ["alt+f4"]     # lifts the default deny of alt+f4
    deny_keys = ["ctrl+w"]      # added to the defaults (default_deny_keys = false drops them)
    confirm_keys = ["ctrl+s"]   # ask the user in the terminal first
    unmatched_keys = "allow"    # allow | deny | confirm: combos no rule names (deny = allowlist)
    secret_detectors = ["all"]  # built-in detectors refusing to type secrets ([] = none)
    deny_text = ['rm\\s+-rf']   # extra regular expressions typed text must not match
    allow_text = ['sk-test-\\w+'] # secrets that fully match one of these may be typed
    confirm_text = []
    allow_windows = []          # non-empty: act only while one of these windows is in front
    deny_windows = ["*Bitwarden*"]  # never act while such a window is in front
    confirm_windows = []
    unknown_window = "allow"    # allow | deny | confirm: when the foreground window is unknown
    confirm_timeout = 60.0      # seconds to wait for an answer, then deny

Key rules match by key *set*: a rule matches every combo that contains all its keys,
so ``deny_keys = ["alt+f4"]`` also stops ``shift+alt+f4``. When several rules match,
the most specific one (most keys) wins, and on a tie deny beats confirm beats allow;
an allow rule spelled exactly like a default deny removes that default. Window
patterns are case-insensitive globs against the title or the class; prefix them with
``title:`` or ``class:`` to pick one (``"class:keepassxc"``).
"""

from __future__ import annotations

import fnmatch
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from deskpilot._errors import (
    ActionDeniedError,
    ConfigError,
    ConfirmationAborted,
    NoTerminalError,
    UnknownKeyError,
)
from deskpilot.safety._combos import combo_keys, format_combo
from deskpilot.safety._secrets import SecretDetector, find_secrets, select_detectors
from deskpilot.safety._window import WindowInfo

__all__ = [
    "DEFAULT_DENY_KEYS",
    "DEFAULT_DENY_WINDOWS",
    "ActionRequest",
    "ConfirmAnswer",
    "ConfirmPrompt",
    "Decision",
    "KeyRule",
    "PendingConfirmation",
    "Policy",
    "PolicyMode",
    "WindowRule",
    "policy_denied_payload",
]

PolicyMode = Literal["enforce", "confirm", "audit", "off"]
Verdict = Literal["allow", "deny", "confirm"]
ConfirmAnswer = Literal["yes", "no", "always"]
#: Asks the user; returns True/"yes" (this once), "always" (for the rest of the run) or
#: False/"no". Raises :class:`NoTerminalError` when there is nobody to ask.
ConfirmPrompt = Callable[[str], "bool | str"]

_MODES: tuple[str, ...] = ("enforce", "confirm", "audit", "off")
_VERDICTS: tuple[str, ...] = ("allow", "deny", "confirm")
_STRENGTH = {"allow": 0, "confirm": 1, "deny": 2}

#: Combos refused unless allowed, with why: each hands the model a way out of the task
#: (a command prompt, a terminal), ends the session or kills the desktop.
DEFAULT_DENY_KEYS: tuple[tuple[str, str], ...] = (
    ("win+r", "opens the Run dialog, which runs arbitrary commands"),
    ("win+x", "opens the power-user menu (terminal, shutdown)"),
    ("win+l", "locks the session"),
    ("alt+f4", "closes the active window (from the desktop: the shutdown dialog)"),
    ("alt+f2", "opens the run-a-command dialog on Linux desktops (GNOME, KDE, Xfce)"),
    ("ctrl+alt+delete", "opens the secure attention screen"),
    ("ctrl+alt+end", "sends ctrl+alt+delete to a remote desktop session"),
    ("ctrl+shift+escape", "opens the Task Manager"),
    ("ctrl+alt+t", "opens a terminal on Linux desktops"),
    ("ctrl+alt+backspace", "kills the X server where zapping is enabled"),
    ("alt+printscreen", "is the Linux Magic SysRq prefix (can reboot or kill processes)"),
    *((f"ctrl+alt+f{n}", "switches to a virtual console") for n in range(1, 13)),
)

#: Windows never acted upon unless allowed: password managers hold every secret.
DEFAULT_DENY_WINDOWS: tuple[str, ...] = (
    "*KeePass*",
    "*1Password*",
    "*Bitwarden*",
    "*LastPass*",
    "*Dashlane*",
    "class:*keepassxc*",
)


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What an action does to the desktop, independent of how the tool is spelled.

    ``tool`` is the name the model used (for messages). ``keys`` are the combos it
    presses or holds, ``text`` what it types, ``pointer`` whether it moves, clicks,
    drags or scrolls.
    """

    tool: str
    keys: tuple[str, ...] = ()
    text: str | None = None
    pointer: bool = False

    def describe(self) -> str:
        parts = [self.tool]
        if self.keys:
            parts.append(" ".join(repr(k) for k in self.keys))
        if self.text is not None:
            parts.append(f"({len(self.text)} chars of text)")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's answer for one action.

    ``rule`` names what decided (``"keys.deny:win+r"``, ``"text.secret:openai_api_key"``,
    ``"window.deny:*KeePass*"``, ``"default"``); ``reason`` says it in words.
    ``confirmed`` is None when nobody was asked, else the user's answer. In audit mode
    ``allowed`` is true and ``would_deny`` records what enforce mode would have done.
    """

    allowed: bool
    rule: str
    reason: str
    category: str = "policy"  # keys | text | window | policy
    confirmed: bool | None = None
    would_deny: bool = False

    def payload(self) -> dict[str, Any] | None:
        """The tool error payload of a denial (None when allowed)."""
        return None if self.allowed else policy_denied_payload(self)

    def raise_if_denied(self) -> None:
        if not self.allowed:
            raise ActionDeniedError(self.reason, rule=self.rule, category=self.category)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"allowed": self.allowed, "rule": self.rule, "reason": self.reason,
                               "category": self.category}
        if self.confirmed is not None:
            out["confirmed"] = self.confirmed
        if self.would_deny:
            out["would_deny"] = True
        return out


ALLOWED = Decision(True, "default", "no rule matched", "policy")


def policy_denied_payload(decision: Decision | ActionDeniedError | str, *, tool: str | None = None) -> dict[str, Any]:
    """``{"ok": False, "error": {"type": "policy_denied", "message": ..., "rule": ...}}``.

    The message tells the model the action was refused on purpose and must not be
    retried as is, so it neither loops on it nor tries to work around the rule.
    """
    if isinstance(decision, Decision):
        reason, rule = decision.reason, decision.rule
    elif isinstance(decision, ActionDeniedError):
        reason, rule = str(decision), str(decision.details.get("rule", "policy"))
    else:
        reason, rule = str(decision), "policy"
    subject = f"{tool} was" if tool else "This action was"
    message = (
        f"{subject} refused by the safety policy: {reason}. "
        "Do not retry it or work around it; continue the task another way or report that it cannot be done."
    )
    return {"ok": False, "error": {"type": "policy_denied", "message": message, "rule": rule}}


@dataclass(frozen=True, slots=True)
class KeyRule:
    keys: frozenset[str]
    verdict: Verdict
    reason: str
    source: str  # "default" or "config"

    @property
    def name(self) -> str:
        return f"keys.{self.verdict}:{format_combo(self.keys)}"


@dataclass(frozen=True, slots=True)
class WindowRule:
    pattern: str  # the glob as written (without its field prefix)
    field: Literal["any", "title", "class"]
    verdict: Verdict
    source: str

    def matches(self, window: WindowInfo) -> bool:
        pat = self.pattern.casefold()
        values: list[str] = []
        if self.field in ("any", "title"):
            values.append(window.title)
        if self.field in ("any", "class"):
            values.extend((window.wm_class, window.instance))
        return any(v and fnmatch.fnmatchcase(v.casefold(), pat) for v in values)

    @property
    def name(self) -> str:
        prefix = "" if self.field == "any" else f"{self.field}:"
        return f"window.{self.verdict}:{prefix}{self.pattern}"


@dataclass(frozen=True, slots=True)
class _TextRule:
    pattern: re.Pattern[str]
    verdict: Verdict

    @property
    def name(self) -> str:
        return f"text.{self.verdict}:{self.pattern.pattern}"


# ------------------------------------------------------------------- config parsing


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """A list of strings from TOML, or a comma-separated string (env vars, --set flags)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise ConfigError(f"policy.{where}: expected strings, got {item!r}", where=f"policy.{where}")
            if item.strip():
                out.append(item.strip())
        return tuple(out)
    raise ConfigError(f"policy.{where}: expected a list of strings, got {type(value).__name__}", where=f"policy.{where}")


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ConfigError(f"policy.{where}: {value!r} is not a boolean", where=f"policy.{where}")


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ConfigError(f"policy.{where}: {value!r} is not one of {', '.join(choices)}", where=f"policy.{where}")


def _combo_set(text: str, where: str) -> frozenset[str]:
    try:
        keys = combo_keys(text)
    except UnknownKeyError as exc:
        raise ConfigError(f"policy.{where}: {exc}", where=f"policy.{where}", combo=text) from None
    return keys


def _regex(text: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"policy.{where}: invalid regular expression {text!r}: {exc}", where=f"policy.{where}") from None


def _window_rule(text: str, verdict: Verdict, source: str) -> WindowRule:
    head, sep, rest = text.partition(":")
    if sep and head.strip().lower() in ("title", "class"):
        return WindowRule(rest.strip(), "title" if head.strip().lower() == "title" else "class", verdict, source)
    return WindowRule(text, "any", verdict, source)


_KNOWN_KEYS = (
    "allow_keys", "allow_text", "allow_windows", "confirm_keys", "confirm_text", "confirm_timeout",
    "confirm_windows", "default_deny_keys", "default_deny_windows", "deny_keys", "deny_text",
    "deny_windows", "mode", "secret_detectors", "unknown_window", "unmatched_keys",
)


# ------------------------------------------------------------------- the policy


@dataclass
class Policy:
    """Allow/deny/confirm rules for keys, typed text and foreground windows.

    Build it with :meth:`from_config` (a ``[policy]`` table) or :meth:`default`.
    ``prompt`` asks the user in confirm cases; the default asks on the terminal and
    denies when there is none. Thread-safe: "always" answers are remembered under a lock.
    """

    mode: PolicyMode = "enforce"
    key_rules: tuple[KeyRule, ...] = ()
    unmatched_keys: Verdict = "allow"
    detectors: tuple[SecretDetector, ...] = ()
    text_rules: tuple[_TextRule, ...] = ()
    allow_text: tuple[re.Pattern[str], ...] = ()
    window_rules: tuple[WindowRule, ...] = ()
    unknown_window: Verdict = "allow"
    confirm_timeout: float = 60.0
    prompt: ConfirmPrompt | None = None
    _always: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def default(cls, *, prompt: ConfirmPrompt | None = None) -> Policy:
        """The policy used when the config says nothing: default key and window denies,
        every secret detector, enforce mode."""
        return cls.from_config({}, prompt=prompt)

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None, *, prompt: ConfirmPrompt | None = None,
                    extra_deny_keys: Iterable[tuple[str, str]] = ()) -> Policy:
        """Build from a ``[policy]`` table (see the module doc). Invalid entries raise
        :class:`~deskpilot._errors.ConfigError` naming the key.

        ``extra_deny_keys`` are ``(combo, reason)`` pairs the caller always denies (the
        kill-switch hotkey: the model must not be able to press it)."""
        table = dict(table or {})
        for key in table:
            if key not in _KNOWN_KEYS:
                import difflib

                close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"[policy]: unknown setting {key!r}{hint}", where=f"policy.{key}")
        mode = _choice(table.get("mode", "enforce"), _MODES, "mode")

        allow = [(_combo_set(c, "allow_keys"), c) for c in _strings(table.get("allow_keys"), "allow_keys")]
        allowed_sets = {keys for keys, _ in allow}
        rules: list[KeyRule] = []
        if _bool(table.get("default_deny_keys", True), "default_deny_keys"):
            for combo, reason in DEFAULT_DENY_KEYS:
                keys = combo_keys(combo)
                if keys not in allowed_sets:
                    rules.append(KeyRule(keys, "deny", f"{combo} {reason}", "default"))
        for combo, reason in extra_deny_keys:
            rules.append(KeyRule(_combo_set(combo, "deny_keys"), "deny", f"{combo} {reason}", "safety"))
        for combo in _strings(table.get("deny_keys"), "deny_keys"):
            rules.append(KeyRule(_combo_set(combo, "deny_keys"), "deny", f"{combo} is denied by the configuration", "config"))
        for combo in _strings(table.get("confirm_keys"), "confirm_keys"):
            rules.append(KeyRule(_combo_set(combo, "confirm_keys"), "confirm", f"{combo} needs confirmation", "config"))
        for keys, combo in allow:
            rules.append(KeyRule(keys, "allow", f"{combo} is allowed by the configuration", "config"))

        try:
            detectors = select_detectors(
                None if "secret_detectors" not in table else _strings(table["secret_detectors"], "secret_detectors")
            )
        except ConfigError as exc:
            if str(exc).startswith("policy."):
                raise
            raise ConfigError(f"policy.secret_detectors: {exc}", where="policy.secret_detectors") from None
        text_rules = [
            _TextRule(_regex(p, "deny_text"), "deny") for p in _strings(table.get("deny_text"), "deny_text")
        ] + [
            _TextRule(_regex(p, "confirm_text"), "confirm") for p in _strings(table.get("confirm_text"), "confirm_text")
        ]
        allow_text = tuple(_regex(p, "allow_text") for p in _strings(table.get("allow_text"), "allow_text"))

        windows: list[WindowRule] = []
        allow_windows = _strings(table.get("allow_windows"), "allow_windows")
        if _bool(table.get("default_deny_windows", True), "default_deny_windows"):
            allowed_globs = {w.casefold() for w in allow_windows}
            windows += [_window_rule(w, "deny", "default") for w in DEFAULT_DENY_WINDOWS if w.casefold() not in allowed_globs]
        windows += [_window_rule(w, "deny", "config") for w in _strings(table.get("deny_windows"), "deny_windows")]
        windows += [_window_rule(w, "confirm", "config") for w in _strings(table.get("confirm_windows"), "confirm_windows")]
        windows += [_window_rule(w, "allow", "config") for w in allow_windows]

        timeout_raw = table.get("confirm_timeout", 60.0)
        if isinstance(timeout_raw, bool) or not isinstance(timeout_raw, (int, float, str)):
            raise ConfigError(f"policy.confirm_timeout: {timeout_raw!r} is not a number", where="policy.confirm_timeout")
        try:
            timeout = float(timeout_raw)
        except ValueError:
            raise ConfigError(f"policy.confirm_timeout: {timeout_raw!r} is not a number", where="policy.confirm_timeout") from None
        if not math.isfinite(timeout) or timeout <= 0:
            raise ConfigError(f"policy.confirm_timeout: {timeout_raw!r} must be a positive number", where="policy.confirm_timeout")

        return cls(
            mode=mode,  # type: ignore[arg-type]
            key_rules=tuple(rules),
            unmatched_keys=_choice(table.get("unmatched_keys", "allow"), _VERDICTS, "unmatched_keys"),  # type: ignore[arg-type]
            detectors=detectors,
            text_rules=tuple(text_rules),
            allow_text=allow_text,
            window_rules=tuple(windows),
            unknown_window=_choice(table.get("unknown_window", "allow"), _VERDICTS, "unknown_window"),  # type: ignore[arg-type]
            confirm_timeout=timeout,
            prompt=prompt,
        )

    @property
    def needs_window(self) -> bool:
        """Whether checks look at the foreground window at all (skip reading it if not)."""
        return self.mode != "off" and (bool(self.window_rules) or self.unknown_window != "allow")

    # -- single checks (no prompting) ------------------------------------------------------

    def keys_verdict(self, combo: str) -> tuple[Verdict, str, str]:
        """``(verdict, rule, reason)`` for one combo. An unparsable combo is denied: the
        input layer would reject it anyway, and a policy must never guess."""
        try:
            keys = combo_keys(combo)
        except UnknownKeyError as exc:
            return "deny", "keys.invalid", f"{combo!r} is not a valid key combo ({exc})"
        best: KeyRule | None = None
        for rule in self.key_rules:
            if rule.keys <= keys and (
                best is None
                or len(rule.keys) > len(best.keys)
                or (len(rule.keys) == len(best.keys) and _STRENGTH[rule.verdict] > _STRENGTH[best.verdict])
            ):
                best = rule
        if best is None:
            if self.unmatched_keys == "allow":
                return "allow", "default", "no rule matched"
            return self.unmatched_keys, f"keys.unmatched:{self.unmatched_keys}", (
                f"{format_combo(keys)} is not in the allowed key combos"
            )
        return best.verdict, best.name, best.reason

    def text_verdict(self, text: str) -> tuple[Verdict, str, str]:
        """``(verdict, rule, reason)`` for text about to be typed. The reason never
        repeats the matched text."""
        for m in find_secrets(text, self.detectors):
            value = text[m.start : m.end]
            if any(p.fullmatch(value) for p in self.allow_text):
                continue
            return "deny", f"text.secret:{m.detector}", f"the text contains {m.description}"
        worst: tuple[Verdict, str, str] = ("allow", "default", "no rule matched")
        for rule in self.text_rules:
            if rule.pattern.search(text) and _STRENGTH[rule.verdict] > _STRENGTH[worst[0]]:
                what = "is denied" if rule.verdict == "deny" else "needs confirmation"
                worst = (rule.verdict, rule.name, f"the text matches a pattern that {what} ({rule.pattern.pattern!r})")
        return worst

    def window_verdict(self, window: WindowInfo | None) -> tuple[Verdict, str, str]:
        """``(verdict, rule, reason)`` for acting while ``window`` is in front."""
        if window is None:
            has_allowlist = any(r.verdict == "allow" for r in self.window_rules)
            if has_allowlist:
                return "deny", "window.unknown", "the foreground window is unknown and only listed windows are allowed"
            if self.unknown_window == "allow":
                return "allow", "default", "no rule matched"
            return self.unknown_window, f"window.unknown:{self.unknown_window}", "the foreground window is unknown"
        verdict: Verdict = "allow"
        rule_name, reason = "default", "no rule matched"
        allowlist = [r for r in self.window_rules if r.verdict == "allow"]
        for rule in self.window_rules:
            if rule.verdict != "allow" and rule.matches(window) and _STRENGTH[rule.verdict] > _STRENGTH[verdict]:
                what = "is denied" if rule.verdict == "deny" else "needs confirmation"
                verdict, rule_name, reason = rule.verdict, rule.name, f"acting on window {window.describe()} {what}"
        if verdict == "deny":
            return verdict, rule_name, reason
        if allowlist and not any(r.matches(window) for r in allowlist):
            return "deny", "window.not_allowed", f"window {window.describe()} is not in the allowed windows"
        return verdict, rule_name, reason

    # -- the full check ------------------------------------------------------------------

    def evaluate(self, request: ActionRequest, window: WindowInfo | None = None,
                 extra: Sequence[tuple[Verdict, str, str, str]] = ()) -> list[tuple[Verdict, str, str, str]]:
        """Every non-allow verdict for ``request``: ``(verdict, rule, reason, category)``.
        ``extra``: findings from the actions before it (:mod:`deskpilot.safety._sequence`)."""
        found: list[tuple[Verdict, str, str, str]] = []
        if self.mode == "off":
            return found
        found.extend(extra)
        verdict, rule, reason = self.window_verdict(window)
        if verdict != "allow":
            found.append((verdict, rule, reason, "window"))
        for combo in request.keys:
            verdict, rule, reason = self.keys_verdict(combo)
            if verdict != "allow":
                found.append((verdict, rule, reason, "keys"))
        if request.text is not None:
            verdict, rule, reason = self.text_verdict(request.text)
            if verdict != "allow":
                found.append((verdict, rule, reason, "text"))
        return found

    def check(self, request: ActionRequest, window: WindowInfo | None = None) -> Decision:
        """Decide ``request`` while ``window`` is in front; may ask the user (confirm),
        blocking the calling thread until the answer (see :meth:`triage` for callers
        that must not block)."""
        result = self.triage(request, window)
        return result.ask() if isinstance(result, PendingConfirmation) else result

    def triage(self, request: ActionRequest, window: WindowInfo | None = None,
               extra: Sequence[tuple[Verdict, str, str, str]] = ()) -> Decision | PendingConfirmation:
        """Decide ``request`` without asking anyone: a :class:`Decision`, or the
        :class:`PendingConfirmation` whose :meth:`~PendingConfirmation.ask` puts the
        question to the user (blocking: run it off an event loop)."""
        found = self.evaluate(request, window, extra)
        if not found:
            return ALLOWED
        denies = [f for f in found if f[0] == "deny"]
        if self.mode == "audit":
            first = (denies or found)[0]
            return Decision(True, first[1], first[2], first[3], would_deny=bool(denies))
        if denies and self.mode != "confirm":
            _, rule, reason, category = denies[0]
            return Decision(False, rule, reason, category)
        # Confirm: every remaining finding (denies too in confirm mode) needs a yes.
        pending = [f for f in found if f[1] not in self._remembered()]
        if not pending:
            first = found[0]
            return Decision(True, first[1], f"{first[2]} (always allowed this run)", first[3], confirmed=True)
        return PendingConfirmation(self, request, window, tuple(pending))

    def _remembered(self) -> set[str]:
        with self._lock:
            return set(self._always)

    def _ask(self, request: ActionRequest, window: WindowInfo | None, pending: Sequence[tuple[Verdict, str, str, str]],
             abort: threading.Event | None = None) -> Decision:
        first = pending[0]
        if abort is not None and abort.is_set():
            return _stopped(first)
        lines = [f"deskpilot wants to run {request.describe()}"]
        if window is not None:
            lines.append(f"  foreground window: {window.describe()}")
        lines += [f"  - {reason} [{rule}]" for _, rule, reason, _ in pending]
        question = "\n".join(lines)
        prompt = self.prompt
        if prompt is None:
            from deskpilot.safety._confirm import terminal_prompt

            def prompt(q: str) -> bool | str:
                return terminal_prompt(q, timeout=self.confirm_timeout, abort=abort)

        try:
            answer = prompt(question)
        except ConfirmationAborted:
            return _stopped(first)
        except NoTerminalError as exc:
            return Decision(False, first[1], f"{first[2]}; confirmation was needed but {exc}", first[3], confirmed=False)
        except TimeoutError:
            return Decision(False, first[1], f"{first[2]}; nobody confirmed within {self.confirm_timeout:g} s",
                            first[3], confirmed=False)
        if abort is not None and abort.is_set():  # answered after the run began to stop
            return _stopped(first)
        normalized = _normalize_answer(answer)
        if normalized == "no":
            return Decision(False, first[1], f"{first[2]}; the user declined", first[3], confirmed=False)
        if normalized == "always":
            with self._lock:
                self._always.update(rule for _, rule, _, _ in pending)
        return Decision(True, first[1], f"{first[2]}; the user confirmed", first[3], confirmed=True)


def _stopped(first: tuple[Verdict, str, str, str]) -> Decision:
    return Decision(False, first[1], f"{first[2]}; the run stopped before anyone confirmed", first[3],
                    confirmed=False)


@dataclass(eq=False)
class PendingConfirmation:
    """A check that needs a yes from the user (:meth:`Policy.triage`).

    :meth:`ask` blocks until the answer, the timeout, or :meth:`abort` (from any
    thread), which withdraws the question: the action is denied.
    """

    policy: Policy
    request: ActionRequest
    window: WindowInfo | None
    findings: tuple[tuple[Verdict, str, str, str], ...]
    aborted: threading.Event = field(default_factory=threading.Event)

    @property
    def rule(self) -> str:
        return self.findings[0][1]

    def ask(self) -> Decision:
        return self.policy._ask(self.request, self.window, self.findings, self.aborted)

    def abort(self) -> Decision:
        """Withdraw the question; returns the denial the action gets."""
        self.aborted.set()
        return _stopped(self.findings[0])


def _normalize_answer(answer: bool | str) -> ConfirmAnswer:
    if answer is True:
        return "yes"
    if answer is False or not isinstance(answer, str):
        return "no"
    text = answer.strip().lower()
    if text in ("y", "yes"):
        return "yes"
    if text in ("a", "always"):
        return "always"
    return "no"
