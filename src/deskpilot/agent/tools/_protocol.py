"""How a tool set's calls travel in the chat: a reply -> calls, their results -> the history.

Every :class:`~deskpilot.agent.tools._core.ToolSet` has one :class:`CallProtocol`, so a
mode has one path whatever language the model speaks:

:class:`NativeCalls` (the default)
    OpenAI-style function calling: the request carries the tools' schemas, the calls are
    the reply's ``tool_calls`` (or a call block in the content, which the client already
    parsed into ``tool_calls``), each result goes back as a ``tool`` message, several calls
    in one reply run one per step unless the mode says otherwise, and a plain text answer
    is a final answer. A reply with no tool call whose text is written in a known model's
    own action language (UI-TARS's ``Action: click(...)``) is read in that language: those
    calls run through that language's own tool set (:func:`~._core.speaking_toolset`) and
    their results go back as text.
:class:`TextCalls`
    a model that writes its actions as text (UI-TARS's ``Action: click(...)``): no tools in
    the request, the calls are read from the content by the tool set's own parser, every
    call of a reply runs in order (the model's language has several actions per reply),
    the results go back as text in the next user message (there is no call id to answer),
    and the run ends only by the language's own ending action (``finished()``), never by
    text alone.

Each names the reminder the model gets after a reply with nothing to run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from deskpilot.agent.client._history import History
from deskpilot.agent.client._toolcalls import ToolCall

__all__ = ["NO_ACTION_REMINDER", "TEXT_LANGUAGES", "CallProtocol", "NativeCalls", "TextCalls", "TextParser"]

#: Reads the calls written in a reply's content (``new_id`` names them).
TextParser = Callable[[str, Callable[[], str]], "list[ToolCall]"]

NO_ACTION_REMINDER = (
    "Your last reply contained no tool call that could be run and no final answer. "
    "To act, call one of the tools (a native tool call). When the task is complete, "
    "reply with a short final answer in plain text and no tool call."
)


#: The ``ToolCall.source`` of calls read from a model's own text language, and the tool set
#: that speaks it.
TEXT_LANGUAGES = {"uitars": "uitars"}


def _as_text(results: Sequence[tuple[ToolCall, dict[str, Any]]]) -> str:
    if not results:
        return ""
    parts = [f"{call.name or 'action'}: {orjson.dumps(payload).decode()}" for call, payload in results]
    return "Result: " + "; ".join(parts)


def _native_text_calls(content: str, new_id: Callable[[], str]) -> list[ToolCall]:
    """Calls written in a known model's own text language (UI-TARS), if the text has any."""
    if "Action" not in content:
        return []
    from deskpilot.agent.tools._uitars import uitars_calls  # it builds on this module

    return uitars_calls(content, new_id)


class CallProtocol(Protocol):
    """What a mode needs to know about how calls travel (module doc)."""

    #: The request carries the tools' schemas.
    @property
    def sends_tools(self) -> bool: ...

    #: Every call of a reply runs (in order), even where the mode runs one per step.
    @property
    def runs_every_call(self) -> bool: ...

    #: A reply with text and no call may be the final answer.
    @property
    def ends_on_text(self) -> bool: ...

    #: What the model is told after a reply with nothing to run.
    @property
    def reminder(self) -> str: ...

    def read(self, content: str, tool_calls: Sequence[ToolCall], new_id: Callable[[], str]) -> tuple[list[ToolCall], bool]:
        """The reply's calls, and whether they were read from its text by this protocol."""
        ...

    def answer(self, history: History, results: Sequence[tuple[ToolCall, dict[str, Any]]]) -> str:
        """Give the model the results: added to ``history`` as the protocol wants, or
        returned as text for the next user message ("" when nothing is left to say)."""
        ...

    def read_text(self, content: str, new_id: Callable[[], str]) -> list[ToolCall]:
        """The calls written in ``content`` (none for a protocol that writes no text calls)."""
        ...


@dataclass(frozen=True, slots=True)
class NativeCalls:
    """OpenAI-style function calling (module doc)."""

    sends_tools: bool = True
    runs_every_call: bool = False
    ends_on_text: bool = True
    reminder: str = NO_ACTION_REMINDER

    def read(self, content: str, tool_calls: Sequence[ToolCall], new_id: Callable[[], str]) -> tuple[list[ToolCall], bool]:
        if tool_calls:
            return list(tool_calls), False
        # A model answering in its own trained text language (UI-TARS's ``Action:
        # click(...)``) under a tool set that calls natively: its actions run through that
        # language's tool set (Session.act), instead of the run ending with no action.
        calls = [call for call in _native_text_calls(content, new_id) if call.error is None]
        return calls, bool(calls)

    def answer(self, history: History, results: Sequence[tuple[ToolCall, dict[str, Any]]]) -> str:
        written = []
        for call, payload in results:
            if call.source in TEXT_LANGUAGES:
                written.append((call, payload))  # written as text: there is no call id to answer
            else:
                history.add_tool_result(call.id, payload, name=call.name or None)
        return _as_text(written)

    def read_text(self, content: str, new_id: Callable[[], str]) -> list[ToolCall]:
        return []


@dataclass(frozen=True, slots=True)
class TextCalls:
    """Calls written as text in the reply's content (module doc)."""

    parse: TextParser
    reminder: str
    sends_tools: bool = False
    runs_every_call: bool = True
    ends_on_text: bool = False

    def read(self, content: str, tool_calls: Sequence[ToolCall], new_id: Callable[[], str]) -> tuple[list[ToolCall], bool]:
        if tool_calls:  # a server that parsed them into tool calls after all
            return list(tool_calls), False
        calls = self.parse(content, new_id)
        return calls, bool(calls)

    def answer(self, history: History, results: Sequence[tuple[ToolCall, dict[str, Any]]]) -> str:
        return _as_text(results)

    def read_text(self, content: str, new_id: Callable[[], str]) -> list[ToolCall]:
        return self.parse(content, new_id)
