"""The policy layer: key combos, typed text, windows, modes, confirmation, payloads."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deskpilot._errors import ActionDeniedError, ConfigError
from deskpilot.safety import (
    ActionRequest,
    Decision,
    NoTerminalError,
    Policy,
    WindowInfo,
    policy_denied_payload,
    terminal_prompt,
)
from deskpilot.safety._combos import combo_keys, format_combo


def keys(*combos: str) -> ActionRequest:
    return ActionRequest("press_key", keys=combos)


def typed(text: str) -> ActionRequest:
    return ActionRequest("type_text", text=text)


# ------------------------------------------------------------------- combos


@pytest.mark.parametrize("spelling", ["Win+R", "super+r", "win + r", "WIN+r", "rwin+r", "lsuper+R", "meta+r", "win-r"])
def test_every_spelling_of_win_r_is_the_same_combo(spelling: str) -> None:
    assert combo_keys(spelling) == frozenset({"win", "r"})
    assert Policy.default().check(keys(spelling)).allowed is False


def test_shifted_characters_fold_to_their_base_key() -> None:
    assert combo_keys("ctrl+?") == combo_keys("ctrl+shift+/") == frozenset({"ctrl", "shift", "slash"})
    assert format_combo(combo_keys("shift+ctrl+alt+del")) == "ctrl+alt+shift+delete"


# ------------------------------------------------------------------- key rules


@pytest.mark.parametrize(
    "combo", ["win+r", "alt+f4", "ctrl+alt+delete", "ctrl+alt+del", "win+l", "ctrl+shift+esc", "ctrl+alt+f2"]
)
def test_default_deny_list(combo: str) -> None:
    decision = Policy.default().check(keys(combo))
    assert not decision.allowed
    assert decision.category == "keys"
    assert decision.rule.startswith("keys.deny:")
    assert decision.reason  # says why in words


@pytest.mark.parametrize("combo", ["ctrl+c", "ctrl+v", "enter", "alt+tab", "ctrl+shift+t", "f5", "win", "alt"])
def test_ordinary_combos_are_allowed(combo: str) -> None:
    assert Policy.default().check(keys(combo)).allowed


def test_a_deny_rule_matches_supersets_so_extra_modifiers_do_not_bypass_it() -> None:
    decision = Policy.default().check(keys("shift+alt+f4"))
    assert not decision.allowed and decision.rule == "keys.deny:alt+f4"


def test_allow_lifts_a_default_deny_and_only_that_one() -> None:
    policy = Policy.from_config({"allow_keys": ["Alt+F4"]})
    assert policy.check(keys("alt+f4")).allowed
    assert not policy.check(keys("win+r")).allowed


def test_the_most_specific_rule_wins() -> None:
    policy = Policy.from_config({"deny_keys": ["win"], "allow_keys": ["win+e"]})
    assert not policy.check(keys("win+d")).allowed
    assert policy.check(keys("win+e")).allowed
    # on a tie deny beats allow
    tie = Policy.from_config({"default_deny_keys": False, "deny_keys": ["ctrl+w"], "allow_keys": ["ctrl+w"]})
    assert not tie.check(keys("ctrl+w")).allowed


def test_default_denies_can_be_dropped() -> None:
    assert Policy.from_config({"default_deny_keys": False}).check(keys("win+r")).allowed


def test_allowlist_of_keys() -> None:
    policy = Policy.from_config({"unmatched_keys": "deny", "allow_keys": ["enter", "ctrl+a", "tab"]})
    assert policy.check(keys("enter")).allowed
    assert policy.check(keys("Ctrl+A")).allowed
    denied = policy.check(keys("ctrl+c"))
    assert not denied.allowed and denied.rule == "keys.unmatched:deny"


def test_every_combo_of_a_request_is_checked() -> None:
    assert not Policy.default().check(keys("ctrl+c", "win+r")).allowed


def test_an_unparsable_combo_is_denied_not_guessed() -> None:
    decision = Policy.default().check(keys("ctrl+nosuchkey"))
    assert not decision.allowed and decision.rule == "keys.invalid"


def test_extra_deny_keys_such_as_the_kill_hotkey() -> None:
    policy = Policy.from_config({"allow_keys": ["ctrl+alt+q"]}, extra_deny_keys=[("ctrl+alt+q", "is the kill switch")])
    decision = policy.check(keys("ctrl+alt+q"))
    # allow and deny tie on specificity: deny wins, the model cannot press the kill switch
    assert not decision.allowed and "kill switch" in decision.reason


# ------------------------------------------------------------------- text rules

SECRETS = {
    "openai_api_key": "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4",
    "aws_access_key_id": "AKIA" + "IOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a" * 36,
    "slack_token": "xoxb-" + "123456789012-abcdefABCDEF",
    "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----",
    "password": "password=hunter2",
    "credit_card": "4111 1111 1111 1111",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secrets_are_never_typed(name: str) -> None:
    decision = Policy.default().check(typed(f"here: {SECRETS[name]} ok"))
    assert not decision.allowed
    assert decision.rule == f"text.secret:{name}"
    assert SECRETS[name] not in decision.reason  # the reason never echoes the secret
    assert "hunter2" not in str(decision.payload())


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "The meeting is at 10:30 tomorrow",
        "4111 1111 1111 1112",  # fails Luhn
        "1234567890123456",  # no issuer prefix
        "ask-me-anything about skis",
        "Enter your password below",
        "",
    ],
)
def test_ordinary_text_is_typed(text: str) -> None:
    assert Policy.default().check(typed(text)).allowed


def test_allow_text_exempts_known_test_keys() -> None:
    policy = Policy.from_config({"allow_text": [r"sk-test-\w+"]})
    assert policy.check(typed("sk-test-abcdefghijklmnopqrstuvwxyz")).allowed
    assert not policy.check(typed("sk-live-abcdefghijklmnopqrstuvwxyz")).allowed


def test_deny_and_confirm_text_patterns() -> None:
    answers: list[str] = []

    def prompt(question: str) -> bool:
        answers.append(question)
        return False

    policy = Policy.from_config({"deny_text": [r"rm\s+-rf"], "confirm_text": ["DROP TABLE"]}, prompt=prompt)
    assert policy.check(typed("sudo rm  -rf /")).rule == r"text.deny:rm\s+-rf"
    decision = policy.check(typed("DROP TABLE users"))
    assert not decision.allowed and decision.confirmed is False and len(answers) == 1


def test_secret_detectors_can_be_chosen_or_disabled() -> None:
    none = Policy.from_config({"secret_detectors": []})
    assert none.check(typed(SECRETS["aws_access_key_id"])).allowed
    only_cards = Policy.from_config({"secret_detectors": ["credit_card"]})
    assert only_cards.check(typed(SECRETS["aws_access_key_id"])).allowed
    assert not only_cards.check(typed(SECRETS["credit_card"])).allowed


# ------------------------------------------------------------------- window rules

TK = WindowInfo("Target app", "Tk", "target_app", 123, 0x200001)
KEEPASS = WindowInfo("Passwords.kdbx - KeePassXC", "KeePassXC", "keepassxc")


def test_password_managers_are_denied_by_default() -> None:
    decision = Policy.default().check(ActionRequest("click_element", pointer=True), KEEPASS)
    assert not decision.allowed and decision.category == "window"
    assert "KeePassXC" in decision.reason


def test_window_globs_match_title_or_class_case_insensitively() -> None:
    policy = Policy.from_config({"deny_windows": ["*terminal*", "class:xterm"]})
    assert not policy.check(ActionRequest("click", pointer=True), WindowInfo("GNOME Terminal", "Gnome-terminal")).allowed
    assert not policy.check(ActionRequest("click", pointer=True), WindowInfo("bash", "XTerm")).allowed
    assert policy.check(ActionRequest("click", pointer=True), TK).allowed


def test_title_prefix_restricts_the_field() -> None:
    policy = Policy.from_config({"deny_windows": ["title:Tk"]})
    assert policy.check(ActionRequest("click", pointer=True), TK).allowed  # class Tk, title differs
    assert not policy.check(ActionRequest("click", pointer=True), WindowInfo("Tk", "Other")).allowed


def test_allow_windows_is_an_allowlist_and_unknown_windows_fail_closed() -> None:
    policy = Policy.from_config({"allow_windows": ["class:Tk"]})
    assert policy.check(ActionRequest("click", pointer=True), TK).allowed
    other = policy.check(ActionRequest("click", pointer=True), WindowInfo("Firefox", "firefox"))
    assert not other.allowed and other.rule == "window.not_allowed"
    unknown = policy.check(ActionRequest("click", pointer=True), None)
    assert not unknown.allowed and unknown.rule == "window.unknown"


def test_deny_beats_an_allowlist_entry() -> None:
    policy = Policy.from_config({"allow_windows": ["*"], "deny_windows": ["*secret*"]})
    assert not policy.check(ActionRequest("click", pointer=True), WindowInfo("my secret notes", "Gedit")).allowed


def test_unknown_window_setting() -> None:
    assert Policy.default().check(ActionRequest("click", pointer=True), None).allowed
    strict = Policy.from_config({"unknown_window": "deny"})
    assert not strict.check(ActionRequest("click", pointer=True), None).allowed
    assert strict.needs_window and Policy.default().needs_window


def test_default_window_denies_can_be_lifted() -> None:
    assert Policy.from_config({"default_deny_windows": False}).check(ActionRequest("click", pointer=True), KEEPASS).allowed
    assert Policy.from_config({"allow_windows": ["*KeePass*"]}).check(
        ActionRequest("click", pointer=True), WindowInfo("KeePass 2", "WindowsForms10")
    ).allowed


# ------------------------------------------------------------------- modes and confirmation


class Recorder:
    def __init__(self, *answers: bool | str | BaseException) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    def __call__(self, question: str) -> bool | str:
        self.questions.append(question)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_off_mode_allows_everything() -> None:
    policy = Policy.from_config({"mode": "off"})
    assert policy.check(keys("win+r")).allowed
    assert policy.check(typed(SECRETS["password"])).allowed
    assert policy.check(ActionRequest("click", pointer=True), KEEPASS).allowed


def test_audit_mode_allows_but_records_what_would_be_denied() -> None:
    decision = Policy.from_config({"mode": "audit"}).check(keys("win+r"))
    assert decision.allowed and decision.would_deny and decision.rule == "keys.deny:win+r"
    assert decision.as_dict()["would_deny"] is True


def test_confirm_mode_asks_instead_of_denying() -> None:
    prompt = Recorder(True, False)
    policy = Policy.from_config({"mode": "confirm"}, prompt=prompt)
    yes = policy.check(keys("win+r"))
    assert yes.allowed and yes.confirmed is True
    no = policy.check(keys("win+r"))
    assert not no.allowed and no.confirmed is False and "declined" in no.reason
    assert "win+r" in prompt.questions[0] and "Run dialog" in prompt.questions[0]
    # ordinary actions are not asked about
    assert policy.check(keys("ctrl+c")).allowed and len(prompt.questions) == 2


def test_confirm_rules_in_enforce_mode_and_always() -> None:
    prompt = Recorder("always")
    policy = Policy.from_config({"confirm_keys": ["ctrl+s"]}, prompt=prompt)
    assert policy.check(keys("ctrl+s")).allowed
    again = policy.check(keys("ctrl+s"))  # remembered: not asked again
    assert again.allowed and again.confirmed is True and len(prompt.questions) == 1
    # deny rules are still enforced without asking in enforce mode
    assert not policy.check(keys("win+r")).allowed and len(prompt.questions) == 1


def test_the_question_shows_the_window_and_every_reason() -> None:
    prompt = Recorder("n")
    policy = Policy.from_config({"confirm_windows": ["class:Tk"], "confirm_keys": ["ctrl+s"]}, prompt=prompt)
    assert not policy.check(keys("ctrl+s"), TK).allowed
    question = prompt.questions[0]
    assert "Target app" in question and "window.confirm:class:Tk" in question and "keys.confirm:ctrl+s" in question


def test_no_terminal_and_timeout_deny_with_a_clear_reason() -> None:
    policy = Policy.from_config({"mode": "confirm"}, prompt=Recorder(NoTerminalError("stdin is not a tty")))
    decision = policy.check(keys("win+r"))
    assert not decision.allowed and "stdin is not a tty" in decision.reason
    policy = Policy.from_config({"mode": "confirm", "confirm_timeout": 5}, prompt=Recorder(TimeoutError()))
    decision = policy.check(keys("win+r"))
    assert not decision.allowed and "within 5 s" in decision.reason


def test_the_default_prompt_denies_without_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a tty
    decision = Policy.from_config({"mode": "confirm"}).check(keys("win+r"))
    assert not decision.allowed and "not a tty" in decision.reason


def test_terminal_prompt_reads_an_answer_from_a_tty() -> None:
    import os

    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"always\n")
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        class Tty:
            closed = False

            def isatty(self) -> bool:
                return True

            def fileno(self) -> int:
                return pipe.fileno()

            def readline(self) -> str:
                return pipe.readline()

        err = io.StringIO()
        assert terminal_prompt("Proceed?", stdin=Tty(), stderr=err, timeout=2) == "always"  # type: ignore[arg-type]
        assert "Proceed?" in err.getvalue() and "[a]lways" in err.getvalue()


@contextlib.contextmanager
def silent_tty() -> Iterator[Any]:
    """A stdin that is a terminal nobody types into (a pipe whose writer stays open)."""
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(read_fd) as pipe:
            class Tty:
                closed = False

                def isatty(self) -> bool:
                    return True

                def fileno(self) -> int:
                    return pipe.fileno()

                def readline(self) -> str:
                    return pipe.readline()

            yield Tty()
    finally:
        os.close(write_fd)


def test_terminal_prompt_times_out() -> None:
    with silent_tty() as tty, pytest.raises(TimeoutError):
        terminal_prompt("Proceed?", stdin=tty, stderr=io.StringIO(), timeout=0.05)


def test_terminal_prompt_gives_up_soon_after_an_abort() -> None:
    """A question withdrawn from another thread (the run is stopping) ends within the
    abort poll, long before its timeout: the policy denies."""
    from deskpilot.safety._confirm import ConfirmationAborted

    with silent_tty() as tty:
        abort = threading.Event()
        threading.Timer(0.1, abort.set).start()
        started = time.monotonic()
        with pytest.raises(ConfirmationAborted):
            terminal_prompt("Proceed?", stdin=tty, stderr=io.StringIO(), timeout=30, abort=abort)
        assert time.monotonic() - started < 2


def test_triage_hands_back_the_question_instead_of_asking() -> None:
    from deskpilot.safety._policy import PendingConfirmation

    prompt = Recorder("y")
    policy = Policy.from_config({"confirm_keys": ["ctrl+s"]}, prompt=prompt)
    assert policy.triage(keys("ctrl+c")).allowed  # nothing to ask: a decision
    assert not policy.triage(keys("win+r")).allowed  # type: ignore[union-attr]
    pending = policy.triage(keys("ctrl+s"))
    assert isinstance(pending, PendingConfirmation) and prompt.questions == []
    assert pending.rule == "keys.confirm:ctrl+s"
    withdrawn = pending.abort()
    assert not withdrawn.allowed and "the run stopped before anyone confirmed" in withdrawn.reason
    assert not pending.ask().allowed and prompt.questions == []  # aborted: never asked
    fresh = policy.triage(keys("ctrl+s"))
    assert isinstance(fresh, PendingConfirmation) and fresh.ask().allowed and len(prompt.questions) == 1


# ------------------------------------------------------------------- payloads and errors


def test_denied_payload_shape_for_the_model() -> None:
    decision = Policy.default().check(keys("win+r"))
    payload = decision.payload()
    assert payload is not None
    assert payload["ok"] is False
    assert payload["error"]["type"] == "policy_denied"
    assert payload["error"]["rule"] == "keys.deny:win+r"
    message = payload["error"]["message"]
    assert "refused by the safety policy" in message and "Run dialog" in message and "Do not retry" in message
    assert Policy.default().check(keys("ctrl+c")).payload() is None


def test_payload_from_an_error_or_a_string() -> None:
    err = ActionDeniedError("typing secrets is not allowed", rule="text.secret:jwt")
    assert policy_denied_payload(err, tool="type_text")["error"]["rule"] == "text.secret:jwt"
    assert policy_denied_payload("nope")["error"]["message"].startswith("This action was refused")
    assert policy_denied_payload(err, tool="type_text")["error"]["message"].startswith("type_text was refused")


def test_raise_if_denied() -> None:
    with pytest.raises(ActionDeniedError) as info:
        Policy.default().check(keys("win+r")).raise_if_denied()
    assert info.value.details["rule"] == "keys.deny:win+r"
    Decision(True, "default", "ok").raise_if_denied()


# ------------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ({"mode": "yolo"}, "policy.mode"),
        ({"deny_keys": ["ctrl+nosuchkey"]}, "policy.deny_keys"),
        ({"deny_keys": [1]}, "expected strings"),
        ({"deny_keys": 3}, "expected a list"),
        ({"deny_text": ["("]}, "invalid regular expression"),
        ({"secret_detectors": ["nope"]}, "unknown secret detector"),
        ({"confirm_timeout": 0}, "positive"),
        ({"confirm_timeout": "soon"}, "not a number"),
        ({"unmatched_keys": "maybe"}, "policy.unmatched_keys"),
        ({"deny_key": ["x"]}, "did you mean 'deny_keys'"),
        ({"default_deny_keys": "perhaps"}, "not a boolean"),
    ],
)
def test_bad_config_is_a_config_error(table: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match="policy") as info:
        Policy.from_config(table)
    assert fragment in str(info.value)


def test_comma_separated_strings_from_env_or_flags() -> None:
    policy = Policy.from_config({"allow_keys": "alt+f4, win+r", "default_deny_windows": "false"})
    assert policy.check(keys("alt+f4")).allowed and policy.check(keys("win+r")).allowed
    assert policy.check(ActionRequest("click", pointer=True), KEEPASS).allowed
