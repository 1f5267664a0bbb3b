"""The argv lists and environment of every fabric launch (pure: nothing here runs anything).

A per-node launch is ``env K=V... timeout -k 5 T tool args``: the environment
and the time limit travel inside the argv, so they reach the node the same way
under srun, ssh and the local transport, and every command logged is the whole
truth. A multi-node run is a :class:`~burnin.launch.base.JobSpec` (the tool,
its ranks, its NCCL environment) that the launcher starts its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from burnin.fabric.settings import FabricSettings
from burnin.launch.base import Container, JobSpec, MpirunOptions, SrunOptions, with_env, with_timeout
from burnin.topology.model import Topology


def compute_hca_list(topology: Topology) -> str:
    """``=mlx5_0:1,...``: exactly the compute HCAs (``=`` = exact names, never a prefix)."""
    names = [f"{hca.name}:1" for hca in topology.compute_hcas]
    return "=" + ",".join(names) if names else ""


def single_hca(name: str) -> str:
    """NCCL_IB_HCA for a single-rail run."""
    return f"={name}:1"


def default_socket_ifname(topology: Topology) -> str:
    """Bootstrap interface: anything but docker, loopback and the storage fabric's netdevs."""
    storage = [hca.netdev for hca in topology.storage_hcas if hca.netdev]
    return ",".join(["^docker", "lo", *storage])


EVIDENCE_SUBSYS = "INIT,NET,ENV"
"""``NCCL_DEBUG_SUBSYS`` of an evidence run: ``NET/IB : Using``, the channel lines and the settings NCCL read."""


@dataclass(frozen=True, slots=True)
class NcclEvidence:
    """A multi-node run that also shows which network devices NCCL opened (STO-02 runtime evidence).

    It runs with ``NCCL_DEBUG=INFO`` and :data:`EVIDENCE_SUBSYS`, its INFO lines on stdout
    (``NCCL_DEBUG_FILE`` is dropped), so they come back with the run's output.
    """

    name: str
    """``group`` (the multi-node all_reduce itself) or ``node-config``."""
    node_config: bool = False
    """``NCCL_IB_HCA`` is not set: each node's own NCCL configuration (its nccl.conf, the launch
    environment) picks the devices, as for a job that does not set it."""
    short: bool = False
    """8 B to 8 MiB, one iteration: enough for NCCL to open its devices and connect its channels."""


GROUP_EVIDENCE = NcclEvidence("group")
NODE_CONFIG_EVIDENCE = NcclEvidence("node-config", node_config=True, short=True)


def nccl_env(topology: Topology, settings: FabricSettings, *, ib_hca: str | None = None,
             evidence: NcclEvidence | None = None) -> dict[str, str]:
    """The NCCL environment of every nccl-tests launch (check-catalog 6, STO-02)."""
    env = {
        "NCCL_IB_HCA": ib_hca or settings.ib_hca or compute_hca_list(topology),
        "NCCL_SOCKET_IFNAME": settings.socket_ifname or default_socket_ifname(topology),
        "NCCL_NVLS_ENABLE": "1" if settings.nvls else "0",
        "NCCL_DEBUG": settings.debug,
    }
    if not env["NCCL_IB_HCA"]:
        del env["NCCL_IB_HCA"]
    env.update(settings.extra_env)
    if evidence is not None:
        env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": EVIDENCE_SUBSYS})
        env.pop("NCCL_DEBUG_FILE", None)
        if evidence.node_config:
            env.pop("NCCL_IB_HCA", None)
    return env


def perf_binary(settings: FabricSettings, collective: str) -> str:
    name = f"{collective}_perf"
    return f"{settings.nccl_tests_dir.rstrip('/')}/{name}" if settings.nccl_tests_dir else name


def perf_args(settings: FabricSettings, gpus_per_process: int, *, short: bool = False) -> list[str]:
    """``-b MIN -e MAX -f F -g G -n ITERS -w WARMUP -c 1`` (data check always on: NCCL-05)."""
    if short:
        return ["-b", "8", "-e", "8M", "-f", "2", "-g", str(gpus_per_process), "-n", "1", "-w", "1", "-c", "1"]
    return ["-b", settings.min_bytes, "-e", settings.max_bytes, "-f", str(settings.step_factor),
            "-g", str(gpus_per_process), "-n", str(settings.iters), "-w", str(settings.warmup), "-c", "1"]


def single_node_command(topology: Topology, settings: FabricSettings, collective: str) -> list[str]:
    """One process driving every GPU of the node (``-g 8``): catalog NCCL-01's single-node form."""
    tool = [perf_binary(settings, collective), *perf_args(settings, len(topology.gpus.devices))]
    return with_env(with_timeout(tool, settings.timeout_s), nccl_env(topology, settings))


