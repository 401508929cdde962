"""The Ray engine: sessions as Ray actors, each owning one desktop on its node.

``deskpilot eval SUITE --engine ray [--ray-address ADDR]``. Each actor asks for one unit of
the custom resource ``deskpilot_desktop`` (a node started with ``ray start --resources
'{"deskpilot_desktop": N}'`` hosts N desktops at once) and is placed with the ``SPREAD``
strategy. An actor runs one attempt at a time exactly as the local engine's worker does
(:meth:`LocalEngine.run_one <deskpilot.eval._engine.LocalEngine.run_one>`: a session
process of its own, forked by a fork server that imported the agent once, in its own
process group, its timeout and stop), on its node.

Files: a session writes its run directory and its spec, result and log under a directory
of the actor's node (``TMPDIR/deskpilot-ray/TOKEN/slot-I``); the actor packs that attempt's
files into a tar archive and returns it with the record, and the driver unpacks it into
``--out`` and rewrites the record's paths, so ``--out`` looks exactly as the local
engine's (results.jsonl, summary.json, report.html, runs/, sessions/) and nothing relies
on a filesystem shared by the nodes. Each record gets ``node`` (the Ray node id) and
``host`` (the node's host name).

Faults: an actor whose process dies mid-attempt is restarted by Ray (``max_restarts``);
the attempt is recorded as the infrastructure error ``actor_died`` and retried by the
queue. The restarted actor first stops what its predecessor's session left running (the
session's process group, noted in a file of the node as it starts). An actor that died
more often than it may restart leaves the pool. Stop (Ctrl+C): every actor stops its
session (SIGTERM, SIGKILL to the group) and the actors are killed.

``ray`` is imported only here, when the engine runs (``pip install "deskpilot[ray]"``).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deskpilot._errors import ConfigError
from deskpilot.eval._engine import SESSION_ENV, Attempt, AttemptQueue, LocalEngine, stop_group

__all__ = ["DESKTOP_RESOURCE", "RayEngine", "forwarded_env", "pack_attempt", "unpack_attempt"]

Record = dict[str, Any]

#: The custom resource an actor asks one unit of: a node's count is how many desktops it hosts.
DESKTOP_RESOURCE = "deskpilot_desktop"

#: How long a restarting actor may take before it leaves the pool (a new worker process
#: and its fork server; a node under load takes seconds).
RESTART_WAIT_S = 120.0


def _stem(attempt: Attempt) -> str:
    return f"{attempt.task}-a{attempt.attempt}-t{attempt.try_}"


def pack_attempt(out: Path, attempt: Attempt) -> bytes:
    """The files one attempt wrote under ``out`` (its run directories and its session's
    spec, result and log) as an uncompressed tar archive (screenshots are PNG already)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        runs = out / "runs" / attempt.task / f"a{attempt.attempt}-t{attempt.try_}"
        if runs.is_dir():
            tar.add(runs, arcname=str(runs.relative_to(out)))
        sessions = out / "sessions"
        if sessions.is_dir():
            for path in sorted(sessions.glob(f"{_stem(attempt)}.*")):
                tar.add(path, arcname=str(path.relative_to(out)))
    return buffer.getvalue()


