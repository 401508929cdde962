"""The input record: what each input controller on a display holds, kept on the display.

A controller that is SIGKILLed cannot release its keys and buttons nor give back the
spare keycodes it borrowed; a second controller on the same display must not remap
keycodes the first one is typing with. Both need one shared place that outlives the
process, and the X server is the one thing every controller of a display shares: each
controller keeps a property on the root window, named ``_DESKPILOT_INPUT <owner>``
(type STRING, JSON)::

    {"v": 1, "host": ..., "pid": ..., "start": ..., "keys": [keycode, ...],
     "buttons": [1, ...], "borrowed": {"<keycode>": keysym, ...}}

``start`` is the process's start time (``/proc/<pid>/stat`` field 22), so a pid the
kernel has handed to a new process does not keep a dead owner alive. An owner writes
only its own property, so recording a press is one asynchronous request (no round
trip, no grab). Claiming spare keycodes reads every owner's property under
``XGrabServer`` (:meth:`InputRecord.transaction`): no other client's request runs in
between, so two controllers never claim the same keycode. An owner whose process is
gone (or a zombie) on this host is *dead*; whoever opens the next transaction
reclaims what it held (see the XTest backend) and deletes its property. Owners on
another host (a remote display) are never judged dead: their pids mean nothing here.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from deskpilot._x11._display import XDisplay
from deskpilot._x11._lib import library

__all__ = [
    "ATOM_PREFIX",
    "InputRecord",
    "Owner",
    "OwnerEntry",
    "process_alive",
    "process_exiting",
    "process_start_time",
    "reclaim_dead_owners",
    "release_dead_owners",
]

ATOM_PREFIX = "_DESKPILOT_INPUT "
_XA_STRING = 31
_PROP_MODE_REPLACE = 0
_MAX_LONGS = 1 << 20  # 4 MiB: far beyond any real record; a bigger one is treated as garbage

_counter = itertools.count(1)


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot, or None when it is not a
    running process (gone, or a zombie whose parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); the start time is field 22.
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


#: ``PF_EXITING`` (include/linux/sched.h) in ``/proc/<pid>/stat``'s flags (field 9): set
#: as the process starts to exit, before its memory, files and zombie state.
_PF_EXITING = 0x4


def process_exiting(pid: int) -> bool:
    """Whether ``pid`` is exiting or gone (Linux: its main thread has PF_EXITING set,
    which happens first thing when a SIGKILL is acted on)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return True
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); the flags are field 9.
    if len(fields) < 7 or fields[0] in ("Z", "X"):
        return True
    try:
        return bool(int(fields[6]) & _PF_EXITING)
    except ValueError:
        return False


def process_start_time(pid: int) -> str | None:
    """The start time of ``pid`` (what an :class:`Owner` records), or None when it is
    not a running process."""
    return _start_time(pid)


