"""One run's redaction of what it writes: secrets, and on request every text typed.

The turn records (through :attr:`RunLog.redactor`), the exchange log
(:class:`RedactingExchangeLog`), the modes' own log lines (``Session.redact_text``) and,
at the end, the run files written before a secret typed in pieces was recognised
(:func:`scrub_run_files`) all go through one :class:`RunRedaction`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from deskpilot._errors import RunLogError
from deskpilot.agent._config import AgentConfig
from deskpilot.rundir import (
    EXCHANGE_FILE,
    EXECUTION_LOG_FILE,
    TURNS_FILE,
    ExchangeLog,
    RunLog,
    dumps_json,
)
from deskpilot.safety import (
    RedactOptions,
    SafetySettings,
    TypedTexts,
    redact,
    redact_text,
    typing_tool_names,
)

__all__ = [
    "MIN_PIECE_CHARS",
    "SPLIT_SECRET_MARK",
    "RedactingExchangeLog",
    "RunRedaction",
    "mask_pieces",
    "redact_options",
    "scrub_run_files",
]


def redact_options(config: AgentConfig) -> RedactOptions | None:
    safety = config.section(SafetySettings)
    if not safety.enabled or not (safety.redact_secrets or safety.mask_typed_text):
        return None
    return RedactOptions(secrets=safety.redact_secrets, mask_typed_text=safety.mask_typed_text)


class RunRedaction:
    """One run's redaction of records and log lines (secrets; typed text on request).

    With ``mask_typed_text`` it learns as the run goes: the typing tools of every tool
    set sent to the model (from their definitions: team 003's ``type_text_input``),
    and every text typed (from the model's calls, the records, the policy checks), so
    that a line written later masks where it echoes one ("Typed: hello")."""

    def __init__(self, options: RedactOptions) -> None:
        self.options = options
        self._no_images = dataclasses.replace(options, images=False)
        self.typed: TypedTexts | None = TypedTexts() if options.mask_typed_text else None
        self._tools: list[dict[str, Any]] | None = None
        #: The run's text protocol (UI-TARS), whose typed texts sit in the reply text.
        self.text_protocol: Any = None
        self.secret_pieces: list[str] = []

    def learn_tools(self, tools: list[dict[str, Any]]) -> None:
        if self.typed is None or tools is self._tools:
            return
        self._tools = tools
        names = typing_tool_names(tools)
        if not names <= self.options.typing_actions:
            self.options = dataclasses.replace(self.options, typing_actions=self.options.typing_actions | names)
            self._no_images = dataclasses.replace(self.options, images=False)

    def learn(self, record: Any) -> None:
        if self.typed is not None:
            self.typed.add_from(record, self.options)

    def record(self, record: Any, *, images: bool = True) -> Any:
        if self.typed is not None and self.text_protocol is not None:
            self._learn_text_calls(record)
        out = redact(record, self.options if images else self._no_images, typed=self.typed)
        return mask_pieces(out, self.secret_pieces) if self.secret_pieces else out

    def _learn_text_calls(self, value: Any) -> None:
        """Typed texts of text-protocol actions (``type(content='...')``) in any string."""
        if isinstance(value, str):
            if "Action:" in value and self.typed is not None:
                for call in self.text_protocol(value, lambda: "redact"):
                    text = (call.arguments or {}).get("content")
                    if call.name == "type" and isinstance(text, str) and text:
                        self.typed.add(text, text.replace("\\n", "\n").rstrip("\n"))
        elif isinstance(value, dict):
            for item in value.values():
                self._learn_text_calls(item)
        elif isinstance(value, list):
            for item in value:
                self._learn_text_calls(item)

    def text(self, text: str) -> str:
        if self.secret_pieces:
            text = mask_pieces(text, self.secret_pieces)
        if self.typed is not None:
            text = self.typed.mask(text)
        return redact_text(text, self.options.detectors) if self.options.secrets else text


SPLIT_SECRET_MARK = "[REDACTED:split_secret]"
MIN_PIECE_CHARS = 4


def mask_pieces(value: Any, pieces: list[str]) -> Any:
    """``value`` with every piece of a secret typed across calls replaced (in strings,
    JSON argument strings included: secret alphabets need no JSON escapes)."""
    if isinstance(value, str):
        for piece in sorted(set(pieces), key=len, reverse=True):
            # Shorter pieces are not secrets on their own and would mask ordinary words.
            if len(piece.strip()) >= MIN_PIECE_CHARS and piece in value:
                value = value.replace(piece, SPLIT_SECRET_MARK)
        return value
    if isinstance(value, list):
        return [mask_pieces(v, pieces) for v in value]
    if isinstance(value, dict):
        return {k: mask_pieces(v, pieces) for k, v in value.items()}
    return value


def scrub_run_files(runlog: RunLog, pieces: list[str]) -> None:
    """Lines written before a split secret was recognised hold its earlier pieces: rewrite
    those files with them redacted (atomically; a file that cannot be rewritten is noted)."""
    for name in (TURNS_FILE, EXCHANGE_FILE, EXECUTION_LOG_FILE):
        path = runlog.path / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            runlog.errors.append(f"redacting {name}: {exc}")
            continue
        if name.endswith(".jsonl"):
            # Values only, line by line: a piece may also spell part of a key or of JSON.
            lines = []
            for line in data.splitlines(keepends=True):
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError:
                    lines.append(line)
                    continue
                masked = mask_pieces(value, pieces)
                lines.append(line if masked == value else dumps_json(masked) + b"\n")
            scrubbed = b"".join(lines)
        else:
            scrubbed = mask_pieces(data.decode("utf-8", "replace"), pieces).encode("utf-8")
        if scrubbed != data:
            try:
                runlog.replace_file(name, scrubbed)
            except (OSError, RunLogError) as exc:
                runlog.errors.append(f"redacting {name}: {exc}")


class RedactingExchangeLog(ExchangeLog):
    """The exchange log with secrets (and, on request, typed text) redacted: the model's
    replies and the history it is sent hold whatever it typed. Images are already
    summarized by the log itself."""

    def __init__(self, path: Path, redaction: RunRedaction) -> None:
        super().__init__(path)
        self.redaction = redaction

    def write(self, record: dict[str, Any]) -> None:
        super().write(self.redaction.record(record, images=False))