def unpack_attempt(data: bytes, out: Path, record: Record, node_out: str) -> Record:
    """Unpack an attempt's archive into ``out`` and point the record's paths (``run_dir``,
    ``report``) there instead of the node's directory ``node_out``."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(out, filter="data")
    node, target = Path(node_out), out.resolve()

    def moved(value: Any) -> Any:
        if not isinstance(value, str) or not value.startswith(str(node)):
            return value
        try:
            return str(target / Path(value).relative_to(node))
        except ValueError:  # a sibling that shares the prefix (/tmp/out2 for /tmp/out)
            return value

    return {k: moved(v) for k, v in record.items()}


class DesktopActor:
    """One desktop on one node: runs attempts one at a time (the body of the Ray actor).

    ``max_concurrency=2`` on the actor: :meth:`stop` runs while :meth:`run` waits on its
    session."""

    def __init__(self, slot: int, token: str, root: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.host = socket.gethostname()
        self.dir = Path(root or tempfile.gettempdir()) / "deskpilot-ray" / token / f"slot-{slot}"
        self.out = self.dir / "out"
        self._pgid_file = self.dir / "session.pgid"
        self._token = token
        self._reap()
        # A predecessor's files of the attempt it died in: the driver recorded that attempt
        # as actor_died and retries it under another name (its next try).
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._sessions = _NodeSessions(self._pgid_file)
        self._sessions.open(token, env)

    def _reap(self) -> None:
        """A restarted actor: its predecessor died with a session running (its own process
        group, so it outlived the actor): stop it and everything it started."""
        with contextlib.suppress(OSError, ValueError):
            pgid = int(self._pgid_file.read_text(encoding="ascii"))
            # Only if the group is still this run's session: its id may have been reused.
            if _group_of_run(pgid, self._token):
                stop_group(pgid, grace=2.0)
        self._pgid_file.unlink(missing_ok=True)

    def ready(self) -> str:
        return self.node

    def run(self, fields: Mapping[str, Any], spec: Mapping[str, Any]) -> Record:
        attempt = Attempt(str(fields["task"]), int(fields["attempt"]), int(fields["try_"]),
                          float(fields["timeout"]))
        record = self._sessions.run_one(attempt, {**spec, "out": str(self.out)}, self._stop)
        self._pgid_file.unlink(missing_ok=True)
        files = pack_attempt(self.out, attempt)
        # The driver has the files now: the node keeps nothing of a finished attempt.
        shutil.rmtree(self.out / "runs" / attempt.task / f"a{attempt.attempt}-t{attempt.try_}", ignore_errors=True)
        for path in (self.out / "sessions").glob(f"{_stem(attempt)}.*"):
            path.unlink(missing_ok=True)
        return {"record": record, "files": files, "node_out": str(self.out), "node": self.node, "host": self.host}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._sessions.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.dir.parent.rmdir()  # the run's directory on this node, once its last actor is done


def _group_of_run(pgid: int, token: str) -> bool:
    """Whether a process of group ``pgid`` carries this run's token in its environment
    (every session process does: :data:`~deskpilot.eval._engine.SESSION_ENV`)."""
    mark = f"{SESSION_ENV}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
            if int(stat.rpartition(")")[2].split()[2]) != pgid:
                continue
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


class _NodeSessions(LocalEngine):
    """The local engine's session runner, noting each session's process group on disk."""

    def __init__(self, pgid_file: Path) -> None:
        super().__init__(1)
        self._pgid_file = pgid_file

    def on_started(self, pgid: int) -> None:
        self._pgid_file.write_text(str(pgid), encoding="ascii")


@dataclass(slots=True)
class _Slot:
    actor: Any
    index: int
    deaths: int = 0
    died_at: float = 0.0


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What of the driver's environment the sessions on the nodes get (an actor's own is its
    raylet's): the agent's settings (``LMSTUDIO_*``, ``AGENT_*``, ``OPENAI_API_KEY``: the API
    key travels in memory to the actors, never into a file under ``--out``)."""
    return {k: v for k, v in environ.items()
            if k.startswith(("LMSTUDIO_", "AGENT_")) or k == "OPENAI_API_KEY"}


def _import_ray() -> Any:
    import ray  # the caller turns a missing install into `pip install "deskpilot[ray]"`

    return ray


