"""What "the replay did the same as the recording" means, field by field.

A replayed run writes its own run directory; its ``turns.jsonl`` records are compared
with the recorded ones turn by turn (stateless mode: every ``stage`` record too), and
the request each turn sent with the recorded one in ``exchange.jsonl``. Every field is
compared exactly unless it is in one of these classes:

**Never compared** (they measure the machine, not the behaviour): ``v``, ``time``,
``timings``, ``settle``, ``background_ms``, ``action_started_early`` (streaming
timing), and in ``model``: ``usage``, ``timings``, ``attempts``, ``streamed``.

**Compared by file name**: screenshot names (``observation.screenshot``,
``observation.raw``, ``result.screenshot``, ``raw_png``, ``annotated_png``,
``team.screenshot``): the directory differs legitimately (``AGENT_DUMP_DIR``).

**Encoding-dependent** (``request.bytes`` and the prefill's text-token estimate made
from it, ``observation.png_bytes``, the request body's
``_bytes`` and the sha256 names of its images): compared only when this process's PNG
encoder reproduces every recorded screenshot byte for byte (same backend, deflate
engine and level, and for ISA-L the same instruction set: it picks its matches with
other instructions on another CPU). Otherwise, in a dry replay, each image URL is
compared by the pixels of the screenshot file it names (``<image pixels:DIGEST>``), or
as ``<image>`` when no file in the run directory has its bytes; with real input always
as ``<image>`` (the live screen is compared with a tolerance instead).

**Screen-derived** (``result.changed``, ``result.changed_region``,
``result.pointer_moved_only``, ``result.no_effect_repeats``, ``result.warning``, the same
in ``more_calls``, and ``screen_unchanged``): computed by the loop from the frames
before and after an action. A dry replay reproduces them only when both frames were
recorded, i.e. the frame shown after answer ``k`` and after answer ``k - 1`` were each
captured before any later action (true for every turn when
``agent.observe_after_action`` is on); otherwise they are skipped for that turn and the
replay says so. With real input they are never compared (the live screen decides).

**Screen pixels** (``observation.digest``, ``reused``, ``unchanged``, ``sent``): a dry
replay serves the recorded pixels, so these must match exactly (a digest that differs
means the replay showed the model another frame); skipped for a frame whose file is
missing, and with real input (there the screenshot is compared with a tolerance).

**End of an incomplete record**: when the recording ended early (interrupted, error,
max_time, a crash) or ``--until`` stops the replay, the last compared turn is compared
only on the keys the recording has, and ``ended_by``/``final`` are not compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import orjson

__all__ = [
    "ABSENT",
    "CompareRules",
    "Divergence",
    "compare_requests",
    "compare_turns",
    "diff_values",
]

ABSENT = "<absent>"

NEVER = frozenset(
    {
        "v",
        "time",
        "timings",
        "settle",
        "background_ms",
        "action_started_early",
        "model.usage",
        "model.timings",
        "model.attempts",
        "model.streamed",
    }
)
FILE_NAMES = frozenset(
    {
        "observation.screenshot",
        "observation.raw",
        "result.screenshot",
        "raw_png",
        "annotated_png",
        "team.screenshot",
    }
)
#: The request's size and what follows from it (the prefill's text-token estimate).
REQUEST_SIZE = ("request.bytes", "request.prefill.text_tokens", "request.prefill.tokens")
ENCODING = frozenset({*REQUEST_SIZE, "observation.png_bytes"})
SCREEN_RESULT_KEYS = ("changed", "changed_region", "pointer_moved_only", "no_effect_repeats", "warning")
SCREEN_PIXELS = ("digest", "reused", "unchanged", "sent")
END_KEYS = ("ended_by", "final")

_KINDS = {
    "action": "action",
    "actions": "action",
    "mapping": "mapping",
    "result": "result",
    "more_calls": "result",
    "extra_calls": "result",
    "model": "model",
    "tool_call": "model",
    "reply": "model",
    "request": "request",
    "observation": "observation",
    "screen_unchanged": "observation",
}


@dataclass(frozen=True, slots=True)
class Divergence:
    """One difference between the recording and the replay."""

    turn: int
    path: str  # dotted path inside the turn record, e.g. "action.x" or "request.body.messages[2].content"
    recorded: Any
    replayed: Any
    kind: str  # action, mapping, result, model, request, observation, flow, screen
    stage: str | None = None

    def describe(self) -> str:
        where = f"turn {self.turn}" + (f" ({self.stage})" if self.stage else "")
        return f"{where}: {self.path}: recorded {_show(self.recorded)}, replayed {_show(self.replayed)}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "stage": self.stage,
            "path": self.path,
            "kind": self.kind,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


def _show(value: Any, limit: int = 120) -> str:
    text = value if value == ABSENT else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(slots=True)
class CompareRules:
    """Which classes of fields a comparison includes (see the module docstring)."""

    encoding: bool = True  # this process's encoder reproduces the recorded PNG bytes
    real_input: bool = False
    #: Turns whose screen-derived fields can be reproduced (None: every turn).
    screen_turns: set[int] | None = None
    #: Turns whose request sizes can be reproduced (None: every turn).
    bytes_turns: set[int] | None = None
    #: Turns whose observation frame file is missing (pixel fields skipped).
    missing_frames: set[int] = field(default_factory=set)
    #: The last compared turn ends an incomplete record (see the module docstring).
    open_end_turn: int | None = None
    ignore_annotation: bool = False


def _file_name(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return value
    return PureWindowsPath(value).name if "\\" in value else PurePosixPath(value).name


def _drop(record: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if not rest:
        record.pop(head, None)
        return
    inner = record.get(head)
    if isinstance(inner, dict):
        inner = dict(inner)
        _drop(inner, rest)
        record[head] = inner


def _apply(record: dict[str, Any], dotted: str, fn: Any) -> None:
    head, _, rest = dotted.partition(".")
    if head not in record:
        return
    if not rest:
        record[head] = fn(record[head])
        return
    inner = record.get(head)
    if isinstance(inner, dict):
        inner = dict(inner)
        _apply(inner, rest, fn)
        record[head] = inner


def normalize(record: Mapping[str, Any], rules: CompareRules) -> dict[str, Any]:
    """The comparable form of one turn record (see the module docstring)."""
    out = dict(record)
    turn = out.get("turn")
    for dotted in NEVER:
        _drop(out, dotted)
    for dotted in FILE_NAMES:
        _apply(out, dotted, _file_name)
    if not rules.encoding:
        for dotted in ENCODING:
            _drop(out, dotted)
    if rules.bytes_turns is not None and turn not in rules.bytes_turns:
        for dotted in REQUEST_SIZE:
            _drop(out, dotted)
    screen_ok = not rules.real_input and (rules.screen_turns is None or turn in rules.screen_turns)
    calls = out.get("more_calls")
    if isinstance(calls, list):
        out["more_calls"] = [_normalize_call(c, screen_ok) for c in calls]
    if not screen_ok:
        for key in SCREEN_RESULT_KEYS:
            _drop(out, f"result.{key}")
        out.pop("screen_unchanged", None)
    if rules.real_input or turn in rules.missing_frames:
        for key in SCREEN_PIXELS:
            _drop(out, f"observation.{key}")
        _drop(out, "observation.png_bytes")
        for dotted in REQUEST_SIZE:
            _drop(out, dotted)
    if rules.ignore_annotation:
        _drop(out, "observation.annotation")
        if out.get("stage") == "annotated":
            out.pop("annotation", None)
    return out


def _normalize_call(call: Any, screen_ok: bool) -> Any:
    if not isinstance(call, dict):
        return call
    call = dict(call)
    _apply(call, "result.screenshot", _file_name)
    if not screen_ok:
        for key in SCREEN_RESULT_KEYS:
            _drop(call, f"result.{key}")
    return call


def diff_values(recorded: Any, replayed: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Leaf differences between two JSON values: ``(path, recorded, replayed)``."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in list(recorded) + [k for k in replayed if k not in recorded]:
            sub = f"{path}.{key}" if path else str(key)
            out.extend(diff_values(recorded.get(key, ABSENT), replayed.get(key, ABSENT), sub))
        return out
    if isinstance(recorded, list) and isinstance(replayed, list):
        out = []
        for index in range(max(len(recorded), len(replayed))):
            a = recorded[index] if index < len(recorded) else ABSENT
            b = replayed[index] if index < len(replayed) else ABSENT
            out.extend(diff_values(a, b, f"{path}[{index}]"))
        return out
    if recorded == replayed and type(recorded) is type(replayed):
        return []
    numbers = (int, float)
    if (
        isinstance(recorded, numbers)
        and isinstance(replayed, numbers)
        and not isinstance(recorded, bool)
        and not isinstance(replayed, bool)
        and recorded == replayed
    ):
        return []  # 1 and 1.0 (JSON does not tell them apart); True is not 1
    return [(path, recorded, replayed)]


def _kind(path: str) -> str:
    head = path.split(".", 1)[0].split("[", 1)[0]
    return _KINDS.get(head, "flow")


def _key(record: Mapping[str, Any]) -> tuple[int, str | None]:
    stage = record.get("stage")
    return int(record.get("turn", -1)), (None if stage in (None, "turn") else str(stage))


def compare_turns(
    recorded: Iterable[Mapping[str, Any]],
    replayed: Iterable[Mapping[str, Any]],
    rules: CompareRules,
    *,
    last_turn: int | None = None,
) -> list[Divergence]:
    """Compare the records of turns ``<= last_turn`` (all when None)."""
    rec = {_key(r): r for r in recorded if isinstance(r.get("turn"), int)}
    rep = {_key(r): r for r in replayed if isinstance(r.get("turn"), int)}
    keys = sorted(set(rec) | set(rep), key=lambda k: (k[0], k[1] or ""))
    out: list[Divergence] = []
    for key in keys:
        turn, stage = key
        if last_turn is not None and turn > last_turn:
            continue
        a, b = rec.get(key), rep.get(key)
        if a is None or b is None:
            out.append(
                Divergence(
                    turn,
                    "turn",
                    "recorded" if a is not None else ABSENT,
                    "replayed" if b is not None else ABSENT,
                    "flow",
                    stage,
                )
            )
            continue
        left, right = normalize(a, rules), normalize(b, rules)
        if rules.open_end_turn is not None and turn == rules.open_end_turn:
            for name in END_KEYS:
                left.pop(name, None)
                right.pop(name, None)
            right = {k: v for k, v in right.items() if k in left}
        for path, x, y in diff_values(left, right):
            out.append(Divergence(turn, path, x, y, _kind(path), stage))
    return out


#: The sha256 name of an image URL -> a digest of its pixels (see ``Recording.image_pixels``).
ImagePixels = Mapping[str, str]


def _normalize_request(
    body: Mapping[str, Any], encoding: bool, sizes: bool, pixels: ImagePixels | None = None
) -> dict[str, Any]:
    out = dict(body)
    if not encoding or not sizes:
        out.pop("_bytes", None)
    messages = out.get("messages")
    if isinstance(messages, list):
        out["messages"] = [_normalize_message(m, encoding, pixels or {}) for m in messages]
    return out


def _image_by_pixels(url: Any, pixels: ImagePixels) -> str:
    from deskpilot.rundir import image_digest_of_url

    digest = pixels.get(image_digest_of_url(url) or "") if isinstance(url, str) else None
    return f"<image pixels:{digest}>" if digest else "<image>"


def _normalize_message(message: Any, encoding: bool, pixels: ImagePixels) -> Any:
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if message.get("role") == "tool" and isinstance(content, str) and content.startswith("{"):
        # Screen-derived payload fields are compared in the turn records, where the
        # replay can tell whether they are reproducible; here they would repeat as noise.
        try:
            payload = orjson.loads(content)
        except orjson.JSONDecodeError:
            return message
        if isinstance(payload, dict):
            for key in SCREEN_RESULT_KEYS:
                payload.pop(key, None)
            return {**message, "content": payload}
        return message
    if encoding or not isinstance(content, list):
        return message
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("image_url"), dict):
            url = part["image_url"].get("url")
            part = {**part, "image_url": {**part["image_url"], "url": _image_by_pixels(url, pixels)}}
        parts.append(part)
    return {**message, "content": parts}


def compare_requests(
    recorded: Mapping[int, Mapping[str, Any]],
    replayed: Mapping[int, Mapping[str, Any]],
    *,
    encoding: bool,
    bytes_turns: set[int] | None = None,
    last_turn: int | None = None,
    recorded_pixels: ImagePixels | None = None,
    replayed_pixels: ImagePixels | None = None,
) -> list[Divergence]:
    """Compare the sanitized request bodies (exchange log) sent by the same turns.

    Only turns present in both logs are compared: a turn missing from one of them is
    already a turn-level divergence, or the recording had no exchange log. Without
    ``encoding``, images are compared by the ``*_pixels`` of each side's files."""
    out: list[Divergence] = []
    for turn in sorted(set(recorded) & set(replayed)):
        if last_turn is not None and turn > last_turn:
            continue
        sizes = bytes_turns is None or turn in bytes_turns
        left = _normalize_request(recorded[turn], encoding, sizes, recorded_pixels)
        right = _normalize_request(replayed[turn], encoding, sizes, replayed_pixels)
        for path, x, y in diff_values(left, right, "request.body"):
            out.append(Divergence(turn, path, x, y, "request"))
    return out
