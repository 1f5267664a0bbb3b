"""`burnin watch` on real slurmd nodes: xid:79 under a running job evicts the node, the job runs again
elsewhere; xid:63 is only recorded."""

from __future__ import annotations

import pytest
from simwatch_support import NODES, WAIT_S, WatchLab

pytestmark = pytest.mark.sim_slurm

# A requeueable batch job on two nodes, running until cancelled.
JOB = ("--requeue", "--nodes=2", "--job-name=train", "--wrap", "srun sleep 3600")


def _running(lab: WatchLab) -> tuple[str, list[str]]:
    job_id = lab.submit(*JOB)
    job = lab.wait_for("running", lambda: (j := lab.job(job_id)).state == "RUNNING" and len(j.nodes) == 2 and j,
                       timeout=WAIT_S)
    return job_id, list(job.nodes)


def test_xid_79_under_a_job_evicts_the_node_and_the_job_runs_again_elsewhere(watch_lab: WatchLab) -> None:
    lab = watch_lab
    lab.reset()
    job_id, nodes = _running(lab)
    victim = nodes[0]
    before = {n: len(lab.journal(n)) for n in NODES}  # what earlier tests left in the journals
    lab.wait_listening(victim)
    lab.fault(victim, "xid:79")

    node = lab.wait_for(f"{victim} drained", lambda: (n := lab.nodes()[victim]).drained and n, timeout=WAIT_S)
    assert node.reason == "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"
    # Slurm alone would hold the requeued job about 120 s (its begin time); the watch lifts that.
    job = lab.wait_for("running again on other nodes",
                       lambda: (j := lab.job(job_id)).restarts >= 1 and j.state == "RUNNING" and j, timeout=100)
    assert victim not in job.nodes and len(job.nodes) == 2
    assert lab.nodes()[victim].drained  # still out of the pool

    (incident,) = [e for e in lab.journal(victim)[before[victim]:] if e["kind"] == "xid"]
    assert incident["action"] == "evict" and incident["check"] == "GPU-04" and incident["code"] == 79
    assert incident["requeued"] == [job_id] and incident["out_of_pool"] is True
    assert incident["detected_at"] <= incident["acted_at"]
    commands = [step["command"] for step in incident["steps"]]
    assert commands[0].startswith(f"scontrol update NodeName={victim} State=DRAIN")
    assert f"scontrol requeue {job_id}" in commands
    released = lab.wait_for("the release in the journal",
                            lambda: [e for e in lab.journal(victim)[before[victim]:] if e["kind"] == "job-released"],
                            timeout=WAIT_S)
    assert released[0]["job"] == job_id and released[0]["ok"], released
    others = [n for n in lab.nodes() if n != victim]
    assert not any(lab.journal(n)[before[n]:] for n in others)  # no other node heard anything


def test_xid_63_under_a_job_is_only_recorded(watch_lab: WatchLab) -> None:
    lab = watch_lab
    lab.reset()
    job_id, nodes = _running(lab)
    node = nodes[1]
    before = len(lab.journal(node))
    lab.wait_listening(node)  # both sightings are waited for below
    lab.fault(node, "xid:63@gpu1")
    entries = lab.wait_for("the record", lambda: lab.journal(node)[before:], timeout=WAIT_S)
    assert [(e["code"], e["action"], e["steps"]) for e in entries] == [(63, "record", [])]
    # NVML and the kernel log both hear it; whichever is second is the same incident, not a second record.
    (first,) = entries
    second = {"nvml": "kmsg", "kmsg": "nvml"}[first["source"]]
    lab.wait_for(f"the {second} sighting",
                 lambda: f"{second}: GPU-04 gpu1 Xid 63" in lab.watch_log(node), timeout=WAIT_S)
    assert len(lab.journal(node)) == before + 1
    assert not lab.nodes()[node].drained
    job = lab.job(job_id)
    assert job.state == "RUNNING" and job.restarts == 0 and node in job.nodes
