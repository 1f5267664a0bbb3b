"""SlurmDispatcher's command flow against a scripted Slurm: no daemons involved."""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnin.dispatch.slurm import SlurmDispatcher
from burnin.errors import UsageError
from burnin.nodes import expand
from burnin.transport.base import CommandResult
from burnin.transport.slurm import SlurmClient

STATES = {
    "sim01": "State=IDLE",
    "sim02": "State=IDLE+DRAIN Reason=burnin: IB-01 port down [root@2026-11-29T23:45:25]",
    "sim03": "State=IDLE+DRAIN Reason=maintenance [alice@2026-11-29T20:00:00]",
    "sim04": "State=MIXED",
}


class ScriptedSlurm(SlurmClient):
    """A tiny slurmctld: node states change with scontrol update; salloc grants at once.

    ``probe_redrains``: a resumed node is drained again at once (a health check that
    still finds the fault), and an allocation in a reservation then pends until scancel.
    """

    def __init__(self, states: dict[str, str], *, fail_salloc: bool = False,
                 probe_redrains: bool = False) -> None:
        super().__init__()
        self.states = dict(states)
        self.fail_salloc = fail_salloc
        self.probe_redrains = probe_redrains
        self.calls: list[tuple[str, ...]] = []
        self._lock = threading.Lock()
        self._jobs = 0
        self._cancelled = threading.Event()

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        argv = tuple(argv)
        with self._lock:
            self.calls.append(argv)
            self._jobs += argv[0] == "salloc"
            job = self._jobs
        out, err, status = "", "", 0
        if argv[:4] == ("scontrol", "--oneliner", "show", "node"):
            names = expand(argv[4])
            out = "".join(f"NodeName={n} Arch=x86_64 {self.states[n]}\n" for n in names if n in self.states)
            err = "".join(f"Node {n} not found\n" for n in names if n not in self.states)
            status = 1 if err else 0
        elif argv[:2] == ("scontrol", "update"):
            nodes = expand(argv[2].split("=", 1)[1])
            for node in nodes:
                if argv[3] == "State=RESUME":
                    self.states[node] = "State=IDLE+NOT_RESPONDING"
                    if self.probe_redrains:
                        self.states[node] = "State=IDLE+DRAIN Reason=burnin: GPU-04 probe [root@t]"
                elif argv[3] == "State=DRAIN":
                    self.states[node] = f"State=IDLE+DRAIN {argv[4]} [root@t]"
        elif argv[0] == "scancel" and argv[1].startswith("--name="):
            self._cancelled.set()
        elif argv[0] == "salloc":
            if self.fail_salloc:
                err, status = "salloc: error: Job submit/allocate failed: Invalid account\n", 1
            elif self.probe_redrains and any(a.startswith("--reservation=") for a in argv):
                assert self._cancelled.wait(timeout)
                err = f"salloc: Pending job allocation {job}\nsalloc: Job allocation {job} has been revoked.\n"
                status = 1
            else:
                err = f"salloc: Granted job allocation {job}\n"
        elif argv[0] == "srun" and "--label" in argv:
            nodes = expand(next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1])
            for task, node in enumerate(nodes):
                facts = json.dumps({"hostname": node, "sources": {}})
                out += f"{task}: \n{task}: @burnin-node {node}@\n{task}: {facts}\n{task}: @burnin-exit 0@\n"
        return CommandResult("slurm", argv, status, out, err, 0.01)


def _gather(client: ScriptedSlurm, nodes: list[str], *, recheck: bool, tmp_path: Path,
            **kwargs: object) -> tuple[SlurmDispatcher, dict[str, object]]:
    dispatcher = SlurmDispatcher(nodes, client=client, recheck_drained=recheck,
                                 log_file=tmp_path / "slurm.log", **kwargs)  # type: ignore[arg-type]
    done: list[str] = []
    try:
        facts = dispatcher.gather(sources="all", timeout=20, on_done=done.append)
    finally:
        dispatcher.close()
    assert sorted(done) == sorted(nodes)
    return dispatcher, {n: f.unreachable for n, f in facts.items()}


def test_one_allocation_one_step_shipped_and_cleaned(tmp_path: Path) -> None:
    client = ScriptedSlurm({"sim01": "State=IDLE", "sim04": "State=MIXED"})
    _, unreachable = _gather(client, ["sim01", "sim04"], recheck=False, tmp_path=tmp_path)
    assert unreachable == {"sim01": None, "sim04": None}
    kinds = [c[0] if c[0] != "srun" else ("srun-label" if "--label" in c else "srun") for c in client.calls]
    assert kinds == ["scontrol", "salloc", "sbcast", "srun-label", "srun", "scancel"]
    sbcast = client.calls[2]
    dest = sbcast[-1]
    # the job, this launcher's own token (job ids repeat across clusters), the content's digest
    assert re.fullmatch(r"/tmp/burnin-collector-1-[0-9a-f]{8}-[0-9a-f]{16}-collector\.pyz", dest)
    step = client.calls[3]
    assert step[step.index("sh") + 3] == dest  # the task runs the shipped file ...
    assert client.calls[4][-3:] == ("rm", "-f", dest)  # ... and a later step removes it
    assert client.calls[5] == ("scancel", "1")
    log = (tmp_path / "slurm.log").read_text()
    assert "# node states: ok" in log and log.count("$ ") == 5


