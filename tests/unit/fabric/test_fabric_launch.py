"""Launchers: per-node steps split by node, srun jobs in one allocation, simulated jobs, mpirun."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabric_support import result

from burnin.fabric.commands import PER_NODE_TASK
from burnin.fabric.launch import SIM_JOB_ENV, SlurmLauncher, TransportLauncher, split_per_node
from burnin.fabric.settings import PRODUCTION, SIMULATED
from burnin.topology import Topology
from burnin.transport.base import CommandResult


def labelled(*tasks: tuple[int, str, list[str], int | None]) -> str:
    lines = []
    for task, node, body, status in tasks:
        lines += [f"{task}: ", f"{task}: @burnin-node {node}@", *(f"{task}: {b}" for b in body)]
        if status is not None:
            lines += [f"{task}: ", f"{task}: @burnin-exit {status}@"]
    return "\n".join(lines) + "\n"


def test_split_per_node_keeps_lines_and_exit_status() -> None:
    out = labelled((1, "sim02", ["# nThread 1", "     8     2  float"], 0), (0, "sim01", ["a", "b"], 3))
    step = result("srun", out, stderr="srun: error: sim03: task 2: Exited with exit code 1\n")
    split = split_per_node(step, ["sim01", "sim02", "sim03"], ["nvbandwidth"])
    assert split["sim02"].stdout == "# nThread 1\n     8     2  float\n" and split["sim02"].exit_status == 0
    assert split["sim01"].exit_status == 3 and split["sim01"].argv == ("nvbandwidth",)
    assert split["sim03"].error is not None and "sim03: task 2" in split["sim03"].error


def test_split_per_node_task_cut_off() -> None:
    step = result("srun", labelled((0, "sim01", ["row 1", "row 2"], None)), status=None, timed_out=True)
    split = split_per_node(step, ["sim01"], ["all_reduce_perf"])
    assert split["sim01"].exit_status is None and split["sim01"].timed_out
    assert "row 2" in split["sim01"].stdout and "srun timed out" in (split["sim01"].error or "")


class FakeClient:
    def __init__(self, replies: Mapping[str, CommandResult]) -> None:
        self.replies = replies
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        return self.replies.get(argv[0], result("ctl", ""))


def test_slurm_launcher_allocates_runs_steps_and_releases(h100_topology: Topology) -> None:
    logged: list[list[str]] = []
    step = result("ctl", labelled((0, "sim01", ["hello"], 0), (1, "sim02", ["world"], 0)))
    client = FakeClient({"salloc": result("ctl", "", stderr="salloc: Granted job allocation 17\n"), "srun": step})
    launcher = SlurmLauncher(client, h100_topology, SIMULATED, partition="gpu",
                             on_command=lambda argv, res: logged.append(list(argv)))
    assert launcher.open(["sim01", "sim02"]) is None
    assert "--exclusive" in client.calls[0] and "--partition=gpu" in client.calls[0]
    outputs = launcher.per_node(["sim01", "sim02"], ["nvbandwidth"], timeout=60)
    assert outputs["sim02"].stdout == "world\n"
    assert client.calls[1][:2] == ["srun", "--jobid=17"] and PER_NODE_TASK in client.calls[1]
    launcher.job(["sim01", "sim02"], "all_reduce", ib_hca="=mlx5_2:1", timeout=60)
    job = client.calls[2]
    assert "--mpi=pmi2" in job and "NCCL_IB_HCA==mlx5_2:1" in job and "all_reduce_perf" in job
    launcher.close()
    assert client.calls[-1] == ["scancel", "17"] and len(logged) == len(client.calls)


def test_slurm_launcher_inside_an_allocation_does_not_allocate_or_cancel(h100_topology: Topology) -> None:
    client = FakeClient({})
    launcher = SlurmLauncher(client, h100_topology, PRODUCTION, job_id="99")
    assert launcher.open(["a", "b"]) is None
    launcher.close()
    assert client.calls == []


def test_slurm_launcher_reports_a_refused_allocation(h100_topology: Topology) -> None:
    refused = result("ctl", "", status=1,
                     stderr="salloc: error: Unable to allocate resources: Requested nodes are busy")
    launcher = SlurmLauncher(FakeClient({"salloc": refused}), h100_topology, PRODUCTION)
    problem = launcher.open(["a", "b"])
    assert problem is not None and "no Slurm allocation" in problem and "busy" in problem


class FakeTransport:
    name = "local"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        self.calls.append((node, list(argv)))
        if node == "boom":
            raise OSError("transport exploded")
        return result(node, "out")

    def close(self) -> None:
        pass


def test_transport_launcher_simulated_job_names_its_members(h100_topology: Topology) -> None:
    transport = FakeTransport()
    launcher = TransportLauncher(transport, h100_topology, SIMULATED, "sim")
    launcher.job(["sim03", "sim04"], "all_reduce", ib_hca=None, timeout=5)
    node, argv = transport.calls[0]
    assert node == "sim03" and f"{SIM_JOB_ENV}=sim03,sim04" in argv and "-g" in argv
    runs = launcher.per_node(["sim01", "boom"], ["nvbandwidth"], timeout=5)
    assert runs["sim01"].ok and "transport exploded" in (runs["boom"].error or "")


def test_transport_launcher_mpirun_from_the_first_node(h100_topology: Topology) -> None:
    transport = FakeTransport()
    TransportLauncher(transport, h100_topology, PRODUCTION, "mpirun").job(["n1", "n2"], "all_reduce", ib_hca=None,
                                                                           timeout=5)
    node, argv = transport.calls[0]
    assert node == "n1" and "mpirun" in argv and "n1:8,n2:8" in argv


class DrainedSlurm(FakeClient):
    """Node states that scontrol update changes; salloc grants job 21."""

    def __init__(self, states: dict[str, str]) -> None:
        super().__init__({"salloc": result("ctl", "", stderr="salloc: Granted job allocation 21\n")})
        self.states = states

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        if list(argv[:4]) == ["scontrol", "--oneliner", "show", "node"]:
            self.calls.append(list(argv))
            return result("ctl", "".join(f"NodeName={n} {s}\n" for n, s in self.states.items()))
        if list(argv[:2]) == ["scontrol", "update"]:
            node = argv[2].split("=", 1)[1]
            self.states[node] = ("State=IDLE" if argv[3] == "State=RESUME"
                                 else f"State=IDLE+DRAIN {argv[4]} [root@t]")
        return super().run(argv, timeout=timeout)


def test_slurm_launcher_measures_burnin_drained_nodes_in_a_reservation(h100_topology: Topology) -> None:
    drained = "State=IDLE+DRAIN Reason=burnin: NCCL-05 wrong values [root@t]"
    client = DrainedSlurm({"sim01": "State=IDLE", "sim02": drained})
    launcher = SlurmLauncher(client, h100_topology, SIMULATED, recheck_drained=True)
    assert launcher.open(["sim01", "sim02"]) is None
    launcher.close()
    calls = [" ".join(c) for c in client.calls if c[:2] != ["scontrol", "--oneliner"]]
    name = calls[0].split("ReservationName=")[1].split()[0]
    assert calls[0].startswith("scontrol create reservation") and "Nodes=sim[01-02]" in calls[0]
    assert "Flags=MAINT,IGNORE_JOBS" in calls[0] and name.startswith("burnin-fabric-")
    assert calls[1:] == [
        "scontrol update NodeName=sim02 State=RESUME",
        next(c for c in calls if c.startswith("salloc")),
        "scancel 21",
        "scontrol update NodeName=sim02 State=DRAIN Reason=burnin: NCCL-05 wrong values",
        f"scontrol delete ReservationName={name}",
    ]
    assert f"--reservation={name}" in calls[2] and "--nodelist=sim[01-02]" in calls[2]
    assert client.states["sim02"].startswith("State=IDLE+DRAIN Reason=burnin: NCCL-05")


def test_slurm_launcher_leaves_other_drains_and_dry_runs_alone(h100_topology: Topology) -> None:
    states = {"sim01": "State=IDLE", "sim02": "State=IDLE+DRAIN Reason=maintenance [alice@t]"}
    client = DrainedSlurm(dict(states))
    launcher = SlurmLauncher(client, h100_topology, SIMULATED, recheck_drained=True)
    launcher.open(["sim01", "sim02"])
    launcher.close()
    assert not any("reservation" in " ".join(c) or c[:2] == ["scontrol", "update"] for c in client.calls)
    drained = {"sim02": "State=IDLE+DRAIN Reason=burnin: NCCL-05 wrong values [root@t]"}
    client = DrainedSlurm(dict(drained))
    launcher = SlurmLauncher(client, h100_topology, SIMULATED)  # --dry-run or no --gate slurm
    launcher.open(["sim02"])
    launcher.close()
    assert [c[0] for c in client.calls] == ["salloc", "scancel"] and client.states == drained
