"""Replay a recorded run without a model: an offline regression test of the harness.

A run directory (see :mod:`deskpilot.rundir._writer`) holds every answer the model gave
and every screenshot it was sent. :func:`replay_run` plays those answers back through
the same client, parser, tools, coordinate mapping and mode as the live run, with a
local server on 127.0.0.1 standing in for the model, and compares what the replay did
with what was recorded, turn by turn::

    from deskpilot.replay import ReplayOptions, format_result, replay_run
    result = replay_run("runs/20250101-120000")            # dry: recorded screens, no input
    print(format_result(result))
    assert result.ok, result.first_divergence

``input="real"`` re-executes the run on this desktop and compares each new screenshot
with the recorded one (:class:`FrameTolerance`), stopping at the first that differs too
much. :mod:`deskpilot.replay._compare` defines exactly which fields must be equal.
"""

from deskpilot._errors import RecordingError
from deskpilot.replay._compare import Divergence
from deskpilot.replay._frames import FrameTolerance, ScreenCheck, compare_frames
from deskpilot.replay._runner import ReplayError, ReplayOptions, ReplayResult, replay_run
from deskpilot.replay._screen import RecordedScreen
from deskpilot.replay._table import format_result
from deskpilot.rundir import Recording, load_recording

__all__ = [
    "Divergence",
    "FrameTolerance",
    "RecordedScreen",
    "Recording",
    "RecordingError",
    "ReplayError",
    "ReplayOptions",
    "ReplayResult",
    "ScreenCheck",
    "compare_frames",
    "format_result",
    "load_recording",
    "replay_run",
]
