"""The team mode: a planner and an executor on one model, over the shared loop.

Every turn is one model request by one role (see :mod:`._state` for who and why):

planner turn (text only, never an image)
    system prompt (role, task, rules, tools) + one user message with the rebuilt
    context; its tool calls update the instructions and/or archive memory.
executor turn (exactly one screenshot)
    system prompt + one user message: the context text and the current screenshot
    (the settled frame of the last action, or a fresh settled capture). Its one tool
    call runs through ``Session.act`` (input thread, adaptive settle, change detection,
    turns.jsonl record) and is added to the memory.

Both histories keep their system prompt and tools schema as cached bytes and are
cleared of the rest every turn, so each request is ``[system, user]`` and the cached
prefix is identical turn after turn (good for servers' prompt caches).

Bad model output never crashes the run; each case is recorded in turns.jsonl and
execution_log.txt and has a defined next step:

=============================  ==============================================================
planner: no tool call          instructions exist: keep them, back to execution; none yet:
                               ask again with a note, stop as ``no_plan`` after
                               ``team.planner_attempts`` answers
planner: unknown tool / bad    call refused (logged, noted to the planner); the rest of the
arguments / two plan calls     answer is used (a second plan or archive call is refused as
                               ``too_many_tool_calls``); no valid plan call: as with none
archive: turns that do not     those turns ignored, the others archived; nothing archivable:
exist, too few, bad arguments  refused; still at the threshold: the oldest turns are
                               archived automatically, down to below the threshold (at
                               most 3 active records kept), so the run cannot stall
executor: no tool call         recorded as a failed action, noted to the executor, next turn
executor: several calls        the first runs, the others get ``too_many_tool_calls``
executor: unknown tool / bad   the seeds' error payload, recorded as a failed action
arguments
completion, short evidence     refused (``insufficient_evidence``), the run goes on
same action repeated without   planner review (and the seeds' recovery sequence with
visible effect                 ``team.loop_recovery``, respecting the cooldown)
=============================  ==============================================================
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from typing import Any, cast

from deskpilot._errors import ArgumentError, DeskpilotError
from deskpilot.agent._config import AgentConfig
from deskpilot.agent._session import ModeResult, Session, Turn
from deskpilot.agent.client._chat import Completion
from deskpilot.agent.client._history import History
from deskpilot.agent.client._toolcalls import ToolCall, strip_think
from deskpilot.agent.modes._registry import ModeSpec
from deskpilot.agent.modes.team._common import (
    DONE_STATUSES,
    ArchiveArgs,
    CompletionArgs,
    ParsedCall,
    PlanArgs,
    ProgressArgs,
    Role,
    parse_call,
)
from deskpilot.agent.modes.team._execlog import ExecutionLog
from deskpilot.agent.modes.team._memory import AgentMemory, CompressionResult, MemoryEntry
from deskpilot.agent.modes.team._recovery import LoopDetector, action_signature, run_recovery
from deskpilot.agent.modes.team._settings import TeamParams, TeamSettings, resolve_params
from deskpilot.agent.modes.team._state import REASONS, TeamState
from deskpilot.agent.modes.team._tools import INSUFFICIENT_EVIDENCE, executor_toolset
from deskpilot.agent.tools._core import ToolOutcome, err_payload
from deskpilot.rundir import CallRecord, TeamTurnRecord

__all__ = ["MODE", "TeamMode"]

#: Active records kept when the engine has to archive on the planner's behalf (fewer
#: when the compression threshold is this low: see :func:`_auto_keep`).
_AUTO_KEEP = 3


def _auto_keep(threshold: int) -> int:
    """Records to keep active after an automatic archive: below ``threshold``, or the next
    turn would be another compression review (and so on until max steps)."""
    return max(0, min(_AUTO_KEEP, threshold - 1))


class TeamMode:
    """``run(session)`` plays one team run (see the module docstring)."""

    def __init__(self, config: AgentConfig, *, params: TeamParams | None = None) -> None:
        self.config = config
        self.params = params if params is not None else resolve_params(config)
        self.variant = self.params.variant
        #: The turn limit of this mode (the variant's 30 / 50 unless set explicitly).
        self.max_steps = self.params.max_steps
        self.tools = executor_toolset(self.variant, min_evidence=self.params.min_evidence)
        self.planner_specs = self.variant.specs("planner")
        self.executor_specs = self.variant.specs("executor")
        self.stats: dict[str, int] = {
            "planner_turns": 0,
            "executor_turns": 0,
            "mode_switches": 0,
            "loops_detected": 0,
            "recoveries": 0,
            "refused_completions": 0,
            "auto_archives": 0,
            "bad_outputs": 0,
        }
        # Set by run(); kept on the instance so tests can inspect a finished run.
        self.state: TeamState | None = None
        self.log: ExecutionLog | None = None

    # ------------------------------------------------------------------ helpers
    def _history(self, role: Role, task: str) -> History:
        p = self.params
        prompt = self.variant.system_prompt(
            role, task=task, review_interval=p.review_interval, threshold=p.compression_threshold
        )
        schemas = (
            [s.schema() for s in self.variant.planner_tools]
            if role == "planner"
            else self.tools.schemas()
        )
        return History(prompt, keep_last_screenshots=1, keep_last_thinks=0, tools=schemas)

    def _request_for_log(
        self, history: History, role: Role, screenshot: str | None
    ) -> dict[str, Any]:
        """The request as the execution log shows it: the system prompt (logged once at
        initialization) and images by length only, as the seeds redact them."""
        p = self.params
        messages: list[dict[str, Any]] = []
        for message in history.messages:
            if message.get("role") == "system":
                messages.append(
                    {
                        "role": "system",
                        "content": f"<{role} system prompt, {len(message['content'])} chars>",
                    }
                )
                continue
            content = message.get("content")
            if isinstance(content, list):
                parts: list[Any] = []
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "image_url":
                        url = str(part.get("image_url", {}).get("url", ""))
                        head = url.split(",", 1)[0]
                        parts.append(
                            {
                                "type": "image_url",
                                "image_url": f"{head},<{len(url) - len(head) - 1} base64 chars: {screenshot}>",
                            }
                        )
                    else:
                        parts.append(part)
                messages.append({**message, "content": parts})
            else:
                messages.append(message)
        planner = role == "planner"
        return {
            "model": self.config.model.model,
            "temperature": p.planner_temperature if planner else p.executor_temperature,
            "max_tokens": p.planner_max_tokens if planner else p.executor_max_tokens,
            "tools": [t["function"]["name"] for t in history.tools or ()],
            "messages": messages,
        }

    def _switch(self, log: ExecutionLog, old: str, new: str, reasons: tuple[str, ...]) -> None:
        self.stats["mode_switches"] += 1
        log.mode_switch(old, new, "; ".join(REASONS.get(r, r.replace("_", " ")) for r in reasons))

    # ------------------------------------------------------------------ run
    async def run(self, session: Session) -> ModeResult:
        p, v = self.params, self.variant
        memory = AgentMemory(p.compression_threshold, p.context_actions, p.loop_recovery_cooldown)
        state = TeamState(session.task, v, p.review_interval, memory)
        self.state = state
        log = ExecutionLog.in_directory(
            session.runlog.path,
            redact=session.redact_text if session.guard is not None else None,
            on_failure=session.runlog.fail,
        )
        self.log = log
        planner_history = self._history("planner", session.task)
        executor_history = self._history("executor", session.task)
        log.start()
        log.initialization(
            {
                "task": session.task,
                "variant": v.title,
                "roles": f"{v.planner_role} (text only) + {v.executor_role} (screenshot every turn)",
                "model": self.config.model.model,
                "endpoint": self.config.model.endpoint,
                "settle": self.config.agent.settle,
                **{
                    k: val
                    for k, val in p.as_dict().items()
                    if k not in ("variant", "variant_title")
                },
                "planner_tools": list(self.planner_specs),
                "executor_tools": list(self.executor_specs),
                f"{v.planner_role}_system_prompt": planner_history.messages[0]["content"],
                f"{v.executor_role}_system_prompt": executor_history.messages[0]["content"],
            }
        )
        detector = LoopDetector(p.loop_repeats)
        outcome = "error"
        answer = ""
        error: str | None = None
        try:
            first = session.start(role=v.executor_role)
            first.record["team"] = {"variant": v.name, "mode": state.mode_name, "initial": True}
            initial = await session.observe(first)
            log.screenshot(initial.screenshot)
            while True:
                number = session.steps + 1
                # One model request per turn: the bound is checked once, here.
                ended = session.step_limit()
                if ended is not None:
                    outcome, answer = ended.outcome, ended.answer
                    break
                before = state.mode_name
                switch = state.begin_turn(number)
                log.turn(number, state.mode_name)
                if switch.switched:
                    self._switch(log, before, state.mode_name, switch.reasons)
                if state.mode == "planner":
                    result = await self._planning_turn(session, state, planner_history, log)
                else:
                    result = await self._execution_turn(
                        session, state, executor_history, log, detector
                    )
                if result is not None:
                    outcome, answer = result.outcome, result.answer
                    break
        except asyncio.CancelledError:
            self._debrief(log, state, "interrupted", "", None)
            log.close()
            raise
        except DeskpilotError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.api_error("run", error)
            self._debrief(log, state, "error", "", error)
            log.close()
            raise
        self._debrief(log, state, outcome, answer, error)
        log.close()
        return ModeResult(outcome, answer, {"team": self._summary(state)})

    def _summary(self, state: TeamState) -> dict[str, Any]:
        return {
            **self.params.as_dict(),
            **self.stats,
            "turns": state.turn,
            "archives": len(state.memory.all_snapshots),
            "actions": len(state.memory.history),
            "active_actions": len(state.memory.active_history),
            "instructions": state.execution_instructions,
            "execution_log": self.log.path.name if self.log else None,
        }

    def _debrief(
        self, log: ExecutionLog, state: TeamState, outcome: str, answer: str, error: str | None
    ) -> None:
        values: dict[str, Any] = {
            "final_status": outcome,
            "total_turns": state.turn,
            "memory_archives": len(state.memory.all_snapshots),
            "actions_recorded": len(state.memory.history),
            **self.stats,
        }
        if answer:
            values["evidence" if outcome == "answered" else "last_answer"] = answer
        if error:
            values["error"] = error
        log.debrief(values, completed=outcome == "answered")

    # ------------------------------------------------------------------ planner
    async def _planning_turn(
        self, session: Session, state: TeamState, history: History, log: ExecutionLog
    ) -> ModeResult | None:
        self.stats["planner_turns"] += 1
        turn, completion = await self._ask_planner(session, state, history, log)
        team_record: TeamTurnRecord = {
            "variant": self.variant.name,
            "team_role": "planner",
            "mode": state.mode_name,
            "reasons": list(state.planning_reasons),
            "image": False,
        }
        turn.record["team"] = team_record
        with turn.timer.phase("parse"):
            plan, archive, refused = self._parse_planner_calls(completion)
        self._refuse_planner_calls(session, state, turn, log, refused)
        records: list[CallRecord] = []
        if archive is not None:
            records.append(self._archive(session, state, log, archive))
        self._auto_archive(state, log, team_record)
        before = state.mode_name
        if plan is not None:
            records.insert(0, self._apply_plan(session, state, log, plan, completion, before))
        elif not completion.tool_calls and completion.finish_reason in ("length", "max_tokens"):
            turn.record["ended_by"] = "truncated"
            return ModeResult(
                "truncated",
                strip_think(completion.content),
                {"finish_reason": completion.finish_reason},
            )
        else:
            ended = self._without_plan(state, turn, log, team_record, completion, refused, before)
            if ended is not None:
                return ended
        if records:
            first_call = records[0]
            turn.record["tool_call"] = {
                "id": first_call["id"],
                "name": first_call["name"],
                "arguments": first_call.get("arguments"),
            }
            turn.record["result"] = records[0]["result"]
            turn.record["team"]["calls"] = records
        log.state(
            turn=state.turn,
            mode=state.mode_name,
            active_history=len(state.memory.active_history),
            archives=len(state.memory.all_snapshots),
            instructions=len(state.execution_instructions),
        )
        await session.pause(turn, self.params.turn_delay)
        return None

    async def _ask_planner(
        self, session: Session, state: TeamState, history: History, log: ExecutionLog
    ) -> tuple[Turn, Completion]:
        """The planner's request: the rebuilt context as text, never an image."""
        p, v = self.params, self.variant
        history.clear(keep_system=True)
        history.add_user(state.planner_context())
        call_no = log.api_request(v.planner_role, self._request_for_log(history, "planner", None))
        turn, completion = await session.ask(
            history,
            role=v.planner_role,
            temperature=p.planner_temperature,
            max_tokens=p.planner_max_tokens,
        )
        log.api_response(call_no, v.planner_role, completion.as_record())
        return turn, completion

    def _refuse_planner_calls(
        self,
        session: Session,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        refused: list[tuple[ToolCall, ArgumentError]],
    ) -> None:
        for call, exc in refused:
            self.stats["bad_outputs"] += 1
            payload = err_payload(exc.kind, exc.message)
            session.reject_call(turn, call, payload)
            log.tool(
                call.name,
                call.arguments if call.arguments is not None else call.raw_arguments,
                f"REFUSED {exc.kind}: {exc.message}",
            )
            state.note(
                "planner",
                f"Your call {call.name or '<no name>'!r} was refused ({exc.kind}): {exc.message}",
            )

    def _archive(
        self, session: Session, state: TeamState, log: ExecutionLog, archive: ParsedCall
    ) -> CallRecord:
        """The planner's archive call applied to the memory."""
        args = cast(ArchiveArgs, archive.args)
        result = state.memory.apply_compression(args.summary, args.patterns, args.archived_turns)
        session.count(tool_calls=1, tool_errors=0 if result.ok else 1)
        payload = self._archive_payload(result)
        if not result.ok:
            self.stats["bad_outputs"] += 1
            state.note(
                "planner",
                f"{archive.name} archived nothing: {result.describe()}. Active turns are "
                f"{sorted({r.turn for r in state.memory.active_history})}.",
            )
        elif result.unknown_turns or result.already_archived:
            state.note("planner", f"{archive.name}: {result.describe()}.")
        log.tool(
            archive.name,
            archive.call.arguments,
            payload.get("result") or payload["error"]["message"],
        )
        return {
            "id": archive.call.id,
            "name": archive.name,
            "arguments": archive.call.arguments,
            "result": payload,
        }

    def _auto_archive(self, state: TeamState, log: ExecutionLog, team_record: TeamTurnRecord) -> None:
        """Still at the threshold after the planner's turn (it archived nothing, too
        little, or its call was refused): archive on its behalf, down to below the
        threshold, or every following turn would be another compression review."""
        if not state.memory.needs_compression:
            return
        auto = state.memory.auto_compress(_auto_keep(state.memory.compression_threshold))
        if auto is not None and auto.ok:
            self.stats["auto_archives"] += 1
            text = f"the {self.variant.planner_role} did not archive enough; archived automatically: {auto.describe()}"
            log.warning(text)
            team_record["auto_archive"] = list(auto.archived_turns)
            state.note(
                "planner",
                f"Memory was over the threshold, so turns {list(auto.archived_turns)} were archived automatically.",
            )

    def _apply_plan(
        self,
        session: Session,
        state: TeamState,
        log: ExecutionLog,
        plan: ParsedCall,
        completion: Completion,
        before: str,
    ) -> CallRecord:
        """The planner's new instructions: the executor takes over with them."""
        args_plan = cast(PlanArgs, plan.args)
        session.count(tool_calls=1)
        content = strip_think(completion.content)
        switch = state.set_plan(args_plan.instructions, content)
        payload = {
            "ok": True,
            "result": "instructions updated",
            "instructions": args_plan.instructions,
        }
        log.tool(plan.name, plan.call.arguments, "instructions updated")
        self._switch(log, before, state.mode_name, switch.reasons)
        return {
            "id": plan.call.id,
            "name": plan.name,
            "arguments": plan.call.arguments,
            "result": payload,
        }

    def _without_plan(
        self,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        team_record: TeamTurnRecord,
        completion: Completion,
        refused: list[tuple[ToolCall, ArgumentError]],
        before: str,
    ) -> ModeResult | None:
        """No valid plan call: keep the plan there is, or ask again (``no_plan`` after
        ``team.planner_attempts`` answers without one)."""
        p, v = self.params, self.variant
        kept = state.keep_plan()
        if not completion.tool_calls:
            self.stats["bad_outputs"] += 1
            log.warning(f"the {v.planner_role} answered without a tool call")
        if kept is not None:
            log.event(
                "PLAN KEPT",
                f"no new instructions; the {v.executor_role} continues with the current ones",
            )
            team_record["plan_kept"] = True
            self._switch(log, before, state.mode_name, kept.reasons)
            return None
        team_record["no_plan"] = state.planner_failures
        plan_tool = v.tool_name("plan")
        attempted = any(call.name == plan_tool for call, _ in refused)
        what = (
            f"had no valid {plan_tool} call (refused, see above)"
            if attempted
            else f"did not call {plan_tool}"
        )
        state.note(
            "planner",
            f"Your previous answer {what}. There is no plan yet: you MUST call "
            f"{plan_tool} with the first instruction for the {v.executor_role}.",
        )
        log.warning(
            f"no usable plan from the {v.planner_role} "
            f"({state.planner_failures}/{p.planner_attempts} attempts)"
        )
        if state.planner_failures >= p.planner_attempts:
            answer = f"the {v.planner_role} gave no plan in {state.planner_failures} attempts"
            turn.record["final"] = True
            turn.record["answer"] = answer
            return ModeResult("no_plan", answer)
        return None

    def _parse_planner_calls(
        self, completion: Completion
    ) -> tuple[ParsedCall | None, ParsedCall | None, list[tuple[ToolCall, ArgumentError]]]:
        plan: ParsedCall | None = None
        archive: ParsedCall | None = None
        refused: list[tuple[ToolCall, ArgumentError]] = []
        for call in completion.tool_calls:
            try:
                parsed = parse_call(call, self.planner_specs, other_role=self.executor_specs)
            except ArgumentError as exc:
                refused.append((call, exc))
                continue
            if parsed.kind == "plan" and plan is None:
                plan = parsed
            elif parsed.kind == "archive" and archive is None:
                archive = parsed
            else:
                refused.append(
                    (
                        call,
                        ArgumentError(
                            "too_many_tool_calls",
                            f"only one {parsed.name} call per answer is used; this one was ignored",
                        ),
                    )
                )
        return plan, archive, refused

    @staticmethod
    def _archive_payload(result: CompressionResult) -> dict[str, Any]:
        if not result.ok:
            return err_payload("unknown_turns", f"nothing archived: {result.describe()}")
        payload: dict[str, Any] = {
            "ok": True,
            "result": result.describe(),
            "archived_turns": list(result.archived_turns),
        }
        if result.unknown_turns:
            payload["unknown_turns"] = list(result.unknown_turns)
        if result.already_archived:
            payload["already_archived"] = list(result.already_archived)
        return payload

    # ------------------------------------------------------------------ executor
    async def _execution_turn(
        self,
        session: Session,
        state: TeamState,
        history: History,
        log: ExecutionLog,
        detector: LoopDetector,
    ) -> ModeResult | None:
        self.stats["executor_turns"] += 1
        turn, completion, screenshot = await self._ask_executor(session, state, history, log)
        response_text = strip_think(completion.content)
        team_record: TeamTurnRecord = {
            "variant": self.variant.name,
            "team_role": "executor",
            "mode": state.mode_name,
            "image": True,
            "screenshot": screenshot,
        }
        turn.record["team"] = team_record
        calls = completion.tool_calls
        if not calls and completion.finish_reason in ("length", "max_tokens"):
            # Cut at the token limit (a thinking model spent it on reasoning): the same
            # request would be cut again, turn after turn, until the step limit.
            turn.record["ended_by"] = "truncated"
            return ModeResult(
                "truncated", response_text, {"finish_reason": completion.finish_reason}
            )
        if not calls:
            await self._no_tool_call(session, state, turn, log, detector, response_text, screenshot)
            return None
        call = self._refuse_extra_calls(session, state, turn, log, calls)
        parsed, outcome, result_text = await self._run_executor_call(
            session, state, turn, log, call, screenshot or "", response_text
        )
        ended = self._after_executor_call(state, turn, log, team_record, parsed, outcome, result_text)
        if ended is not None:
            return ended
        changed = bool(outcome.payload.get("changed", False))
        await self._check_loop(
            session, state, turn, log, detector, action_signature(call, parsed), changed
        )
        await session.pause(turn, self.params.turn_delay)
        self._executor_state(log, state)
        return None

    async def _ask_executor(
        self, session: Session, state: TeamState, history: History, log: ExecutionLog
    ) -> tuple[Turn, Completion, str | None]:
        """The executor's request: the context text and exactly one screenshot."""
        p, v = self.params, self.variant
        previous = session.pending
        assert previous is not None  # session.start() opened turn 0
        obs = await session.observe(previous)
        history.clear(keep_system=True)
        session.show(previous, history, obs, text=state.executor_context(), force_image=True)
        log.screenshot(obs.screenshot)
        call_no = log.api_request(
            v.executor_role, self._request_for_log(history, "executor", obs.screenshot)
        )
        turn, completion = await session.ask(
            history,
            role=v.executor_role,
            temperature=p.executor_temperature,
            max_tokens=p.executor_max_tokens,
        )
        log.api_response(call_no, v.executor_role, completion.as_record())
        return turn, completion, obs.screenshot

    def _refuse_extra_calls(
        self, session: Session, state: TeamState, turn: Turn, log: ExecutionLog, calls: list[ToolCall]
    ) -> ToolCall:
        """The first call runs; every other one is refused as one too many."""
        call = calls[0]
        for extra in calls[1:]:
            self.stats["bad_outputs"] += 1
            message = (
                f"only ONE tool call per turn is allowed; {extra.name or 'this call'} was not run "
                f"({len(calls)} calls were sent, the first one ran)"
            )
            session.reject_call(turn, extra, err_payload("too_many_tool_calls", message))
            log.tool(extra.name, extra.arguments, f"REFUSED too_many_tool_calls: {message}")
        if len(calls) > 1:
            state.note(
                "executor",
                f"You sent {len(calls)} tool calls; only the first ({call.name}) ran. Call exactly ONE tool per turn.",
            )
        return call

    def _parsed(self, call: ToolCall, outcome: ToolOutcome) -> ParsedCall | None:
        """The call as its tool read it (the outcome's ``detail``: read once, by the tool);
        None when its arguments were refused. An unknown tool's message says which role
        owns it."""
        spec = self.executor_specs.get(call.name)
        if spec is not None and outcome.detail is not None:
            return ParsedCall(call, spec, outcome.detail)
        error = outcome.payload.get("error") or {}
        if error.get("type") == "unknown_tool":
            try:
                parse_call(call, self.executor_specs, other_role=self.planner_specs)
            except ArgumentError as exc:
                error["message"] = exc.message
        return None

    async def _run_executor_call(
        self,
        session: Session,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        call: ToolCall,
        screenshot: str,
        response_text: str,
    ) -> tuple[ParsedCall | None, ToolOutcome, str]:
        """Run the call the one path of every action; the memory and the log keep it."""
        outcome = await session.act(turn, call, self.tools)
        parsed = self._parsed(call, outcome)
        payload = outcome.payload
        if outcome.ok:
            result_text = str(payload.get("result") or "ok")
            if outcome.acted:
                result_text += " (screen changed)" if payload.get("changed") else " (no visible change)"
        else:
            self.stats["bad_outputs"] += 1
            err = payload.get("error") or {}
            result_text = f"ERROR {err.get('type')}: {err.get('message')}"
        record = MemoryEntry(
            turn.number,
            call.name or "<empty>",
            parsed.args if parsed is not None else call.arguments,
            result_text,
            screenshot,
            response_text,
            ok=outcome.ok,
        )
        state.memory.add_action(record)
        log.tool(
            call.name,
            call.arguments if call.arguments is not None else call.raw_arguments,
            result_text,
        )
        return parsed, outcome, result_text

    def _after_executor_call(
        self,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        team_record: TeamTurnRecord,
        parsed: ParsedCall | None,
        outcome: ToolOutcome,
        result_text: str,
    ) -> ModeResult | None:
        """What the call means for the team: an accepted completion ends the run; a
        refused one, a progress report or a refused call is noted for the next turns."""
        payload = outcome.payload
        if parsed is None:
            if not outcome.ok:
                state.note("executor", f"Your last call was refused: {result_text}")
            return None
        if outcome.ok and parsed.kind == "complete":
            evidence = cast(CompletionArgs, parsed.args).evidence
            turn.record["final"] = True
            turn.record["answer"] = evidence
            log.event("COMPLETION ACCEPTED", f"{len(evidence.strip())} characters of evidence")
            return ModeResult("answered", evidence)
        if not outcome.ok and payload.get("error", {}).get("type") == INSUFFICIENT_EVIDENCE:
            self.stats["refused_completions"] += 1
            log.warning(f"completion refused: {payload['error']['message']}")
            state.note("executor", payload["error"]["message"])
        if outcome.ok and parsed.kind == "progress":
            progress = cast(ProgressArgs, parsed.args)
            state.last_report = (progress.goal, progress.state, progress.evidence)
            if progress.state in DONE_STATUSES:
                state.request_review("goal_done")
            elif progress.state == "BLOCKED":
                state.request_review("goal_blocked")
            team_record["report"] = {"goal": progress.goal, "status": progress.state}
        return None

    @staticmethod
    def _executor_state(log: ExecutionLog, state: TeamState) -> None:
        """The STATE UPDATE section that ends every executor turn."""
        log.state(
            turn=state.turn,
            mode=state.mode_name,
            active_history=len(state.memory.active_history),
            archives=len(state.memory.all_snapshots),
            needs_review=state.needs_review,
        )

    async def _no_tool_call(
        self,
        session: Session,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        detector: LoopDetector,
        response_text: str,
        screenshot: str | None,
    ) -> None:
        """The executor answered with text only: a failed action, then the next turn."""
        self.stats["bad_outputs"] += 1
        message = "the answer had no tool call; call exactly ONE tool per turn"
        payload = err_payload("no_tool_call", message)
        turn.record["result"] = payload
        session.count(tool_errors=1)
        state.memory.add_action(
            MemoryEntry(
                turn.number,
                "(no tool call)",
                None,
                f"ERROR no_tool_call: {message}",
                screenshot or "",
                response_text,
                ok=False,
            )
        )
        log.warning(f"the {self.variant.executor_role} answered without a tool call")
        log.tool("", None, f"ERROR no_tool_call: {message}")
        state.note(
            "executor",
            "Your last answer had no tool call. Write the report, then call exactly ONE tool.",
        )
        await self._check_loop(
            session, state, turn, log, detector, action_signature(None, None), False
        )
        await session.pause(turn, self.params.turn_delay)
        self._executor_state(log, state)

    async def _check_loop(
        self,
        session: Session,
        state: TeamState,
        turn: Turn,
        log: ExecutionLog,
        detector: LoopDetector,
        signature: str,
        changed: bool,
    ) -> None:
        if not detector.note(signature, changed):
            return
        p = self.params
        self.stats["loops_detected"] += 1
        log.warning(
            f"LOOP DETECTED: {p.loop_repeats} identical actions without visible effect ({signature})"
        )
        state.request_review("loop_detected")
        team = turn.record["team"]
        team["loop_detected"] = signature
        if not p.loop_recovery:
            return
        if not state.memory.should_recover(turn.number):
            log.event(
                "LOOP RECOVERY SKIPPED",
                f"cooldown: last recovery at turn {state.memory.last_recovery_turn}",
            )
            team["recovery"] = "cooldown"
            return
        report = await run_recovery(session.ctx)
        state.memory.mark_recovery(turn.number)
        self.stats["recoveries"] += 1
        text = report.describe()
        log.event("LOOP RECOVERY", text)
        team["recovery"] = {
            "performed": report.performed,
            "denied": report.denied,
            "error": report.error,
        }
        state.memory.add_action(
            MemoryEntry(turn.number, "loop_recovery", None, text, "", "", ok=report.error is None)
        )
        state.note(
            "planner", f"The engine ran the loop recovery sequence at turn {turn.number}: {text}."
        )
        if report.performed:
            # The next executor screenshot must show the screen after the recovery.
            await session.recapture(turn)


