"""Evaluation at scale: task suites over isolated desktops (``deskpilot eval``).

A suite is a list of :class:`Task`\\ s (the built-in ``desktop`` suite, or a TOML file);
:func:`run_eval` runs each task as a session (its own Xvfb display, its app, one agent run
through the normal entry point, the task's checker on the app's state) on an
:class:`Engine` (:class:`LocalEngine`: ``--parallel N`` processes on this host;
:class:`RayEngine`: Ray actors over a cluster's nodes) and writes
``results.jsonl``, ``summary.json`` and ``report.html`` into its ``out`` directory.
``scripted=True`` plays each task's solution through the built-in model server;
:func:`merge_results` joins the results of a suite's shards (``run_eval(shard=(K, N))``).
Linux (Xvfb) only: on Windows it raises :class:`~deskpilot.errors.PlatformError`.
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.eval._driver import EvalOutcome, run_eval
from deskpilot.eval._driver import Progress as Progress
from deskpilot.eval._driver import check_platform as check_platform
from deskpilot.eval._driver import parse_shard as parse_shard
from deskpilot.eval._engine import Attempt, AttemptQueue, Engine, LocalEngine
from deskpilot.eval._ray import RayEngine
from deskpilot.eval._results import merge_results
from deskpilot.eval._session import run_session
from deskpilot.eval._task import SUITES, Step, Suite, Task, load_suite

__all__ = [
    "SUITES",
    "Attempt",
    "AttemptQueue",
    "Engine",
    "EvalOutcome",
    "LocalEngine",
    "RayEngine",
    "Step",
    "Suite",
    "Task",
    "load_suite",
    "merge_results",
    "run_eval",
    "run_session",
]
