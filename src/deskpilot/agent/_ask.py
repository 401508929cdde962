"""Asking for the task at a prompt (seed 003 reads it with ``input()``)."""

from __future__ import annotations

import sys
from typing import TextIO

from deskpilot._errors import ConfigError

__all__ = ["ask_for_task"]


def ask_for_task(
    *, stdin: TextIO | None = None, stdout: TextIO | None = None, prompt: str = "Task: "
) -> str:
    """Read one line from a terminal; a clear :class:`ConfigError` when there is no
    terminal, the input ends (Ctrl+D) or the line is empty."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    how = 'give the task on the command line: deskpilot run --mode team "open the editor and ..."'
    if stdin is None or stdin.closed or not stdin.isatty():
        raise ConfigError(
            f"no task given and standard input is not a terminal to ask for one; {how}"
        )
    stdout.write(prompt)
    stdout.flush()
    try:
        line = stdin.readline()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"could not read the task from the terminal ({exc}); {how}") from None
    if line == "":
        stdout.write("\n")
        raise ConfigError(f"no task: the input ended before a task was typed; {how}")
    task = line.strip()
    if not task:
        raise ConfigError(f"no task provided (empty line); {how}")
    return task