# IB-08 loopback: the server in the background, the client connecting to it on the same node (retried
# while the server is not listening yet), the server's own output shown when the client failed.
# "$@" is ib_write_bw with its arguments; the client adds the server name. Stopped (the timeout's TERM, an SSH
# session's HUP), it stops the server and removes the server's log before it goes.
LOOPBACK_TASK = (
    'log=$(mktemp) || exit 1; server=; trap \'kill $server 2>/dev/null; rm -f "$log"; exit 143\' TERM; '
    'trap \'kill $server 2>/dev/null; rm -f "$log"; exit 129\' HUP; "$@" >"$log" 2>&1 & server=$!; n=0; '
    'while :; do out=$("$@" localhost 2>&1); rc=$?; [ "$rc" -eq 0 ] && break; n=$((n + 1)); '
    'case "$out" in *"Couldn\'t connect"*|*"Unable to init the socket"*) '
    '[ "$n" -lt 50 ] && { sleep 0.2; continue; } ;; esac; break; done; '
    '[ "$rc" -eq 0 ] || kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; printf "%s\\n" "$out"; '
    '[ "$rc" -eq 0 ] || sed "s/^/server: /" "$log" >&2; rm -f "$log"; exit "$rc"'
)
MEMORY_KINDS = ("cuda", "host")
"""IB-08 runs every HCA twice: GPU memory of its paired GPU (``--use_cuda``), then host memory."""


def ib_write_bw_port(settings: FabricSettings, hca_index: int, kind: str) -> int:
    return settings.ib_write_bw_port + 2 * hca_index + MEMORY_KINDS.index(kind)


def ib_write_bw_command(settings: FabricSettings, hca: str, gpu: int | None, *, port: int) -> list[str]:
    """``ib_write_bw -d HCA -F --report_gbits -s S -n N -q Q -p P [--use_cuda=GPU]`` as a loopback pair.

    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA number the GPUs as nvidia-smi
    and the topology do (CUDA's default order is fastest first).
    """
    tool = [settings.ib_write_bw, "-d", hca, "-F", "--report_gbits", "-s", str(settings.ib_write_bw_size),
            "-n", str(settings.ib_write_bw_iters), "-q", str(settings.ib_write_bw_qps), "-p", str(port)]
    if gpu is not None:
        tool.append(f"--use_cuda={gpu}")
    pair = ["sh", "-c", LOOPBACK_TASK, "sh", *tool]
    return with_env(with_timeout(pair, settings.timeout_s), {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})


def nvbandwidth_command(settings: FabricSettings) -> list[str]:
    tool = [settings.nvbandwidth, "-i", str(settings.nvbandwidth_iters)]
    for testcase in settings.nvbandwidth_testcases:
        tool += ["-t", testcase]
    return with_timeout(tool, settings.timeout_s)


def p2p_bandwidth_command(settings: FabricSettings) -> list[str]:
    """NVL-03: the CUDA sample ``p2pBandwidthLatencyTest`` as it ships (no options: P2P writes, copy engines)."""
    return with_timeout([settings.p2p_bandwidth], settings.timeout_s)


# ---------------------------------------------------------------- the multi-node job


def srun_options(settings: FabricSettings) -> SrunOptions:
    """What Slurm is told about a fabric step: MPI, GPUs per node, the container (pyxis), the site's arguments."""
    container = Container(settings.container) if settings.container else None
    return SrunOptions(mpi=settings.mpi, gpus_per_node=settings.srun_gpus_per_node, container=container,
                       extra=tuple(settings.srun_args))


def group_job(nodes: Sequence[str], topology: Topology, settings: FabricSettings, collective: str, *,
              ib_hca: str | None = None, evidence: NcclEvidence | None = None,
              timeout_s: float | None = None) -> JobSpec:
    """One multi-node nccl-tests run (catalog NCCL-03): ``ranks_per_node`` ranks of ``-g gpus_per_rank`` on each
    node, the NCCL environment on every rank; the launcher starts it its way (srun, mpirun, a simulated job)."""
    short = evidence is not None and evidence.short
    program = (perf_binary(settings, collective), *perf_args(settings, settings.gpus_per_rank, short=short))
    return JobSpec(tuple(nodes), program, settings.timeout_s if timeout_s is None else timeout_s,
                   ranks_per_node=settings.ranks_per_node,
                   env=nccl_env(topology, settings, ib_hca=ib_hca, evidence=evidence),
                   launcher="mpirun" if settings.launcher == "mpirun" else "auto",
                   srun=srun_options(settings), mpirun=MpirunOptions(settings.mpirun, tuple(settings.mpirun_args)))
