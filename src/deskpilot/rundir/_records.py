"""The records of the run directory as types: the one schema of its JSON.

``docs/run-directory.md`` describes the format for users; these ``TypedDict``s say the
same for the code that writes it (the session, the modes, :class:`RunLog`) and the code
that reads it (:func:`load_recording`, replay, the report). They are plain dicts at run
time: typing a record changes no byte written. tests/unit/rundir/test_records.py checks
every record of every golden run against them and that the doc names every key.

Keys are optional (``total=False``) unless a record always has them (``Required``). A
value whose vocabulary is open (a tool's result payload, the server's ``usage``, the
resolved config) stays ``dict[str, Any]``: its keys belong to whoever fills it.
:class:`ActionRecord` lives in :mod:`deskpilot.actions` (a floor below, beside
``to_record``); it is one of these records all the same.
"""

# No ``from __future__ import annotations``: TypedDict reads Required[...] from real
# annotations, so that ``__required_keys__`` is right at run time.
import sys
from typing import Any

if sys.version_info >= (3, 11):
    from typing import Required, TypedDict
else:  # pragma: no cover - 3.10's typing has no Required (its backport's TypedDict reads it)
    from typing_extensions import Required, TypedDict

from deskpilot.actions import ActionRecord

__all__ = [
    "ActionRecord",
    "CallRecord",
    "MappingRecord",
    "ModelRecord",
    "ModelTimingsRecord",
    "ObservationRecord",
    "PhaseStatsRecord",
    "RejectedCallRecord",
    "ReplyRecord",
    "RequestRecord",
    "RunInfo",
    "SettleRecord",
    "Summary",
    "TeamTurnRecord",
    "ToolCallRecord",
    "TotalsRecord",
    "TurnRecord",
]


class MappingRecord(TypedDict, total=False):
    """The frame a call's 0..1000 coordinates were read in (``Session.describe``)."""

    monitor: int
    origin: list[int]
    physical_size: list[int]
    image_size: list[int]
    scale: list[float]


class ErrorRecord(TypedDict, total=False):
    type: Required[str]
    message: str | None


class ToolCallRecord(TypedDict, total=False):
    """One tool call as the model wrote it (``ToolCall.as_dict``); the turn's
    ``tool_call`` holds id, name and arguments (+ ``raw_arguments`` when they did not parse)."""

    id: Required[str]
    name: Required[str]
    arguments: dict[str, Any] | None
    raw_arguments: str
    #: How the call was found: a native tool call, or parsed from the text.
    source: str
    error: ErrorRecord
    #: The tool set that ran it when that is not the run's: the call was in a model's
    #: own language (``"qwen"``: ``computer_use``; ``"uitars"``: UI-TARS action text).
    toolset: str


class ModelTimingsRecord(TypedDict, total=False):
    ttfb_s: float | None
    first_tool_call_s: float | None
    total_s: float
    retry_wait_s: float


class ModelRecord(TypedDict, total=False):
    """The model's answer (``Completion.as_record``): no raw body."""

    content: str
    reasoning: str | None
    tool_calls: list[ToolCallRecord]
    finish_reason: str | None
    usage: dict[str, Any] | None
    timings: ModelTimingsRecord
    attempts: int
    streamed: bool


class RequestRecord(TypedDict, total=False):
    """What was sent this turn; ``prefill``: the server's prompt-cache estimate."""

    messages: int
    images: int
    bytes: int
    prefill: dict[str, int]


class SettleRecord(TypedDict, total=False):
    """How the screen settled after an action (or before a look): see ``agent._settle``.
    Runs recorded before issue 20 have only ``polls``, ``stable``, ``waited_ms`` and
    ``damage``."""

    polls: int
    #: The screen is as the app left it (False: still changing at ``settle_max``, or a
    #: fixed/none settle).
    stable: bool
    waited_ms: float
    #: X11 DAMAGE notifications seen (absent: settled by polling).
    damage: int
    #: ``"quiet"``, ``"max"`` (still changing) or ``"no_reaction"`` (nothing changed within
    #: ``settle_first_reaction``); absent: a fixed/none settle.
    ended: str
    #: After an input: when the app's first reaction was seen, ms after the action
    #: (absent: none seen, or a look without an input before it).
    first_reaction_ms: float
    #: Frames seen from the reaction on: bursts of drawing notifications, or probes that
    #: differed from the one before.
    frames: int
    #: The quiet interval the settle ended with, ms (learned from the frames' spacing).
    quiet_ms: float


class ObservationRecord(TypedDict, total=False):
    """The image prepared for the next request."""

    screenshot: str | None
    mapping: MappingRecord
    digest: str
    #: The same frame was encoded before: no new file.
    reused: bool
    #: The same pixels as the last image sent.
    unchanged: bool
    zoomed: bool
    png_bytes: int
    #: ``"image"``, or ``"note"``: a one-line text was sent instead.
    sent: str
    #: Once per run: why frames go without the cursor.
    cursor_missing: str
    #: Stateless mode: the raw (unannotated) screenshot and how the sent one was annotated.
    raw: str | None
    annotation: str