class RayEngine:
    """Sessions as Ray actors (see the module's doc). ``address``: the cluster's head
    (``HOST:PORT``); None connects to ``RAY_ADDRESS`` or, without it, starts a local Ray
    with ``desktops`` (default: the CPU count) of the desktop resource. ``desktops``: how
    many actors (sessions at once); default every desktop the cluster has. An already
    initialised Ray (``ray.init`` by the caller) is used as it is and left running."""

    name = "ray"

    def __init__(self, address: str | None = None, *, desktops: int | None = None, max_restarts: int = 3,
                 node_dir: str | None = None) -> None:
        if desktops is not None and desktops < 1:
            raise ValueError("desktops must be at least 1")
        self.address = address
        self.desktops = desktops
        self.max_restarts = max_restarts
        self.node_dir = node_dir
        #: Sessions at once (the actors), known once connected; summary.json's ``parallel``.
        self.parallel = desktops or 1
        #: Seconds from the start of :meth:`run` until every actor was up (placed, its fork
        #: server started; connecting too, unless :meth:`connect` was called before).
        self.startup_s: float | None = None
        self._started_ray = False
        self._connected = False

    def connect(self) -> int:
        """Connect to (or start) Ray; the number of actors this run will have."""
        ray = _import_ray()
        if not ray.is_initialized():
            address = self.address or os.environ.get("RAY_ADDRESS") or None
            if address:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            else:
                count = self.desktops or os.cpu_count() or 1
                ray.init(resources={DESKTOP_RESOURCE: count}, include_dashboard=False, logging_level="ERROR",
                         log_to_driver=False)
            self._started_ray = True
        total = int(ray.cluster_resources().get(DESKTOP_RESOURCE, 0))
        if total < 1:
            self.shutdown()
            raise ConfigError(
                f"the Ray cluster has no {DESKTOP_RESOURCE!r} resource: start each node that hosts desktops with "
                f"ray start ... --resources '{{\"{DESKTOP_RESOURCE}\": N}}' (N desktops at once)", where="--engine ray")
        self.parallel = min(self.desktops, total) if self.desktops else total
        self._connected = True
        return self.parallel

    def shutdown(self) -> None:
        if self._started_ray:
            _import_ray().shutdown()
            self._started_ray = False
        self._connected = False

    def run(self, queue: AttemptQueue, spec: Mapping[str, Any], stop: threading.Event) -> None:
        started = time.monotonic()
        ray = _import_ray()
        try:
            if not self._connected or not ray.is_initialized():
                self.connect()
            token = str(spec.get("token", ""))
            remote = ray.remote(DesktopActor).options(
                resources={DESKTOP_RESOURCE: 1}, num_cpus=0, max_restarts=self.max_restarts, max_task_retries=0,
                max_concurrency=2, scheduling_strategy="SPREAD")
            env = forwarded_env(os.environ)
            slots = [_Slot(remote.remote(i, token, self.node_dir, env), i) for i in range(self.parallel)]
            try:
                if self._wait_ready(ray, slots, stop):
                    self.startup_s = round(time.monotonic() - started, 3)
                    self._loop(ray, slots, queue, spec, stop)
            finally:
                self._close(ray, slots)
        finally:
            self.shutdown()

    def _wait_ready(self, ray: Any, slots: list[_Slot], stop: threading.Event, timeout: float = 300.0) -> bool:
        """Every actor up (placed on a node with a free desktop, its fork server started);
        False when stopped first. An actor that cannot be placed in ``timeout`` is an error."""
        pending = [slot.actor.ready.remote() for slot in slots]
        deadline = time.monotonic() + timeout
        while pending:
            if stop.is_set():
                return False
            if time.monotonic() > deadline:
                raise ConfigError(f"{len(pending)} of {len(slots)} Ray actors found no node with a free "
                                  f"{DESKTOP_RESOURCE!r} within {timeout:g} s", where="--engine ray")
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            ray.get(ready)
        return True

    def _loop(self, ray: Any, slots: list[_Slot], queue: AttemptQueue, spec: Mapping[str, Any],
              stop: threading.Event) -> None:
        out = Path(spec["out"])
        idle = list(slots)
        running: dict[Any, tuple[_Slot, Attempt]] = {}
        # An actor that died is restarted by Ray; calls to it fail while it restarts, so it
        # takes attempts again only once a ``ready`` probe answers.
        probing: dict[Any, _Slot] = {}
        probe_later: list[tuple[float, _Slot]] = []
        while not stop.is_set():
            now = time.monotonic()
            for when, slot in [p for p in probe_later if p[0] <= now]:
                probe_later.remove((when, slot))
                probing[slot.actor.ready.remote()] = slot
            while idle:
                attempt = queue.take(block=False)
                if attempt is None:
                    break
                slot = idle.pop(0)
                running[slot.actor.run.remote(asdict(attempt), spec)] = (slot, attempt)
            if queue.finished or not (idle or running or probing or probe_later):
                return  # every attempt settled, or no actor is left to run the rest
            # Results as they arrive, whichever node they come from.
            ready, _ = ray.wait([*running, *probing], num_returns=1, timeout=0.2)
            for ref in ready:
                if ref in probing:
                    slot = probing.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.ActorUnavailableError:  # still restarting
                        if time.monotonic() < slot.died_at + RESTART_WAIT_S:
                            probe_later.append((time.monotonic() + 0.5, slot))
                    except ray.exceptions.RayError:
                        pass  # dead for good (out of restarts, its node gone): it leaves the pool
                    else:
                        idle.append(slot)
                    continue
                slot, attempt = running.pop(ref)
                record = self._collect(ray, ref, attempt, slot, out)
                if record is not None and record.get("error_kind") == "actor_died":
                    if slot.deaths <= self.max_restarts:
                        probing[slot.actor.ready.remote()] = slot
                else:
                    idle.append(slot)
                queue.done(attempt, record)
        # Stopped: every actor stops its session; what ends in time is recorded as usual.
        for slot, _attempt in running.values():
            with contextlib.suppress(Exception):
                slot.actor.stop.remote()
        deadline = time.monotonic() + 15.0
        while running and time.monotonic() < deadline:
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                slot, attempt = running.pop(ref)
                record = self._collect(ray, ref, attempt, slot, out)
                stopped = record is None or record.get("error_kind") == "actor_died"
                queue.done(attempt, None if stopped else record)
        for _slot, attempt in running.values():
            queue.done(attempt, None)

    def _collect(self, ray: Any, ref: Any, attempt: Attempt, slot: _Slot, out: Path) -> Record | None:
        base: Record = {"task": attempt.task, "attempt": attempt.attempt, "try": attempt.try_, "success": False,
                        "outcome": None, "steps": 0, "seconds": 0.0, "run_dir": None, "node": None, "host": None}
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            # The actor's process died (killed, out of memory, its node lost): Ray restarts it.
            slot.deaths += 1
            slot.died_at = time.monotonic()
            return {**base, "error_kind": "actor_died", "error": f"the Ray actor died during the attempt: {exc}"[:600]}
        except ray.exceptions.RayError as exc:
            return {**base, "error_kind": "actor_error", "error": f"the Ray actor failed: {exc}"[:600]}
        record: Record | None = answer["record"]
        if record is None:
            return None  # stopped
        record = unpack_attempt(answer["files"], out, record, answer["node_out"])
        record.update(node=answer["node"], host=answer["host"])
        return record

    def _close(self, ray: Any, slots: list[_Slot], timeout: float = 20.0) -> None:
        """Every actor closes (its fork server, its directory on the node), then is killed.
        An actor still restarting after a death answers "unavailable": asked again until
        it is back (it cleans up what its predecessor left) or ``timeout`` runs out."""
        closing = {slot.actor.close.remote(): slot for slot in slots}
        deadline = time.monotonic() + timeout
        while closing and time.monotonic() < deadline:
            ready, _ = ray.wait(list(closing), num_returns=1, timeout=0.5)
            for ref in ready:
                slot = closing.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.ActorUnavailableError:
                    time.sleep(0.2)
                    closing[slot.actor.close.remote()] = slot
                except ray.exceptions.RayError:
                    pass  # dead for good: nothing of it to close
        for slot in slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)
