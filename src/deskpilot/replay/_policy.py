"""The model of a replay: a test-server policy that answers from the recording, in order.

Request ``k`` gets the ``k``-th recorded answer, rendered by
:class:`deskpilot.testing.ModelServer` exactly as a server would send it (JSON or SSE,
as the replayed client asks), so the client's HTTP, SSE and tool-call parsing run for
real. Before answering it

* moves the recorded screen on (``on_answer(k)``: the frame the run captured after
  answer ``k`` is what the screen shows next), and
* with real input, checks the newest screenshot of the request against the recorded
  one (``check(k, request)``); a screen that differs too much stops the replay there.

When the recording has no more answers (or ``until`` is reached) the request is answered
``410 Gone`` with :data:`END_OF_RECORDING` in the message: the client does not retry a
4xx, so the run ends at once with that error, which the replay recognises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from deskpilot.rundir import RecordedAnswer
from deskpilot.testing import Fault, RecordedRequest, Reply

__all__ = ["END_OF_RECORDING", "SCREEN_STOP", "ReplayPolicy", "reply_for"]

END_OF_RECORDING = "deskpilot replay: end of the recording"
SCREEN_STOP = "deskpilot replay: the screen differs from the recording"
STOP_STATUS = 410


def reply_for(answer: RecordedAnswer) -> Reply:
    """A :class:`Reply` that renders to the recorded assistant message."""
    message = answer.message
    calls = message.get("tool_calls")
    content = message.get("content")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Reply(
        content=content if isinstance(content, str) else None,
        tool_calls=[dict(c) for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
        reasoning=reasoning if isinstance(reasoning, str) else None,
        finish_reason=answer.finish_reason,
        usage=answer.usage,
    )


class ReplayPolicy:
    """Answers the recorded replies in order (see the module docstring)."""

    def __init__(
        self,
        answers: Sequence[RecordedAnswer],
        *,
        until: int | None = None,
        on_answer: Callable[[int], None] | None = None,
        check: Callable[[int, RecordedRequest], str | None] | None = None,
    ) -> None:
        self.answers = list(answers)
        self.replies = [reply_for(a) for a in self.answers]
        self.until = until
        self.on_answer = on_answer
        self.check = check
        self.served = 0
        self.stopped: str | None = None  # why the replay was stopped early, if it was
        self.requested = 0
        self._lock = threading.Lock()

    def respond(self, request: RecordedRequest) -> Any:
        with self._lock:
            self.requested += 1
            number = self.requested
        if self.check is not None:
            problem = self.check(number, request)
            if problem is not None:
                self.stopped = problem
                return Fault.http(STOP_STATUS, f"{SCREEN_STOP}: {problem}")
        limit = len(self.replies) if self.until is None else min(self.until, len(self.replies))
        if number > limit:
            return Fault.http(STOP_STATUS, f"{END_OF_RECORDING} (request {number}, {limit} recorded answers replayed)")
        if self.on_answer is not None:
            self.on_answer(number)
        with self._lock:
            self.served = max(self.served, number)
        return self.replies[number - 1]
