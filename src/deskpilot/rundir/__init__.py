"""The run directory: what one agent run leaves on disk, its one format.

The agent writes it (:class:`RunLog`: ``run.json``, ``turns.jsonl``, ``summary.json``,
screenshots; :class:`ExchangeLog`: ``exchange.jsonl``), replay and the report read it
(:func:`load_recording`). Files are append-only JSON lines that never end in a partial
line; the format is public and described in ``docs/run-directory.md``. File names are
defined once (:mod:`deskpilot.rundir._files`).
"""

# `from ... import name as name`: the room's internal interface (ARCHITECTURE.md, "Faces"),
# what other rooms of deskpilot import from here; not for users, so not in __all__.
from deskpilot.rundir._exchange import ExchangeLog
from deskpilot.rundir._files import (
    EXCHANGE_FILE,
    EXECUTION_LOG_FILE,
    RUN_FILE,
    STATELESS_FILE,
    SUMMARY_FILE,
    TURNS_FILE,
)
from deskpilot.rundir._reader import RecordedAnswer, Recording, decode_png, load_recording
from deskpilot.rundir._reader import image_digest_of_url as image_digest_of_url
from deskpilot.rundir._records import (
    ActionRecord,
    MappingRecord,
    ModelRecord,
    ObservationRecord,
    RunInfo,
    Summary,
    TurnRecord,
)
from deskpilot.rundir._records import CallRecord as CallRecord
from deskpilot.rundir._records import ModelTimingsRecord as ModelTimingsRecord
from deskpilot.rundir._records import ReplyRecord as ReplyRecord
from deskpilot.rundir._records import SettleRecord as SettleRecord
from deskpilot.rundir._records import TeamTurnRecord as TeamTurnRecord
from deskpilot.rundir._records import ToolCallRecord as ToolCallRecord
from deskpilot.rundir._writer import (
    FORMAT_VERSION,
    LineFile,
    RunLog,
    iter_turns,
    load_summary,
    validate_run_dir,
)
from deskpilot.rundir._writer import dumps_json as dumps_json

__all__ = [
    "EXCHANGE_FILE",
    "EXECUTION_LOG_FILE",
    "FORMAT_VERSION",
    "RUN_FILE",
    "STATELESS_FILE",
    "SUMMARY_FILE",
    "TURNS_FILE",
    "ActionRecord",
    "ExchangeLog",
    "LineFile",
    "MappingRecord",
    "ModelRecord",
    "ObservationRecord",
    "RecordedAnswer",
    "Recording",
    "RunInfo",
    "RunLog",
    "Summary",
    "TurnRecord",
    "decode_png",
    "iter_turns",
    "load_recording",
    "load_summary",
    "validate_run_dir",
]