def process_alive(host: str, pid: int, start: str | None) -> bool:
    """Whether the owner process (``host``, ``pid``, ``start``) still runs."""
    if host != socket.gethostname():
        return True  # another machine's process: cannot be checked from here
    if os.path.isdir("/proc"):
        now = _start_time(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class Owner:
    """The identity one controller records itself under."""

    host: str
    pid: int
    start: str | None
    key: str

    @classmethod
    def current(cls) -> Owner:
        host = socket.gethostname()
        pid = os.getpid()
        start = _start_time(pid)
        return cls(host, pid, start, f"{host}/{pid}/{start}/{next(_counter)}")


@dataclass(slots=True)
class OwnerEntry:
    """One owner's line of the record."""

    host: str
    pid: int
    start: str | None
    keys: set[int] = field(default_factory=set)
    buttons: set[int] = field(default_factory=set)
    borrowed: dict[int, int] = field(default_factory=dict)  # keycode -> keysym

    @classmethod
    def parse(cls, raw: Any) -> OwnerEntry | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(
                str(raw["host"]),
                int(raw["pid"]),
                None if raw.get("start") is None else str(raw["start"]),
                {int(k) for k in raw.get("keys", ())},
                {int(b) for b in raw.get("buttons", ())},
                {int(k): int(v) for k, v in dict(raw.get("borrowed", {})).items()},
            )
        except (KeyError, TypeError, ValueError):
            return None

    def dump(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "start": self.start,
            "keys": sorted(self.keys),
            "buttons": sorted(self.buttons),
            "borrowed": {str(k): v for k, v in sorted(self.borrowed.items())},
        }

    def alive(self) -> bool:
        return process_alive(self.host, self.pid, self.start)

    def empty(self) -> bool:
        return not (self.keys or self.buttons or self.borrowed)


class InputRecord:
    """Read and change the owners' properties on ``display``'s root window."""

    def __init__(self, display: XDisplay, owner: Owner) -> None:
        self.display = display
        self.owner = owner
        self.atom = self._intern(owner.key)
        self._names: dict[int, str | None] = {
            self.atom: owner.key
        }  # atom -> owner key (None: not ours)
        self._written: bytes | None = None
        self._atoms: dict[str, int] = {}  # owner key -> atom, as of the last read

    def _intern(self, key: str) -> int:
        d = self.display
        return int(d.x11.XInternAtom(d.handle(), (ATOM_PREFIX + key).encode("utf-8", "replace"), 0))

    def _owner_atoms(self) -> dict[int, str]:
        """atom -> owner key of every owner property on the root window (one round
        trip, plus one for names never seen before)."""
        d = self.display
        count = ctypes.c_int()
        atoms = d.x11.XListProperties(d.handle(), d.root, ctypes.byref(count))
        if not atoms:
            return {}
        try:
            listed = [int(atoms[i]) for i in range(count.value)]
        finally:
            d.x11.XFree(atoms)
        unknown = [a for a in listed if a not in self._names]
        if unknown:
            array = (ctypes.c_ulong * len(unknown))(*unknown)
            names = (ctypes.c_void_p * len(unknown))()
            if d.x11.XGetAtomNames(d.handle(), array, len(unknown), names):
                for atom, name in zip(unknown, names, strict=True):
                    if not name:
                        continue
                    text = ctypes.string_at(name).decode("utf-8", "replace")
                    d.x11.XFree(name)
                    self._names[atom] = (
                        text[len(ATOM_PREFIX) :] if text.startswith(ATOM_PREFIX) else None
                    )
        return {a: k for a in listed if (k := self._names.get(a)) is not None}

    def _read(self, atom: int) -> OwnerEntry | None:
        d = self.display
        actual_type, actual_format = ctypes.c_ulong(), ctypes.c_int()
        count, after = ctypes.c_ulong(), ctypes.c_ulong()
        data = ctypes.POINTER(ctypes.c_ubyte)()
        status = d.x11.XGetWindowProperty(
            d.handle(),
            d.root,
            atom,
            0,
            _MAX_LONGS,
            0,
            _XA_STRING,
            ctypes.byref(actual_type),
            ctypes.byref(actual_format),
            ctypes.byref(count),
            ctypes.byref(after),
            ctypes.byref(data),
        )
        if status != 0 or not data:
            return None
        try:
            if actual_format.value != 8:
                return None
            raw = ctypes.string_at(data, count.value)
        finally:
            d.x11.XFree(data)
        try:
            return OwnerEntry.parse(orjson.loads(raw))
        except orjson.JSONDecodeError:
            return None

    def read(self) -> dict[str, OwnerEntry]:
        """Every owner now recorded. A garbled property reads as an owner holding
        nothing, found dead or alive like any other (so it gets cleaned up)."""
        out: dict[str, OwnerEntry] = {}
        self._atoms = {key: atom for atom, key in self._owner_atoms().items()}
        for key, atom in self._atoms.items():
            entry = self._read(atom)
            if entry is None:
                host, _, rest = key.partition("/")
                pid = rest.partition("/")[0]
                entry = OwnerEntry(host, int(pid) if pid.isdigit() else 0, None)
            out[key] = entry
        return out

    def publish(self, entry: OwnerEntry) -> None:
        """Write this owner's property (asynchronous: no round trip, no grab)."""
        d = self.display
        raw = b"" if entry.empty() else orjson.dumps({"v": 1, **entry.dump()})
        if raw == self._written:
            return
        if raw:
            buf = ctypes.create_string_buffer(raw, len(raw))
            d.x11.XChangeProperty(
                d.handle(), d.root, self.atom, _XA_STRING, 8, _PROP_MODE_REPLACE, buf, len(raw)
            )
        else:
            d.x11.XDeleteProperty(d.handle(), d.root, self.atom)
        self._written = raw

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, OwnerEntry]]:
        """Read every owner under a server grab and yield them; owners popped from the
        dict have their property deleted, this owner's entry is published.

        The grab is released whatever happens (a killed process loses its connection,
        which releases the grab too); nothing is written when the block raises."""
        d = self.display
        d.x11.XGrabServer(d.handle())
        try:
            owners = self.read()
            keys = set(owners)
            yield owners
            for key in keys - set(owners):
                if key != self.owner.key:
                    d.x11.XDeleteProperty(d.handle(), d.root, self._atoms[key])
            mine = owners.get(self.owner.key)
            self.publish(
                mine
                if mine is not None
                else OwnerEntry(self.owner.host, self.owner.pid, self.owner.start)
            )
        finally:
            if not d.closed:
                d.x11.XUngrabServer(d.handle())
                d.x11.XFlush(d.handle())