# ---------------------------------------------------------------------- mode registration


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    # ``parser`` is the "team mode" argument group of ``deskpilot run``.
    parser.add_argument(
        "--variant",
        metavar="NAME",
        help="team variant: planner/executor (default; seed 003, alias 003) or commander/operator "
        "(seed 002, alias 002); one role name ('planner', 'commander') works too",
    )
    parser.add_argument(
        "--review-interval", type=int, metavar="N", help="planner review every N turns (5 / 7)"
    )
    parser.add_argument(
        "--compression-threshold",
        type=int,
        metavar="N",
        help="active actions that trigger compression (8 / 12)",
    )
    parser.add_argument(
        "--turn-delay",
        type=float,
        metavar="S",
        help="seconds to sleep after each turn (seeds: 1.5)",
    )
    parser.add_argument(
        "--loop-recovery",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="on a detected loop press ESC, click the Start-button corner, press ctrl+esc (seeds' recovery)",
    )


def _flags(args: argparse.Namespace) -> Mapping[str, Any]:
    return {
        "team.variant": getattr(args, "variant", None),
        "team.review_interval": getattr(args, "review_interval", None),
        "team.compression_threshold": getattr(args, "compression_threshold", None),
        "team.turn_delay": getattr(args, "turn_delay", None),
        "team.loop_recovery": getattr(args, "loop_recovery", None),
    }


MODE = ModeSpec(
    "team",
    "planner (text only) + executor (screenshots), memory compression (seeds 002/003)",
    TeamMode,
    sections={"team": TeamSettings},
    add_arguments=_add_arguments,
    flags=_flags,
)
