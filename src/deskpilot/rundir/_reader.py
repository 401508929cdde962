"""A recorded run directory, read tolerantly (a crashed run is still worth reading).

:func:`load_recording` reads ``run.json``, ``turns.jsonl``, ``summary.json``,
``exchange.jsonl`` and (stateless mode) ``stateless.json`` without ever raising for a
missing or torn file: what could not be read is listed in :attr:`Recording.problems`
and :attr:`Recording.partial` says whether the record is incomplete. Only a path that is
not a directory, or a directory with neither ``turns.jsonl`` nor ``run.json``, is an
error (:class:`RecordingError`).

What replay needs from a recording, per model request ``k`` (1-based):

* the answer the model gave (:class:`RecordedAnswer`): the raw response from
  ``exchange.jsonl`` when it was logged (so the client's parser sees the same bytes), else
  rebuilt from the turn's ``model`` record;
* the screenshots: which recorded frame the screen showed after answer ``k`` (see
  :meth:`Recording.frame_after`), and which file was the newest image in request ``k``
  (matched by the sha256 of its base64 text, exactly as the exchange log names images).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import orjson

from deskpilot._errors import DeskpilotError, RecordingError, ReplayDecodeError
from deskpilot.rundir._files import (
    EXCHANGE_FILE,
    RUN_FILE,
    STATELESS_FILE,
    SUMMARY_FILE,
    TURNS_FILE,
)
from deskpilot.rundir._records import ModelRecord, RunInfo, Summary, TurnRecord

__all__ = ["RecordedAnswer", "Recording", "RecordingError", "decode_png", "load_recording"]


#: Outcomes of a run that ended on its own; any other ends the record early.
COMPLETE_OUTCOMES = frozenset({"answered", "max_steps"})


@dataclass(slots=True)
class RecordedAnswer:
    """The model's answer to one recorded request."""

    request: int  # 1-based request number, in the order the run sent them
    turn: int  # the turn record that holds it (its ``model`` key)
    role: str
    message: dict[str, Any]  # choices[0].message as the server sent it
    finish_reason: str | None
    usage: dict[str, Any] | None
    source: str  # "exchange" (the logged response) or "turns" (rebuilt from turns.jsonl)
    streamed: bool = False
    #: The request as the exchange log recorded it (sanitized), or None.
    request_log: dict[str, Any] | None = None


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        problems.append(f"{path.name} is missing")
        return None
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        problems.append(f"{path.name} cannot be read: {exc}")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name} is not a JSON object")
        return None
    return value


def _read_jsonl(path: Path, problems: list[str], *, required: bool) -> list[dict[str, Any]]:
    if not path.is_file():
        if required:
            problems.append(f"{path.name} is missing")
        return []
    out: list[dict[str, Any]] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.append(f"{path.name} cannot be read: {exc}")
        return []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            # A crash can tear the last line; anything else is damage worth naming.
            where = "last line" if number >= len(lines) - 1 else f"line {number}"
            problems.append(f"{path.name}: {where} is not JSON (skipped)")
            continue
        if isinstance(value, dict):
            out.append(value)
        else:
            problems.append(f"{path.name}: line {number} is not an object (skipped)")
    return out


def _b64_sha256(data: bytes) -> str:
    """sha256 of the base64 text of ``data``: the name the exchange log gives an image."""
    return hashlib.sha256(base64.b64encode(data)).hexdigest()


def image_digest_of_url(url: str) -> str | None:
    """``data:image/png;base64,<sha256:HEX len:N>`` -> ``HEX`` (None for anything else)."""
    marker = "<sha256:"
    start = url.find(marker)
    if start < 0:
        return None
    end = url.find(" ", start)
    return url[start + len(marker) : end if end > 0 else None]