def reclaim_dead_owners(
    display: XDisplay,
    owners: dict[str, OwnerEntry],
    *,
    me: str | None = None,
    keys: Iterable[int] = (),
    buttons: Iterable[int] = (),
    borrowed: Iterable[int] = (),
    keycodes: tuple[int, int] = (9, 255),
    ending: Owner | None = None,
) -> list[OwnerEntry]:
    """Release the keys and buttons that dead owners of ``owners`` held and restore the
    keycodes they borrowed; pop them from ``owners`` (so the transaction deletes their
    properties) and return them. Call inside :meth:`InputRecord.transaction`: nobody
    else changes the keymap meanwhile.

    Only what an owner recorded is touched, and nothing a live owner (``me``, holding
    ``keys``, ``buttons`` and ``borrowed``, or another one in the record) holds. The
    events go through XTest, whose device is not the user's keyboard or mouse: releasing
    a key the XTest device does not hold is dropped by the server, so a key the user
    holds on a real keyboard is never let go. ``ending``: a process known to be exiting
    (the watchdog's parent): its owners count as dead before the kernel says so."""

    def gone(entry: OwnerEntry) -> bool:
        if ending is not None and (entry.host, entry.pid, entry.start) == (ending.host, ending.pid, ending.start):
            return True
        return not entry.alive()

    dead = [k for k, e in owners.items() if k != me and gone(e)]
    if not dead:
        return []
    xtst = library("Xtst")
    live = [e for k, e in owners.items() if k not in dead]
    live_keys = {kc for e in live for kc in e.keys} | set(keys)
    live_buttons = {b for e in live for b in e.buttons} | set(buttons)
    live_borrowed = {kc for e in live for kc in e.borrowed} | set(borrowed)
    low, high = keycodes
    handle = display.handle()
    found: list[OwnerEntry] = []
    for key in dead:
        entry = owners.pop(key)
        found.append(entry)
        # Releasing a key the XTest device does not hold is dropped by the server,
        # so a stale entry costs nothing; keys a live owner holds are left alone.
        for kc in sorted((entry.keys | set(entry.borrowed)) - live_keys):
            if low <= kc <= high:
                xtst.XTestFakeKeyEvent(handle, kc, 0, 0)
        for button in sorted(entry.buttons - live_buttons):
            if 1 <= button <= 255:
                xtst.XTestFakeButtonEvent(handle, button, 0, 0)
        for kc, keysym in entry.borrowed.items():
            # Only what it left behind: a keycode another client mapped since is not ours to clear.
            if kc in live_borrowed or not low <= kc <= high:
                continue
            if _first_keysym(display, kc) == keysym:
                pair = (ctypes.c_ulong * 2)(0, 0)
                display.x11.XChangeKeyboardMapping(handle, kc, 2, pair, 1)
    return found


def _first_keysym(display: XDisplay, keycode: int) -> int:
    per = ctypes.c_int()
    syms = display.x11.XGetKeyboardMapping(display.handle(), keycode, 1, ctypes.byref(per))
    if not syms:
        return 0
    try:
        return int(syms[0]) if per.value else 0
    finally:
        display.x11.XFree(syms)


def release_dead_owners(display: XDisplay, ending: Owner | None = None) -> list[OwnerEntry]:
    """One record transaction on ``display``: release what every dead owner (and every
    owner of the ``ending`` process) held (see :func:`reclaim_dead_owners`), delete their
    properties; returns their entries."""
    lo, hi = ctypes.c_int(), ctypes.c_int()
    display.x11.XDisplayKeycodes(display.handle(), ctypes.byref(lo), ctypes.byref(hi))
    record = InputRecord(display, Owner.current())
    with record.transaction() as owners:
        released = reclaim_dead_owners(
            display, owners, me=record.owner.key, keycodes=(max(lo.value, 9), hi.value), ending=ending
        )
    display.sync("reclaim")
    return released
