"""Which of a Mutter stream's cursor updates is newer than a motion this process sent
(``deskpilot._wayland._mutter.newest_pointer_update``): a frame Mutter made before the
motion can arrive after it on a loaded machine, with the old position."""

from __future__ import annotations

import pytest

pytest.importorskip("jeepney")

from deskpilot._wayland._mutter import newest_pointer_update

MOVED = (10.0, (700, 500))  # sent at t=10 s to (700, 500)


def test_without_a_motion_sent_the_newest_update_counts() -> None:
    assert newest_pointer_update([(1.0, (5, 5)), (2.0, (6, 6))], None, 3.0) == (2.0, (6, 6))
    assert newest_pointer_update([], MOVED, 11.0) is None


def test_updates_older_than_the_motion_are_handed_back_for_the_caller_to_weigh() -> None:
    # The caller takes the newest of these and the motion: the motion wins.
    assert newest_pointer_update([(9.0, (301, 333))], MOVED, 10.1) == (9.0, (301, 333))


def test_a_stale_frame_arriving_after_the_motion_does_not_count() -> None:
    # Measured on a loaded machine: the position before the click came after it.
    assert newest_pointer_update([(9.0, (301, 333)), (10.05, (301, 333))], MOVED, 10.1) is None


def test_once_the_stream_showed_the_motion_later_updates_count() -> None:
    log = [(10.05, (301, 333)), (10.06, (701, 499)), (10.2, (0, 0))]  # caught up (within 2 px), then the user
    assert newest_pointer_update(log, MOVED, 10.3) == (10.2, (0, 0))
    assert newest_pointer_update(log[:2], MOVED, 10.3) == (10.06, (701, 499))


def test_a_move_mutter_coalesced_with_ours_counts_after_a_second() -> None:
    log = [(10.05, (0, 0))]  # the user's move, ours never shown on its own
    assert newest_pointer_update(log, MOVED, 10.5) is None
    assert newest_pointer_update(log, MOVED, 11.5) == (10.05, (0, 0))
