"""The run report as one self-contained HTML page.

No network at view time: the CSS and the little JavaScript are inline, marks are inline
SVG over each screenshot, and images are either embedded (``data:image/png;base64``) or
linked by a path relative to the HTML file. Every text from the run is escaped.

Page structure (the browser test relies on it): ``<header id="summary">`` with the task,
outcome, totals and the phase table; one ``<section class="turn" data-turn="N">`` per
turn, holding a ``figure.shot`` (``img`` + ``svg.marks``) when the model saw an image,
the model's text, the calls and results, and a ``div.bar`` of phase timings. When the
script has run, ``document.body.dataset.ready`` is ``"1"`` and
``document.body.dataset.turns`` the number of turn sections.
"""

from __future__ import annotations

import base64
import html
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from deskpilot.report._model import BAR_PHASES, CallView, Mark, ReportData, TurnView

__all__ = ["render_html"]

PHASE_COLOURS = {
    "model": "#7c8db5",
    "parse": "#e0a458",
    "action": "#d1495b",
    "settle": "#66a182",
    "capture": "#00798c",
    "annotate": "#b07aa1",
    "encode": "#edae49",
    "request_build": "#8d6a9f",
    "delay": "#9aa0a6",
}
OTHER_COLOUR = "#c0c4c8"
MAX_TEXT = 20000

CSS = """
:root { --fg:#1d2330; --muted:#5f6b7a; --line:#d8dde4; --bg:#f6f7f9; --card:#fff; --ok:#2e7d32; --bad:#c62828; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", "Noto Sans CJK SC",
  "Noto Sans CJK JP", "Noto Sans CJK KR", "Source Han Sans", "WenQuanYi Micro Hei", "Microsoft YaHei", "Yu Gothic",
  "Malgun Gothic", "PingFang SC", "Hiragino Sans", sans-serif; color:var(--fg); background:var(--bg); }
main { max-width: 1280px; margin: 0 auto; padding: 16px 20px 60px; }
h1 { font-size: 20px; margin: 0 0 6px; }
h2 { font-size: 16px; margin: 0; }
.muted { color: var(--muted); }
.banner { border:1px solid #e0b4b4; background:#fff4f4; color:#7a1f1f; padding:8px 12px; border-radius:6px; margin:10px 0; }
.grid { display:grid; grid-template-columns: repeat(auto-fit, minmax(160px, 1fr)); gap:8px; margin:12px 0; }
.stat { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:6px 10px; }
.stat b { display:block; font-size:16px; }
table { border-collapse: collapse; background:var(--card); }
th, td { border:1px solid var(--line); padding:3px 8px; text-align:right; font-variant-numeric: tabular-nums; }
th:first-child, td:first-child { text-align:left; }
.outcome-answered { color: var(--ok); } .outcome-error, .outcome-interrupted { color: var(--bad); }
section.turn { background:var(--card); border:1px solid var(--line); border-radius:8px; margin:14px 0; padding:12px 14px; }
section.turn > header { display:flex; gap:12px; align-items:baseline; flex-wrap:wrap; margin-bottom:8px; }
.role { font-size:12px; padding:1px 8px; border-radius:10px; background:#e8ecf3; }
.role-planner { background:#f3e8d8; } .role-executor { background:#dcefe2; } .role-stateless { background:#e6e0f3; }
.body { display:grid; grid-template-columns: minmax(280px, 1.25fr) minmax(260px, 1fr); gap:14px; }
@media (max-width: 900px) { .body { grid-template-columns: 1fr; } }
figure.shot { position:relative; margin:0; line-height:0; border:1px solid var(--line); background:#222; cursor: zoom-in; }
figure.shot img { width:100%; height:auto; display:block; image-rendering: auto; }
figure.shot svg.marks { position:absolute; left:0; top:0; width:100%; height:100%; pointer-events:none; }
figure.shot.big { position:fixed; inset:2vh 2vw; z-index:10; cursor: zoom-out; background:#111; display:flex; align-items:center; }
figure.shot.big img { object-fit: contain; max-height:96vh; }
body.hide-marks svg.marks { display:none; }
.noimg { border:1px dashed var(--line); padding:16px; color:var(--muted); border-radius:6px; }
figcaption, .caption { font-size:12px; color:var(--muted); margin-top:4px; line-height:1.3; }
pre { white-space: pre-wrap; word-break: break-word; background:#f3f5f8; border:1px solid var(--line); border-radius:6px; padding:6px 8px; margin:4px 0 8px; font:12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", "Noto Sans Mono CJK SC", "Noto Sans CJK SC", "Microsoft YaHei", monospace; max-height: 320px; overflow:auto; }
.call { border-left:3px solid #7c8db5; padding-left:8px; margin:6px 0; }
.call.failed { border-color: var(--bad); }
.label { font-size:12px; font-weight:600; color:var(--muted); text-transform: uppercase; letter-spacing: .03em; }
.bar { display:flex; height:14px; border-radius:3px; overflow:hidden; background:#eef0f3; margin-top:8px; }
.bar span { display:block; height:100%; min-width:1px; }
.legend { display:flex; flex-wrap:wrap; gap:10px; font-size:12px; color:var(--muted); margin-top:4px; }
.legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:middle; }
details > summary { cursor:pointer; color:var(--muted); font-size:12px; }
.final { border:1px solid #b7dfb9; background:#f1fbf1; padding:6px 10px; border-radius:6px; }
.final.failed { border-color:#e0b4b4; background:#fff4f4; }
nav.controls { position:sticky; top:0; background:var(--bg); padding:6px 0; z-index:5; border-bottom:1px solid var(--line); font-size:13px; }
"""