def request_image_urls(request: dict[str, Any] | None) -> list[str]:
    """Every image URL of a (sanitized) chat request, in message order."""
    urls: list[str] = []
    messages = request.get("messages") if isinstance(request, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            image = part.get("image_url") if isinstance(part, dict) else None
            url = image.get("url") if isinstance(image, dict) else None
            if isinstance(url, str):
                urls.append(url)
    return urls


@dataclass(slots=True)
class Recording:
    """Everything read from one run directory (see the module docstring)."""

    path: Path
    run_info: RunInfo
    summary: Summary | None
    records: list[TurnRecord]  # every turns.jsonl line, in file order
    exchanges: list[dict[str, Any]]
    stateless: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    _digests: dict[str, str] | None = None
    _pixels: dict[str, str] | None = None

    # ------------------------------------------------------------------ basics
    @property
    def mode(self) -> str:
        mode = self.run_info.get("mode") or (self.summary.get("mode") if self.summary else None)
        if not mode:
            mode = next((r.get("mode") for r in self.records if r.get("mode")), None)
        return str(mode or "single")

    @property
    def task(self) -> str:
        return str(self.run_info.get("task") or (self.summary.get("task") if self.summary else None) or "")

    @property
    def outcome(self) -> str | None:
        value = self.summary.get("outcome") if self.summary else None
        return str(value) if value is not None else None

    @property
    def complete(self) -> bool:
        """The run ended on its own and its record was closed (answered or max_steps)."""
        return self.outcome in COMPLETE_OUTCOMES

    @property
    def partial(self) -> bool:
        """The record is incomplete: a file is missing or torn, or the run never finished
        writing its summary (``outcome`` still ``running``)."""
        return bool(self.problems) or self.outcome in (None, "running")

    @property
    def config(self) -> dict[str, Any]:
        cfg = self.run_info.get("config")
        return cfg if isinstance(cfg, dict) else {}

    def setting(self, section: str, key: str, default: Any = None) -> Any:
        value = self.config.get(section, {}).get(key, default) if isinstance(self.config.get(section), dict) else default
        return default if value == "***" else value

    def turns(self) -> list[TurnRecord]:
        """The turn records (without stateless mode's per-image ``raw``/``annotated`` lines)."""
        return [r for r in self.records if r.get("stage") in (None, "turn") and isinstance(r.get("turn"), int)]

    def stage_records(self, stage: str) -> dict[int, TurnRecord]:
        return {r["turn"]: r for r in self.records if r.get("stage") == stage and isinstance(r.get("turn"), int)}

    def resolve(self, name: str | None) -> Path | None:
        """A screenshot name as turns record it -> its path (None when absent on disk)."""
        if not name:
            return None
        candidate = Path(name)
        path = candidate if candidate.is_absolute() else self.path / candidate
        return path if path.is_file() else None

    # ------------------------------------------------------------------ answers
    def _exchange_by_turn(self) -> dict[int, dict[str, Any]]:
        """The successful exchange of each turn (the last 200 attempt with a response)."""
        found: dict[int, dict[str, Any]] = {}
        for record in self.exchanges:
            context = record.get("context")
            turn = context.get("turn") if isinstance(context, dict) else None
            if not isinstance(turn, int) or record.get("status") != 200 or record.get("error"):
                continue
            if record.get("response") is None:
                continue
            found[turn] = record
        return found

    def requests_log(self) -> dict[int, dict[str, Any]]:
        """Turn number -> the sanitized request body of its successful exchange."""
        return {
            turn: record["request"]
            for turn, record in self._exchange_by_turn().items()
            if isinstance(record.get("request"), dict)
        }

    def answers(self) -> list[RecordedAnswer]:
        """Every answered model request, in order (see the module docstring)."""
        exchanges = self._exchange_by_turn()
        out: list[RecordedAnswer] = []
        for record in sorted(self.turns(), key=lambda r: r["turn"]):
            model = record.get("model")
            if not isinstance(model, dict):
                continue
            turn = record["turn"]
            role = str(record.get("role") or "agent")
            exchange = exchanges.get(turn)
            answer = _answer_from_exchange(exchange, len(out) + 1, turn, role) if exchange else None
            if answer is None:
                answer = _answer_from_model_record(model, len(out) + 1, turn, role)
            out.append(answer)
        return out

    # ------------------------------------------------------------------ screenshots
    def raw_frame(self, record: TurnRecord) -> tuple[str | None, bool]:
        """The captured (un-annotated) frame a turn recorded, and whether it is a zoom crop."""
        obs = record.get("observation")
        if not isinstance(obs, dict):
            return None, False
        if self.mode == "stateless":
            return (obs.get("raw") or None), False
        return (obs.get("screenshot") or None), bool(obs.get("zoomed"))

    def capture_index(self, record: TurnRecord) -> int:
        """How many model answers came before this turn's frame was captured.

        Single and team modes capture after the turn's own answer (turn 0: before any);
        the stateless mode captures turn ``n`` after the actions of answer ``n - 1``.
        """
        turn = int(record["turn"])
        return turn - 1 if self.mode == "stateless" else turn

    def frame_schedule(self) -> list[tuple[int, str, bool, int]]:
        """``(capture index, screenshot name, zoomed, turn)`` of every recorded frame, in order."""
        out = []
        for record in self.turns():
            name, zoomed = self.raw_frame(record)
            if name:
                out.append((self.capture_index(record), name, zoomed, int(record["turn"])))
        out.sort(key=lambda item: (item[0], item[3]))
        return out

    def screenshot_digests(self) -> dict[str, str]:
        """sha256 of the base64 text of every PNG in the run directory -> its relative name."""
        if self._digests is None:
            digests: dict[str, str] = {}
            for path in sorted(self.path.rglob("*.png")):
                try:
                    digests[_b64_sha256(path.read_bytes())] = path.relative_to(self.path).as_posix()
                except OSError:
                    continue
            self._digests = digests
        return self._digests

    def image_pixels(self) -> dict[str, str]:
        """sha256 name of every PNG in the run directory -> a digest of its decoded pixels.

        Two encoders (another deflate engine, or ISA-L on another CPU, which picks its
        matches with other instructions) can turn the same pixels into different bytes;
        this is what a request's image is compared by when the bytes cannot be."""
        if self._pixels is None:
            from deskpilot import imaging

            pixels: dict[str, str] = {}
            for sha, name in self.screenshot_digests().items():
                try:
                    pixels[sha] = f"{imaging.frame_digest(decode_png(self.path / name)) & 0xFFFFFFFFFFFFFFFF:016x}"
                except DeskpilotError:
                    continue
            self._pixels = pixels
        return self._pixels

    def sent_image(self, answer: RecordedAnswer) -> str | None:
        """The file that was the newest image of a recorded request (None: no image, or
        the exchange log did not record it)."""
        urls = request_image_urls(answer.request_log)
        if not urls:
            return None
        digest = image_digest_of_url(urls[-1])
        return self.screenshot_digests().get(digest or "")


def _answer_from_exchange(record: dict[str, Any], index: int, turn: int, role: str) -> RecordedAnswer | None:
    response = record.get("response")
    streamed = bool(record.get("stream"))
    if isinstance(response, dict) and isinstance(response.get("assembled"), dict):
        response = response["assembled"]
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str) and "... <truncated, " in content:
        return None  # the log cut a very long answer: the turn record has it whole
    usage = response.get("usage") if isinstance(response, dict) else None
    return RecordedAnswer(
        request=index,
        turn=turn,
        role=role,
        message=message,
        finish_reason=choices[0].get("finish_reason"),
        usage=usage if isinstance(usage, dict) else None,
        source="exchange",
        streamed=streamed,
        request_log=record.get("request") if isinstance(record.get("request"), dict) else None,
    )


