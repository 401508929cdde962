"""Server-sent events of a streamed chat completion, assembled into one message.

Two pure pieces, no I/O:

* :class:`SSEDecoder` turns arbitrary byte chunks (split anywhere, even inside a UTF-8
  sequence or a ``\\r\\n``) into event ``data`` strings, per the SSE spec: ``data:`` lines
  joined by ``\\n``, dispatched at a blank line; comments (``:``) and other fields ignored;
  a last event without its blank line is flushed by :meth:`SSEDecoder.close`.
* :class:`StreamAssembler` folds OpenAI ``chat.completion.chunk`` objects into the message a
  non-streamed response would have carried: ``delta.content`` and ``delta.reasoning_content``
  appended, ``delta.tool_calls[i]`` merged by ``index`` (id, name and argument fragments),
  ``finish_reason`` and ``usage`` kept. :meth:`StreamAssembler.feed` returns the tool calls
  that became *complete* with that event, so a caller can act on a call before the stream
  ends. A call is complete when its arguments decode to a JSON object (nothing valid can
  follow a closed object), when a later call starts, at ``finish_reason``, at
  ``data: [DONE]`` or at :meth:`StreamAssembler.finish`.

Garbage is survived, not fatal: an event that is not JSON, or not an object, is counted in
``bad_events`` and skipped. A chunk carrying ``{"error": ...}`` (llama.cpp and vLLM report
mid-stream failures that way) sets :attr:`StreamAssembler.error`.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["AssembledMessage", "SSEDecoder", "StreamAssembler", "sse_events"]

DONE = "[DONE]"


class SSEDecoder:
    """Incremental SSE parser: :meth:`feed` bytes, get complete events' data strings."""

    __slots__ = ("_data", "_decoder", "_event", "_has_data", "_partial", "_pending_cr")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # The unfinished last line, in pieces: joined once when its end arrives, so a
        # long line (or a run of whitespace) fed in many chunks costs linear time.
        self._partial: list[str] = []
        self._data: list[str] = []
        self._has_data = False
        self._pending_cr = False
        self._event = ""

    def feed(self, chunk: bytes) -> list[str]:
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._pending_cr:
            # A "\r" ended the previous chunk: a "\n" starting this one belongs to it.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        if text.endswith("\r"):
            self._pending_cr = True
        if "\n" not in text and "\r" not in text:
            self._partial.append(text)
            return []
        buffer = "".join([*self._partial, text])
        if "\r" in buffer:
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        self._partial = [lines.pop()]
        events: list[str] = []
        for line in lines:
            self._line(line, events)
        return events

    def close(self) -> list[str]:
        """End of stream: the last line and a last event without its blank line."""
        events: list[str] = []
        tail = "".join(self._partial) + self._decoder.decode(b"", final=True)
        self._partial = []
        if tail:
            self._line(tail, events)
        if self._has_data:
            events.append(self._dispatch())
        return events

    def _dispatch(self) -> str:
        data = "\n".join(self._data)
        self._data.clear()
        self._has_data = False
        event, self._event = self._event, ""
        return _as_error(data) if event == "error" else data

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._has_data:
                events.append(self._dispatch())
            else:
                self._event = ""
            return
        if line[0] == ":":
            return  # comment / keep-alive ping
        name, colon, value = line.partition(":")
        if not colon:
            return  # a field with no value: nothing we use
        if value.startswith(" "):
            value = value[1:]
        if name == "error":
            # llama.cpp's own field, not SSE: an event of its own, at once.
            events.append(_as_error(value))
            return
        if name == "event":
            self._event = value.strip()
            return
        if name != "data":
            return  # id:, retry: carry nothing a chat completion needs
        self._data.append(value)
        self._has_data = True


def _as_error(value: str) -> str:
    """An error event's data as a ``{"error": ...}`` chunk (the assembler's error form)."""
    try:
        decoded: Any = orjson.loads(value)
    except orjson.JSONDecodeError:
        decoded = value.strip() or "the server reported an error without a message"
    if isinstance(decoded, dict) and decoded.get("error"):
        return orjson.dumps(decoded).decode()
    return orjson.dumps({"error": decoded}).decode()


def sse_events(body: bytes) -> list[str]:
    """All event data strings of a complete SSE body (tests and log replay)."""
    decoder = SSEDecoder()
    return decoder.feed(body) + decoder.close()


@dataclass(slots=True)
class _PartialCall:
    index: int
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: str = ""
    complete: bool = False


