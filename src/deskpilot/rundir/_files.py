"""The file names of a run directory, defined once (docs/run-directory.md describes each).

The writer (:mod:`._writer`, :mod:`._exchange`, the team's execution log, the stateless
mode's ``stateless.json``) and the readers (:mod:`._reader`, replay, the report) name
files only through these constants.
"""

from __future__ import annotations

__all__ = [
    "EXCHANGE_FILE",
    "EXECUTION_LOG_FILE",
    "RUN_FILE",
    "STATELESS_FILE",
    "SUMMARY_FILE",
    "TURNS_FILE",
]

#: One JSON line per turn (and per stage in stateless mode), appended as the run goes.
TURNS_FILE = "turns.jsonl"
#: Written once at the start: the task, the mode, the resolved config and its sources.
RUN_FILE = "run.json"
#: Written at the end (also on Ctrl+C / SIGTERM): the outcome, totals and timings.
SUMMARY_FILE = "summary.json"
#: Every request and reply of the model server, images replaced by their sha256.
EXCHANGE_FILE = "exchange.jsonl"
#: The stateless mode's working area, monitor and overlay settings.
STATELESS_FILE = "stateless.json"
#: The team mode's human-readable execution log.
EXECUTION_LOG_FILE = "execution_log.txt"
