"""The single mode (seeds 000 and 001): one vision model, one tool call per step.

Turn policy:

1. system prompt (for the tool set) + task; the first screenshot (seed 000 observes
   before the first request).
2. Each step: request -> answer. No tool call: what the answer is decides the outcome
   (:func:`final_verdict`): a final text the model finished on purpose
   (``finish_reason`` stop) ends the run ``answered``; a reply cut at the token limit
   ends it ``truncated``; an empty reply, or action text no parser could read (UI-TARS
   ``Action: click(...)``, a broken call block), gets one reminder to call a tool and,
   when the next reply is no better, ends the run ``no_action``. Otherwise the first
   call runs; extra calls are answered with
   ``too_many_tool_calls`` (``agent.one_tool_call = false`` runs them all, in order).
3. After an action the screen settles and the tool result says whether it changed.
   With ``agent.observe_after_action`` (default) the settled frame is attached as the
   next observation (a one-line note instead when the pixels did not change); with it
   off the model calls observe_screen / take_screenshot itself, as in the seeds.
4. ``zoom`` shows a native-resolution crop next; ``wait`` and the observe tools always
   send a fresh image.

With a streamed answer the first tool call starts running as soon as it has arrived,
while the rest of the stream is still being received.
"""

from __future__ import annotations

import asyncio
import re

from deskpilot.agent._config import AgentConfig
from deskpilot.agent._prompts import observation_text, system_prompt
from deskpilot.agent._session import ModeResult, Observation, Session, Turn
from deskpilot.agent.client._chat import Completion
from deskpilot.agent.client._history import History
from deskpilot.agent.client._toolcalls import CALL_MARKERS, ToolCall, strip_think
from deskpilot.agent.modes._registry import ModeSpec
from deskpilot.agent.tools._core import TextParser, ToolOutcome, ToolSet, err_payload, toolset
from deskpilot.agent.tools._protocol import NO_ACTION_REMINDER
from deskpilot.agent.tools._uitars import UITARS_REMINDER

__all__ = ["MODE", "NO_ACTION_REMINDER", "UITARS_REMINDER", "SingleMode", "final_verdict"]

#: Finish reasons that mean "the model ended its reply on purpose" (OpenAI, llama.cpp,
#: vLLM, LM Studio: ``stop``; Ollama's native API: ``stop``; some gateways: ``eos``,
#: ``end_turn``). ``None``: a server that does not say (a complete JSON body).
_FINISHED = frozenset({"stop", "eos", "end_turn", "stop_sequence"})
_TRUNCATED = frozenset({"length", "max_tokens", "model_length"})
# Text that is an action in a syntax no parser read: not a final answer.
_ACTION_TEXT = (*CALL_MARKERS, "<|box_start|>", "<point>", "</tool_call>", "<arg_key>")
# UI-TARS: "Action: click(start_box=...)" (a final answer may well say "Action: none").
_ACTION_CALL = re.compile(r"^\s*Action:\s*[A-Za-z_]\w*\(", re.MULTILINE)

def final_verdict(content: str, finish_reason: str | None) -> str:
    """What a reply without tool calls means: ``"answered"`` (a final text, finished on
    purpose), ``"truncated"`` (cut at the token limit, e.g. a thinking model that spent
    ``max_tokens`` on its reasoning) or ``"no_action"`` (empty, or action text that was
    not understood)."""
    if finish_reason in _TRUNCATED:
        return "truncated"
    visible = strip_think(content)
    if not visible:
        return "no_action"
    if any(marker in visible for marker in _ACTION_TEXT) or _ACTION_CALL.search(visible):
        return "no_action"
    if finish_reason is None or finish_reason in _FINISHED:
        return "answered"
    # "tool_calls" without a call, "content_filter", ...: not a final answer.
    return "no_action"