class CallRecord(TypedDict, total=False):
    """A call after the first of a turn (``more_calls``, agent.one_tool_call off), and
    team mode's executed calls (``team.calls``)."""

    id: Required[str]
    name: Required[str]
    arguments: dict[str, Any] | None
    raw_arguments: str
    #: As in :class:`ToolCallRecord`.
    toolset: str
    result: dict[str, Any]
    action: ActionRecord | None
    mapping: MappingRecord


class RejectedCallRecord(TypedDict):
    """A call answered without running (``extra_calls``: too many tool calls)."""

    id: str
    name: str
    result: dict[str, Any]


class TeamTurnRecord(TypedDict, total=False):
    """Team mode's part of a turn (``team``)."""

    variant: str
    team_role: str
    mode: str
    initial: bool
    reasons: list[str]
    image: bool
    screenshot: str | None
    calls: list[CallRecord]
    auto_archive: list[int]
    plan_kept: bool
    no_plan: int
    report: dict[str, Any]
    #: The signature of the repeated action without effect, and what was done about it.
    loop_detected: str
    recovery: str | dict[str, Any]


class ReplyRecord(TypedDict, total=False):
    """Stateless mode: the model's one JSON answer, parsed (``VlmOutput.as_record``)."""

    observation: str
    bboxes: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    source: str
    text: str
    #: The answer came from the reasoning, the content being empty.
    from_reasoning: bool


class TurnRecord(TypedDict, total=False):
    """One line of ``turns.jsonl``: a turn, or (stateless mode, ``stage`` "raw" /
    "annotated") one of a turn's stage records. Keys are absent when not applicable."""

    #: The format version; the writer adds it, every line on disk has it.
    v: int
    turn: Required[int]
    time: float
    mode: str
    role: str
    request: RequestRecord
    model: ModelRecord
    tool_call: ToolCallRecord
    #: The payload the model got back (the tool's own keys).
    result: dict[str, Any]
    action: ActionRecord | None
    mapping: MappingRecord
    more_calls: list[CallRecord]
    extra_calls: list[RejectedCallRecord]
    text_calls: list[ToolCallRecord]
    settle: SettleRecord
    screen_unchanged: bool
    observation: ObservationRecord
    #: Phase -> milliseconds (``model``, ``parse``, ``action``, ``capture``, ``settle``,
    #: ``encode``, ``request_build``, ``overhead``, and a mode's own phases).
    timings: dict[str, float]
    action_started_early: bool
    final: bool
    answer: str
    ended_by: str
    no_action: dict[str, Any]
    server_adapted: list[str]
    team: TeamTurnRecord
    # Stateless mode.
    stage: str
    reply: ReplyRecord
    #: Stage "turn": each action of the reply with its physical record and result;
    #: stage "raw": the reply's actions as parsed.
    actions: list[dict[str, Any]]
    policy_denied: int
    dry_run: bool
    next: str
    background_ms: dict[str, float]
    model_observation: str
    bboxes: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    source: str
    raw_png: str | None
    annotated_png: str | None
    annotation: str


class RunInfo(TypedDict, total=False):
    """``run.json``: what was asked."""

    v: int
    task: str
    scenario: dict[str, Any] | None
    mode: str
    toolset: str
    #: Every setting, secrets masked.
    config: dict[str, Any]
    #: "section.key" -> where its value came from.
    config_sources: dict[str, str]
    config_file: str | None
    deskpilot: str
    python: str
    platform: str
    imaging_backend: str
    started: float
    pid: int
    #: ``deskpilot mcp`` sessions: the server's own settings (coordinates, image size cap, ...).
    mcp: dict[str, Any]


class TotalsRecord(TypedDict, total=False):
    requests: int
    tool_calls: int
    tool_errors: int
    request_bytes: int
    prompt_tokens: int
    completion_tokens: int
    images_sent: int
    frames_encoded: int


class PhaseStatsRecord(TypedDict, total=False):
    count: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float
    total_ms: float


class Summary(TypedDict, total=False):
    """``summary.json``: the outcome and totals (``"running"`` until the run ends)."""

    v: int
    run_dir: str
    task: str
    mode: str
    model: str
    endpoint: str
    outcome: Required[str]
    error: str | None
    error_details: dict[str, Any]
    answer: str
    steps: int
    max_steps: int
    started: float
    ended: float
    duration_s: float
    screenshots: list[str]
    screenshot_dir: str
    totals: TotalsRecord
    phases: dict[str, PhaseStatsRecord]
    server: dict[str, Any]
    settle_signal: str
    prefill: dict[str, Any] | None
    run_log_errors: list[str]
    lmstudio_logs: list[str]
    dpi_awareness: dict[str, Any]
    safety: dict[str, Any]
    # A mode's own part.
    team: dict[str, Any]
    stateless: dict[str, Any]
    finish_reason: str | None
