"""What a run report shows, extracted from a run directory (any mode, any state).

:func:`build_report_data` turns a :class:`~deskpilot.replay.Recording` into plain data
for the HTML renderer: the header (task, outcome, totals, p50/p95 per phase) and one
:class:`TurnView` per turn with the image the model saw, the marks to draw on it (in
that image's pixels), the model's text, the calls with their results, and the phase
timings. Every key of a record is optional here: a crashed run's directory yields a
report of what is there, flagged partial.

Which image a turn "saw":

* single and team modes: the newest image sent before the turn's request, i.e. the
  last observation recorded by an earlier turn that was sent as an image (a planner
  turn sends none: it gets no image);
* stateless mode: turn ``n``'s actions answer the request of turn ``n - 1``, whose image
  is that turn's annotated screenshot (turn 1 runs the boot output: no image).

Marks come from the recorded physical actions mapped back through the recorded mapping
(what really happened), and from normalized boxes in the arguments (what was asked).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deskpilot.actions import (
    ActionRecord,
    Click,
    Drag,
    Hold,
    KeyPress,
    MoveMouse,
    Scroll,
    TypeText,
    from_record,
)
from deskpilot.rundir import Recording, RunInfo, TurnRecord

__all__ = ["Mark", "ReportData", "TurnView", "build_report_data", "png_size"]

#: Phases drawn in the timing bar, in turn order (others follow, ``overhead`` is a sum).
BAR_PHASES = ("model", "parse", "action", "settle", "capture", "annotate", "encode", "request_build", "delay")


@dataclass(slots=True)
class Mark:
    """One thing to draw over an image, in image pixels."""

    kind: str  # click, double_click, right_click, move, drag, scroll, box, zoom, bbox, text
    x: float = 0.0
    y: float = 0.0
    x2: float | None = None
    y2: float | None = None
    label: str = ""
    index: int | None = None  # order within the turn (stateless: several actions)


@dataclass(slots=True)
class CallView:
    name: str
    arguments: Any
    result: Any
    action: ActionRecord | None
    note: str = ""  # "refused: too_many_tool_calls", ...


@dataclass(slots=True)
class TurnView:
    number: int
    role: str
    kind: str  # "initial", "agent", "planner", "executor", "stateless", ...
    image: str | None  # the screenshot the model saw (run-relative name), None = no image
    image_path: Path | None
    image_size: tuple[int, int] | None
    image_note: str  # why there is no image, or which one it is
    marks: list[Mark]
    content: str
    reasoning: str
    calls: list[CallView]
    stateless: dict[str, Any] | None
    result: Any
    after: str | None  # the screenshot recorded after the turn
    after_path: Path | None
    timings: dict[str, float]
    final: bool
    answer: str
    ended_by: str | None
    request: dict[str, Any]
    record: TurnRecord
    #: How the screen settled after the turn's action (the record's ``settle``; empty: none).
    settle: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ReportData:
    path: Path
    mode: str
    task: str
    outcome: str
    partial: bool
    problems: list[str]
    #: summary.json as read (empty without one).
    summary: Mapping[str, Any]
    run_info: RunInfo
    phases: list[dict[str, Any]]  # {"phase", "count", "p50_ms", "p95_ms", "mean_ms", "max_ms", "total_ms"}
    totals: dict[str, Any]
    turns: list[TurnView] = field(default_factory=list)
    #: ``summary.prefill`` (or the same counted from the turns): what a prefix-caching
    #: server had to process anew per request (None: the run recorded no prefill).
    prefill: dict[str, Any] | None = None


def png_size(path: Path | None) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR (no decoder needed), or None."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def _mapping(value: Any) -> tuple[float, float, float, float, float, float] | None:
    """``(left, top, phys_w, phys_h, img_w, img_h)`` of a recorded mapping, or None."""
    if not isinstance(value, dict):
        return None
    try:
        ox, oy = (float(v) for v in value["origin"])
        pw, ph = (float(v) for v in value["physical_size"])
        iw, ih = (float(v) for v in value["image_size"])
    except (KeyError, TypeError, ValueError):
        return None
    if min(pw, ph, iw, ih) <= 0:
        return None
    return ox, oy, pw, ph, iw, ih


def _phys_to_image(m: tuple[float, float, float, float, float, float], x: Any, y: Any) -> tuple[float, float] | None:
    try:
        px, py = float(x), float(y)
    except (TypeError, ValueError):
        return None
    ox, oy, pw, ph, iw, ih = m
    return (px - ox + 0.5) * iw / pw, (py - oy + 0.5) * ih / ph


def _norm_box(value: Any) -> tuple[float, float, float, float] | None:
    """A 0..1000 box in any of the three formats -> (x1, y1, x2, y2), or None."""
    try:
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (list, tuple)) for v in value):
            (x1, y1), (x2, y2) = value
        elif isinstance(value, (list, tuple)) and len(value) == 4:
            x1, y1, x2, y2 = value
        elif isinstance(value, (list, tuple)) and len(value) == 2:
            x1, y1 = value
            x2, y2 = x1, y1
        else:
            return None
        box = [min(1000.0, max(0.0, float(v))) for v in (x1, y1, x2, y2)]
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in box):
        return None
    return min(box[0], box[2]), min(box[1], box[3]), max(box[0], box[2]), max(box[1], box[3])


def _physical_marks(
    action: Any, m: tuple[float, float, float, float, float, float] | None, index: int | None = None
) -> list[Mark]:
    """The marks of a recorded action (read with :func:`deskpilot.actions.from_record`;
    a record no deskpilot version wrote gets none)."""
    if not isinstance(action, dict):
        return []
    try:
        typed = from_record(action)
    except ValueError:
        return []
    out: list[Mark] = []
    if isinstance(typed, (Click, MoveMouse, Scroll)):
        point = _phys_to_image(m, *typed.point) if m and typed.point is not None else None
        if point is None:
            return out
        if isinstance(typed, Click):
            name = "right_click" if typed.button == "right" else ("double_click" if typed.count == 2 else "click")
            out.append(Mark(name, *point, label=typed.label or "", index=index))
        elif isinstance(typed, MoveMouse):
            out.append(Mark("move", *point, index=index))
        else:
            dy, dx = typed.dy, typed.dx
            out.append(Mark("scroll", *point, x2=float(dx), y2=float(dy), label=f"scroll {dy:+}" if dy else f"scroll x{dx:+}", index=index))
    elif isinstance(typed, Drag) and m:
        a = _phys_to_image(m, *typed.start) if typed.start is not None else None
        b = _phys_to_image(m, *typed.end)
        if a and b:
            out.append(Mark("drag", a[0], a[1], b[0], b[1], label=typed.label or "drag", index=index))
    elif isinstance(typed, TypeText):
        out.append(Mark("text", label=f"type: {typed.text}", index=index))
    elif isinstance(typed, KeyPress):
        out.append(Mark("text", label=f"key: {typed.combo}", index=index))
    elif isinstance(typed, Hold):
        out.append(Mark("text", label=f"hold {typed.combo} {typed.seconds} s", index=index))
    return out


def _box_mark(box: Any, size: tuple[int, int] | None, kind: str, label: str = "", index: int | None = None) -> Mark | None:
    norm = _norm_box(box)
    if norm is None or size is None:
        return None
    x1, y1, x2, y2 = norm
    if kind == "box" and x1 == x2 and y1 == y2:
        return None  # a point: the click mark shows it
    w, h = size
    return Mark(kind, x1 * w / 1000, y1 * h / 1000, x2 * w / 1000, y2 * h / 1000, label=label, index=index)


def _call_marks(call: Mapping[str, Any], action: Any, m: Any, size: tuple[int, int] | None) -> list[Mark]:
    out = _physical_marks(action, m)
    args = _dict(call.get("arguments"))
    name = str(call.get("name") or "")
    if name == "zoom":
        mark = _box_mark(args.get("box"), size, "zoom", "zoom")
        if mark:
            out.append(mark)
    else:
        for key in ("box", "position"):
            mark = _box_mark(args.get(key), size, "box", str(args.get("label") or args.get("element_name") or ""))
            if mark:
                out.append(mark)
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _split_think(text: str) -> tuple[str, str]:
    from deskpilot.agent.client import extract_think, strip_think

    return strip_think(text), extract_think(text)


def _phases(recording: Recording, turns: list[TurnRecord]) -> list[dict[str, Any]]:
    recorded = recording.summary.get("phases") if recording.summary else None
    if isinstance(recorded, dict) and recorded:
        return [{"phase": name, **stats} for name, stats in recorded.items() if isinstance(stats, dict)]
    from deskpilot.agent import summarize

    rows = [t["timings"] for t in turns if isinstance(t.get("timings"), dict)]
    clean = [{k: float(v) for k, v in row.items() if isinstance(v, (int, float))} for row in rows]
    return [{"phase": s.phase, **s.as_dict()} for s in summarize(clean)]


def _totals_from_turns(turns: list[TurnRecord]) -> dict[str, Any]:
    """What summary.json would say, counted from the turn records (a crashed run has none)."""
    requests = [_dict(t.get("request")) for t in turns if t.get("request")]
    calls = [
        _dict(c.get("result"))
        for t in turns
        for c in ([t] if t.get("tool_call") else []) + _list(t.get("more_calls")) + _list(t.get("extra_calls"))
    ]
    observations = [_dict(t.get("observation")) for t in turns if t.get("observation")]
    if any("sent" in o for o in observations):
        images = sum(1 for o in observations if o.get("sent") == "image")
    else:  # stateless mode: every request carries its one screenshot
        images = sum(1 for r in requests if r.get("images"))
    return {
        "requests": len(requests),
        "request_bytes": sum(int(r.get("bytes") or 0) for r in requests),
        "tool_calls": len(calls),
        "tool_errors": sum(1 for r in calls if r.get("ok") is False),
        "images_sent": images,
    }


def _prefill_from_turns(turns: list[TurnRecord]) -> dict[str, Any] | None:
    """``summary.prefill`` counted from the turn records (a crashed run has no summary)."""
    rows = [_dict(_dict(t.get("request")).get("prefill")) for t in turns]
    rows = [r for r in rows if r]
    if not rows:
        return None
    later = rows[1:] or rows
    known = all(isinstance(r.get("image_tokens"), int) for r in later)
    return {
        "requests": len(rows),
        "images": sum(int(r.get("images") or 0) for r in rows),
        "images_per_turn": round(sum(int(r.get("images") or 0) for r in later) / len(later), 3),
        "image_tokens_per_turn": round(sum(int(r["image_tokens"]) for r in later) / len(later), 1) if known else None,
        "text_tokens_per_turn": round(sum(int(r.get("text_tokens") or 0) for r in later) / len(later), 1),
        "max_images_in_context": max(int(r.get("images_in_context") or 0) for r in rows),
    }


def build_report_data(recording: Recording) -> ReportData:
    """Everything the HTML report shows (see the module docstring)."""
    summary: Mapping[str, Any] = recording.summary or {}
    turns = sorted(recording.turns(), key=lambda r: int(r["turn"]))
    stateless_mode = recording.mode == "stateless"
    data = ReportData(
        path=recording.path,
        mode=recording.mode,
        task=recording.task,
        outcome=str(summary.get("outcome") or "unknown (no summary.json)"),
        partial=recording.partial,
        problems=list(recording.problems),
        summary=summary,
        run_info=recording.run_info,
        phases=_phases(recording, turns),
        totals=dict(summary.get("totals") or {}) or _totals_from_turns(turns),
        prefill=_dict(summary.get("prefill")) or _prefill_from_turns(turns),
    )
    last_sent: tuple[str, Any] | None = None  # (screenshot, mapping) of the newest image sent
    previous_obs: dict[str, Any] | None = None
    for record in turns:
        number = int(record["turn"])
        role = str(record.get("role") or "agent")
        team = _dict(record.get("team"))
        obs = _dict(record.get("observation")) or None
        request = _dict(record.get("request"))
        kind = "initial" if number == 0 and "model" not in record else str(team.get("team_role") or role)

        image: str | None = None
        mapping: Any = None
        note = ""
        if stateless_mode:
            if previous_obs is not None and previous_obs.get("screenshot"):
                image, mapping = str(previous_obs["screenshot"]), previous_obs.get("mapping")
                note = f"the annotated screenshot of turn {number - 1}"
            else:
                note = "the boot output: the model saw no image for these actions"
        elif kind == "initial":
            if obs is not None and obs.get("screenshot"):
                image, mapping = str(obs["screenshot"]), obs.get("mapping")
            note = "the first screenshot, sent with the first request"
        elif request.get("images") == 0 or team.get("image") is False:
            note = "text only: this request carried no image"
        elif last_sent is not None:
            image, mapping = last_sent
            note = "the newest image in the request"
        else:
            note = "no screenshot was recorded before this request"
        if isinstance(record.get("mapping"), dict):
            mapping = record["mapping"]  # the frame the call really used (a zoom crop, say)
        image_path = recording.resolve(image)
        size = png_size(image_path)
        m = _mapping(mapping)

        marks: list[Mark] = []
        calls: list[CallView] = []
        stateless: dict[str, Any] | None = None
        call = record.get("tool_call")
        if isinstance(call, dict):
            marks += _call_marks(call, record.get("action"), m, size)
            args = call.get("arguments") if call.get("arguments") is not None else call.get("raw_arguments")
            calls.append(CallView(str(call.get("name")), args, record.get("result"), record.get("action")))
            for more in record.get("more_calls") or []:
                if isinstance(more, dict):
                    marks += _call_marks(more, more.get("action"), _mapping(more.get("mapping")) or m, size)
                    calls.append(CallView(str(more.get("name")), more.get("arguments"), more.get("result"), more.get("action")))
        for extra in record.get("extra_calls") or []:
            if isinstance(extra, dict):
                err = (extra.get("result") or {}).get("error") or {}
                calls.append(CallView(str(extra.get("name")), None, extra.get("result"), None, f"not run: {err.get('type', 'refused')}"))
        if stateless_mode:
            reply = _dict(record.get("reply"))
            actions = _list(record.get("actions"))
            for i, entry in enumerate(actions, 1):
                if isinstance(entry, dict):
                    marks += _physical_marks(entry.get("physical"), m, index=i)
            for b in reply.get("bboxes") or []:
                if isinstance(b, dict):
                    mark = _box_mark([b.get("x1"), b.get("y1"), b.get("x2"), b.get("y2")], size, "bbox", str(b.get("label") or ""))
                    if mark:
                        marks.append(mark)
            stateless = {
                "observation": reply.get("observation"),
                "actions": actions,
                "rejected": reply.get("rejected") or [],
                "bboxes": reply.get("bboxes") or [],
            }
        if image is None:
            marks = [mk for mk in marks if mk.kind == "text"]

        model = _dict(record.get("model"))
        content, think = _split_think(str(model.get("content") or ""))
        reasoning = str(model.get("reasoning") or "")
        if think:
            reasoning = f"{reasoning}\n\n{think}".strip()
        after = (obs.get("screenshot") if obs else None) if obs else None
        timings = {k: float(v) for k, v in _dict(record.get("timings")).items() if isinstance(v, (int, float))}
        data.turns.append(
            TurnView(
                number=number,
                role=role,
                kind=kind,
                image=image,
                image_path=image_path,
                image_size=size,
                image_note=note if image_path or image is None else f"{note} ({image} is missing)",
                marks=marks,
                content=content,
                reasoning=reasoning,
                calls=calls,
                stateless=stateless,
                result=record.get("result"),
                after=str(after) if after else None,
                after_path=recording.resolve(str(after)) if after else None,
                timings=timings,
                final=bool(record.get("final")),
                answer=str(record.get("answer") or ""),
                ended_by=str(record["ended_by"]) if record.get("ended_by") else None,
                request=request,
                record=record,
                settle=_dict(record.get("settle")),
            )
        )
        if obs is not None:
            previous_obs = obs
            if obs.get("screenshot") and obs.get("sent", "image") != "note":
                last_sent = (str(obs["screenshot"]), obs.get("mapping"))
    return data
