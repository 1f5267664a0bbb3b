"""What a running simulated node emits when a fault strikes: kernel log records and NVML events.

The node's state is replayed from its fault list, so it holds no time; events
do. When ``apply_fault`` changes a running node, :func:`record_changes`
compares the state before and after and appends, at that moment:

- to ``<node>/kmsg``: the lines the node's ``dmesg`` gained (the Xid line, the
  ``NVRM: GPU at PCI`` lines before a GPU's first Xid, link messages), as
  ``/dev/kmsg`` records ``<level>,<seq>,<usec>,-;<text>``, with the sequence
  number continuing the file and the time of this machine's CLOCK_BOOTTIME;
- to ``<node>/nvml.events``: the NVML events the simulated library delivers
  to event sets (``nvml_sim.c``): ``event <gpu> <type> <data>`` for an Xid
  (type 0x8, data the Xid), a double-bit ECC error (0x2), a row-remap event
  (0x400) or failure (0x800); ``lost <gpu>`` when a GPU falls off the bus.

Both files are append-only; clearing faults leaves them alone (a real kernel
log does not forget either). A process on the node finds them beside the NVML
state file named by ``BURNIN_SIM_NVML`` (``burnin watch`` reads ``kmsg`` there).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from burnin.sim.formats.dmesg import dmesg
from burnin.sim.state import GpuState, NodeState

KMSG_FILE = "kmsg"
NVML_EVENTS_FILE = "nvml.events"

# nvmlEventType* bits (nvml.h); the simulated library delivers these.
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID = 0x8
EVENT_DRAM_RETIREMENT = 0x400
EVENT_DRAM_RETIREMENT_FAILURE = 0x800

LEVEL_WARNING, LEVEL_INFO = 4, 6
_LEVELS = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warn": 4, "warning": 4, "notice": 5,
           "info": 6, "debug": 7}


def _new_lines(before: list[str], after: list[str]) -> list[str]:
    """Lines of ``after`` beyond those of ``before`` (as a multiset), in ``after``'s order."""
    old = Counter(before)
    new: list[str] = []
    for line in after:
        if old[line] > 0:
            old[line] -= 1
        else:
            new.append(line)
    return new


def new_kernel_lines(before: NodeState, after: NodeState) -> list[tuple[int, str]]:
    """``(level, text)`` of every line the node's dmesg gained."""
    levels = {m.text: _LEVELS.get(m.level, LEVEL_INFO) for m in after.host.messages}
    lines = _new_lines(dmesg(before, "notime").splitlines(), dmesg(after, "notime").splitlines())
    return [(LEVEL_WARNING if "NVRM: " in text else levels.get(text, LEVEL_INFO), text) for text in lines]


def _gpus_by_bus(state: NodeState) -> dict[str, tuple[int, GpuState]]:
    return {gpu.bus_id: (index, gpu) for index, gpu in enumerate(state.visible_gpus)}


def new_nvml_events(before: NodeState, after: NodeState) -> list[str]:
    """Lines for ``nvml.events``: what NVML reports about the change, GPU by NVML index."""
    events: list[str] = []
    gpus = _gpus_by_bus(after)
    old_xids = Counter((x.bus_id, x.xid, x.text) for x in before.host.xids)
    for xid in after.host.xids:
        key = (xid.bus_id, xid.xid, xid.text)
        if old_xids[key] > 0:
            old_xids[key] -= 1
        elif xid.bus_id in gpus:
            events.append(f"event {gpus[xid.bus_id][0]} {EVENT_XID} {xid.xid}")
    old_gpus = {gpu.bus_id: gpu for gpu in before.gpus}
    for bus_id, (index, gpu) in gpus.items():
        old = old_gpus.get(bus_id)
        if old is None:
            continue
        if gpu.ecc["uncorrected_volatile_dram"] > old.ecc["uncorrected_volatile_dram"]:
            events.append(f"event {index} {EVENT_DOUBLE_BIT_ECC} 0")
        if gpu.remap_failure and not old.remap_failure:
            events.append(f"event {index} {EVENT_DRAM_RETIREMENT_FAILURE} 0")
        elif gpu.remap_pending and not old.remap_pending:
            events.append(f"event {index} {EVENT_DRAM_RETIREMENT} 0")
        if gpu.lost and not old.lost:
            events.append(f"lost {index}")
    return events


@contextlib.contextmanager
def _locked_append(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _next_sequence(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def _boot_usec() -> int:
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return time.clock_gettime_ns(clock) // 1000


def append_kernel_records(node_dir: Path, lines: list[tuple[int, str]]) -> None:
    """Append ``/dev/kmsg`` records for ``lines`` to the node's kernel log."""
    if not lines:
        return
    path = Path(node_dir) / KMSG_FILE
    with _locked_append(path) as fd:
        seq = _next_sequence(path)
        usec = _boot_usec()
        text = "".join(f"{level},{seq + k},{usec},-;{line}\n" for k, (level, line) in enumerate(lines))
        os.write(fd, text.encode())


def append_nvml_events(node_dir: Path, lines: list[str]) -> None:
    if not lines:
        return
    with _locked_append(Path(node_dir) / NVML_EVENTS_FILE) as fd:
        os.write(fd, "".join(f"{line}\n" for line in lines).encode())


def record_changes(node_dir: Path, before: NodeState, after: NodeState) -> None:
    """Emit the events of the change ``before`` -> ``after`` of a running node: NVML first, then the kernel."""
    append_nvml_events(node_dir, new_nvml_events(before, after))
    append_kernel_records(node_dir, new_kernel_lines(before, after))
