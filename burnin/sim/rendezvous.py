"""How the processes of one job started across simulated nodes learn each other, standard library only.

A real job's processes meet through their launcher: nccl-tests' ranks through MPI (rank 0 gathers
every rank's ``#  Rank`` line), torchrun's agents through their rendezvous store on the master. The
simulated tools link no MPI, so they meet in a folder that every node of the rack sees, as a
cluster's shared file system: ``$BURNIN_SIM_SHARED_DIR`` (the lab sets it on every node), else the
system's temporary folder (enough where every node is a process of one host). Each process writes one
record (atomically: a reader sees it whole or not at all) into a folder named after a key that only
this job has, reads every other's and says so; the process with index 0 goes on once every other
has read them all (:func:`meet`, a barrier, as a collective init is). Under MPI (:func:`finish`,
:func:`wait_done`) index 0 also says when the job is over and the others wait for that, as MPI ranks
end together; the folder goes once all have left.

A torchrun job has no job id that every node knows (each node's agent gets the master's address and
port), so there one process, the master agent, holds a *store* (:func:`open_store`), as torchrun's
master holds its TCP store: a new generation per job, alive while its holder runs; the others report
into the live generation (:func:`join_store`), so what a killed earlier job left is never read.

Simulated nodes carry a copy as ``out/fabric/rendezvous.py`` and ``out/megatron/rendezvous.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

SHARED_ENV = "BURNIN_SIM_SHARED_DIR"
DONE = "done"
STORE = "store.json"
POLL_S = 0.05
LEAVE_WAIT_S = 60.0
"""Index 0 removes an MPI job's folder once the others have left, or after this long (a failure limit)."""


class Missing(Exception):
    """Some process never reported within the wait (its node failed to start it), or the store went."""


def folder(kind: str, *key: object) -> str:
    """The job's folder: ``<shared>/burnin-sim-<kind>/<digest of key>``, created if needed."""
    root = os.environ.get(SHARED_ENV) or tempfile.gettempdir()
    digest = hashlib.sha256("|".join(str(k) for k in key).encode()).hexdigest()[:20]
    path = os.path.join(root, f"burnin-sim-{kind}", digest)
    os.makedirs(path, exist_ok=True)
    return path


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _wait_for(paths: list[str], wait_s: float, what: str, abort: Callable[[], str | None] | None = None
              ) -> list[dict[str, Any]]:
    """The records at ``paths``, once all exist; :class:`Missing` after ``wait_s`` or when ``abort()`` says why."""
    deadline = time.monotonic() + wait_s
    records: dict[int, dict[str, Any]] = {}
    while True:
        for index, path in enumerate(paths):
            if index not in records:
                record = _read(path)
                if record is not None:
                    records[index] = record
        if len(records) == len(paths):
            return [records[i] for i in range(len(paths))]
        why = abort() if abort is not None else None
        if why:
            raise Missing(why)
        if time.monotonic() > deadline:
            absent = min(set(range(len(paths))) - set(records))
            raise Missing(f"{what} {absent} of {len(paths)} never reported within {wait_s:g} s")
        time.sleep(POLL_S)


def meet(where: str, index: int, count: int, record: dict[str, Any], wait_s: float, *, prefix: str = "",
         abort: Callable[[], str | None] | None = None) -> list[dict[str, Any]]:
    """Report ``record`` as process ``index`` of ``count`` and read everyone's, by index (:class:`Missing` after
    ``wait_s``, or when ``abort()`` gives a reason); index 0 returns once every other process has read them too."""
    _write(os.path.join(where, f"{prefix}{index}.json"), record)
    records = _wait_for([os.path.join(where, f"{prefix}{i}.json") for i in range(count)], wait_s, "process",
                        abort)
    _write(os.path.join(where, f"{prefix}read-{index}"), {})
    if index == 0:
        _wait_for([os.path.join(where, f"{prefix}read-{i}") for i in range(1, count)], wait_s, "process")
    return records


def finish(where: str, count: int, status: int) -> None:
    """Index 0 of an MPI job: the job is over with ``status``; the folder goes once the others have left."""
    _write(os.path.join(where, DONE), {"status": status})
    deadline = time.monotonic() + LEAVE_WAIT_S
    others = [os.path.join(where, f"{i}.json") for i in range(1, count)]
    while any(os.path.exists(p) for p in others) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    shutil.rmtree(where, ignore_errors=True)


def wait_done(where: str, index: int) -> int:
    """Any other index of an MPI job: wait until index 0 says the job is over (until killed); leave; its status."""
    path = os.path.join(where, DONE)
    while True:
        done = _read(path)
        if done is not None:
            break
        time.sleep(POLL_S)
    try:
        os.unlink(os.path.join(where, f"{index}.json"))
    except OSError:
        pass
    try:
        return int(done.get("status", 1))
    except (TypeError, ValueError):
        return 1


# ---------------------------------------------------------------- a store held by one process


def open_store(where: str, count: int, record: dict[str, Any], wait_s: float) -> tuple[str, list[dict[str, Any]]]:
    """The holder (index 0, torchrun's master agent): a new generation, what an earlier one left removed; then
    :func:`meet` in it. (The generation, every record.)"""
    generation = uuid.uuid4().hex[:12]
    for name in os.listdir(where):
        if name != STORE and not name.startswith(f"{generation}-"):
            try:
                os.unlink(os.path.join(where, name))
            except OSError:
                pass
    _write(os.path.join(where, STORE), {"generation": generation, "pid": os.getpid()})
    return generation, meet(where, 0, count, record, wait_s, prefix=f"{generation}-")


def store_generation(where: str) -> str | None:
    """The generation of a live store (its holder still runs: the store dies with it), else None."""
    data = _read(os.path.join(where, STORE))
    try:
        pid, generation = int(data["pid"]), str(data["generation"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return generation


def join_store(where: str, index: int, count: int, record: dict[str, Any], wait_s: float) -> list[dict[str, Any]]:
    """Any other index: :func:`meet` in the live store's generation (again in a new one when the store is opened
    anew); :class:`Missing` when no live store comes, or some process never does, within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        generation = store_generation(where)
        if generation is None:
            if time.monotonic() > deadline:
                raise Missing(f"no rendezvous store within {wait_s:g} s (the master never started, or ended)")
            time.sleep(POLL_S)
            continue

        def changed(mine: str = generation) -> str | None:
            return None if store_generation(where) == mine else "the rendezvous store closed or opened anew"

        try:
            return meet(where, index, count, record, max(0.0, deadline - time.monotonic()),
                        prefix=f"{generation}-", abort=changed)
        except Missing:
            if store_generation(where) not in (None, generation):
                continue  # opened anew: report there
            raise


def close_store(where: str, generation: str) -> None:
    """The holder, at its end: its store and its generation's records go (a later job's store may be open)."""
    if store_generation(where) == generation:
        try:
            os.unlink(os.path.join(where, STORE))
        except OSError:
            pass
    for name in os.listdir(where) if os.path.isdir(where) else ():
        if name.startswith(f"{generation}-"):
            try:
                os.unlink(os.path.join(where, name))
            except OSError:
                pass
