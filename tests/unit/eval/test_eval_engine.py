"""The attempt queue: order, retries at the front, the end once nothing runs, close()."""

from __future__ import annotations

import threading

from deskpilot.eval import Attempt, AttemptQueue


def test_a_retry_goes_to_the_front_and_the_queue_ends_when_nothing_runs() -> None:
    seen: list[tuple[str, int]] = []

    def on_result(attempt: Attempt, record: dict[str, object]) -> Attempt | None:
        seen.append((attempt.task, attempt.try_))
        if record.get("error_kind") and attempt.try_ < 2:
            return Attempt(attempt.task, attempt.attempt, attempt.try_ + 1, attempt.timeout)
        return None

    queue = AttemptQueue([Attempt("a", 1, 1, 9.0), Attempt("b", 1, 1, 9.0)], on_result)
    a = queue.take()
    assert a is not None and a.task == "a" and queue.running == 1
    queue.done(a, {"error_kind": "timeout"})
    retry = queue.take()
    assert retry == Attempt("a", 1, 2, 9.0)
    b = queue.take()
    assert b is not None and b.task == "b"
    # Empty, but two run: take() waits for them (one may come back as a retry).
    got: list[Attempt | None] = []
    waiter = threading.Thread(target=lambda: got.append(queue.take()))
    waiter.start()
    queue.done(retry, {"error_kind": None})
    waiter.join(0.2)
    assert waiter.is_alive()
    queue.done(b, {"error_kind": None})
    waiter.join(5)
    assert got == [None] and seen == [("a", 1), ("a", 2), ("b", 1)]


def test_close_ends_take_and_a_stopped_attempt_is_not_recorded() -> None:
    recorded: list[str] = []
    queue = AttemptQueue([Attempt("a", 1, 1, 1.0), Attempt("b", 1, 1, 1.0)],
                         lambda attempt, record: recorded.append(attempt.task))  # type: ignore[func-returns-value]
    a = queue.take()
    assert a is not None
    queue.close()
    assert queue.take() is None
    queue.done(a, None)
    assert recorded == [] and queue.running == 0


def test_take_without_blocking_answers_at_once_and_finished_says_when_nothing_will_come() -> None:
    # The Ray engine waits on its actors itself (ray.wait): it asks the queue without blocking.
    def retry_once(attempt: Attempt, record: dict[str, object]) -> Attempt | None:
        return Attempt(attempt.task, attempt.attempt, 2, attempt.timeout) if attempt.try_ == 1 else None

    queue = AttemptQueue([Attempt("a", 1, 1, 9.0)], retry_once)
    assert not queue.finished
    a = queue.take(block=False)
    assert a is not None
    # Nothing pending, one running: no wait, and not finished (it may come back as a retry).
    assert queue.take(block=False) is None and not queue.finished
    queue.done(a, {"error_kind": "actor_died"})
    assert not queue.finished
    retry = queue.take(block=False)
    assert retry == Attempt("a", 1, 2, 9.0)
    queue.done(retry, {"error_kind": None})
    assert queue.finished and queue.take(block=False) is None
    closed = AttemptQueue([Attempt("b", 1, 1, 9.0)], retry_once)
    closed.close()
    assert closed.finished and closed.take(block=False) is None
