"""The stateless engine (seed 004): one model output -> actions -> screenshot -> annotation -> request.

A turn, as the seed defines it::

    model output (boot, /inject or the last reply)
      -> parse JSON (observation, bboxes, actions)          deskpilot.agent.modes.stateless._protocol
      -> execute every action, in order, inside the working area (CAPTURE_CROP: the sandbox)
      -> capture AFTER the actions: crop -> resize -> settle until the screen is still
      -> annotate: orange heat of the actions that ran (+ fading trail; refused or
         skipped ones are not drawn), blue boxes, labels
           native (default): compiled kernels, ~1-2 ms at 1536x864
           browser: the panel page draws and POSTs the PNG back (the seed's round trip)
      -> request: system prompt + the model's own observation + the annotated image
         (no other history: the model is stateless) -> the reply starts the next turn

Pipelining: the raw screenshot's PNG is encoded and written in a worker thread while the
annotated one is drawn and encoded in another (the native encoder and the annotation
kernels release the GIL), and the raw record is finished while the model thinks, so the
client-side overhead between a reply and the next request is capture + annotate + encode.

Run artifacts (``LOG_LAYOUT``): ``flat`` = ``turn_0001_raw.png``, ``turn_0001_annotated.png``
in the run directory; ``turn_dirs`` = ``turn_0001/screenshot_raw.png``,
``screenshot_annotated.png`` and ``vlm_output.json``. ``turns.jsonl`` gets the seed's two
records per turn (``stage: "raw"`` with the parsed reply and ``raw_png``, ``stage:
"annotated"`` with ``annotated_png``), then the turn's own record (``stage: "turn"``: the
actions run with their physical coordinates, the model's answer, timings) in the shared
format of the run log. The model's text observation is ``model_observation`` there (the
shared format uses ``observation`` for the screenshot record).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from deskpilot import imaging
from deskpilot._errors import ActionDeniedError, DeskpilotError, RunLogError, StatelessError
from deskpilot.actions import Action as InputAction
from deskpilot.actions import Click, Drag, KeyPress, MoveMouse, Scroll, TypeText
from deskpilot.agent._config import AgentConfig
from deskpilot.agent._run import RunResult, run_agent
from deskpilot.agent._screen import CapturerScreen
from deskpilot.agent._session import ModeResult, Session, Turn
from deskpilot.agent.client._chat import Completion
from deskpilot.agent.client._history import History, png_data_url
from deskpilot.agent.client._toolcalls import strip_think
from deskpilot.agent.modes.stateless._config import StatelessSettings, output_size
from deskpilot.agent.modes.stateless._prompt import denied_text, system_prompt, user_text
from deskpilot.agent.modes.stateless._protocol import ReplyAction, VlmOutput, parse_vlm_output
from deskpilot.agent.tools._act import act
from deskpilot.agent.tools._core import Hands, err_payload
from deskpilot.geometry import Box, Rect, crop_rect
from deskpilot.geometry import Mapping as GeoMapping
from deskpilot.imaging import ActionMark, BoxMark, action_mark, annotate
from deskpilot.panel import PanelServer, PanelState, resolve_token, style_to_ui_config
from deskpilot.rundir import STATELESS_FILE, LineFile, RunLog

if TYPE_CHECKING:
    from deskpilot.capture import Capturer

__all__ = [
    "StatelessEngine",
    "StatelessError",
    "StatelessMode",
    "run_stateless",
    "take_lingering_panels",
]

#: Panels kept up after their run (``panel_linger``), on threads of their own.
_LINGERING: list[PanelServer] = []


def take_lingering_panels() -> list[PanelServer]:
    """The panels runs left up (``panel_linger``); the caller stops them (``stop_thread``)."""
    panels = list(_LINGERING)
    _LINGERING.clear()
    return panels


log = logging.getLogger("deskpilot.stateless")
U8 = npt.NDArray[np.uint8]
R = TypeVar("R")


@dataclass(slots=True)
class _Frame:
    rgb: U8
    mapping: GeoMapping
    digest: int


@dataclass(slots=True)
class _Saved:
    png: bytes
    name: str | None  # as turns.jsonl records it (relative to the run directory)
    encode_ms: float
    work_ms: float = 0.0  # annotation time inside the same worker call


def _error_type(entry: dict[str, Any]) -> str | None:
    """``policy_denied`` / ``action_failed`` of one action record, None when it ran."""
    result = entry.get("result")
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        return str(result["error"].get("type"))
    return None


class StatelessMode:
    """``deskpilot run --mode stateless``: the seed 004 loop over the shared session."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.settings = config.section(StatelessSettings)

    async def run(self, session: Session) -> ModeResult:
        return await StatelessEngine(session, self.settings).run()


