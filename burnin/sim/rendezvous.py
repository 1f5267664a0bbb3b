"""How the processes of one job started across simulated nodes learn each other, standard library only.

A real job's processes meet through their launcher: nccl-tests' ranks through MPI (rank 0 gathers
every rank's ``#  Rank`` line), torchrun's agents through their rendezvous store on the master. The
simulated tools link no MPI, so they meet in a folder that every node of the rack sees, as a
cluster's shared file system: ``$BURNIN_SIM_SHARED_DIR`` (the lab sets it on every node), else the
system's temporary folder (enough where every node is a process of one host). Each process writes one
record (atomically: a reader sees it whole or not at all) into a folder named after a key that only
this job has (the launcher's job id), reads every other's, and the process with index 0 says when
the job is over; the others wait for that, as MPI ranks end together.

Simulated nodes carry a copy as ``out/fabric/rendezvous.py`` and ``out/megatron/rendezvous.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from typing import Any

SHARED_ENV = "BURNIN_SIM_SHARED_DIR"
DONE = "done"
POLL_S = 0.05
LEAVE_WAIT_S = 5.0
"""Index 0 removes the job's folder once the others have left, or after this long."""


class Missing(Exception):
    """Some process never reported within the wait (its node failed to start it)."""


def folder(kind: str, *key: object) -> str:
    """The job's folder: ``<shared>/<kind>/<digest of key>``, created if needed."""
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


def publish(where: str, index: int, record: dict[str, Any]) -> None:
    _write(os.path.join(where, f"{index}.json"), record)


def gather(where: str, count: int, wait_s: float) -> list[dict[str, Any]]:
    """Every process's record, by index; :class:`Missing` naming the first absent after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    records: dict[int, dict[str, Any]] = {}
    while True:
        for index in range(count):
            if index in records:
                continue
            try:
                with open(os.path.join(where, f"{index}.json"), encoding="utf-8") as handle:
                    records[index] = json.load(handle)
            except (OSError, ValueError):
                continue
        if len(records) == count:
            return [records[i] for i in range(count)]
        if time.monotonic() > deadline:
            absent = min(set(range(count)) - set(records))
            raise Missing(f"process {absent} of {count} never reported within {wait_s:g} s")
        time.sleep(POLL_S)


def finish(where: str, count: int, status: int) -> None:
    """Index 0: the job is over with ``status``; remove its folder once the others have left."""
    _write(os.path.join(where, DONE), {"status": status})
    deadline = time.monotonic() + LEAVE_WAIT_S
    others = [os.path.join(where, f"{i}.json") for i in range(1, count)]
    while any(os.path.exists(p) for p in others) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    shutil.rmtree(where, ignore_errors=True)


def wait_done(where: str, index: int) -> int:
    """Any other index: wait until index 0 says the job is over (until killed); leave; its status."""
    path = os.path.join(where, DONE)
    while True:
        try:
            with open(path, encoding="utf-8") as handle:
                status = int(json.load(handle).get("status", 1))
            break
        except (OSError, ValueError):
            time.sleep(POLL_S)
    try:
        os.unlink(os.path.join(where, f"{index}.json"))
    except OSError:
        pass
    return status
