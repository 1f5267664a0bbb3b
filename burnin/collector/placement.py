"""The placement probe: where a launched rank really runs (check-catalog PIN-01..04).

Standard library only and no other burnin import: burnin runs it as
``python3 -c <this file>`` under the same launcher and binding options as
training (srun ``--cpu-bind``, a numactl wrapper per local rank), so nothing is
installed on the nodes. Each rank prints one line::

    BURNIN-PLACEMENT {"rank": 3, "local_rank": 3, "cpus": "0-55,112-167", "mems": "0", ...}

with its allowed CPUs (``sched_getaffinity`` and ``Cpus_allowed_list``), allowed
memory nodes (``Mems_allowed_list``), the GPU it drives (``CUDA_VISIBLE_DEVICES``
and the local rank, resolved to a PCI bus id through ``/proc/driver/nvidia/gpus``
in PCI order), ``NCCL_IB_HCA``, where 64 MiB it wrote landed (``/proc/self/numa_maps``)
and which CPUs its threads ran on while busy (``/proc/self/task/*/stat``). A
source that fails is reported as an ``*_error`` field; the probe always exits 0.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable

MARKER = "BURNIN-PLACEMENT"
VERSION = 1
TOUCH_BYTES = 64 << 20
THREADS = 3
SAMPLES = 5
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
LOCAL_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
WORLD_VARS = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
BIND_VARS = ("SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST", "SLURM_MEM_BIND",
             "SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER")


def cpu_list(cpus: Iterable[int]) -> str:
    """Fold CPU numbers into ``0-3,8``."""
    ordered = sorted({int(c) for c in cpus})
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _first_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def _status() -> dict[str, str]:
    fields = {}
    with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("Cpus_allowed_list", "Mems_allowed_list"):
                fields[key] = value.strip()
    return fields


def _gpus() -> list[tuple[str, str]]:
    """(bus id, UUID) of the NVIDIA GPUs this process may use, in PCI order.

    procfs lists every GPU of the node; a device cgroup (Slurm ConstrainDevices) lets a task open only its
    own ``/dev/nvidiaN`` and CUDA numbers just those. When some can be opened and some cannot, the ones
    that can are the task's GPUs.
    """
    found = []
    for bus in sorted(os.listdir(NVIDIA_GPUS)):
        uuid, minor = "", ""
        try:
            with open(os.path.join(NVIDIA_GPUS, bus, "information"), encoding="ascii", errors="replace") as handle:
                for line in handle:
                    key, _, value = line.partition(":")
                    if key.strip() == "GPU UUID":
                        uuid = value.strip()
                    elif key.strip() == "Device Minor":
                        minor = value.strip()
        except OSError:
            pass
        found.append((bus.lower(), uuid, minor))
    usable = [(bus, uuid) for bus, uuid, minor in found if minor.isdigit() and _can_open(f"/dev/nvidia{minor}")]
    if usable and len(usable) < len(found):
        return usable
    return [(bus, uuid) for bus, uuid, _ in found]


def _can_open(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError:
        return False
    return True


def _visible(gpus: list[tuple[str, str]], spec: str | None) -> list[str]:
    """Bus ids of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible, in CUDA's order (PCI order assumed)."""
    if spec is None:
        return [bus for bus, _ in gpus]
    visible = []
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            break
        if token.isdigit():
            if int(token) >= len(gpus):
                break  # CUDA stops at the first invalid entry
            visible.append(gpus[int(token)][0])
            continue
        match = [bus for bus, uuid in gpus if uuid and uuid.startswith(token)]
        if len(match) != 1:
            break
        visible.append(match[0])
    return visible


def _cpus(record: dict[str, object], local_rank: int | None) -> None:
    record["cpus"] = cpu_list(os.sched_getaffinity(0))


def _allowed(record: dict[str, object], local_rank: int | None) -> None:
    status = _status()
    record["cpus_allowed_list"] = status.get("Cpus_allowed_list")
    record["mems"] = status.get("Mems_allowed_list")


