"""Hypothesis fuzzing of the policy parser, the decisions and the redaction.

Properties: building a policy from any table either works or raises ConfigError; any
action gets a Decision (never an exception); a denied decision always has a complete
policy_denied payload; redaction never crashes, keeps the record's shape, is
idempotent, and removes every planted secret.
"""

from __future__ import annotations

import contextlib
import json
import string
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deskpilot._errors import ConfigError, UnknownKeyError
from deskpilot.safety import (
    ActionRequest,
    Decision,
    Policy,
    WindowInfo,
    find_secrets,
    redact,
    redact_text,
)
from deskpilot.safety._combos import combo_keys
from deskpilot.safety._policy import _KNOWN_KEYS

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

key_words = st.sampled_from(
    ["ctrl", "alt", "shift", "win", "super", "meta", "r", "f4", "delete", "del", "esc", "q", "plus", "+", "-",
     "?", "enter", "tab", "space", " ", "", "nosuchkey", "F13", "numpad5", "ä", "\x00", "ctrl+", "++"]
)
combos = st.one_of(
    st.lists(key_words, min_size=0, max_size=5).map(lambda parts: "+".join(parts)),
    st.lists(key_words, min_size=1, max_size=4).map(lambda parts: " - ".join(parts)),
    st.text(max_size=20),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                  st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)
table_values = st.one_of(json_values, st.lists(combos, max_size=4), st.lists(st.text(max_size=15), max_size=4),
                         st.sampled_from(["enforce", "confirm", "audit", "off", "allow", "deny", "all"]))
tables = st.dictionaries(st.one_of(st.sampled_from(_KNOWN_KEYS), st.text(max_size=10)), table_values, max_size=6)
windows = st.one_of(st.none(), st.builds(WindowInfo, st.text(max_size=30), st.text(max_size=15), st.text(max_size=10)))
requests = st.builds(
    ActionRequest,
    st.text(max_size=12),
    st.lists(combos, max_size=3).map(tuple),
    st.one_of(st.none(), st.text(max_size=80)),
    st.booleans(),
)


def _never_ask(question: str) -> bool:
    return False


@FUZZ
@given(tables)
@example({"allow_keys": ["win+r"], "deny_keys": "win+r", "mode": "confirm"})
@example({"deny_text": ["(?P<x"], "secret_detectors": "jwt,nope"})
def test_any_table_builds_a_policy_or_raises_config_error(table: dict[str, Any]) -> None:
    try:
        policy = Policy.from_config(table, prompt=_never_ask)
    except ConfigError as exc:
        assert str(exc).startswith(("policy.", "[policy]")), str(exc)
        return
    assert policy.mode in ("enforce", "confirm", "audit", "off")


@FUZZ
@given(tables, requests, windows)
def test_every_action_gets_a_decision(table: dict[str, Any], request: ActionRequest, window: WindowInfo | None) -> None:
    try:
        policy = Policy.from_config(table, prompt=_never_ask)
    except ConfigError:
        policy = Policy.default(prompt=_never_ask)
    decision = policy.check(request, window)
    assert isinstance(decision, Decision)
    assert decision.rule and decision.reason
    if decision.allowed:
        assert decision.payload() is None
    else:
        payload = decision.payload()
        assert payload is not None and payload["ok"] is False
        assert payload["error"]["type"] == "policy_denied"
        assert payload["error"]["message"] and payload["error"]["rule"] == decision.rule
        json.dumps(payload)  # serializable for the tool message
    if request.text:
        # a denial for text never quotes a detected secret back
        for m in find_secrets(request.text):
            secret = request.text[m.start : m.end]
            if len(secret) >= 8:
                assert secret not in decision.reason


@FUZZ
@given(combos)
def test_combo_normalization_is_total_and_order_free(combo: str) -> None:
    try:
        keys = combo_keys(combo)
    except UnknownKeyError:
        return
    assert keys and all(isinstance(k, str) and k for k in keys)
    parts = combo.split("+")
    if len(parts) > 1 and all(p.strip() for p in parts):
        with contextlib.suppress(UnknownKeyError):  # "ctrl++" style spellings are not reversible
            assert combo_keys("+".join(reversed(parts))) == keys


secret_samples = st.sampled_from([
    "sk-" + "Ab1" * 8,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "ghp_" + "z9" * 18,
    "xoxb-" + "1234567890-abc",
    "4111111111111111",
    "5500 0000 0000 0004",
    "-----BEGIN PRIVATE KEY-----",
    "AIza" + "Q" * 35,
])
separators = st.sampled_from([" ", "\n", "\t", ", ", "; ", " (", ") ", '"', "'"])


@FUZZ
@given(st.text(max_size=40), secret_samples, separators, separators, st.text(max_size=40))
def test_planted_secrets_are_removed(before: str, secret: str, sep1: str, sep2: str, after: str) -> None:
    text = before + sep1 + secret + sep2 + after
    out = redact_text(text)
    assert secret not in out
    assert "[REDACTED:" in out
    assert not Policy.default().check(ActionRequest("type_text", text=text)).allowed


@FUZZ
@given(st.text(max_size=200))
@example("password=password=x")
@example("pwd: [REDACTED:password]")
def test_redact_text_never_crashes_and_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@FUZZ
@given(st.text(alphabet=string.ascii_letters + string.digits + "-_=:/+ \n\"'{},", max_size=300))
def test_redact_text_on_key_like_alphabets(text: str) -> None:
    out = redact_text(text)
    assert find_secrets(out) == [] or all(out[m.start : m.end].startswith("[REDACTED:") for m in find_secrets(out))


def _shape(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return type(node).__name__


@FUZZ
@given(json_values, st.booleans())
def test_redact_keeps_the_shape_of_any_record(record: Any, mask: bool) -> None:
    out = redact(record, mask_typed_text=mask)
    assert _shape(out) == _shape(record)
