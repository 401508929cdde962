"""``replay_run``: play a recorded run back through the real agent, then compare.

Setup, from the recording:

1. the configuration is rebuilt from ``run.json`` (every setting the run used; masked
   secrets dropped; masked ``*max_tokens`` values taken from the recorded requests),
   then pointed at a local replay server; with ``input="dry"`` the timing settings that
   cannot change behaviour (settle bounds, step and turn delays) are shortened so a
   replay takes milliseconds per turn;
2. a :class:`deskpilot.testing.ModelServer` on 127.0.0.1 answers with the recorded
   replies (:class:`ReplayPolicy`);
3. ``input="dry"``: the screen is :class:`RecordedScreen` (the recorded frames) and the
   hands an :class:`~deskpilot.input.InputController` over the dry backend;
   ``input="real"``: the real capture and input of this desktop, and every new
   screenshot is compared with the recorded one before the model "answers";
4. :func:`deskpilot.agent.run_agent` runs the recorded mode as a live run would, into a
   run directory of its own; its records are then compared with the recording
   (:mod:`deskpilot.replay._compare` defines what must be equal).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deskpilot import imaging
from deskpilot._errors import ReplayError
from deskpilot.geometry import Rect
from deskpilot.replay._compare import CompareRules, Divergence, compare_requests, compare_turns
from deskpilot.replay._frames import FrameTolerance, ScreenCheck, compare_frames
from deskpilot.replay._policy import END_OF_RECORDING, SCREEN_STOP, ReplayPolicy
from deskpilot.replay._screen import RecordedScreen, decode_png
from deskpilot.rundir import Recording, TurnRecord, load_recording

__all__ = ["ReplayError", "ReplayOptions", "ReplayResult", "replay_run"]

_SECRET_PARTS = ("key", "token", "password")
# Masked ``max_tokens``-like settings and the request roles whose body carries their value.
_ROLE_KEYS = {
    ("model", "max_tokens"): ("agent", "stateless"),
    ("team", "planner_max_tokens"): ("planner", "commander"),
    ("team", "executor_max_tokens"): ("executor", "operator"),
}


@dataclass(slots=True)
class ReplayOptions:
    """How to replay (``deskpilot replay`` flags)."""

    input: str = "dry"  # "dry": recorded screens, no input; "real": this desktop, real input
    until: int | None = None  # replay turns up to this one (None: all)
    tolerance: FrameTolerance = field(default_factory=FrameTolerance)
    out_dir: Path | None = None  # keep the replay's run directory here (None: a temporary one)
    timeout: float = 60.0  # seconds per model request (the replay server answers at once)


@dataclass(slots=True)
class ReplayResult:
    """What a replay found (``ok``: no divergence)."""

    run_dir: Path
    replay_dir: Path | None
    mode: str
    input: str
    answers_recorded: int
    answers_replayed: int
    last_turn: int | None
    recorded_outcome: str | None
    replayed_outcome: str
    replayed_error: str | None
    divergences: list[Divergence]
    screen_checks: list[ScreenCheck]
    notes: list[str]
    recorded_turns: list[TurnRecord]
    replayed_turns: list[TurnRecord]
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.divergences and self.stopped is None

    @property
    def first_divergence(self) -> Divergence | None:
        return min(self.divergences, key=lambda d: d.turn) if self.divergences else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "replay_dir": str(self.replay_dir) if self.replay_dir else None,
            "mode": self.mode,
            "input": self.input,
            "ok": self.ok,
            "answers_recorded": self.answers_recorded,
            "answers_replayed": self.answers_replayed,
            "last_turn": self.last_turn,
            "recorded_outcome": self.recorded_outcome,
            "replayed_outcome": self.replayed_outcome,
            "replayed_error": self.replayed_error,
            "stopped": self.stopped,
            "first_divergence_turn": self.first_divergence.turn if self.first_divergence else None,
            "divergences": [d.as_dict() for d in self.divergences],
            "screen_checks": [c.as_dict() for c in self.screen_checks],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------- configuration


def _field_types(cls: type[Any]) -> dict[str, Any]:
    import typing

    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name) for f in dataclasses.fields(cls)}


def _recover_masked(recording: Recording, section: str, key: str) -> Any:
    roles = _ROLE_KEYS.get((section, key))
    if roles is None:
        return None
    turns = {r["turn"]: r for r in recording.turns()}
    for turn, body in sorted(recording.requests_log().items()):
        record = turns.get(turn)
        role = str((record.get("role") if record else None) or "agent")
        if role in roles and isinstance(body.get("max_tokens"), int):
            return body["max_tokens"]
    return None


def _flags_from_recording(recording: Recording, notes: list[str]) -> dict[str, Any]:
    from deskpilot.agent import registered_sections
    from deskpilot.agent.modes import discover_modes

    discover_modes()  # modes register their sections ([team], [stateless], ...)
    sections = registered_sections()
    flags: dict[str, Any] = {}
    # Only what the run set explicitly becomes a flag: some settings resolve differently
    # when another one was given (team mode: an explicit model.temperature wins over the
    # variant's), so a default must stay a default.
    sources = recording.run_info.get("config_sources")
    explicit = {k for k, v in sources.items() if v != "default"} if isinstance(sources, dict) else None
    for section, values in recording.config.items():
        cls = sections.get(section)
        if cls is None or not isinstance(values, dict):
            notes.append(f"config section [{section}] is unknown to this deskpilot: not applied")
            continue
        types = _field_types(cls)
        for key, value in values.items():
            if key not in types:
                notes.append(f"setting {section}.{key} is unknown to this deskpilot: not applied")
                continue
            if explicit is not None and f"{section}.{key}" not in explicit:
                continue
            secretish = any(part in key for part in _SECRET_PARTS)
            if secretish and value == "***":
                recovered = _recover_masked(recording, section, key)
                if recovered is None:
                    if key != "api_key":
                        notes.append(f"setting {section}.{key} was masked in run.json: default used")
                    continue
                value = recovered
            elif secretish and value == "" and types[key] in (int, float):
                value = 0  # run.json masks falsy secret-like values as ""
            # Older runs recorded unset settings as 0 / -1.0 (team.max_steps, agent.step_delay,
            # ...): load_config reads those numbers as None (setting(legacy_unset=...)).
            flags[f"{section}.{key}"] = value
    return flags


def _replay_config(recording: Recording, endpoint: str, runs_dir: Path, options: ReplayOptions, notes: list[str]) -> Any:
    from deskpilot.agent import load_config, registered_sections

    flags = _flags_from_recording(recording, notes)
    sections = registered_sections()
    flags.update(
        {
            "model.endpoint": endpoint,
            "model.api_key": "",
            "model.retries": 0,
            "model.timeout": options.timeout,
            "agent.mode": recording.mode,
            "agent.max_seconds": 0.0,  # read as unset: no wall limit but the safety hard cap
            "run.runs_dir": str(runs_dir),
            "run.dump_dir": "",
            "run.save_screenshots": True,
            "run.exchange_log": True,
            "run.lmstudio_logs": "off",
            "run.quiet": True,
        }
    )
    max_steps = recording.summary.get("max_steps") if recording.summary else None
    if isinstance(max_steps, int) and max_steps > 0:
        flags["agent.max_steps"] = max_steps  # the bound the run used (scenario or mode default)
    if options.input == "dry":
        # Timing only: a still screen settles at the second probe, no seed sleeps. The
        # recorded screen changes when the replay answers, never in reaction to the dry
        # input: no first reaction to wait for, no frame interval to learn.
        poll = flags.get("agent.settle_poll", 0.01)
        flags.update(
            {
                "agent.settle_min": 0.0,
                "agent.settle_first_reaction": 0.0,
                "agent.settle_frame": 0.0,
                "agent.settle_poll": min(float(poll), 0.002),
                "agent.settle_max": max(0.05, min(float(flags.get("agent.settle_max", 1.5)), 0.5)),
                "agent.step_delay": 0.0,
            }
        )
        if flags.get("agent.settle") == "fixed":
            flags["agent.settle"] = "adaptive"
            notes.append("dry replay: the seeds' fixed delays replaced by adaptive settle (timing only)")
        if "team" in sections:
            flags["team.turn_delay"] = 0.0
        if "stateless" in sections:
            flags["stateless.capture_delay"] = 0.0
            flags["stateless.action_delay_seconds"] = 0.0
    else:
        flags["agent.dry_run"] = False
    if recording.mode == "stateless" and "stateless" in sections:
        flags["stateless.panel"] = "off"
        if flags.get("stateless.annotate") == "browser":
            flags["stateless.annotate"] = "native"
            notes.append("the run drew overlays in the browser panel: the replay draws them natively")
        if not flags.get("stateless.boot_enabled", True):
            first = next((t for t in recording.turns() if t.get("turn") == 1), None)
            text = ((first.get("reply") if first else None) or {}).get("text")
            if isinstance(text, str):
                flags["stateless.boot_enabled"] = True
                flags["stateless.boot_vlm_output"] = text
                notes.append("the run started from an injected model output: replayed as the boot output")
    return load_config(flags=flags, env={}, search_default=False)


# ---------------------------------------------------------------------- screens


def _monitor_area(recording: Recording) -> Rect:
    if recording.mode == "stateless" and recording.stateless:
        monitor = recording.stateless.get("monitor") or {}
        origin, size = monitor.get("origin"), monitor.get("size")
        if isinstance(origin, list) and isinstance(size, list):
            return Rect(int(origin[0]), int(origin[1]), int(size[0]), int(size[1]))
    for record in recording.turns():
        obs = record.get("observation")
        if isinstance(obs, dict) and not obs.get("zoomed") and isinstance(obs.get("mapping"), dict):
            m = obs["mapping"]
            return Rect(int(m["origin"][0]), int(m["origin"][1]), int(m["physical_size"][0]), int(m["physical_size"][1]))
    raise ReplayError(f"{recording.path}: no observation records a screen mapping: nothing to replay on")


def _encoder_matches(recording: Recording, png_level: int) -> bool:
    """Whether this process encodes every recorded frame's pixels into the recorded bytes.

    Every frame, not the first: ISA-L's output depends on the CPU's instruction set, and
    a second machine can reproduce one frame's bytes and not another's."""
    paths = [p for _, name, _, _ in recording.frame_schedule() if (p := recording.resolve(name)) is not None]
    for path in dict.fromkeys(paths):
        if bytes(imaging.encode_png(decode_png(path), level=png_level)) != path.read_bytes():
            return False
    return bool(paths)


def _acting_turns(recording: Recording) -> list[int]:
    return sorted(int(r["turn"]) for r in recording.turns() if r.get("action") or r.get("more_calls"))


def _screen_exact_turns(recording: Recording) -> set[int]:
    """Turns whose frames before and after their action are both recorded.

    After an action the loop settles and compares the settled frame with the last full
    frame it captured. The settled frame of turn ``k`` is recorded when the first full
    frame captured after answer ``k`` comes before any other action; the frame before
    is the settled frame of the previous action (or a recorded observation since).
    """
    schedule = [
        index for index, name, zoomed, _ in recording.frame_schedule() if not zoomed and recording.resolve(name)
    ]
    acting = _acting_turns(recording)

    def settled_recorded(turn: int) -> bool:
        captured = next((index for index in schedule if index >= turn), None)
        return captured is not None and not any(turn < other <= captured for other in acting)

    exact: set[int] = set()
    for record in recording.turns():
        turn = int(record["turn"])
        before = [other for other in acting if other < turn]
        if settled_recorded(turn) and (not before or settled_recorded(before[-1])):
            exact.add(turn)
    return exact


# ---------------------------------------------------------------------- replay


def _image_turns(recording: Recording) -> dict[str, int]:
    """Recorded screenshot name -> the turn that recorded it."""
    out: dict[str, int] = {}
    for record in recording.turns():
        obs = record.get("observation")
        if isinstance(obs, dict) and obs.get("screenshot"):
            out.setdefault(str(obs["screenshot"]), int(record["turn"]))
    return out


def _screen_checker(
    recording: Recording, tolerance: FrameTolerance, checks: list[ScreenCheck]
) -> Callable[[int, Any], str | None]:
    answers = recording.answers()
    turns_by_image = _image_turns(recording)
    stopped: list[bool] = []

    def check(number: int, request: Any) -> str | None:
        if stopped or number > len(answers):
            return None
        name = recording.sent_image(answers[number - 1])
        image = request.last_image
        if name is None or image is None or image.data is None:
            return None
        path = recording.resolve(name)
        if path is None:
            return None
        import io

        from PIL import Image

        with Image.open(io.BytesIO(image.data)) as im:
            new = np.asarray(im.convert("RGB"), dtype=np.uint8)
        differing, region, detail = compare_frames(decode_png(path), new, tolerance)
        ok = differing <= tolerance.max_fraction
        result = ScreenCheck(number, turns_by_image.get(name), name, differing, region, ok, detail)
        checks.append(result)
        if ok:
            return None
        stopped.append(True)
        return result.describe()

    return check


def _recorded_confirmations(recording: Recording, notes: list[str]) -> Callable[[str], bool]:
    """Answers the policy's confirm questions as the user did in the recorded run, in
    order (``summary.safety.confirmations``): no terminal is asked during a replay, and
    a question the recording did not answer is answered no (and noted)."""
    safety = (recording.summary.get("safety") if recording.summary else None) or {}
    recorded = safety.get("confirmations") if isinstance(safety, dict) else None
    answers = [bool(c.get("confirmed")) for c in recorded or [] if isinstance(c, dict)]
    pending = iter(answers)

    def answer(question: str) -> bool:
        try:
            return next(pending)
        except StopIteration:
            notes.append(f"a confirm question the recording did not answer was answered no: {question}")
            return False

    return answer


def replay_run(run_dir: str | Path, options: ReplayOptions | None = None) -> ReplayResult:
    """Replay a recorded run (see the module docstring); returns what differed."""
    from deskpilot.agent import run_agent
    from deskpilot.testing import ModelServer

    options = options or ReplayOptions()
    if options.input not in ("dry", "real"):
        raise ReplayError(f"input must be 'dry' or 'real', not {options.input!r}")
    if options.until is not None and options.until < 0:
        raise ReplayError(f"--until must be a turn number >= 0, got {options.until}")
    recording = load_recording(run_dir)
    if not recording.run_info:
        raise ReplayError(
            f"{recording.path}: run.json is missing or unreadable: the run's configuration is unknown",
            problems=recording.problems,
        )
    notes = [f"recording: {p}" for p in recording.problems]
    answers = recording.answers()
    if any(a.source == "turns" for a in answers):
        notes.append(
            "some answers were rebuilt from turns.jsonl (no exchange.jsonl response): "
            "the client parses a re-rendered message, not the original bytes"
        )
    if any(r.get("next") == "injected" for r in recording.turns()):
        notes.append("the run received model outputs injected through the panel mid-run: the replay sends requests instead")

    if recording.mode == "mcp":
        # An MCP session: the client's calls are sent again (no model answers to play).
        from deskpilot.replay._mcp import replay_mcp

        return replay_mcp(
            recording, options, notes,
            lambda runs: _replay_config(recording, "http://127.0.0.1:9/v1/chat/completions", runs, options, notes),
        )
    temporary = options.out_dir is None
    runs_dir = Path(tempfile.mkdtemp(prefix="deskpilot-replay-")) if temporary else Path(options.out_dir)  # type: ignore[arg-type]
    checks: list[ScreenCheck] = []
    screen: RecordedScreen | None = None
    try:
        area = _monitor_area(recording)
        hands_holder: list[Any] = []

        def pointer() -> tuple[int, int] | None:
            return tuple(hands_holder[0].position()) if hands_holder else None  # type: ignore[return-value]

        if options.input == "dry":
            check = None
        else:
            check = _screen_checker(recording, options.tolerance, checks)

        def advance(number: int) -> None:
            if screen is not None:
                screen.advance(number)

        policy = ReplayPolicy(answers, until=options.until, on_answer=advance, check=check)
        with ModelServer(policy, reject_invalid=False, keep_images=1 if options.input == "real" else 0) as server:
            config = _replay_config(recording, server.endpoint, runs_dir, options, notes)
            screen_factory = hands_factory = None
            if options.input == "dry":
                size = (config.screen.image_width, config.screen.image_height)
                screen = RecordedScreen(recording, area=area, image_size=size, monitor=config.screen.monitor, pointer=pointer)
                if screen.missing_frames:
                    notes.append("no recorded screenshot could be found: the replay shows black frames")

                def make_hands() -> Any:
                    from deskpilot.input import DryBackend, InputController

                    controller = InputController(DryBackend(desktop=area))
                    hands_holder.append(controller)
                    return controller

                def make_screen() -> Any:
                    return screen

                screen_factory, hands_factory = make_screen, make_hands
            result = run_agent(
                config,
                recording.task,
                screen_factory=screen_factory,
                hands_factory=hands_factory,
                handle_signals=False,
                run_name="replay",
                confirm_prompt=_recorded_confirmations(recording, notes),
            )
            problems = server.problems
        for problem in problems:
            notes.append(f"replay server: {problem}")
        replayed = load_recording(result.run_dir)
        encoding = options.input == "dry" and _encoder_matches(recording, config.screen.png_level)
        if options.input == "dry" and not encoding:
            notes.append(
                "this deskpilot encodes PNGs differently from the recording's "
                f"(recorded backend {recording.run_info.get('imaging_backend')!r}, here {imaging.BACKEND!r}): "
                "PNG sizes not compared, request images compared by their pixels"
            )
        divergences, last_turn = _compare(recording, replayed, options, encoding, policy, notes)
        replay_dir: Path | None = None if temporary else result.run_dir
        return ReplayResult(
            run_dir=recording.path,
            replay_dir=replay_dir,
            mode=recording.mode,
            input=options.input,
            answers_recorded=len(answers),
            answers_replayed=policy.served,
            last_turn=last_turn,
            recorded_outcome=recording.outcome,
            replayed_outcome=result.outcome,
            replayed_error=result.error,
            divergences=divergences,
            screen_checks=checks,
            notes=notes,
            recorded_turns=recording.turns(),
            replayed_turns=replayed.turns(),
            stopped=policy.stopped,
        )
    finally:
        if temporary:
            shutil.rmtree(runs_dir, ignore_errors=True)


def _compare(
    recording: Recording,
    replayed: Recording,
    options: ReplayOptions,
    encoding: bool,
    policy: ReplayPolicy,
    notes: list[str],
) -> tuple[list[Divergence], int | None]:
    recorded_turns = recording.turns()
    last_recorded = max((int(r["turn"]) for r in recorded_turns), default=0)
    open_end: int | None = None
    last_turn: int | None = None
    if options.until is not None:
        last_turn = min(options.until, last_recorded)
        open_end = last_turn if last_turn == last_recorded and not recording.complete else None
    elif not recording.complete:
        last_turn = open_end = last_recorded
    if policy.stopped is not None:
        # Real input stopped at a screen: compare what ran before it.
        stop_turn = max((int(r["turn"]) for r in replayed.turns() if "model" in r), default=0)
        last_turn = stop_turn if last_turn is None else min(last_turn, stop_turn)
        open_end = last_turn
    missing = {
        int(r["turn"]) for r in recorded_turns if recording.raw_frame(r)[0] and recording.resolve(recording.raw_frame(r)[0]) is None
    }
    screen_turns: set[int] | None = None
    bytes_turns: set[int] | None = None
    if recording.mode != "stateless" and options.input == "dry":
        screen_turns = _screen_exact_turns(recording)
        acting = _acting_turns(recording)
        skipped = [t for t in acting if t not in screen_turns and (last_turn is None or t <= last_turn)]
        # A request carries the payloads of earlier actions: its size is reproducible
        # only while every earlier screen-derived field was.
        bytes_turns = {
            int(r["turn"]) for r in recorded_turns if all(t in screen_turns for t in acting if t < int(r["turn"]))
        }
        if skipped:
            notes.append(
                "changed/changed_region not compared at turns "
                + ", ".join(map(str, skipped))
                + ": the frame after (or before) the action was not recorded"
            )
    browser = recording.setting("stateless", "annotate") == "browser"
    rules = CompareRules(
        encoding=encoding,
        real_input=options.input == "real",
        screen_turns=screen_turns,
        bytes_turns=bytes_turns,
        missing_frames=missing,
        open_end_turn=open_end,
        ignore_annotation=browser,
    )
    out = compare_turns(recording.records, replayed.records, rules, last_turn=last_turn)
    by_pixels = not encoding and options.input == "dry"
    out += compare_requests(
        recording.requests_log(),
        replayed.requests_log(),
        encoding=encoding,
        bytes_turns=bytes_turns,
        last_turn=last_turn,
        # A dry replay shows the recorded pixels, so an image that differs is a divergence;
        # with real input the live screen decides (compared with a tolerance instead).
        recorded_pixels=recording.image_pixels() if by_pixels else None,
        replayed_pixels=replayed.image_pixels() if by_pixels else None,
    )
    final_turn = last_turn if last_turn is not None else last_recorded
    # Either summary may be missing (a torn recording, a replay that crashed): read as empty.
    recorded_summary: Mapping[str, Any] = recording.summary or {}
    replayed_summary: Mapping[str, Any] = replayed.summary or {}
    if recording.complete and options.until is None and policy.stopped is None:
        outcome = replayed_summary.get("outcome")
        if outcome != recording.outcome:
            error = replayed_summary.get("error") or ""
            if END_OF_RECORDING in str(error):
                error = "the replay asked the model for more than the recording holds"
            out.append(Divergence(final_turn, "outcome", recording.outcome, f"{outcome} {error}".strip(), "flow"))
        elif replayed_summary.get("answer") != recorded_summary.get("answer"):
            out.append(
                Divergence(
                    final_turn, "answer", recorded_summary.get("answer"), replayed_summary.get("answer"), "flow"
                )
            )
    error = str(replayed_summary.get("error") or "")
    if error and END_OF_RECORDING not in error and SCREEN_STOP not in error and not recording.complete:
        notes.append(f"the replay ended with: {error}")
    out.sort(key=lambda d: (d.turn, d.stage or "", d.path))
    return out, last_turn