class StatelessEngine:
    """One run of the stateless loop (see the module docstring)."""

    def __init__(
        self, session: Session, settings: StatelessSettings, *, state: PanelState | None = None
    ) -> None:
        self.session = session
        self.settings = settings
        self.style = settings.overlay_style
        self.state = state or PanelState(annotate=settings.annotate)
        self.panel: PanelServer | None = None
        self.area: Rect | None = None
        self.mapping: GeoMapping | None = None
        self.hands: Hands = session.ctx.hands
        self.dry: Any = None
        self.system = ""
        trail = max(0, self.style.trail_turns - 1)
        self._previous_marks: deque[tuple[ActionMark, ...]] = deque(maxlen=trail or 1)
        self._previous_dicts: deque[list[dict[str, Any]]] = deque(maxlen=trail or 1)
        self._turn: Turn | None = None
        self._log_handler: logging.Handler | None = None
        self._log_level = logging.NOTSET
        self._annotation_fallbacks = 0
        self._capturer: Capturer | None = None  # of the working area (real screens)
        #: The digest of the last frame captured: the settle after actions waits for the
        #: app's first reaction, a frame other than this one.
        self._last_digest: int | None = None
        self._finish_reason: str | None = None  # of the model reply being parsed
        self._text_from_reasoning = False

    # ------------------------------------------------------------------ run
    async def run(self) -> ModeResult:
        s = self.settings
        self._start_log_file()
        try:
            await self._setup()
            if s.boot_enabled:
                text, reply_at = s.boot_vlm_output, None
            else:
                text, reply_at = await self._wait_injection(), time.perf_counter()
            number = 0
            while True:
                number += 1
                step = await self._run_turn(number, text, reply_at)
                if isinstance(step, ModeResult):
                    return step
                text, reply_at = step
        except BaseException as exc:
            if isinstance(exc, DeskpilotError):
                self.state.set_phase("error", f"{type(exc).__name__}: {exc}")
                self._close_open_turn("error")
            else:
                self._stopped("interrupted")
            raise
        finally:
            if self._capturer is not None:
                capturer, self._capturer = self._capturer, None
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._on_capture(capturer.close), 2.0)
            if self.panel is not None:
                await self._stop_or_keep_panel()
            if self.dry is not None:
                self.dry.close()
            self._stop_log_file()

    def _stopped(self, ended: str) -> None:
        """The run stops without an answer (``max_steps``, or a stop from outside)."""
        self.state.set_phase("stopped")
        self._close_open_turn(ended)

    def _close_open_turn(self, ended: str) -> None:
        turn = self._turn
        if turn is not None and not turn.closed:
            turn.record.setdefault("ended_by", ended)
            self.session.close_turn(turn)

    async def _setup(self) -> None:
        s = self.settings
        session = self.session
        full = await self._on_capture(session.screen.grab)
        monitor = full.mapping.area
        self.area = crop_rect(monitor, s.crop_fraction)
        size = output_size(s, self.area.width, self.area.height)
        self.mapping = GeoMapping(self.area, *size)
        session.ctx.mapping = self.mapping
        if isinstance(session.screen, CapturerScreen):
            # A capturer of the working area itself: crop, downscale and BGRA->RGB fused in
            # one native pass, instead of a full-screen RGB frame cropped and resized after.
            screen_cfg = session.config.screen
            region = (
                self.area.left - monitor.left,
                self.area.top - monitor.top,
                self.area.width,
                self.area.height,
            )
            monitor_index = session.screen.monitor

            def open_capturer() -> Capturer:
                from deskpilot.capture import Capturer

                return Capturer(
                    screen_cfg.capture_backend,
                    monitor=monitor_index,
                    region=region,
                    cursor=screen_cfg.cursor,
                )

            self._capturer = await self._on_capture(open_capturer)
        if not s.physical_execution:
            from deskpilot.input import DryBackend, InputController

            self.dry = InputController(DryBackend(desktop=monitor))
            self.hands = self.dry
        self.system = system_prompt(
            session.task,
            max_actions=s.max_actions,
            max_bboxes=s.max_bboxes,
            overlays=s.annotate != "none",
            trail_turns=self.style.trail_turns if self.style.heat_enabled else 1,
            template=s.system_prompt,
        )
        self.state.config_payload = {
            "ui": style_to_ui_config(self.style),
            "capture_width": size[0],
            "capture_height": size[1],
            "capture_crop": list(s.capture_crop),
            "physical_execution": s.physical_execution,
            "task": session.task,
        }
        if s.panel_enabled():
            token, generated = resolve_token(s.panel_token)
            self.panel = PanelServer(
                self.state, host=s.host, port=s.port, token=token, allowed_hosts=s.allowed_hosts
            )
            await self.panel.start()
            log.info("panel at %s%s", self.panel.url, " (token required)" if token else "")
            if generated:
                # The only place the generated token appears (never in the run directory):
                # printed even when quiet, or nobody could open the panel.
                print(
                    f"deskpilot: panel at {self.panel.page_url} (this run's token is in the link)",
                    file=sys.stderr,
                    flush=True,
                )
            elif token is None:
                # Off only by an explicit choice; say what that means, even when quiet.
                print(
                    f"deskpilot: panel at {self.panel.url} WITHOUT a token (--no-panel-token): any "
                    "local process can read /state and POST /inject to drive this desktop",
                    file=sys.stderr,
                    flush=True,
                )
            elif not session.config.run.quiet:
                note = " (token required: PANEL_TOKEN; open /?token=...)"
                print(f"deskpilot: panel at {self.panel.url}{note}", file=sys.stderr, flush=True)
        session.runlog.write_json(
            STATELESS_FILE,
            {
                "working_area": {"crop": list(s.capture_crop), **self.mapping.describe()},
                "monitor": {
                    "origin": [monitor.left, monitor.top],
                    "size": [monitor.width, monitor.height],
                },
                "annotate": s.annotate,
                "physical_execution": s.physical_execution,
                "log_layout": s.log_layout,
                "panel": self.panel.url if self.panel else None,
                "panel_token": bool(self.panel and self.panel.token),
                "system_prompt": self.system,
                "ui": style_to_ui_config(self.style),
            },
        )

    async def _stop_or_keep_panel(self) -> None:
        """Stop the panel, or (``panel_linger``) move it to a thread of its own, same port and
        state, so the final state can be looked at after this loop ends; the caller stops it
        (:func:`take_lingering_panels`)."""
        panel = self.panel
        assert panel is not None
        port = panel.port
        await panel.stop()
        if not self.settings.panel_linger or port is None:
            return
        s = self.settings
        kept = PanelServer(
            self.state, host=s.host, port=port, token=panel.token, allowed_hosts=s.allowed_hosts
        )
        try:
            kept.start_in_thread()
        except Exception as exc:  # the run's result matters more than the after-view
            log.warning("the panel could not stay up after the run: %s", exc)
            return
        _LINGERING.append(kept)

    async def _wait_injection(self) -> str:
        self.state.set_phase("waiting_inject")
        timeout = self.settings.inject_timeout or None
        if self.panel is not None:
            log.info("waiting for POST %s/inject", self.panel.url)
            if not self.session.config.run.quiet:
                # Say what to paste where: the run does nothing until it comes. The token is
                # the one the start-up link already printed on this terminal.
                auth = f" -H 'Authorization: Bearer {self.panel.token}'" if self.panel.token else ""
                print(
                    f"deskpilot: waiting for a model output. Paste the model's JSON into the panel "
                    f"({self.panel.url}/, 'Inject a model output'), or post it:\n"
                    f"  curl -X POST {self.panel.url}/inject -H 'Content-Type: application/json'{auth} \\\n"
                    '    -d \'{"observation": "what I see", "actions": [{"name": "click", "x1": 500, "y1": 500}]}\'\n'
                    "  (coordinates 0..1000 over the screenshot; actions: click, double_click, right_click, "
                    "move, drag, scroll, type, key, done)",
                    file=sys.stderr,
                    flush=True,
                )
        try:
            return await self.state.next_injection(timeout)
        except TimeoutError:
            raise StatelessError(
                f"no model output was injected within {timeout} s (BOOT_ENABLED is off: POST /inject)",
                timeout=timeout,
            ) from None

    # ------------------------------------------------------------------ one turn
    async def _run_turn(
        self, number: int, text: str, reply_at: float | None
    ) -> ModeResult | tuple[str, float]:
        """One turn: parse the reply, act, capture, annotate, then end the run or ask again."""
        turn = self._open_turn(number, reply_at)
        out, finish_reason = self._parse(turn, number, text)
        if finish_reason in ("length", "max_tokens") and not out.actions and not out.done:
            return self._truncated(turn, text, finish_reason)
        self.state.set_phase("executing")
        self.session.reporter.phase(number, "action")
        executed, ran = await self._execute(turn, out.actions)
        annotated, how, raw_task = await self._picture(turn, number, out, ran, text)
        self._result_record(turn, out, executed)
        ended = await self._end_of_turn(turn, number, out, text, raw_task, annotated, how)
        if ended is not None:
            return ended
        return await self._ask_next(turn, number, out, executed, text, raw_task, annotated, how)

    def _open_turn(self, number: int, reply_at: float | None) -> Turn:
        turn = Turn(number, "stateless")
        turn.reply_at = reply_at
        turn.record.update(
            {
                "turn": number,
                "time": round(time.time(), 3),
                "mode": self.session.mode,
                "role": "stateless",
                "stage": "turn",
            }
        )
        self._turn = turn
        return turn

    def _parse(self, turn: Turn, number: int, text: str) -> tuple[VlmOutput, str | None]:
        """The reply's JSON (never fails), and the finish reason its completion gave."""
        s = self.settings
        self.session.reporter.phase(number, "parse")
        with turn.timer.phase("parse"):
            out = parse_vlm_output(
                text,
                max_actions=s.max_actions,
                max_bboxes=s.max_bboxes,
                from_reasoning=self._text_from_reasoning,
            )
        turn.record["reply"] = {
            **out.as_record(),
            "text": text if len(text) <= 20000 else text[:20000],
        }
        # What the reply's completion said applies to this turn only (an injected or
        # boot text that follows has none).
        finish_reason, self._finish_reason = self._finish_reason, None
        if self._text_from_reasoning:
            turn.record["reply"]["from_reasoning"] = True
            self._text_from_reasoning = False
        log.debug(
            "turn %d: reply parsed from %s: %d action(s), %d bbox(es), %d refused",
            number,
            out.source,
            len(out.actions),
            len(out.bboxes),
            len(out.rejected),
        )
        return out, finish_reason

    def _truncated(self, turn: Turn, text: str, finish_reason: str) -> ModeResult:
        """Cut at the token limit with nothing usable: asking again would be cut again."""
        turn.record["final"] = False
        turn.record["ended_by"] = "truncated"
        self.session.close_turn(turn)
        self._turn = None
        return ModeResult(
            "truncated",
            strip_think(text),
            extra={"stateless": self._summary(), "finish_reason": finish_reason},
        )

    async def _picture(
        self,
        turn: Turn,
        number: int,
        out: VlmOutput,
        ran: list[tuple[ReplyAction, InputAction]],
        text: str,
    ) -> tuple[_Saved, str, asyncio.Future[_Saved]]:
        """The screen after the actions, its raw PNG (encoded in the background) and the
        annotated one: the heat and the trail show where actions ran, as the prompt tells
        the model (an action the policy refused or one skipped after a failure is not drawn)."""
        s = self.settings
        session = self.session
        boxes = tuple(b.mark() for b in out.bboxes)
        marks = tuple(action_mark(physical) for _, physical in ran)
        ran_dicts = [action.as_dict() for action, _ in ran]
        self.state.set_phase("capturing")
        if s.capture_delay > 0:
            with turn.timer.phase("delay"):
                await asyncio.sleep(s.capture_delay)
        frame = await self._capture(turn, after_input=bool(ran))
        self.state.set_phase("annotating")
        session.reporter.phase(number, "encode")
        raw_task = asyncio.ensure_future(
            asyncio.to_thread(self._encode_and_save, frame.rgb, number, "raw")
        )
        previous_marks = tuple(self._previous_marks) if self.style.trail_turns > 1 else ()
        previous_dicts = list(self._previous_dicts) if self.style.trail_turns > 1 else []
        try:
            annotated, how = await self._annotate(
                turn,
                number,
                frame,
                marks,
                boxes,
                previous_marks,
                previous_dicts,
                out,
                ran_dicts,
                text,
                raw_task,
            )
        except BaseException:
            raw_task.cancel()
            raise
        self._previous_marks.append(marks)
        self._previous_dicts.append(ran_dicts)
        turn.record["observation"] = {
            "screenshot": annotated.name,
            "raw": None,
            "mapping": session.describe(frame.mapping),
            "digest": f"{frame.digest & 0xFFFFFFFFFFFFFFFF:016x}",
            "png_bytes": len(annotated.png),
            "annotation": how,
        }
        # Once per run, as in the other modes: frames go on without the cursor.
        capturer = self._capturer
        session.note_cursor_problem(turn.record["observation"], capturer.cursor_problem if capturer is not None else None)
        return annotated, how, raw_task

    @staticmethod
    def _result_record(turn: Turn, out: VlmOutput, executed: list[tuple[ReplyAction, str | None]]) -> None:
        turn.record["result"] = {
            "ok": all(error is None for _, error in executed),
            "actions_run": len(executed),
            "refused": len(out.rejected),
        }
        if any(error is not None for _, error in executed):
            # policy_denied when the policy refused something and nothing else failed.
            types = {_error_type(entry) for entry in turn.record.get("actions", ())} - {None}
            kind = "policy_denied" if types == {"policy_denied"} else "action_failed"
            turn.record["result"]["error"] = {"type": kind}
            if "policy_denied" in types:
                turn.record["result"]["denied"] = turn.record.get("policy_denied", 0)

    async def _end_of_turn(
        self,
        turn: Turn,
        number: int,
        out: VlmOutput,
        text: str,
        raw_task: asyncio.Future[_Saved],
        annotated: _Saved,
        how: str,
    ) -> ModeResult | tuple[str, float] | None:
        """The run's end (``done``, ``max_steps``) or an injected model output; None: ask."""
        session = self.session
        if out.done:
            raw = await raw_task
            self._finish_records(turn, number, out, text, raw, annotated, how)
            self.state.set_phase("done")
            turn.record["final"] = True
            turn.record["answer"] = out.observation
            session.close_turn(turn)
            self._turn = None
            return ModeResult("answered", out.observation, extra={"stateless": self._summary()})

        injected = self.state.take_injection()
        if injected is not None:
            # A model output injected through the panel replaces this turn's request.
            raw = await raw_task
            self._finish_records(turn, number, out, text, raw, annotated, how)
            turn.record["next"] = "injected"
            session.close_turn(turn)
            self._turn = None
            return injected, time.perf_counter()

        ended = session.step_limit()
        if ended is not None:
            # The last screenshot and its records still belong to the run.
            self._finish_records(turn, number, out, text, await raw_task, annotated, how)
            turn.record["ended_by"] = "max_steps"
            self._stopped("max_steps")
            return ended
        return None

    async def _ask_next(
        self,
        turn: Turn,
        number: int,
        out: VlmOutput,
        executed: list[tuple[ReplyAction, str | None]],
        text: str,
        raw_task: asyncio.Future[_Saved],
        annotated: _Saved,
        how: str,
    ) -> tuple[str, float]:
        """The next request (the records are finished while the model thinks); returns
        the model's answer text and when it was complete."""
        self.state.set_phase("calling_model")
        with turn.timer.phase("request_build"):
            body = self._request_body(out, executed, annotated.png, number)

        async def finish_records() -> None:
            raw = await raw_task  # finished while the model thinks
            self._finish_records(turn, number, out, text, raw, annotated, how)

        completion, replied = await self.session.send(turn, body, images=1, meanwhile=finish_records())
        self._turn = None
        self._finish_reason = completion.finish_reason
        return self._answer_text(completion), replied

    def _answer_text(self, completion: Completion) -> str:
        """The text the next turn parses: the content, or the reasoning that holds the answer."""
        if (
            not strip_think(completion.content)
            and completion.reasoning
            and completion.reasoning.strip()
        ):
            # A thinking model behind a reasoning parser (LM Studio, llama.cpp
            # --reasoning-format, vLLM --reasoning-parser) can leave its whole JSON answer
            # in the reasoning field and an empty content: read the answer from there.
            self._text_from_reasoning = True
            return completion.reasoning
        self._text_from_reasoning = False
        return completion.content

    def _request_body(
        self, out: VlmOutput, executed: list[tuple[ReplyAction, str | None]], png: bytes, number: int
    ) -> bytes:
        history = History(self.system, keep_last_screenshots=1, keep_last_thinks=0)
        text = user_text(
            out.observation,
            turn=number,
            executed=executed,
            rejected=out.rejected,
            feedback=self.settings.feedback,
        )
        history.add_observation(png_data_url(png), text=text, label=f"turn {number}")
        # The server profile decides the token-limit field and whether temperature goes.
        return self.session.request_body(history, tools=[], extra={"top_p": self.settings.top_p})

    # ------------------------------------------------------------------ actions
    def _physical(self, action: ReplyAction) -> InputAction:
        """The protocol's action in physical pixels, as the tool sets' typed action (what
        the policy checks, the record keeps and replay reads)."""
        assert self.mapping is not None
        to_physical = self.mapping.norm_to_physical
        if action.name == "type":
            return TypeText(action.text or "")
        if action.name == "key":
            return KeyPress(action.keys or "")
        assert action.x1 is not None and action.y1 is not None  # the protocol requires a point
        point = to_physical(action.x1, action.y1)
        source = Box(action.x1, action.y1, action.x1, action.y1)
        if action.name == "drag":
            assert action.x2 is not None and action.y2 is not None
            steps = self.settings.drag_duration_steps
            return Drag(
                point,
                to_physical(action.x2, action.y2),
                steps=steps,
                duration=round(steps * self.settings.drag_step_delay, 4),
                source=(source, Box(action.x2, action.y2, action.x2, action.y2)),
            )
        if action.name == "scroll":
            return Scroll(point, dy=action.dy, dx=action.dx, source=source)
        if action.name == "move":
            return MoveMouse(point, source=source)
        button: Literal["left", "right"] = "right" if action.name == "right_click" else "left"
        return Click(point, button, 2 if action.name == "double_click" else 1, source=source)

    async def _execute(
        self, turn: Turn, actions: tuple[ReplyAction, ...]
    ) -> tuple[list[tuple[ReplyAction, str | None]], list[tuple[ReplyAction, InputAction]]]:
        """Run the turn's actions in order: ``(outcomes, ran)``.

        ``outcomes`` pairs every action that was tried with its error (None when it ran;
        a policy denial or an input failure otherwise), for the model's feedback; ``ran``
        holds the actions that were sent, each with its physical form (dry runs: that would have been), failed ones
        included since their input may have been partly delivered, but not the ones the
        policy refused nor those skipped after a failure: what the heat may show.
        """
        s = self.settings
        ctx = self.session.ctx
        done: list[tuple[ReplyAction, str | None]] = []
        ran: list[tuple[ReplyAction, InputAction]] = []
        records: list[dict[str, Any]] = []
        failed = False
        for action in actions:
            if action.name == "done":
                continue
            physical = self._physical(action)
            entry: dict[str, Any] = {"action": action.as_dict(), "physical": physical.to_record()}
            records.append(entry)
            if failed:
                entry["skipped"] = "an earlier action of this turn failed"
                continue
            if done and s.action_delay_seconds > 0:
                with turn.timer.phase("delay"):
                    await asyncio.sleep(s.action_delay_seconds)
            started = time.perf_counter()
            error: str | None = None
            try:
                # The one path of every action: the run's safety policy checks exactly the
                # action sent (in dry runs too) before any input; a confirm question never
                # blocks the loop; a text is typed in chunks a stop ends early.
                await act(ctx, physical, hands=self.hands, pauses=False)
                ran.append((action, physical))
            except ActionDeniedError as exc:
                # Like a tool call: the denial is this action's result, the turn goes on
                # and the model reads why in the next request's feedback.
                payload = exc.payload
                if not isinstance(payload, dict):
                    payload = err_payload("policy_denied", str(exc))
                    payload["error"]["rule"] = str(exc.details.get("rule", "policy"))
                entry["result"] = payload
                error = denied_text(str(payload["error"].get("rule") or "policy"), str(exc))
            except DeskpilotError as exc:
                if not isinstance(exc, (OSError, ValueError)):
                    raise  # a stop (kill switch, Ctrl+C) or a bug: not this action's failure
                ran.append((action, physical))  # its input may have been partly delivered
                error = f"{type(exc).__name__}: {exc}"
                entry["result"] = err_payload("action_failed", error)
                failed = True
            turn.timer.add("action", (time.perf_counter() - started) * 1000)
            entry["ok"] = error is None
            if error:
                entry["error"] = error
                log.warning(
                    "turn %d: %s failed: %s",
                    turn.number,
                    self.session.redact_text(action.describe()),
                    self.session.redact_text(error),
                )
            done.append((action, error))
        turn.record["actions"] = records
        denied = sum(1 for entry in records if _error_type(entry) == "policy_denied")
        if denied:
            turn.record["policy_denied"] = denied
        if self.dry is not None:
            turn.record["dry_run"] = True
        return done, ran

    # ------------------------------------------------------------------ screen
    async def _on_capture(self, fn: Callable[[], R]) -> R:
        # The session's capture thread owns the X connection / GDI DC of its screen.
        return await self.session.call_on_capture(fn)

    def _grab(self) -> _Frame:
        """Runs on the capture thread: the working area at the model's image size."""
        assert self.area is not None and self.mapping is not None
        w, h = self.mapping.image_width, self.mapping.image_height
        if self._capturer is not None:
            rgb = self._capturer.grab(size=(w, h)).rgb
            return _Frame(rgb, self.mapping, imaging.frame_digest(rgb))
        shot = self.session.screen.grab_region(self.area)
        rgb = shot.rgb
        if rgb.shape[1] != w or rgb.shape[0] != h:
            rgb = imaging.downscale(rgb, (w, h))
        elif not rgb.flags.writeable or not rgb.flags.c_contiguous:
            rgb = np.ascontiguousarray(rgb).copy()
        return _Frame(rgb, self.mapping, imaging.frame_digest(rgb))

    async def _capture(self, turn: Turn, *, after_input: bool = False) -> _Frame:
        def grab() -> tuple[int, _Frame]:
            frame = self._grab()
            return frame.digest, frame

        baseline = self._last_digest if after_input else None
        frame = await self.session.settle_on(turn, grab, baseline=baseline)
        self._last_digest = frame.digest
        return frame

    # ------------------------------------------------------------------ images
    def _path(self, number: int, kind: str) -> tuple[str, Path]:
        root = self.session.runlog.path
        if self.settings.log_layout == "turn_dirs":
            folder = root / f"turn_{number:04d}"
            return f"turn_{number:04d}/screenshot_{kind}.png", folder / f"screenshot_{kind}.png"
        return f"turn_{number:04d}_{kind}.png", root / f"turn_{number:04d}_{kind}.png"

    def _write(self, number: int, kind: str, png: bytes) -> str | None:
        if not self.session.runlog.save_screenshots:
            return None
        name, path = self._path(number, kind)
        self.session.runlog.write_new_file(path, png)  # no partial file; a failure stops the run
        self.session.runlog.screenshots.append(name)
        return name

    def _encode_and_save(self, rgb: U8, number: int, kind: str) -> _Saved:
        """Runs in a worker thread (the encoder releases the GIL)."""
        started = time.perf_counter()
        png = imaging.encode_png(rgb, level=self.session.config.screen.png_level)
        encode_ms = (time.perf_counter() - started) * 1000
        return _Saved(png, self._write(number, kind, png), encode_ms)

    def _annotate_and_save(
        self,
        rgb: U8,
        number: int,
        marks: tuple[ActionMark, ...],
        boxes: tuple[BoxMark, ...],
        previous: tuple[tuple[ActionMark, ...], ...],
    ) -> _Saved:
        """Runs in a worker thread: copy (the raw encoder reads the original), draw, encode, write."""
        started = time.perf_counter()
        canvas = rgb.copy()
        annotate(canvas, marks, boxes, style=self.style, previous=previous)
        drawn = time.perf_counter()
        png = imaging.encode_png(canvas, level=self.session.config.screen.png_level)
        encoded = time.perf_counter()
        return _Saved(
            png,
            self._write(number, "annotated", png),
            (encoded - drawn) * 1000,
            (drawn - started) * 1000,
        )

    async def _annotate(
        self,
        turn: Turn,
        number: int,
        frame: _Frame,
        marks: tuple[ActionMark, ...],
        boxes: tuple[BoxMark, ...],
        previous_marks: tuple[tuple[ActionMark, ...], ...],
        previous_dicts: list[list[dict[str, Any]]],
        out: VlmOutput,
        ran_dicts: list[dict[str, Any]],
        text: str,
        raw_task: asyncio.Future[_Saved],
    ) -> tuple[_Saved, str]:
        s = self.settings
        size = (frame.mapping.image_width, frame.mapping.image_height)

        def publish(raw: _Saved) -> None:
            self.state.publish(
                turn=number,
                raw_png=raw.png,
                image_size=size,
                observation=out.observation,
                bboxes=[b.as_dict() for b in out.bboxes],
                actions=ran_dicts,  # what the page draws: the actions that ran
                vlm_json=text,
                trail=previous_dicts,
                rejected=[r.as_dict() for r in out.rejected],
            )

        if s.annotate == "browser":
            raw = await raw_task
            turn.timer.add("encode", raw.encode_ms)
            publish(raw)
            started = time.perf_counter()
            try:
                # 0 = wait forever (seed scenario C); a stop cancels this wait like any other.
                png = await self.state.wait_annotation(number, s.annotate_timeout or None)
            except TimeoutError:
                turn.timer.add("annotate", (time.perf_counter() - started) * 1000)
                self._annotation_fallbacks += 1
                message = f"no annotated image from the panel within {s.annotate_timeout} s: drawn natively instead"
                log.warning("turn %d: %s", number, message)
                self.state.set_phase("annotating", message)
                saved = await asyncio.to_thread(
                    self._annotate_and_save, frame.rgb, number, marks, boxes, previous_marks
                )
                turn.timer.add("annotate", saved.work_ms)
                turn.timer.add("encode", saved.encode_ms)
                self.state.set_annotated(number, saved.png)
                return saved, "native_fallback"
            turn.timer.add("annotate", (time.perf_counter() - started) * 1000)
            name = await asyncio.to_thread(self._write, number, "annotated", png)
            return _Saved(png, name, 0.0), "browser"

        if s.annotate == "none":
            raw = await raw_task
            turn.timer.add("encode", raw.encode_ms)
            publish(raw)
            name = await asyncio.to_thread(self._write, number, "annotated", raw.png)
            self.state.set_annotated(number, raw.png)
            return _Saved(raw.png, name, 0.0), "none"

        saved = await asyncio.to_thread(
            self._annotate_and_save, frame.rgb, number, marks, boxes, previous_marks
        )
        turn.timer.add("annotate", saved.work_ms)
        turn.timer.add("encode", saved.encode_ms)
        self.state.set_annotated(number, saved.png)

        def publish_when_raw_done(task: asyncio.Future[_Saved]) -> None:
            if not task.cancelled() and task.exception() is None:
                publish(task.result())
                self.state.set_annotated(number, saved.png)

        raw_task.add_done_callback(publish_when_raw_done)
        return saved, "native"

    # ------------------------------------------------------------------ records
    def _finish_records(
        self,
        turn: Turn,
        number: int,
        out: VlmOutput,
        text: str,
        raw: _Saved,
        annotated: _Saved,
        how: str,
    ) -> None:
        """The seed's raw and annotated records (and turn_dirs' vlm_output.json)."""
        runlog = self.session.runlog
        turn.record["observation"]["raw"] = raw.name
        if self.settings.annotate != "browser":
            # In native mode the raw encode ran beside the annotation, off the critical path.
            turn.record.setdefault("background_ms", {})["encode_raw"] = round(raw.encode_ms, 3)
        runlog.write_turn(
            {
                "turn": number,
                "stage": "raw",
                "model_observation": out.observation,
                "bboxes": [b.as_dict() for b in out.bboxes],
                "actions": [a.as_dict() for a in out.actions],
                "rejected": [r.as_dict() for r in out.rejected],
                "source": out.source,
                "raw_png": raw.name,
            }
        )
        runlog.write_turn(
            {
                "turn": number,
                "stage": "annotated",
                "annotated_png": annotated.name,
                "annotation": how,
            }
        )
        if self.settings.log_layout == "turn_dirs" and runlog.save_screenshots:
            runlog.write_json(
                f"turn_{number:04d}/vlm_output.json", {"text": text, **out.as_record()}
            )
        log.info(
            "turn %d: %d action(s), %d refused, observation: %s",
            number,
            len(out.actions),
            len(out.rejected),
            self.session.redact_text(out.observation[:200]),
        )

    def _summary(self) -> dict[str, Any]:
        return {
            "panel": self.panel.url if self.panel else None,
            "annotate": self.settings.annotate,
            "annotation_fallbacks": self._annotation_fallbacks,
            "working_area": self.mapping.describe() if self.mapping else None,
        }

    # ------------------------------------------------------------------ main.log
    def _start_log_file(self) -> None:
        if not self.settings.log_to_file:
            return
        handler = _RunFileHandler(self.session.runlog, "main.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        level = self.settings.log_level_number  # seed: LOG_LEVEL
        handler.setLevel(level)
        root = logging.getLogger("deskpilot")
        self._log_level = root.level
        root.addHandler(handler)
        if root.level == logging.NOTSET or root.level > level:
            root.setLevel(level)
        self._log_handler = handler

    def _stop_log_file(self) -> None:
        if self._log_handler is not None:
            root = logging.getLogger("deskpilot")
            root.removeHandler(self._log_handler)
            root.setLevel(self._log_level)
            self._log_handler.close()
            self._log_handler = None


class _RunFileHandler(logging.Handler):
    """main.log, written by the run files' one line writer: whole lines or nothing, and a
    failed write stops the run (RunLog.fail) instead of printing logging's "--- Logging
    error ---" traceback on stderr."""

    def __init__(self, runlog: RunLog, name: str) -> None:
        super().__init__()
        self.runlog = runlog
        self._file = LineFile(runlog.path / name)

    def emit(self, record: logging.LogRecord) -> None:
        if self._file.closed or self._file.failure is not None:
            return
        try:
            line = self.format(record) + "\n"
            self._file.append(line.encode("utf-8", "replace"))
        except RunLogError as exc:
            self.runlog.fail(exc)
        except Exception:  # a bad format string in a log call: logging's own report
            self.handleError(record)

    def close(self) -> None:
        self._file.close()
        super().close()


def run_stateless(config: AgentConfig, task: str, **kwargs: Any) -> RunResult:
    """Run ``task`` in the stateless mode (``config.agent.mode`` is overridden); see :func:`run_agent`."""
    from dataclasses import replace

    return run_agent(config.replace(agent=replace(config.agent, mode="stateless")), task, **kwargs)