class _EarlyCall:
    """Streaming: the first complete call starts running while the rest still arrives."""

    def __init__(self, session: Session, tools: ToolSet) -> None:
        self._session = session
        self._tools = tools
        self.call: ToolCall | None = None
        self.task: asyncio.Future[ToolOutcome] | None = None

    def start(self, turn: Turn, call: ToolCall) -> None:
        if self.task is None and call.index == 0 and not call.error:
            self.call = call
            self.task = asyncio.ensure_future(self._session.act(turn, call, self._tools))

    def take(self, call: ToolCall) -> asyncio.Future[ToolOutcome] | None:
        """The running task of ``call``, if it is the one started early."""
        task = self.task
        if task is None or self.call is None or self.call.id != call.id:
            return None
        self.task = None
        return task

    async def drain(self) -> None:
        """Wait for (or, ``cancel``) a task nobody took."""
        if self.task is not None:  # the early call was not among those to run (cannot happen for index 0)
            await asyncio.gather(self.task, return_exceptions=True)

    async def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


class SingleMode:
    """One model, one tool set; each step: ask, read the calls, act, answer, observe.

    The tool set's :class:`~deskpilot.agent.tools._protocol.CallProtocol` says how calls
    travel (native tool calls, or UI-TARS's text), so every tool set takes the same path.
    """

    def __init__(self, config: AgentConfig, tools: ToolSet | None = None, prompt: str | None = None) -> None:
        self.config = config
        self.tools = tools or toolset(config.agent.toolset)
        self.protocol = self.tools.protocol
        self.one_call = config.agent.one_tool_call
        self.auto_observe = config.agent.observe_after_action
        self.prompt = prompt or self.tools.prompt or system_prompt(
            self.tools, one_call_per_step=self.one_call, auto_observe=self.auto_observe
        )
        self._images = 0

    @property
    def text_protocol(self) -> TextParser | None:
        """The parser of calls written as text (UI-TARS), None for native tool calls."""
        return self.tools.text_protocol

    def new_history(self) -> History:
        h = self.config.history
        return History(
            self.prompt,
            keep_last_screenshots=h.keep_last_screenshots,
            keep_last_thinks=h.keep_last_thinks,
            prune_chunk=h.prune_chunk,
            tools=self.tools.schemas() if self.protocol.sends_tools else None,
        )

    def _text(self, *, zoomed: bool, unchanged: bool) -> str:
        if unchanged:
            return "No new screenshot: the screen looks exactly like the previous screenshot."
        self._images += 1
        return observation_text(self._images, zoomed=zoomed)

    async def run(self, session: Session) -> ModeResult:
        history = await self._begin(session)
        reminded = False
        while True:
            ended = session.step_limit()
            if ended is not None:
                return ended
            turn, completion, early = await self._ask(session, history)
            with turn.timer.phase("parse"):
                run_calls, extra_calls = self._read_calls(session, turn, history, completion)
            if not run_calls:
                ended = self._without_calls(turn, history, completion, reminded)
                if ended is not None:
                    return ended
                reminded = True
                continue
            reminded = False
            results = await self._act(session, turn, run_calls, early)
            ended = self._final(turn, completion, results)
            if ended is not None:
                return ended
            await self._answer(session, turn, history, results, extra_calls)
            await session.pause(turn, self.config.agent.effective_step_delay)

    async def _begin(self, session: Session) -> History:
        """The system prompt, the task and the first screenshot."""
        history = self.new_history()
        history.add_task(session.task)
        turn = session.start()
        first = await session.observe(turn)
        session.show(turn, history, first, text=self._text(zoomed=False, unchanged=False))
        return history

    async def _ask(self, session: Session, history: History) -> tuple[Turn, Completion, _EarlyCall]:
        """The next request; with streaming, the first call starts as soon as it has arrived."""
        early = _EarlyCall(session, self.tools)
        on_call = early.start if self.config.model.stream else None
        try:
            turn, completion = await session.ask(history, on_tool_call=on_call)
        except BaseException:
            await early.cancel()
            raise
        return turn, completion, early

    def _read_calls(
        self, session: Session, turn: Turn, history: History, completion: Completion
    ) -> tuple[list[ToolCall], list[ToolCall]]:
        """The calls to run this step and those refused as one too many."""
        history.add_assistant(completion.message)
        calls, from_text = self.protocol.read(completion.content, completion.tool_calls, session.client.new_call_id)
        if from_text:
            turn.record["text_calls"] = [c.as_dict() for c in calls]
        if self.one_call and not self.protocol.runs_every_call:
            return calls[:1], calls[1:]
        return calls, []

    def _without_calls(
        self, turn: Turn, history: History, completion: Completion, reminded: bool
    ) -> ModeResult | None:
        """A reply with nothing to run: the run's ending, or (once) a reminder and None."""
        answer = strip_think(completion.content)
        verdict = final_verdict(completion.content, completion.finish_reason)
        if verdict == "answered" and not self.protocol.ends_on_text:
            verdict = "no_action"  # the protocol ends only by its own ending action
        if verdict == "no_action" and not reminded:
            # Tell the model once what was wrong, and ask again.
            turn.record["no_action"] = {"finish_reason": completion.finish_reason, "reminded": True}
            history.add_user(self.protocol.reminder)
            return None
        turn.record["final"] = verdict == "answered"
        turn.record["answer"] = answer
        if verdict == "answered":
            return ModeResult("answered", answer)
        turn.record["ended_by"] = verdict
        return ModeResult(verdict, answer, {"finish_reason": completion.finish_reason})

    async def _act(
        self, session: Session, turn: Turn, calls: list[ToolCall], early: _EarlyCall
    ) -> list[tuple[ToolCall, ToolOutcome]]:
        """Run the calls in order (the one started early is awaited, not run again)."""
        results: list[tuple[ToolCall, ToolOutcome]] = []
        for call in calls:
            task = early.take(call)
            if task is not None:
                outcome = await task
                turn.record["action_started_early"] = True  # while the stream was still arriving
            else:
                outcome = await session.act(turn, call, self.tools)
            results.append((call, outcome))
        await early.drain()
        return results

    @staticmethod
    def _final(
        turn: Turn, completion: Completion, results: list[tuple[ToolCall, ToolOutcome]]
    ) -> ModeResult | None:
        """The model ended the task with a tool (terminate / answer / finished / call_user)."""
        final = next((o.final for _, o in results if o.final is not None), None)
        if final is None:
            return None
        status, text = final
        answer = text or strip_think(completion.content) or f"the model ended the task: {status}"
        turn.record["final"] = True
        turn.record["answer"] = answer
        if status == "success":
            return ModeResult("answered", answer)
        turn.record["ended_by"] = "failed"
        return ModeResult("failed", answer, {"model_status": status})

    async def _observe_after(
        self, session: Session, turn: Turn, results: list[tuple[ToolCall, ToolOutcome]]
    ) -> Observation | None:
        """The image the calls ask for: a zoom's crop, a fresh look, or the settled screen."""
        last = results[-1][1]
        wants_image = any(o.observe for _, o in results)
        acted = any(o.acted for _, o in results)
        obs: Observation | None = None
        if last.zoom is not None:
            obs = await session.observe(turn, zoom=last.zoom)
        elif wants_image:
            obs = await session.observe(turn, fresh=not acted)
        elif acted and self.auto_observe:
            obs = await session.observe(turn)
        if obs is not None:
            for _call, outcome in results:
                if outcome.observe:
                    outcome.payload.update(
                        screenshot=obs.screenshot,
                        image_size=list(obs.shot.size),
                        screen_size=[obs.mapping.area.width, obs.mapping.area.height],
                    )
        return obs

    async def _answer(
        self,
        session: Session,
        turn: Turn,
        history: History,
        results: list[tuple[ToolCall, ToolOutcome]],
        extra_calls: list[ToolCall],
    ) -> None:
        """The results (and the refused extra calls) go back to the model, with the image."""
        obs = await self._observe_after(session, turn, results)
        answers = [(call, outcome.payload) for call, outcome in results]
        for call in extra_calls:
            payload = err_payload(
                "too_many_tool_calls",
                f"only one tool call per step is allowed; {call.name or 'this call'} was not run. "
                "Call it again in your next reply if it is still needed.",
            )
            session.reject_call(turn, call, payload)
            answers.append((call, payload))
        said = self.protocol.answer(history, answers)
        if obs is None:
            if said:
                history.add_user(said)
            return
        last = results[-1][1]
        force = any(o.observe for _, o in results) or last.zoom is not None or obs.shot.zoomed
        text = self._text(zoomed=obs.shot.zoomed, unchanged=obs.unchanged and not force)
        if said:
            text = said + "\n" + text
        session.show(turn, history, obs, text=text, force_image=force)


MODE = ModeSpec(
    "single",
    "one vision model, one tool call per step (seeds 000/001)",
    SingleMode,
)
