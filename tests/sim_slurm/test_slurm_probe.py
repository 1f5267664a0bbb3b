"""`burnin probe --drain` as slurmd's HealthCheckProgram on simulated nodes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from simslurm_support import HEALTH_INTERVAL, NODES, WAIT_S, SlurmLab

pytestmark = pytest.mark.sim_slurm


def _probe_lines(lab: SlurmLab, node: str) -> list[str]:
    path = lab.state / "slurm" / "log" / f"probe-{node}.log"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return text[:text.rfind("\n") + 1].splitlines()  # a line still being written is not one yet


def test_slurm_probe_drains_a_faulted_node(
        slurm_lab: SlurmLab, record_property: Callable[[str, object], None]) -> None:
    slurm_lab.reset()
    done = slurm_lab.burnin("sim", "fault", "--state", str(slurm_lab.state), "sim03", "xid:79")
    assert done.returncode == 0, done.stderr
    # from the moment the fault is in place (the command has returned); the latency is recorded,
    # not asserted: one interval plus the probe's own time here, far more on a loaded CI machine
    latency = slurm_lab.wait_for("sim03 drained", lambda nodes: nodes["sim03"].drained)
    record_property("drain_latency_s", f"{latency:.2f}")
    print(f"fault -> drained: {latency:.2f} s (HealthCheckInterval={HEALTH_INTERVAL})")
    sim03 = slurm_lab.nodes()["sim03"]
    assert sim03.reason.startswith("burnin:") and "GPU-04" in sim03.reason, sim03
    others = slurm_lab.nodes()
    assert not any(others[n].drained for n in NODES if n != "sim03"), others


def test_slurm_probe_leaves_healthy_nodes_alone(slurm_lab: SlurmLab) -> None:
    slurm_lab.reset()
    seen = {node: len(_probe_lines(slurm_lab, node)) for node in NODES}
    deadline = time.monotonic() + WAIT_S  # two intervals and the probes' time when not loaded
    fresh: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        fresh = {n: [line for line in _probe_lines(slurm_lab, n)[seen[n]:] if "burnin:" in line]
                 for n in NODES}
        if all(fresh.values()):
            break
        time.sleep(0.2)
    assert all(fresh.values()), f"the health check did not run on every node: {fresh}"
    assert all("burnin: OK" in line for lines in fresh.values() for line in lines), fresh
    assert all(s.state == "IDLE" for s in slurm_lab.nodes().values())
