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
from typing import Any

import orjson

from deskpilot.agent._config import AgentConfig
from deskpilot.agent._prompts import observation_text, system_prompt
from deskpilot.agent._session import ModeResult, Observation, Session, Turn
from deskpilot.agent.client._history import History
from deskpilot.agent.client._toolcalls import CALL_MARKERS, ToolCall, strip_think
from deskpilot.agent.modes._registry import ModeSpec
from deskpilot.agent.tools._core import ToolOutcome, ToolSet, err_payload, toolset

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

NO_ACTION_REMINDER = (
    "Your last reply contained no tool call that could be run and no final answer. "
    "To act, call one of the tools (a native tool call). When the task is complete, "
    "reply with a short final answer in plain text and no tool call."
)

UITARS_REMINDER = (
    "Your last reply had no action that could be run. Answer in the output format: a line "
    "'Thought: ...' and a line 'Action: ...' with one action of the action space; when the "
    "task is complete, Action: finished(content='...')."
)


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


class SingleMode:
    def __init__(self, config: AgentConfig, tools: ToolSet | None = None, prompt: str | None = None) -> None:
        self.config = config
        self.tools = tools or toolset(config.agent.toolset)
        self.one_call = config.agent.one_tool_call
        self.auto_observe = config.agent.observe_after_action
        self.prompt = prompt or self.tools.prompt or system_prompt(
            self.tools, one_call_per_step=self.one_call, auto_observe=self.auto_observe
        )
        #: A text protocol (UI-TARS): no tools in the request, calls read from the content,
        #: results sent back as user text (there is no tool_call id to answer).
        self.text_protocol = self.tools.text_protocol
        self._images = 0

    def _explicit(self, key: str) -> bool:
        """Whether ``key`` was set (flag, variable, file, tool set) rather than left at its default."""
        return self.config.sources.get(key, "default") != "default"

    def new_history(self) -> History:
        h = self.config.history
        return History(
            self.prompt,
            keep_last_screenshots=h.keep_last_screenshots,
            keep_last_thinks=h.keep_last_thinks,
            prune_chunk=h.prune_chunk,
            # An explicit AGENT_KEEP_LAST_SCREENSHOTS=N keeps the seeds' meaning: at most N
            # images in any request (the chunked pruning alone may hold N + chunk - 1).
            max_images=h.keep_last_screenshots if self._explicit("history.keep_last_screenshots") else None,
            tools=None if self.text_protocol is not None else self.tools.schemas(),
        )

    def _text(self, *, zoomed: bool, unchanged: bool) -> str:
        if unchanged:
            return "No new screenshot: the screen looks exactly like the previous screenshot."
        self._images += 1
        return observation_text(self._images, zoomed=zoomed)

    async def run(self, session: Session) -> ModeResult:
        history = self.new_history()
        history.add_task(session.task)
        turn = session.start()
        first = await session.observe(turn)
        session.show(turn, history, first, text=self._text(zoomed=False, unchanged=False))
        stream = self.config.model.stream
        reminded = False
        while True:
            early: dict[str, Any] = {}

            def start_early(t: Turn, call: ToolCall, early: dict[str, Any] = early) -> None:
                # Streaming: act on the first complete call while the rest still arrives.
                if "task" not in early and call.index == 0 and not call.error:
                    early["call"] = call
                    early["task"] = asyncio.ensure_future(session.act(t, call, self.tools))

            ended = session.step_limit()
            if ended is not None:
                return ended
            try:
                turn, completion = await session.ask(history, on_tool_call=start_early if stream else None)
            except BaseException:
                task = early.get("task")
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                raise
            with turn.timer.phase("parse"):
                history.add_assistant(completion.message)
                calls = completion.tool_calls
                if self.text_protocol is not None and not calls:
                    calls = self.text_protocol(completion.content, session.client.new_call_id)
                    if calls:
                        turn.record["text_calls"] = [c.as_dict() for c in calls]
                # A UI-TARS reply may hold several actions: its protocol runs them in order.
                one = self.one_call and self.text_protocol is None
                run_calls = calls[:1] if one else calls
                extra_calls = calls[1:] if one else []
            if not calls:
                answer = strip_think(completion.content)
                verdict = final_verdict(completion.content, completion.finish_reason)
                if verdict == "answered" and self.text_protocol is not None:
                    verdict = "no_action"  # the protocol ends only by its own finished()
                if verdict == "no_action" and not reminded:
                    # Tell the model once what was wrong, and ask again.
                    reminded = True
                    turn.record["no_action"] = {"finish_reason": completion.finish_reason, "reminded": True}
                    history.add_user(UITARS_REMINDER if self.text_protocol is not None else NO_ACTION_REMINDER)
                    continue
                turn.record["final"] = verdict == "answered"
                turn.record["answer"] = answer
                if verdict == "answered":
                    return ModeResult("answered", answer)
                turn.record["ended_by"] = verdict
                return ModeResult(verdict, answer, {"finish_reason": completion.finish_reason})
            reminded = False

            results: list[tuple[ToolCall, ToolOutcome]] = []
            for call in run_calls:
                task = early.get("task")
                if task is not None and early["call"].id == call.id:
                    outcome = await task
                    early.pop("task")
                    turn.record["action_started_early"] = True  # while the stream was still arriving
                else:
                    outcome = await session.act(turn, call, self.tools)
                results.append((call, outcome))
            leftover = early.get("task")
            if leftover is not None:  # the early call was not among those to run (cannot happen for index 0)
                await asyncio.gather(leftover, return_exceptions=True)

            final = next((o.final for _, o in results if o.final is not None), None)
            if final is not None:
                # terminate / answer / finished / call_user: the model ended the task.
                status, text = final
                answer = text or strip_think(completion.content) or f"the model ended the task: {status}"
                turn.record["final"] = True
                turn.record["answer"] = answer
                if status == "success":
                    return ModeResult("answered", answer)
                turn.record["ended_by"] = "failed"
                return ModeResult("failed", answer, {"model_status": status})
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
            text_results: list[str] = []
            for call, outcome in results:
                if self.text_protocol is not None:
                    text_results.append(f"{call.name or 'action'}: {orjson.dumps(outcome.payload).decode()}")
                else:
                    history.add_tool_result(call.id, outcome.payload, name=call.name or None)
            if text_results and obs is None:
                history.add_user("Result: " + "; ".join(text_results))
            for call in extra_calls:
                payload = err_payload(
                    "too_many_tool_calls",
                    f"only one tool call per step is allowed; {call.name or 'this call'} was not run. "
                    "Call it again in your next reply if it is still needed.",
                )
                session.reject_call(turn, call, payload)
                history.add_tool_result(call.id, payload, name=call.name or None)
            if obs is not None:
                force = wants_image or last.zoom is not None or obs.shot.zoomed
                text = self._text(zoomed=obs.shot.zoomed, unchanged=obs.unchanged and not force)
                if text_results:
                    text = "Result: " + "; ".join(text_results) + "\n" + text
                session.show(turn, history, obs, text=text, force_image=force)
            await session.pause(turn, self.config.agent.effective_step_delay)


MODE = ModeSpec(
    "single",
    "one vision model, one tool call per step (seeds 000/001)",
    SingleMode,
)