@dataclass(slots=True)
class AssembledMessage:
    """What a stream added up to, shaped like a non-streamed response's parts."""

    content: str | None
    reasoning: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: dict[str, Any] | None
    done: bool
    chunks: int
    bad_events: int
    error: Any = None
    response_id: str | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        """``choices[0].message`` as a non-streamed response would carry it."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg

    def response(self) -> dict[str, Any]:
        """The equivalent non-streamed ``chat.completion`` object."""
        out: dict[str, Any] = {
            "id": self.response_id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": self.message(), "finish_reason": self.finish_reason}],
        }
        if self.usage is not None:
            out["usage"] = self.usage
        return out


class StreamAssembler:
    """Folds ``chat.completion.chunk`` events into one assistant message (choice 0)."""

    def __init__(self, *, new_id: Callable[[], str] | None = None) -> None:
        # Ids are given to id-less calls when they complete, so the call handed to an
        # early consumer and the one in the final message carry the same id.
        self._new_id = new_id
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._has_content = False
        self._calls: dict[int, _PartialCall] = {}
        self._last_index: int | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.chunks = 0
        self.bad_events = 0
        self.error: Any = None
        self.response_id: str | None = None
        self.model: str | None = None

    # -- feeding -----------------------------------------------------------------------
    def feed(self, data: str) -> list[dict[str, Any]]:
        """Fold one event's data; return the tool calls (OpenAI form) completed by it."""
        if self.done:
            return []
        stripped = data.strip()
        if stripped == DONE:
            self.done = True
            return self._complete_all()
        if not stripped:
            return []
        try:
            chunk = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            self.bad_events += 1
            return []
        if not isinstance(chunk, dict):
            self.bad_events += 1
            return []
        return self.feed_chunk(chunk)

    def feed_chunk(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """Fold one already-decoded chunk object."""
        self.chunks += 1
        if chunk.get("error"):
            self.error = chunk["error"]
            return []
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        if self.model is None and isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        completed: list[dict[str, Any]] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return completed
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is never requested; only choice 0 is assembled
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                # Some servers put a full message in the last chunk instead of a delta.
                message = choice.get("message")
                delta = message if isinstance(message, dict) else {}
            self._fold_delta(delta, completed)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
                completed.extend(self._complete_all())
        return completed

    def _fold_delta(self, delta: dict[str, Any], completed: list[dict[str, Any]]) -> None:
        content = delta.get("content")
        if isinstance(content, str):
            self._has_content = True
            if content:
                self._content.append(content)
        for key in ("reasoning_content", "reasoning"):
            reasoning = delta.get(key)
            if isinstance(reasoning, str) and reasoning:
                self._reasoning.append(reasoning)
                break
        fragments = delta.get("tool_calls")
        if not isinstance(fragments, list):
            return
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, dict):
                self.bad_events += 1
                continue
            index = fragment.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                index = self._infer_index(fragment, position)
            call = self._calls.get(index)
            if call is None:
                call = self._calls[index] = _PartialCall(index=index)
            if self._last_index is not None and self._last_index != index:
                # A new call started: every earlier one has all its fragments.
                for other in self._calls.values():
                    if other.index != index and not other.complete:
                        completed.extend(self._complete(other))
            self._last_index = index
            frag_id = fragment.get("id")
            if isinstance(frag_id, str) and frag_id:
                call.id = _merge_piece(call.id, frag_id)
            if isinstance(fragment.get("type"), str):
                call.type = fragment["type"]
            function = fragment.get("function")
            if not isinstance(function, dict):
                continue
            name = function.get("name")
            if isinstance(name, str) and name:
                call.name = _merge_piece(call.name, name)
            args = function.get("arguments")
            if isinstance(args, str):
                call.arguments += args
            elif isinstance(args, dict):
                # Ollama-style: the whole object at once.
                call.arguments = orjson.dumps(args).decode()
            if not call.complete and call.arguments.rstrip().endswith("}") and call.name:
                try:
                    value = orjson.loads(call.arguments)
                except orjson.JSONDecodeError:
                    value = None
                if isinstance(value, dict):
                    completed.extend(self._complete(call))

    def _infer_index(self, fragment: dict[str, Any], position: int) -> int:
        frag_id = fragment.get("id")
        if isinstance(frag_id, str) and frag_id:
            for call in self._calls.values():
                if call.id == frag_id:
                    return call.index
            return len(self._calls)
        if self._last_index is not None:
            return self._last_index
        return position

    def _complete(self, call: _PartialCall) -> list[dict[str, Any]]:
        if call.complete:
            return []
        call.complete = True
        if not call.id and self._new_id is not None:
            call.id = self._new_id()
        return [_openai_call(call)]

    def _complete_all(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index in sorted(self._calls):
            out.extend(self._complete(self._calls[index]))
        return out

    # -- result ------------------------------------------------------------------------
    def finish(self) -> AssembledMessage:
        """The assembled message (call once, after the last event)."""
        self._complete_all()
        content: str | None = "".join(self._content) if self._has_content else None
        reasoning = "".join(self._reasoning) if self._reasoning else None
        return AssembledMessage(
            content=content,
            reasoning=reasoning,
            tool_calls=[_openai_call(self._calls[i]) for i in sorted(self._calls)],
            finish_reason=self.finish_reason,
            usage=self.usage,
            done=self.done,
            chunks=self.chunks,
            bad_events=self.bad_events,
            error=self.error,
            response_id=self.response_id,
            model=self.model,
        )

    @property
    def started(self) -> bool:
        """Whether any content or tool call fragment has arrived."""
        return bool(self._content or self._calls or self._reasoning)


def _merge_piece(current: str, piece: str) -> str:
    """Append a fragment, but not a repetition of the whole value (servers that resend
    the id or name in every chunk)."""
    if not current:
        return piece
    if piece == current:
        return current
    return current + piece


def _openai_call(call: _PartialCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.id or None,
        "type": call.type or "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    return out