SCRIPT = """
(function () {
  var body = document.body;
  var copies = document.querySelectorAll('img[data-same-as]');
  for (var k = 0; k < copies.length; k++) {
    var original = document.getElementById(copies[k].getAttribute('data-same-as'));
    if (original) { copies[k].src = original.src; }
  }
  var toggle = document.getElementById('toggle-marks');
  if (toggle) {
    toggle.addEventListener('change', function () { body.classList.toggle('hide-marks', !toggle.checked); });
  }
  var figures = document.querySelectorAll('figure.shot');
  for (var i = 0; i < figures.length; i++) {
    figures[i].addEventListener('click', function (event) { event.currentTarget.classList.toggle('big'); });
  }
  document.addEventListener('keydown', function (event) {
    if (event.key === 'Escape') {
      var open = document.querySelectorAll('figure.shot.big');
      for (var j = 0; j < open.length; j++) { open[j].classList.remove('big'); }
    }
  });
  body.dataset.turns = String(document.querySelectorAll('section.turn').length);
  body.dataset.ready = '1';
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _compact(value: Any, indent: str = "") -> str:
    """JSON with one key per line, but lists of plain values on one line (boxes, points)."""
    if isinstance(value, dict) and value:
        inner = indent + "  "
        items = [f"{inner}{orjson.dumps(str(k)).decode()}: {_compact(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + _compact(v, inner) for v in value) + "\n" + indent + "]"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v, indent) for v in value) + "]"
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def _json(value: Any) -> str:
    text = _compact(value)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n... ({len(text)} characters)"
    return _e(text)


def _text(value: str) -> str:
    if len(value) > MAX_TEXT:
        value = value[:MAX_TEXT] + f"\n... ({len(value)} characters)"
    return _e(value)


def _ms(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    if number != number:  # NaN
        return "-"
    return f"{number:.1f}" if number < 100 else f"{number:.0f}"


class _Images:
    """Image sources: embedded (data URLs) or relative links.

    An embedded image appears once in the file: a second ``<img>`` of the same file gets
    ``data-same-as`` naming the first, and the script copies its source (a turn 0 and the
    turn that saw the same screenshot do not double the page's size).
    """

    def __init__(self, embed: bool, out_dir: Path) -> None:
        self.embed = embed
        self.out_dir = out_dir
        self._ids: dict[Path, str] = {}

    def attrs(self, path: Path) -> str:
        """``src="..." id="..."`` for the first use of a file, ``data-same-as`` after."""
        if not self.embed:
            rel = os.path.relpath(path.resolve(), self.out_dir.resolve())
            return f'src="{_e(quote(Path(rel).as_posix()))}"'
        first = self._ids.get(path)
        if first is not None:
            return f'data-same-as="{first}"'
        ident = f"img-{len(self._ids) + 1}"
        self._ids[path] = ident
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'id="{ident}" src="data:image/png;base64,{data}"'


def _marks_svg(marks: list[Mark], size: tuple[int, int]) -> str:
    w, h = size
    unit = max(w, h) / 100  # marks scale with the image, not with the page
    stroke = max(1.0, unit * 0.35)
    font = max(7.0, unit * 2.2)
    parts = [
        f'<svg class="marks" viewBox="0 0 {w} {h}" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg" aria-hidden="true">',
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"8\" refY=\"5\" markerWidth=\"5\" markerHeight=\"5\" orient=\"auto-start-reverse\">"
        '<path d="M0,0 L10,5 L0,10 z" fill="#ff3b30"/></marker></defs>',
    ]
    texts: list[str] = []

    def label(x: float, y: float, text: str) -> None:
        if text:
            # Keep the label inside the image (a click near the right edge labels leftwards).
            x = max(1.0, min(x, w - len(text[:60]) * font * 0.55 - 2))
            y = max(font, min(y, h - 2.0))
            parts.append(
                f'<text x="{x:.1f}" y="{y:.1f}" font-size="{font:.1f}" fill="#fff" stroke="#000" stroke-width="{stroke * 0.8:.2f}" '
                f'paint-order="stroke" font-family="sans-serif">{_e(text[:60])}</text>'
            )

    for mark in marks:
        tag = f"{mark.index}. " if mark.index is not None else ""
        r = unit * 1.6
        if mark.kind in ("click", "double_click", "right_click"):
            colour = "#ff3b30" if mark.kind != "right_click" else "#ff9500"
            parts.append(f'<circle class="mark mark-{mark.kind}" cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="{r:.1f}" fill="none" stroke="{colour}" stroke-width="{stroke * 1.5:.2f}"/>')
            if mark.kind == "double_click":
                parts.append(f'<circle cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="{r * 1.6:.1f}" fill="none" stroke="{colour}" stroke-width="{stroke:.2f}"/>')
            parts.append(
                f'<path d="M{mark.x - r * 1.8:.1f},{mark.y:.1f} H{mark.x + r * 1.8:.1f} M{mark.x:.1f},{mark.y - r * 1.8:.1f} V{mark.y + r * 1.8:.1f}" '
                f'stroke="{colour}" stroke-width="{stroke * 0.6:.2f}"/>'
            )
            name = {"click": "click", "double_click": "double click", "right_click": "right click"}[mark.kind]
            label(mark.x + r * 1.4, mark.y - r * 1.4, f"{tag}{name}" + (f" {mark.label}" if mark.label else ""))
        elif mark.kind == "move":
            parts.append(f'<circle class="mark mark-move" cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="{r:.1f}" fill="none" stroke="#34c759" stroke-width="{stroke:.2f}" stroke-dasharray="{stroke * 2:.1f}"/>')
            label(mark.x + r * 1.2, mark.y - r * 1.2, f"{tag}move")
        elif mark.kind == "drag" and mark.x2 is not None and mark.y2 is not None:
            parts.append(
                f'<line class="mark mark-drag" x1="{mark.x:.1f}" y1="{mark.y:.1f}" x2="{mark.x2:.1f}" y2="{mark.y2:.1f}" '
                f'stroke="#ff3b30" stroke-width="{stroke * 1.5:.2f}" marker-end="url(#arrow)"/>'
            )
            parts.append(f'<circle cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="{r * 0.5:.1f}" fill="#ff3b30"/>')
            label(mark.x + r, mark.y - r, f"{tag}{mark.label or 'drag'}")
        elif mark.kind == "scroll":
            dy = mark.y2 or 0.0
            dx = mark.x2 or 0.0
            length = unit * 6
            ex = mark.x + (length if dx > 0 else -length if dx < 0 else 0)
            ey = mark.y + (length if dy > 0 else -length if dy < 0 else 0)
            parts.append(f'<circle class="mark mark-scroll" cx="{mark.x:.1f}" cy="{mark.y:.1f}" r="{r * 0.6:.1f}" fill="#5856d6"/>')
            parts.append(
                f'<line x1="{mark.x:.1f}" y1="{mark.y:.1f}" x2="{ex:.1f}" y2="{ey:.1f}" stroke="#5856d6" '
                f'stroke-width="{stroke * 1.5:.2f}" marker-end="url(#arrow)"/>'
            )
            label(mark.x + r, mark.y + r * 2, f"{tag}{mark.label}")
        elif mark.kind in ("box", "zoom", "bbox") and mark.x2 is not None and mark.y2 is not None:
            colour = {"box": "#ffcc00", "zoom": "#00c7be", "bbox": "#0a84ff"}[mark.kind]
            dash = f' stroke-dasharray="{stroke * 3:.1f}"' if mark.kind != "bbox" else ""
            parts.append(
                f'<rect class="mark mark-{mark.kind}" x="{mark.x:.1f}" y="{mark.y:.1f}" width="{max(1.0, mark.x2 - mark.x):.1f}" '
                f'height="{max(1.0, mark.y2 - mark.y):.1f}" fill="none" stroke="{colour}" stroke-width="{stroke:.2f}"{dash}/>'
            )
            label(mark.x, max(font, mark.y - stroke * 2), mark.label if mark.kind != "zoom" else "zoom")
        elif mark.kind == "text":
            texts.append(f"{tag}{mark.label}")
    for i, text in enumerate(texts):
        y = h - (len(texts) - i) * font * 1.5 + font * 0.2
        width = min(w - 8.0, len(text[:60]) * font * 0.62 + font)
        parts.append(f'<rect class="mark mark-text" x="4" y="{y - font * 1.1:.1f}" width="{width:.1f}" height="{font * 1.4:.1f}" rx="{font * 0.3:.1f}" fill="rgba(0,0,0,0.65)"/>')
        parts.append(f'<text x="{4 + font * 0.4:.1f}" y="{y:.1f}" font-size="{font:.1f}" fill="#ffeb3b" font-family="monospace">{_e(text[:60])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bar(timings: dict[str, float]) -> str:
    phases = [(p, timings[p]) for p in BAR_PHASES if timings.get(p, 0) > 0]
    phases += [(p, v) for p, v in timings.items() if p not in BAR_PHASES and p != "overhead" and v > 0]
    total = sum(v for _, v in phases)
    if total <= 0:
        return '<div class="caption">no timings recorded</div>'
    spans = "".join(
        f'<span class="phase-{_e(p)}" style="width:{100 * v / total:.3f}%;background:{PHASE_COLOURS.get(p, OTHER_COLOUR)}" '
        f'title="{_e(p)} {_ms(v)} ms"></span>'
        for p, v in phases
    )
    legend = "".join(f'<span><i style="background:{PHASE_COLOURS.get(p, OTHER_COLOUR)}"></i>{_e(p)} {_ms(v)} ms</span>' for p, v in phases)
    overhead = timings.get("overhead")
    extra = f"<span>overhead {_ms(overhead)} ms</span>" if overhead is not None else ""
    return f'<div class="bar" title="{_ms(total)} ms">{spans}</div><div class="legend">{legend}{extra}<span>total {_ms(total)} ms</span></div>'


def _settle_html(settle: dict[str, Any]) -> str:
    """One line: what the settle after the action saw (runs before issue 20: polls, stable, wait)."""
    if not settle:
        return ""
    ended = settle.get("ended")
    parts: list[str] = []
    if ended == "no_reaction":
        parts.append("no visible reaction (the screen unchanged)")
    elif isinstance(settle.get("first_reaction_ms"), (int, float)):
        parts.append(f"first reaction at {_ms(float(settle['first_reaction_ms']))} ms")
    if isinstance(settle.get("frames"), int) and ended != "no_reaction":
        parts.append(f"{settle['frames']} frame{'' if settle['frames'] == 1 else 's'}")
    if isinstance(settle.get("quiet_ms"), (int, float)):
        parts.append(f"quiet {_ms(float(settle['quiet_ms']))} ms")
    if ended == "max":
        parts.append("still changing at the bound")
    elif ended is None and "stable" in settle:
        parts.append("stable" if settle.get("stable") else "not stable")
    if isinstance(settle.get("waited_ms"), (int, float)):
        parts.append(f"waited {_ms(float(settle['waited_ms']))} ms")
    how = f"{settle['damage']} DAMAGE events" if isinstance(settle.get("damage"), int) else "polling"
    parts.append(f"{settle.get('polls', '?')} probes, {how}")
    cls = "settle still-changing" if ended == "max" else "settle"
    title = f"ended by {ended}" if ended else "settle"
    return f'<div class="caption {cls}" data-ended="{_e(ended or "")}" title="{_e(title)}">settle: {_e(", ".join(parts))}</div>'


def _call_html(call: CallView) -> str:
    result = call.result if isinstance(call.result, dict) else {}
    failed = result.get("ok") is False or bool(call.note)
    out = [f'<div class="call{" failed" if failed else ""}"><div class="label">tool call</div>']
    if isinstance(call.arguments, str):
        shown = _text(call.arguments)  # arguments that did not parse, as the model sent them
    elif call.arguments is None:
        shown = "…"
    else:
        shown = _json(call.arguments)
    out.append(f'<pre class="tool-call">{_e(call.name)}({shown})</pre>')
    if call.note:
        out.append(f'<div class="caption">{_e(call.note)}</div>')
    if call.action:
        out.append(f'<div class="label">physical action</div><pre class="action">{_json(call.action)}</pre>')
    if call.result is not None:
        out.append(f'<div class="label">result</div><pre class="result">{_json(call.result)}</pre>')
    out.append("</div>")
    return "".join(out)


def _figure(turn: TurnView, images: _Images) -> str:
    if turn.image_path is None or turn.image_size is None:
        return f'<div class="noimg">{_e(turn.image_note or "no image")}</div>'
    svg = _marks_svg(turn.marks, turn.image_size)
    w, h = turn.image_size
    return (
        f'<figure class="shot"><img {images.attrs(turn.image_path)} width="{w}" height="{h}" '
        f'alt="screenshot {_e(turn.image)} seen at turn {turn.number}" loading="lazy" decoding="async">{svg}</figure>'
        f'<div class="caption">{_e(turn.image)}: {_e(turn.image_note)} ({w}x{h})</div>'
    )


def _turn_html(turn: TurnView, images: _Images, seen: set[str]) -> str:
    role_class = f"role role-{_e(turn.kind)}"
    heading = f"Turn {turn.number}"
    flags = []
    if turn.final:
        flags.append('<span class="role" style="background:#dcefe2">final</span>')
    if turn.ended_by:
        flags.append(f'<span class="role" style="background:#f8d7da">ended by {_e(turn.ended_by)}</span>')
    req = turn.request
    req_text = (
        f'<span class="muted">request: {_e(req.get("messages", "?"))} messages, {_e(req.get("images", "?"))} images, '
        f'{_e(req.get("bytes", "?"))} bytes{_prefill_text(req.get("prefill"))}</span>'
        if req
        else ""
    )
    left = [_figure(turn, images)]
    if turn.after_path is not None and turn.after not in seen:
        # Only screens no turn shows as "seen" (e.g. the last one): each image once.
        left.append(
            f'<details class="after"><summary>screen after this turn ({_e(turn.after)})</summary>'
            f'<figure class="shot"><img {images.attrs(turn.after_path)} alt="screen after turn {turn.number}" loading="lazy" decoding="async"></figure></details>'
        )
    right: list[str] = []
    if turn.reasoning:
        right.append(f'<details><summary>reasoning ({len(turn.reasoning)} characters)</summary><pre class="reasoning">{_text(turn.reasoning)}</pre></details>')
    if turn.content and turn.stateless is None:
        right.append(f'<div class="label">model</div><pre class="content">{_text(turn.content)}</pre>')
    elif turn.content:
        right.append(
            f'<details><summary>the model\'s answer to this turn\'s request (run as turn {turn.number + 1})</summary>'
            f'<pre class="content">{_text(turn.content)}</pre></details>'
        )
    if turn.stateless is not None:
        s = turn.stateless
        if s.get("observation"):
            right.append(f'<div class="label">observation</div><pre class="content">{_text(str(s["observation"]))}</pre>')
        for i, entry in enumerate(s.get("actions") or [], 1):
            if isinstance(entry, dict):
                failed = entry.get("ok") is False
                right.append(
                    f'<div class="call{" failed" if failed else ""}"><div class="label">action {i}</div>'
                    f'<pre class="tool-call">{_json(entry.get("action"))}</pre>'
                    f'<div class="label">physical</div><pre class="action">{_json(entry.get("physical"))}</pre>'
                    + (f'<div class="caption">{_e(entry.get("error") or entry.get("skipped") or "")}</div>' if failed or entry.get("skipped") else "")
                    + "</div>"
                )
        if s.get("rejected"):
            right.append(f'<div class="label">refused</div><pre class="result">{_json(s["rejected"])}</pre>')
        if turn.result is not None:
            right.append(f'<div class="label">result</div><pre class="result">{_json(turn.result)}</pre>')
    for call in turn.calls:
        right.append(_call_html(call))
    if turn.settle:
        right.append(_settle_html(turn.settle))
    if turn.final and turn.answer:
        right.append(f'<div class="final"><div class="label">final answer</div>{_text(turn.answer)}</div>')
    if not right:
        right.append('<div class="caption">no model output in this turn</div>')
    return (
        f'<section class="turn" id="turn-{turn.number}" data-turn="{turn.number}" data-role="{_e(turn.kind)}">'
        f'<header><h2>{heading}</h2><span class="{role_class}">{_e(turn.kind)}</span>{"".join(flags)}{req_text}</header>'
        f'<div class="body"><div class="left">{"".join(left)}</div><div class="right">{"".join(right)}</div></div>'
        f"{_bar(turn.timings)}</section>"
    )


def _prefill_text(prefill: Any) -> str:
    """The turn header's part on what the server had to prefill for this request."""
    if not isinstance(prefill, dict):
        return ""
    tokens = prefill.get("image_tokens")
    images = f"{_e(prefill.get('images', '?'))} images" + (f" ({_e(tokens)} tokens)" if isinstance(tokens, int) else "")
    return (
        f'; <span class="prefill">prefill: {images} + ~{_e(prefill.get("text_tokens", "?"))} text tokens, '
        f'{_e(prefill.get("reused_messages", "?"))} of {_e(prefill.get("messages", "?"))} messages reused</span>'
    )


def _prefill_table(data: ReportData) -> str:
    """One row per request: what a prefix-caching server processed anew (the prefill column)."""
    rows = []
    for turn in data.turns:
        p = turn.request.get("prefill") if turn.request else None
        if not isinstance(p, dict):
            continue
        rows.append(
            f'<tr><td><a href="#turn-{turn.number}">{turn.number}</a></td><td>{_e(p.get("reused_messages", "-"))} / '
            f'{_e(p.get("messages", "-"))}</td><td>{_e(p.get("images", "-"))}</td>'
            f'<td>{_e(p.get("image_tokens") if p.get("image_tokens") is not None else "-")}</td>'
            f'<td>{_e(p.get("text_tokens", "-"))}</td><td>{_e(p.get("images_in_context", "-"))}</td></tr>'
        )
    if not rows:
        return ""
    pf = data.prefill or {}
    per_turn = pf.get("image_tokens_per_turn")
    caption = (
        f'<div class="caption">per turn after the first: {_e(pf.get("images_per_turn", "-"))} images prefilled'
        + (f", {_e(per_turn)} image tokens" if per_turn is not None else "")
        + f', ~{_e(pf.get("text_tokens_per_turn", "-"))} text tokens; at most {_e(pf.get("max_images_in_context", "-"))} '
        "images in context</div>"
    )
    return (
        '<details id="prefill"><summary>prefill per request (what a prefix-caching server processes anew)</summary>'
        f"{caption}"
        '<table><thead><tr><th>turn</th><th>messages reused</th><th>images prefilled</th><th>image tokens</th>'
        f"<th>text tokens (est.)</th><th>images in context</th></tr></thead><tbody>{''.join(rows)}</tbody></table></details>"
    )


def _when(value: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(value)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "-"


def _header(data: ReportData) -> str:
    s = data.summary
    outcome = data.outcome
    out = [
        '<header id="summary">',
        f"<h1>{_e(data.task or '(no task recorded)')}</h1>",
        f'<div class="muted">{_e(data.path.name)} · {_e(data.mode)} mode · '
        f'<b class="outcome outcome-{_e(outcome)}">{_e(outcome)}</b></div>',
    ]
    if data.partial:
        problems = "".join(f"<li>{_e(p)}</li>" for p in data.problems) or "<li>the run did not finish writing its record</li>"
        out.append(f'<div class="banner" id="partial"><b>Partial record.</b> This report shows what the run directory holds.<ul>{problems}</ul></div>')
    if s.get("error"):
        out.append(f'<div class="banner"><b>Error:</b> {_e(s["error"])}</div>')
    if s.get("answer"):
        if outcome == "answered":
            out.append(f'<div class="final" id="answer"><div class="label">answer</div>{_text(str(s["answer"]))}</div>')
        else:
            # The green box means "the task was answered"; a failed run's last text is not that.
            out.append(
                f'<div class="final failed" id="answer"><div class="label">last model text (the run ended '
                f'{_e(outcome)}, this is not an answer)</div>{_text(str(s["answer"]))}</div>'
            )
    t = data.totals
    stats = [
        ("turns", len(data.turns)),
        ("steps", f"{s.get('steps', '-')} / {s.get('max_steps', '-')}"),
        ("duration", f"{s['duration_s']:.2f} s" if isinstance(s.get("duration_s"), (int, float)) else "-"),
        ("started", _when(s.get("started") or data.run_info.get("started"))),
        ("model", s.get("model") or (data.run_info.get("config") or {}).get("model", {}).get("model") or "-"),
        ("requests", t.get("requests", "-")),
        ("tool calls", f"{t.get('tool_calls', '-')} ({t.get('tool_errors', 0)} errors)"),
        ("images sent", t.get("images_sent", "-")),
        ("request bytes", t.get("request_bytes", "-")),
        ("tokens in / out", f"{t.get('prompt_tokens', '-')} / {t.get('completion_tokens', '-')}"),
    ]
    if data.prefill:
        stats.append(("image prefills per turn", data.prefill.get("images_per_turn", "-")))
    out.append('<div class="grid">' + "".join(f'<div class="stat"><span class="muted">{_e(k)}</span><b>{_e(v)}</b></div>' for k, v in stats) + "</div>")
    if data.phases:
        rows = "".join(
            f"<tr><td>{_e(p.get('phase'))}</td><td>{_e(p.get('count', '-'))}</td><td>{_ms(p.get('p50_ms'))}</td>"
            f"<td>{_ms(p.get('p95_ms'))}</td><td>{_ms(p.get('mean_ms'))}</td><td>{_ms(p.get('max_ms'))}</td><td>{_ms(p.get('total_ms'))}</td></tr>"
            for p in data.phases
        )
        out.append(
            '<table id="phases"><thead><tr><th>phase</th><th>n</th><th>p50 ms</th><th>p95 ms</th><th>mean ms</th>'
            f"<th>max ms</th><th>total ms</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    out.append(_prefill_table(data))
    out.append("</header>")
    return "".join(out)


def render_html(data: ReportData, *, embed: bool = True, out_dir: Path | None = None) -> str:
    """The report page (see the module docstring); ``out_dir`` anchors relative links."""
    images = _Images(embed, out_dir or data.path)
    seen = {t.image for t in data.turns if t.image and t.image_path is not None}
    turns = "".join(_turn_html(t, images, seen) for t in data.turns)
    if not data.turns:
        turns = '<div class="banner">No turn was recorded.</div>'
    title = f"deskpilot run {data.path.name}: {data.task[:80]}"
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data: file: 'self'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{CSS}</style></head>"
        f'<body><main>{_header(data)}'
        '<nav class="controls"><label><input type="checkbox" id="toggle-marks" checked> show actions on screenshots</label>'
        f' · <span class="muted">{len(data.turns)} turns · click a screenshot to enlarge</span></nav>'
        f"{turns}</main><script>{SCRIPT}</script></body></html>\n"
    )
