"""The simulated NVML event API through the real pynvml, fed by faults (burnin.sim.events)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import SimNode, apply_fault, build_node, clear_faults
from burnin.sim.events import KMSG_FILE, NVML_EVENTS_FILE, append_nvml_events
from burnin.topology import find_topology

pytestmark = pytest.mark.rack

# Runs as the node: registers the GPUs named on argv for Xid + DBE events, says "ready", then
# prints what each wait returns (an event, or the NVML error code) for the number of waits asked.
# Every wait but the last expects an event and may take up to a minute (the test applies its faults
# after "ready", which takes seconds on a loaded machine); the last one expects nothing and waits 2 s.
WAITER = r'''
import json, sys
import pynvml as n
gpus, waits, types = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
out = {"supported": n.nvmlDeviceGetSupportedEventTypes(handles[0]), "results": []}
s = n.nvmlEventSetCreate()
for i in gpus:
    try:
        n.nvmlDeviceRegisterEvents(handles[i], types, s)
    except n.NVMLError as exc:
        out["register_error"] = exc.value
print("ready", flush=True)
for left in range(waits, 0, -1):
    try:
        d = n.nvmlEventSetWait_v2(s, 2000 if left == 1 else 60000)
        out["results"].append([n.nvmlDeviceGetIndex(d.device), d.eventType, d.eventData,
                               d.gpuInstanceId, d.computeInstanceId])
    except n.NVMLError as exc:
        out["results"].append(exc.value)
try:
    n.nvmlDeviceGetUUID(handles[2])
    out["gpu2"] = "ok"
except n.NVMLError as exc:
    out["gpu2"] = exc.value
n.nvmlEventSetFree(s)
n.nvmlShutdown()
print(json.dumps(out))
'''
XID, DBE = 0x8, 0x2
TIMEOUT, NOT_SUPPORTED, GPU_IS_LOST, UNKNOWN = 10, 3, 15, 999


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return build_node(tmp_path / "sim01", find_topology("hgx-h100-8gpu"), "sim01")


def _waiter(node: SimNode, gpus: list[int], waits: int, types: int = XID | DBE) -> subprocess.Popen[str]:
    env = {**os.environ, **node.environment()}
    proc = subprocess.Popen([sys.executable, "-c", WAITER, json.dumps(gpus), str(waits), str(types)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def _result(proc: subprocess.Popen[str]) -> dict:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_faults_become_events_on_registered_gpus_only(node: SimNode) -> None:
    apply_fault(node.dir, "xid:13@gpu1")  # before the set exists: not delivered
    proc = _waiter(node, [2, 3], waits=3)
    apply_fault(node.dir, "xid:63@gpu1")  # gpu1 is not registered
    apply_fault(node.dir, "xid:79@gpu2")
    apply_fault(node.dir, "ecc-uncorrectable@gpu3")
    result = _result(proc)
    assert result["supported"] & (XID | DBE) == XID | DBE
    assert result["results"] == [[2, XID, 79, 0xFFFFFFFF, 0xFFFFFFFF], [3, DBE, 0, 0xFFFFFFFF, 0xFFFFFFFF],
                                 TIMEOUT]


def test_lost_gpu_and_driver_error(node: SimNode) -> None:
    proc = _waiter(node, [2], waits=3)
    apply_fault(node.dir, "gpu-lost@gpu2")
    append_nvml_events(node.dir, [f"error {UNKNOWN}"])
    result = _result(proc)
    assert result["results"] == [GPU_IS_LOST, UNKNOWN, TIMEOUT]
    assert result["gpu2"] == GPU_IS_LOST


def test_no_supported_events(node: SimNode) -> None:
    with node.nvml_state.open("a") as fh:
        fh.write("supported_event_types=0\n")
    result = _result(_waiter(node, [0], waits=1))
    assert result["supported"] == 0 and result["register_error"] == NOT_SUPPORTED
    assert result["results"] == [TIMEOUT]


def test_kernel_log_grows_with_the_fault_and_not_with_clear(node: SimNode) -> None:
    assert not (node.dir / KMSG_FILE).exists()
    apply_fault(node.dir, "xid:79@gpu2")
    apply_fault(node.dir, "ib-port-down@mlx5_2")
    clear_faults(node.dir)
    apply_fault(node.dir, "xid:79@gpu2")  # again, after the node was healed: new records
    lines = (node.dir / KMSG_FILE).read_text().splitlines()
    seqs = [int(line.split(",")[1]) for line in lines]
    assert seqs == list(range(len(lines)))
    texts = [line.split(";", 1)[1] for line in lines]
    xid = "NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert texts.count(xid) == 2
    assert any(t.endswith("Port module event: module 0, Cable unplugged") for t in texts)
    assert all(line.startswith("4,") for line in lines if "Xid" in line)
    events = (node.dir / NVML_EVENTS_FILE).read_text().splitlines()
    assert events == [f"event 2 {XID} 79", f"event 2 {XID} 79"]


def test_state_faults_without_events_append_nothing(node: SimNode) -> None:
    apply_fault(node.dir, "nvlink-down@gpu1")
    assert not (node.dir / NVML_EVENTS_FILE).exists()
    assert not (node.dir / KMSG_FILE).exists()