def _answer_from_model_record(model: ModelRecord, index: int, turn: int, role: str) -> RecordedAnswer:
    calls = model.get("tool_calls") or []
    content = model.get("content")
    native: list[dict[str, Any]] = []
    blocks: list[str] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        raw = call.get("raw_arguments")
        if raw is None:
            raw = orjson.dumps(call.get("arguments") or {}).decode()
        if call.get("source") == "content":
            # The client took it out of the content: put it back where the model wrote it.
            arguments = call.get("arguments") if call.get("arguments") is not None else raw
            blocks.append(
                "<tool_call>\n"
                + orjson.dumps({"name": call.get("name"), "arguments": arguments}).decode()
                + "\n</tool_call>"
            )
            continue
        entry: dict[str, Any] = {"type": "function", "function": {"name": call.get("name"), "arguments": raw}}
        if call.get("id"):
            entry["id"] = call["id"]
        native.append(entry)
    if blocks:
        content = "\n".join([content or "", *blocks]).strip()
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if model.get("reasoning"):
        message["reasoning_content"] = model["reasoning"]
    if native:
        message["tool_calls"] = native
    usage = model.get("usage")
    return RecordedAnswer(
        request=index,
        turn=turn,
        role=role,
        message=message,
        finish_reason=model.get("finish_reason"),
        usage=usage if isinstance(usage, dict) else None,
        source="turns",
        streamed=bool(model.get("streamed")),
    )


def load_recording(run_dir: str | os.PathLike[str]) -> Recording:
    """Read a run directory (see the module docstring); never raises for a partial one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RecordingError(f"{str(path)!r} is not a directory", path=str(path))
    if not (path / TURNS_FILE).is_file() and not (path / RUN_FILE).is_file():
        raise RecordingError(
            f"{str(path)!r} is not a run directory (no {TURNS_FILE} and no {RUN_FILE})", path=str(path)
        )
    problems: list[str] = []
    run_info = _read_json(path / RUN_FILE, problems) or {}
    summary = _read_json(path / SUMMARY_FILE, problems)
    records = _read_jsonl(path / TURNS_FILE, problems, required=True)
    exchanges = _read_jsonl(path / EXCHANGE_FILE, [], required=False)
    stateless_problems: list[str] = []
    stateless = _read_json(path / STATELESS_FILE, stateless_problems) if (path / STATELESS_FILE).exists() else None
    problems.extend(stateless_problems)
    # The files are read as the records' types say; a foreign or torn file's odd values
    # are the readers' to doubt (they check with isinstance/.get, as before).
    recording = Recording(
        path,
        cast(RunInfo, run_info),
        cast("Summary | None", summary),
        cast("list[TurnRecord]", records),
        exchanges,
        stateless,
        problems,
    )
    if summary is not None and summary.get("outcome") == "running":
        problems.append("summary.json says the run is still running: it stopped without closing its record")
    for record in recording.turns():
        for name in (recording.raw_frame(record)[0], (record.get("observation") or {}).get("screenshot")):
            if name and recording.resolve(name) is None:
                problems.append(f"turn {record['turn']}: screenshot {name} is missing")
    return recording


def decode_png(path: Path) -> npt.NDArray[np.uint8]:
    """An RGB array of a PNG file (Pillow decodes; it is in the ``replay`` extra)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - depends on the environment
        raise ReplayDecodeError(
            'replaying screenshots needs Pillow to decode them: pip install "deskpilot[replay]"'
        ) from None
    try:
        with Image.open(io.BytesIO(path.read_bytes())) as im:
            return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))
    except (OSError, ValueError) as exc:
        raise ReplayDecodeError(f"cannot decode {str(path)!r}: {exc}", path=str(path)) from None
