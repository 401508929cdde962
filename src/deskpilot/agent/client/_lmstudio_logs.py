"""Seed 001's LM Studio log extraction: copy the server-log lines written during a run.

LM Studio writes its server log to ``~/.lmstudio/server-logs/<YYYY-MM>/<YYYY-MM-DD>.<n>.log``
(older builds: ``~/.cache/lm-studio/server-logs``), one entry per line starting with a
timestamp such as ``[2025-01-07 12:34:56]`` or ``2025-01-07 12:34:56``; continuation
lines (pretty-printed JSON of a request) carry none and belong to the entry above.
After a run, the entries between its start and end go to ``lmstudio_raw.log`` in the run
directory, and a cleaned copy to ``lmstudio_raw_clean.log``: base64 images replaced by
``<sha256:HEX len:N>``, empty and brace-only lines dropped (seed 001's format).

Best effort: with no log folder nothing happens (``required=True`` -- the ``on``
setting -- records a note instead of skipping silently). Never raises.

The ``auto`` setting extracts only when the model endpoint is on this machine
(:func:`is_loopback_endpoint`: localhost, 127.x, ::1): the local log folder says nothing
about a server elsewhere, and lines of other clients' requests there are not this run's.
:func:`wants_lmstudio_logs` is that decision; ``export_lmstudio_logs(..., endpoint=...)``
applies it too.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "clean_lines",
    "export_lmstudio_logs",
    "find_log_dir",
    "is_loopback_endpoint",
    "select_entries",
    "wants_lmstudio_logs",
]

_STAMP = re.compile(r"^\[?(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?\]?")
_DATA_URL = re.compile(r"(data:[\w/+.-]+;base64,)([A-Za-z0-9+/=]{64,})")
_BRACES_ONLY = re.compile(r"^[\s{}\[\],]*$")


def is_loopback_endpoint(endpoint: str) -> bool:
    """Whether ``endpoint``'s host is this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    text = endpoint.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return False
    if not host:
        return False
    host = host.rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def wants_lmstudio_logs(setting: str, endpoint: str) -> bool:
    """``run.lmstudio_logs``: ``on`` always, ``off`` never, ``auto`` for a loopback endpoint."""
    if setting == "on":
        return True
    if setting == "auto":
        return is_loopback_endpoint(endpoint)
    return False


def find_log_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    if explicit:  # LMSTUDIO_LOG_DIR: that folder only
        candidates = [Path(explicit).expanduser()]
    else:
        home = Path.home()
        candidates = [
            home / ".lmstudio" / "server-logs",
            home / ".cache" / "lm-studio" / "server-logs",
        ]
    for path in candidates:
        if path.is_dir():
            return path
    return None


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    if not m:
        return None
    try:
        when = dt.datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    frac = float(f"0.{m.group(3)}") if m.group(3) else 0.0
    return when.timestamp() + frac  # LM Studio logs local time


def select_entries(
    lines: Iterable[str], since: float, until: float, *, slack: float = 1.0
) -> list[str]:
    """Lines of entries stamped within ``[since - slack, until + slack]`` (local time)."""
    out: list[str] = []
    keep = False
    for line in lines:
        stamp = _stamp(line)
        if stamp is not None:
            keep = since - slack <= stamp <= until + slack
        if keep:
            out.append(line)
    return out


def clean_lines(lines: Iterable[str]) -> list[str]:
    def summarize(m: re.Match[str]) -> str:
        payload = m.group(2)
        return f"{m.group(1)}<sha256:{hashlib.sha256(payload.encode()).hexdigest()} len:{len(payload)}>"

    out = []
    for line in lines:
        if _BRACES_ONLY.match(line):
            continue
        out.append(_DATA_URL.sub(summarize, line.rstrip("\n")) + "\n")
    return out


def export_lmstudio_logs(
    run_dir: Path,
    *,
    since: float,
    until: float,
    log_dir: str | os.PathLike[str] | None = None,
    required: bool = False,
    endpoint: str | None = None,
) -> list[Path]:
    """Write ``lmstudio_raw.log`` / ``lmstudio_raw_clean.log`` into ``run_dir``; returns them.

    With ``endpoint`` and not ``required`` (the ``auto`` setting), nothing is done unless
    the endpoint is on this machine (:func:`is_loopback_endpoint`).
    """
    if endpoint is not None and not required and not is_loopback_endpoint(endpoint):
        return []
    try:
        folder = find_log_dir(log_dir)
        if folder is None:
            if required:
                (run_dir / "lmstudio_logs.txt").write_text(
                    "LM Studio log extraction was requested but no server-log folder was found "
                    f"(looked at {log_dir or '~/.lmstudio/server-logs'}).\n"
                )
            return []
        cutoff = since - 86400
        files = sorted(
            (p for p in folder.rglob("*.log") if p.stat().st_mtime >= cutoff),
            key=lambda p: p.stat().st_mtime,
        )
        selected: list[str] = []
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as fh:
                selected.extend(select_entries(fh, since, until))
        if not selected:
            return []
        raw = run_dir / "lmstudio_raw.log"
        clean = run_dir / "lmstudio_raw_clean.log"
        raw.write_text(
            "".join(line if line.endswith("\n") else line + "\n" for line in selected),
            encoding="utf-8",
        )
        clean.write_text("".join(clean_lines(selected)), encoding="utf-8")
        return [raw, clean]
    except OSError:
        return []