def _gpu(record: dict[str, object], local_rank: int | None) -> None:
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    record["cuda_visible_devices"] = spec
    try:
        gpus = _gpus()
    except OSError as exc:
        record["gpu_error"] = f"{NVIDIA_GPUS}: {exc.strerror or exc}"
        return
    visible = _visible(gpus, spec)
    record["gpu_bus_ids"] = visible
    if not visible:
        record["gpu_error"] = f"no GPU visible (CUDA_VISIBLE_DEVICES={spec!r}, {len(gpus)} GPUs on the node)"
        return
    # Megatron: torch.cuda.set_device(local_rank % device_count)
    record["gpu_bus_id"] = visible[(local_rank or 0) % len(visible)]


def _mapping_of(address: int) -> str | None:
    with open("/proc/self/maps", encoding="ascii", errors="replace") as handle:
        for line in handle:
            span = line.split(" ", 1)[0]
            start, _, end = span.partition("-")
            if int(start, 16) <= address < int(end, 16):
                return start.lstrip("0") or "0"
    return None


def _memory(record: dict[str, object], local_rank: int | None) -> None:
    """Write TOUCH_BYTES from this thread and count where the pages landed (first touch)."""
    page = os.sysconf("SC_PAGE_SIZE") or 4096
    buffer = bytearray(TOUCH_BYTES)
    for offset in range(0, TOUCH_BYTES, page):
        buffer[offset] = 1
    address = ctypes.addressof((ctypes.c_char * TOUCH_BYTES).from_buffer(buffer))
    start = _mapping_of(address)
    if start is None:
        record["memory_error"] = "the buffer is in no mapping of /proc/self/maps"
        return
    with open("/proc/self/numa_maps", encoding="ascii", errors="replace") as handle:
        for line in handle:
            if (line.split(" ", 1)[0].lstrip("0") or "0") != start:
                continue
            pages: dict[str, int] = {}
            for field in line.split()[1:]:
                key, _, value = field.partition("=")
                if key[:1] == "N" and key[1:].isdigit() and value.isdigit():
                    pages[key[1:]] = pages.get(key[1:], 0) + int(value)
            record["memory"] = {"bytes": TOUCH_BYTES, "pages_by_node": pages}
            return
    record["memory_error"] = "the buffer's mapping is not in /proc/self/numa_maps"


def _threads(record: dict[str, object], local_rank: int | None) -> None:
    """CPUs this process's threads ran on while busy (field 39 of /proc/self/task/<tid>/stat)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(2000))

    workers = [threading.Thread(target=spin, daemon=True) for _ in range(THREADS)]
    for worker in workers:
        worker.start()
    seen: set[int] = set()
    try:
        for _ in range(SAMPLES):
            time.sleep(0.02)
            for tid in os.listdir("/proc/self/task"):
                try:
                    with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as handle:
                        fields = handle.read().rpartition(")")[2].split()
                except OSError:
                    continue  # the thread ended
                if len(fields) > 36 and fields[36].isdigit():
                    seen.add(int(fields[36]))
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    record["thread_cpus"] = cpu_list(seen)


def probe() -> dict[str, object]:
    """This rank's placement as one JSON-ready record."""
    rank, local_rank = _first_int(RANK_VARS), _first_int(LOCAL_VARS)
    record: dict[str, object] = {"probe": "burnin-placement", "version": VERSION, "host": socket.gethostname(),
                                 "pid": os.getpid(), "rank": rank, "local_rank": local_rank,
                                 "world_size": _first_int(WORLD_VARS)}
    steps: tuple[tuple[str, Callable[[dict[str, object], int | None], None]], ...] = (
        ("cpus", _cpus), ("status", _allowed), ("gpu", _gpu), ("memory", _memory), ("threads", _threads))
    for name, step in steps:
        try:
            step(record, local_rank)
        except (OSError, ValueError, AttributeError) as exc:
            record[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
    record["nccl_ib_hca"] = os.environ.get("NCCL_IB_HCA")
    record["binding_env"] = {name: os.environ[name] for name in BIND_VARS if name in os.environ}
    return record


def main() -> int:
    sys.stdout.write(f"{MARKER} {json.dumps(probe(), sort_keys=True)}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