def test_drained_nodes_are_not_dispatched_without_the_gate(tmp_path: Path) -> None:
    client = ScriptedSlurm(STATES)
    _, unreachable = _gather(client, ["sim01", "sim02", "sim03", "nosuch"], recheck=False,
                             tmp_path=tmp_path)
    assert unreachable["sim01"] is None
    assert "State=IDLE+DRAIN" in str(unreachable["sim02"]) and "--gate slurm" in str(unreachable["sim02"])
    assert "maintenance" in str(unreachable["sim03"])
    assert "not a node of this Slurm cluster" in str(unreachable["nosuch"])
    assert not any("RESUME" in " ".join(c) or "reservation" in c for c in client.calls)


def test_burnin_drained_node_is_rechecked_in_its_own_reservation(tmp_path: Path) -> None:
    client = ScriptedSlurm(STATES)
    _, unreachable = _gather(client, ["sim01", "sim02", "sim03"], recheck=True, tmp_path=tmp_path)
    assert unreachable["sim01"] is None and unreachable["sim02"] is None
    assert "maintenance" in str(unreachable["sim03"])  # someone else's drain: not touched
    calls = [" ".join(c) for c in client.calls]
    create = next(i for i, c in enumerate(calls) if c.startswith("scontrol create reservation"))
    name = re.search(r"ReservationName=(\S+)", calls[create]).group(1)  # type: ignore[union-attr]
    assert "Nodes=sim02 " in calls[create]
    resume = calls.index("scontrol update NodeName=sim02 State=RESUME")
    alloc = next(i for i, c in enumerate(calls) if c.startswith("salloc") and f"--reservation={name}" in c)
    restore = calls.index("scontrol update NodeName=sim02 State=DRAIN Reason=burnin: IB-01 port down")
    delete = calls.index(f"scontrol delete ReservationName={name}")
    job = sum(c.startswith("salloc") for c in calls[:alloc + 1])  # the scripted job ids count up
    recheck_cancel = calls.index(f"scancel {job}")
    assert create < resume < alloc < recheck_cancel < restore < delete
    assert not any("sim03" in c for c in calls if "update" in c or "create" in c)
    # one collector step per allocation, never one per node
    assert sum("--label" in c for c in client.calls) == 2


def test_recheck_gives_up_when_the_health_check_drains_the_node_again(tmp_path: Path) -> None:
    client = ScriptedSlurm({"sim02": STATES["sim02"]}, probe_redrains=True)
    _, unreachable = _gather(client, ["sim02"], recheck=True, tmp_path=tmp_path)
    assert "drained again while waiting to be rechecked" in str(unreachable["sim02"])
    assert "GPU-04 probe" in str(unreachable["sim02"])
    calls = [" ".join(c) for c in client.calls]
    assert any(c.startswith("scancel --name=burnin-recheck-") for c in calls)
    # the newer drain stays; the reservation goes
    assert not any("State=DRAIN" in c for c in calls)
    assert calls[-1].startswith("scontrol delete ReservationName=burnin-recheck-")
    assert "GPU-04 probe" in client.states["sim02"]


def test_allocation_failure_makes_every_node_incomplete(tmp_path: Path) -> None:
    client = ScriptedSlurm({"sim01": "State=IDLE"}, fail_salloc=True)
    _, unreachable = _gather(client, ["sim01"], recheck=False, tmp_path=tmp_path)
    assert "no Slurm allocation" in str(unreachable["sim01"]) and "Invalid account" in str(unreachable["sim01"])
    assert [c[0] for c in client.calls] == ["scontrol", "salloc"]


def test_inside_an_allocation_no_salloc_and_a_named_collector(tmp_path: Path) -> None:
    client = ScriptedSlurm({"sim01": "State=IDLE"})
    _, unreachable = _gather(client, ["sim01"], recheck=True, tmp_path=tmp_path,
                             job_id="77", collector="/opt/burnin/collector.pyz")
    assert unreachable == {"sim01": None}
    assert [c[0] for c in client.calls] == ["srun"]
    assert "--jobid=77" in client.calls[0] and "/opt/burnin/collector.pyz" in client.calls[0]


def _args(**values: object) -> argparse.Namespace:
    base: dict[str, object] = {"nodes": None, "partition": None, "reservation": None, "collector": None,
                               "gate": "none", "dry_run": False}
    base.update(values)
    return argparse.Namespace(**base)


@pytest.fixture
def with_srun(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setattr("burnin.dispatch.slurm.shutil.which", lambda name: f"/usr/bin/{name}")
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_from_args_nodes_and_allocation(with_srun: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dispatcher = SlurmDispatcher.from_args(_args(nodes="sim[01-04]", gate="slurm"), "t", tmp_path)
    assert dispatcher.nodes == ["sim01", "sim02", "sim03", "sim04"]
    assert dispatcher.job_id is None and dispatcher.recheck_drained
    assert not SlurmDispatcher.from_args(_args(nodes="sim01", gate="slurm", dry_run=True), "t",
                                         tmp_path).recheck_drained
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST"):
        SlurmDispatcher.from_args(_args(), "t", tmp_path)
    with_srun.setenv("SLURM_JOB_ID", "99")
    with_srun.setenv("SLURM_JOB_NODELIST", "sim[01-02]")
    inside = SlurmDispatcher.from_args(_args(), "t", tmp_path)
    assert inside.nodes == ["sim01", "sim02"] and inside.job_id == "99"
    subset = SlurmDispatcher.from_args(_args(nodes="sim02"), "t", tmp_path)
    assert subset.job_id == "99"
    outside = SlurmDispatcher.from_args(_args(nodes="sim[02-03]"), "t", tmp_path)
    assert outside.job_id is None


def test_from_args_without_slurm_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("burnin.dispatch.slurm.shutil.which", lambda name: None)
    with pytest.raises(UsageError, match="srun not found"):
        SlurmDispatcher.from_args(_args(nodes="sim01"), "t", tmp_path)
