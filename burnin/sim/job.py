"""A job on a simulated node as ``burnin watch`` samples it: running and moving bytes, or stalled (faults ``job-*``).

``burnin sim fault NODE job-running``: every GPU has a compute process, 98% utilisation, 620 W and its SM
clock at 1980 MHz; the compute HCAs' traffic counters (sysfs ``ports/1/counters/port_xmit_data``,
``port_rcv_data``, ``port_*_packets``) advance while something pumps them (:func:`pump`, :class:`TrafficPump`:
the job's collectives). ``job-stalled``: the collective stopped progressing, the usual tell of a flapping link
or a stuck rank: the compute processes are still there, 100% utilisation (a spinning NCCL kernel), the SM clock
up, power back at idle, and the counters frozen (the pump leaves them alone). Clearing the faults is "no job".

The node's state holds no time (it is replayed from its fault list), so the counters cannot advance by
themselves: the render of a node with a job writes ``job.json`` beside the node's state (what the pump may
advance: the compute HCAs' counter files while the job is running) and :func:`pump` adds one step to each.
A render (any fault applied) puts the counters back to the state's values: the watch sees one more change.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from burnin.sim.faults import Fault, node_fault, simulates
from burnin.sim.state import IB_TRAFFIC_COUNTERS, NodeState
from burnin.sim.writer import replace_file

JOB_FILE = "job.json"
STALL_CHECK = "NCCL-05"  # the catalog's "correctness and hangs": a collective that stops progressing
BUSY_UTILISATION_PCT = 98
STALLED_UTILISATION_PCT = 100
BUSY_POWER_MW = 620000
IDLE_POWER_MW = 75000  # a healthy simulated H100 at rest draws 69 to 75 W (burnin.sim.state)
BUSY_SM_CLOCK_MHZ = 1980
FIRST_PID = 41000
PUMP_STEP = 1 << 20  # counter units (4-byte words, packets) added per pump


def _job(state: NodeState, stalled: bool) -> None:
    for gpu in state.gpus:
        gpu.compute_pids = [FIRST_PID + gpu.index]
        gpu.sm_clock_mhz = BUSY_SM_CLOCK_MHZ
        gpu.memory_used_mib = max(gpu.memory_used_mib, gpu.memory_total_mib // 2)
        gpu.utilization_pct = STALLED_UTILISATION_PCT if stalled else BUSY_UTILISATION_PCT
        if stalled:  # also after job-running's figures (faults are replayed in order)
            gpu.power_usage_mw = min(gpu.power_usage_mw, IDLE_POWER_MW)
        else:
            gpu.power_usage_mw = min(BUSY_POWER_MW, gpu.power_enforced_mw)
    state.host.job = "stalled" if stalled else "running"


@simulates(node_fault("job-running", STALL_CHECK, "a job runs on the node and its collectives progress",
                      "every GPU: a compute process (nvmlDeviceGetComputeRunningProcesses), utilisation 98%, "
                      "power 620 W, SM clock 1980 MHz; the compute HCAs' port_xmit_data/port_rcv_data/packets "
                      "counters advance while the job's traffic is pumped (burnin.sim.job); burnin watch flags "
                      "nothing", fatal=False, suite="watch"))
def job_running(state: NodeState, fault: Fault) -> None:
    if state.host.job != "stalled":  # with job-stalled too, the stall wins
        _job(state, stalled=False)


@simulates(node_fault("job-stalled", STALL_CHECK, "the job's collective stalled (a flapping link, a stuck rank)",
                      "every GPU: the compute process stays, utilisation 100%, SM clock 1980 MHz, power at idle "
                      "(about 70 W); the compute HCAs' traffic counters frozen; burnin watch records a stall "
                      "(and drains under its drain policy)", suite="watch"))
def job_stalled(state: NodeState, fault: Fault) -> None:
    _job(state, stalled=True)


def traffic_files(state: NodeState) -> list[str]:
    """The compute HCAs' traffic counter files, relative to the node's folder."""
    return [f"root/sys/class/infiniband/{hca.name}/ports/1/counters/{counter}"
            for hca in state.hcas if hca.role == "compute" for counter in IB_TRAFFIC_COUNTERS]


def write_marker(node_dir: Path, state: NodeState) -> None:
    """``job.json``: the job's state and, while it runs, the files :func:`pump` advances; none without a job."""
    if state.host.job is None:
        (node_dir / JOB_FILE).unlink(missing_ok=True)
        return
    files = traffic_files(state) if state.host.job == "running" else []
    replace_file(node_dir / JOB_FILE, json.dumps({"job": state.host.job, "advance": files}) + "\n")


def pump(node_dir: Path | str, step: int = PUMP_STEP) -> bool:
    """One step of the job's traffic: add ``step`` to each counter a running job advances; False when none."""
    try:
        marker = json.loads((Path(node_dir) / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    files = marker.get("advance") if isinstance(marker, dict) else None
    if not isinstance(files, list) or not files:
        return False
    for relative in files:
        path = Path(node_dir) / str(relative)
        try:
            value = int(path.read_text(encoding="ascii").strip() or "0")
        except (OSError, ValueError):
            continue
        replace_file(path.resolve(), f"{value + step}")
    return True


class TrafficPump:
    """A thread pumping the traffic of the running jobs on ``nodes`` every ``period`` s (the job's collectives)."""

    def __init__(self, nodes: Iterable[Path | str], period: float = 0.02) -> None:
        self.nodes = [Path(node) for node in nodes]
        self.period = period
        self.paused: set[Path] = set()  # nodes whose job stopped pumping (a test stalls them one by one)
        self.pumps = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="burnin-sim-traffic", daemon=True)

    def __enter__(self) -> TrafficPump:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def pause(self, node: Path | str) -> None:
        """Stop pumping ``node``; once this returns, no step of it is being written."""
        with self._lock:
            self.paused.add(Path(node))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            for node in self.nodes:
                with self._lock:
                    if node not in self.paused and pump(node):
                        self.pumps += 1
