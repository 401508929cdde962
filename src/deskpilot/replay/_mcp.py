"""Replay of an MCP session (``deskpilot mcp``, ``mode`` "mcp"): the client's calls, again.

An MCP session has no model answers to play back: the client's tool calls are the
recording's ``tool_call`` records. They are sent again, in order, with the official SDK's
client (in process) to a new :class:`deskpilot.mcp.Desktop` built from the recorded
configuration: with ``input="dry"`` its screen shows the recorded screenshots
(:class:`~deskpilot.replay._screen.RecordedScreen`, turn ``n``'s frame while call ``n``
runs) and its hands are the dry backend; with ``input="real"`` this desktop's. The
replay's run directory is then compared with the recording turn by turn, field by field,
as every mode's is (:func:`~deskpilot.replay._compare.compare_turns`): the action sent,
the result (refusals included), the mapping and the observation.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskpilot.geometry import Rect
from deskpilot.replay._compare import CompareRules, Divergence, compare_turns
from deskpilot.rundir import Recording, load_recording

if TYPE_CHECKING:
    from deskpilot.replay._runner import ReplayOptions, ReplayResult

__all__ = ["replay_mcp"]


def _area(recording: Recording) -> Rect:
    for record in recording.turns():
        obs = record.get("observation")
        if isinstance(obs, dict) and not obs.get("zoomed") and isinstance(obs.get("mapping"), dict):
            m = obs["mapping"]
            return Rect(int(m["origin"][0]), int(m["origin"][1]), int(m["physical_size"][0]), int(m["physical_size"][1]))
    return Rect(0, 0, 1920, 1080)


def _calls(recording: Recording, until: int | None) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for record in sorted(recording.turns(), key=lambda r: int(r["turn"])):
        call = record.get("tool_call")
        if not isinstance(call, dict) or (until is not None and int(record["turn"]) > until):
            continue
        arguments = call.get("arguments")
        out.append((int(record["turn"]), str(call.get("name")), dict(arguments) if isinstance(arguments, dict) else {}))
    return out


def _pointers(recording: Recording) -> dict[int, tuple[int, int]]:
    """Turn -> where a screenshot found the pointer (``result.pointer``)."""
    out = {}
    for record in recording.turns():
        pointer = (record.get("result") or {}).get("pointer")
        if isinstance(pointer, list) and len(pointer) == 2 and all(isinstance(v, int) for v in pointer):
            out[int(record["turn"])] = (pointer[0], pointer[1])
    return out


async def _play(recording: Recording, config: Any, options: ReplayOptions, runs_dir: Path, notes: list[str]) -> Path:
    from mcp import Client

    from deskpilot.mcp import Desktop, DesktopOptions, build_server
    from deskpilot.replay._screen import RecordedScreen

    recorded = recording.run_info.get("mcp") if isinstance(recording.run_info.get("mcp"), dict) else {}
    assert isinstance(recorded, dict)
    image = recorded.get("max_image") or [1920, 1080]
    desktop_options = DesktopOptions(
        coordinates=recorded.get("coordinates", "pixels"),
        max_image=(int(image[0]), int(image[1])),
        max_bytes=int(recorded.get("max_bytes") or 950_000),
        read_only=bool(recorded.get("read_only")),
        max_steps=recorded.get("max_steps"),
        run_name="replay",
    )
    screen: RecordedScreen | None = None
    hands: list[Any] = []
    hands_factory = screen_factory = None
    if options.input == "dry":
        area = _area(recording)

        def pointer() -> tuple[int, int] | None:
            # Where the dry hands put the pointer: the recorded frames have it drawn there.
            return tuple(hands[0].position()) if hands else None  # type: ignore[return-value]

        screen = RecordedScreen(recording, area=area, image_size=desktop_options.max_image,
                                monitor=config.screen.monitor, pointer=pointer)
        if screen.missing_frames:
            notes.append("no recorded screenshot could be found: the replay shows black frames")
        recorded_screen = screen

        def make_screen(**_kwargs: Any) -> Any:
            return recorded_screen

        def make_hands() -> Any:
            from deskpilot.input import DryBackend, InputController

            controller = InputController(DryBackend(desktop=area))
            hands.append(controller)
            return controller

        screen_factory, hands_factory = make_screen, make_hands
        layout = ((area.left, area.top, area.width, area.height),)
        desktop_options.layout_reader = lambda: layout
        desktop_options.watch_desktop = False
    async with Desktop.open(config, desktop_options, hands_factory=hands_factory, screen_factory=screen_factory) as desktop:
        async with Client(build_server(desktop)) as client:
            pointers = _pointers(recording)
            for turn, name, arguments in _calls(recording, options.until):
                if screen is not None:
                    screen.advance(turn)
                    if turn in pointers and hands:
                        # The user moved the pointer between calls: the recorded frame shows it there.
                        hands[0].move(*pointers[turn])
                await client.call_tool(name, arguments)
        run_dir = Path(desktop.run_dir)
    return run_dir


def replay_mcp(
    recording: Recording, options: ReplayOptions, notes: list[str], make_config: Callable[[Path], Any]
) -> ReplayResult:
    """Replay an MCP session (see the module doc); a :class:`~deskpilot.replay.ReplayResult`."""
    from deskpilot.replay._runner import ReplayResult

    temporary = options.out_dir is None
    runs_dir = Path(tempfile.mkdtemp(prefix="deskpilot-replay-")) if temporary else Path(options.out_dir)  # type: ignore[arg-type]
    try:
        run_dir = asyncio.run(_play(recording, make_config(runs_dir), options, runs_dir, notes))
        replayed = load_recording(run_dir)
        last = max((int(r["turn"]) for r in recording.turns()), default=0)
        last_turn = min(options.until, last) if options.until is not None else None
        rules = CompareRules(encoding=True, real_input=options.input == "real")
        divergences: list[Divergence] = compare_turns(recording.records, replayed.records, rules, last_turn=last_turn)
        divergences.sort(key=lambda d: (d.turn, d.stage or "", d.path))
        calls = len(_calls(recording, options.until))
        summary: dict[str, Any] = dict(replayed.summary or {})
        return ReplayResult(
            run_dir=recording.path,
            replay_dir=None if temporary else run_dir,
            mode=recording.mode,
            input=options.input,
            answers_recorded=len(_calls(recording, None)),
            answers_replayed=calls,
            last_turn=last_turn,
            recorded_outcome=recording.outcome,
            replayed_outcome=str(summary.get("outcome")),
            replayed_error=summary.get("error"),
            divergences=divergences,
            screen_checks=[],
            notes=notes,
            recorded_turns=recording.turns(),
            replayed_turns=replayed.turns(),
        )
    finally:
        if temporary:
            shutil.rmtree(runs_dir, ignore_errors=True)
