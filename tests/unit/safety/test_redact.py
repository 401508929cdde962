"""Secret detection and redaction of run records."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from deskpilot._errors import ConfigError
from deskpilot.safety import (
    DETECTOR_NAMES,
    RedactOptions,
    find_secrets,
    luhn_valid,
    mask_text,
    redact,
    redact_lines,
    redact_text,
)
from deskpilot.safety._secrets import custom_detector, select_detectors


@pytest.mark.parametrize(
    ("number", "valid"),
    [("4111111111111111", True), ("4111111111111112", False), ("79927398713", True), ("0", True),
     ("", False), ("12a4", False), ("٤١١١", False)],
)
def test_luhn(number: str, valid: bool) -> None:
    assert luhn_valid(number) is valid


@pytest.mark.parametrize(
    ("text", "detector", "secret"),
    [
        ('{"api_key": "sk-abcdefghijklmnopqrstuvwx"}', "openai_api_key", "sk-abcdefghijklmnopqrstuvwx"),
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx end", "openai_api_key", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx"),
        ("id=AKIAIOSFODNN7EXAMPLE;", "aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key",
         "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("token ghp_" + "x1" * 18 + " here", "github_token", "ghp_" + "x1" * 18),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        ("xoxp-1234567890-abcdef", "slack_token", "xoxp-1234567890-abcdef"),
        ("AIza" + "B" * 35, "google_api_key", "AIza" + "B" * 35),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
         "jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
        ("Password: hunter2", "password", "hunter2"),
        ('"passwd":"s3cr3t!"', "password", "s3cr3t!"),
        ("pay with 5500-0000-0000-0004 now", "credit_card", "5500-0000-0000-0004"),
        ("amex 378282246310005", "credit_card", "378282246310005"),
    ],
)
def test_detectors_find_the_secret_value(text: str, detector: str, secret: str) -> None:
    matches = find_secrets(text)
    assert [m.detector for m in matches] == [detector]
    m = matches[0]
    assert text[m.start : m.end] == secret
    assert secret not in repr(m)  # a match never carries the value


@pytest.mark.parametrize(
    "text",
    [
        "sk-short",
        "task-abcdefghijklmnopqrstuvwxyz0123",  # "sk-" inside a word
        "AKIAIOSFODNN7EXAMPL",  # one char short
        "timestamp 1712345678123456789",  # long number without issuer prefix / Luhn
        "the password field",
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    ],
)
def test_no_false_positives_on_ordinary_text(text: str) -> None:
    assert find_secrets(text) == []


def test_private_key_block_is_one_match_including_its_body() -> None:
    pem = "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\ny"
    assert redact_text(pem) == "x\n[REDACTED:private_key]\ny"
    # a header alone (the model typing it line by line) is still caught
    assert redact_text("-----BEGIN PRIVATE KEY-----") == "[REDACTED:private_key]"


def test_redact_text_keeps_the_field_name() -> None:
    assert redact_text("login password=hunter2 user=bob") == "login password=[REDACTED:password] user=bob"
    assert redact_text("nothing here") == "nothing here"


def test_overlapping_matches_merge() -> None:
    text = "api_key=sk-abcdefghijklmnopqrstuvwxyz"
    out = redact_text(text)
    assert "abcdefghij" not in out and out.count("[REDACTED:") == 1


def test_select_and_custom_detectors() -> None:
    assert select_detectors(None) == select_detectors(["all"])
    assert [d.name for d in select_detectors(["jwt", "jwt", "password"])] == ["jwt", "password"]
    assert select_detectors([]) == ()
    assert set(DETECTOR_NAMES) >= {"openai_api_key", "aws_access_key_id", "github_token", "slack_token",
                                    "private_key", "password", "credit_card"}
    internal = custom_detector(r"ACME-\d{6}", name="acme_ticket")
    assert redact_text("see ACME-123456", (internal,)) == "see [REDACTED:acme_ticket]"
    with pytest.raises(ConfigError):
        custom_detector("(")
    with pytest.raises(ConfigError):
        select_detectors(["nope"])


def _png_data_url() -> tuple[str, bytes]:
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    return "data:image/png;base64," + base64.b64encode(raw).decode(), raw


def test_redact_record_replaces_images_and_secrets_without_mutating() -> None:
    url, raw = _png_data_url()
    record = {
        "turn": 3,
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "my key is sk-abcdefghijklmnopqrstuvwx"},
                {"type": "image_url", "image_url": {"url": url}},
            ]},
        ],
        "sha256": "keepme",
        "ok": True,
        "ratio": 0.5,
    }
    original = json.dumps(record)
    out = redact(record)
    assert json.dumps(record) == original  # input untouched
    content = out["messages"][0]["content"]
    assert content[0]["text"] == "my key is [REDACTED:openai_api_key]"
    assert content[1]["image_url"]["url"] == f"<image/png sha256={hashlib.sha256(raw).hexdigest()} bytes={len(raw)}>"
    assert out["turn"] == 3 and out["ok"] is True and out["ratio"] == 0.5 and out["sha256"] == "keepme"


def test_mask_typed_text_in_every_record_shape() -> None:
    tool_call = {"id": "call_1", "type": "function",
                 "function": {"name": "type_text", "arguments": json.dumps({"text": "Dear Bob", "justification": "x"})}}
    stateless = {"type": "type", "text": "hello there"}
    turn = {"action": "type_text", "args": {"text": "secret memo"}, "result": {"ok": True, "typed": 11}}
    click = {"type": "click", "x": 1, "y": 2, "text": "label stays"}
    out = redact([tool_call, stateless, turn, click], mask_typed_text=True)
    args = json.loads(out[0]["function"]["arguments"])
    assert args == {"text": mask_text("Dear Bob"), "justification": "x"}
    assert out[1]["text"] == "[MASKED:11 chars]"
    assert out[2]["args"]["text"] == "[MASKED:11 chars]"
    assert out[3]["text"] == "label stays"
    # off by default
    assert redact(stateless)["text"] == "hello there"


def test_mask_typed_text_with_unparsable_arguments_hides_them_whole() -> None:
    call = {"function": {"name": "type_text", "arguments": '{"text": "unterminated'}}
    assert redact(call, mask_typed_text=True)["function"]["arguments"] == mask_text('{"text": "unterminated')


def test_options_can_turn_parts_off() -> None:
    url, _ = _png_data_url()
    record = {"a": url, "b": "password=hunter2"}
    assert redact(record, RedactOptions(images=False, secrets=False)) == record
    assert redact(record, secrets=False)["b"] == "password=hunter2"


def test_redact_lines_handles_json_and_damaged_lines() -> None:
    lines = [json.dumps({"text": "password=hunter2"}), '{"broken": "AKIAIOSFODNN7EXAMPLE']
    out = redact_lines(lines)
    assert json.loads(out[0]) == {"text": "password=[REDACTED:password]"}
    assert out[1] == '{"broken": "[REDACTED:aws_access_key_id]'


def test_raw_base64_screenshots_become_placeholders_and_blobs_are_kept() -> None:
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    b64 = base64.b64encode(raw).decode()
    assert redact({"raw_b64": b64})["raw_b64"] == f"<image/png sha256={hashlib.sha256(raw).hexdigest()} bytes={len(raw)}>"
    blob = base64.b64encode(bytes(range(256)) * 8).decode()
    assert redact({"data": blob})["data"] == blob  # not an image: kept verbatim, not scanned
    assert redact({"raw_b64": b64}, images=False)["raw_b64"] == b64
    # a short base64-alphabet string is still text and still scanned
    assert redact("AKIAIOSFODNN7EXAMPLE") == "[REDACTED:aws_access_key_id]"
