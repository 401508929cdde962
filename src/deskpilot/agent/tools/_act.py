"""The one path from an :data:`~deskpilot.actions.Action` to the desktop.

Every action the agent sends goes through :func:`act`: the tool calls of every tool set
(``execute_tool_call``, which ``Session.act`` and team's executor use), the stateless
protocol's actions, team's loop recovery and the MCP server. A tool only translates a
call into one typed ``Action`` (or none) plus its payload; it never touches the hands.

:func:`act` does, in this order:

1. an action *at the pointer* (``Click(None)``, ``Scroll(None)``, a ``Drag`` without a
   start) gets the pointer's position, read on the input thread: the policy checks, the
   hands are sent and the record keeps that one point (a click the policy allowed at one
   place cannot land at another);
2. the policy checks exactly that action (``ToolContext.acheck_policy``: async, a confirm
   question waits off the event loop); a refusal raises
   :class:`~deskpilot.errors.ActionDeniedError` before any input;
3. a stop (``ctx.stop``: Ctrl+C, SIGTERM, the kill switch, a cancelled call) that came
   while the policy decided, a confirm question waiting, ends it there: nothing is sent,
   :class:`~deskpilot.errors.RunInterrupted` is raised (a text already started stops
   between chunks instead);
4. the action is performed on the one input thread (``ToolContext.run_blocking``):
   :func:`deskpilot.input.perform`, except a :class:`~deskpilot.actions.TypeText`, which
   is typed in chunks of ``ToolContext.type_chunk`` characters with the stop flag checked
   between chunks (the policy saw the whole text, so a secret cannot pass in pieces);
5. it returns a :class:`Performed`: the action as sent (``to_record()`` is the turn
   record's ``"action"``) and, for a text, how many characters were typed.

:class:`~deskpilot.actions.Wait` and :class:`~deskpilot.actions.Zoom` send nothing: they
are returned as they are, unchecked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from deskpilot._errors import RunInterrupted
from deskpilot.actions import PASSIVE, Action, ActionRecord, Click, Drag, Scroll, TypeText
from deskpilot.agent.tools._core import ToolContext
from deskpilot.input import Hands, perform

__all__ = ["Performed", "act"]


@dataclass(frozen=True, slots=True)
class Performed:
    """What :func:`act` sent."""

    #: Exactly the action the policy allowed and the hands were sent (pointer resolved).
    action: Action
    #: For a :class:`TypeText`: the characters typed, fewer than the text's when a stop
    #: ended the typing between two chunks. None for every other action.
    typed: int | None = None

    @property
    def interrupted(self) -> bool:
        """A stop ended the typing before the whole text was typed."""
        return isinstance(self.action, TypeText) and self.typed is not None and self.typed < len(self.action.text)

    def to_record(self) -> ActionRecord:
        """The turn record's ``"action"``."""
        return self.action.to_record()


def _at_pointer(action: Action) -> bool:
    if isinstance(action, (Click, Scroll)):
        return action.point is None
    return isinstance(action, Drag) and action.start is None


def _placed(action: Action, where: tuple[int, int]) -> Action:
    if isinstance(action, Drag):
        return dataclasses.replace(action, start=where)
    if isinstance(action, (Click, Scroll)):
        return dataclasses.replace(action, point=where)
    return action


def _type_in_chunks(ctx: ToolContext, hands: Hands, text: str, pauses: bool) -> int:
    """Runs on the input thread: ``text`` in chunks, the stop flag checked between them."""
    size = max(1, ctx.type_chunk)
    typed = 0
    for start in range(0, len(text), size):
        if ctx.stop.is_set():
            break
        chunk = text[start : start + size]
        hands.type_text(chunk)
        typed += len(chunk)
    hands.sync()
    if pauses:
        ctx.pause(0.1)
    return typed


async def act(ctx: ToolContext, action: Action, *, hands: Hands | None = None, pauses: bool = True) -> Performed:
    """Check ``action`` with the run's policy, perform it on the input thread, return it as sent.

    ``hands``: other hands than ``ctx.hands`` (the stateless mode's dry run sends to a
    recorder). ``pauses``: the seeds' delays (``ctx.seed_delays``) around the action.
    Raises :class:`~deskpilot.errors.ActionDeniedError` when the policy refuses (nothing
    was sent), :class:`~deskpilot.errors.RunInterrupted` when the run is stopping (nothing
    was sent), and the input layer's errors when the OS refuses an event.
    """
    if isinstance(action, PASSIVE):
        return Performed(action)
    # A stopping run refuses before the policy is asked: the policy's refusal is a tool
    # result the model reads, and a run whose stop could not cancel its mode (the stop came
    # before the mode's task, or the cancellation was lost on the way) would go on turn
    # after turn with every action refused.
    if ctx.stop.is_set():
        raise RunInterrupted("input refused: the run is stopping", reason="stop")
    target = ctx.hands if hands is None else hands
    if _at_pointer(action):
        where = await ctx.run_blocking(target.position)
        action = _placed(action, (int(where[0]), int(where[1])))
    await ctx.acheck_policy(action)
    if ctx.stop.is_set():  # stopped while the policy was asked (a confirmation, say)
        raise RunInterrupted("input refused: the run is stopping", reason="stop")
    if isinstance(action, TypeText):
        text = action.text
        typed = await ctx.run_blocking(lambda: _type_in_chunks(ctx, target, text, pauses))
        return Performed(action, typed)
    sent = action
    pause = ctx.pause if pauses else None
    await ctx.run_blocking(lambda: perform(target, sent, pause=pause, stop=ctx.stop))
    return Performed(action)
