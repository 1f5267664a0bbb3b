"""The argv lists and environment of every fabric launch (pure: nothing here runs anything).

A launch is ``[launcher...] env K=V... timeout -k 5 T tool args``: the
environment and the time limit travel inside the argv, so they reach the ranks
the same way under srun, mpirun, ssh and the local transport, and every command
logged is the whole truth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from burnin.fabric.settings import FabricSettings
from burnin.nodes import fold
from burnin.topology.model import Topology
from burnin.transport import slurm as slurm_argv
from burnin.transport.slurm import PER_NODE_TASK as PER_NODE_TASK  # the one per-node task (Slurm's job layer)
from burnin.transport.slurm import minutes

KILL_AFTER_S = 5  # `timeout -k`: SIGKILL this long after SIGTERM


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


def with_env(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    return ["env", *(f"{key}={value}" for key, value in env.items()), *argv] if env else list(argv)


def with_timeout(argv: Sequence[str], seconds: float) -> list[str]:
    return ["timeout", "-k", str(KILL_AFTER_S), str(max(1, math.ceil(seconds))), *argv]


def single_node_command(topology: Topology, settings: FabricSettings, collective: str) -> list[str]:
    """One process driving every GPU of the node (``-g 8``): catalog NCCL-01's single-node form."""
    tool = [perf_binary(settings, collective), *perf_args(settings, len(topology.gpus.devices))]
    return with_env(with_timeout(tool, settings.timeout_s), nccl_env(topology, settings))


def rank_command(topology: Topology, settings: FabricSettings, collective: str, *,
                 ib_hca: str | None = None, extra_env: Mapping[str, str] | None = None,
                 evidence: NcclEvidence | None = None, timeout_s: float | None = None) -> list[str]:
    """What each rank of a multi-node job runs (``-g gpus_per_rank``), with env and time limit."""
    short = evidence is not None and evidence.short
    tool = [perf_binary(settings, collective), *perf_args(settings, settings.gpus_per_rank, short=short)]
    env = {**nccl_env(topology, settings, ib_hca=ib_hca, evidence=evidence), **(extra_env or {})}
    return with_env(with_timeout(tool, settings.timeout_s if timeout_s is None else timeout_s), env)


# IB-08 loopback: the server in the background, the client connecting to it on the same node (retried
# while the server is not listening yet), the server's own output shown when the client failed.
# "$@" is ib_write_bw with its arguments; the client adds the server name.
LOOPBACK_TASK = (
    'log=$(mktemp) || exit 1; "$@" >"$log" 2>&1 & server=$!; n=0; '
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


# ---------------------------------------------------------------- Slurm


def salloc_argv(nodes: Sequence[str], *, job_name: str, time_limit_s: float, immediate_s: float,
                partition: str | None = None, reservation: str | None = None) -> list[str]:
    """Whole nodes (``--exclusive``) for the fabric phase, without a shell, bounded wait."""
    return slurm_argv.salloc_argv(nodes, job_name=job_name, time_limit_s=time_limit_s, immediate_s=immediate_s,
                                  partition=partition, reservation=reservation, exclusive=True, tasks_per_node=None)


def _srun_common(job_id: str, nodes: Sequence[str], settings: FabricSettings, time_limit_s: float) -> list[str]:
    argv = ["srun", f"--jobid={job_id}", f"--nodes={len(nodes)}", f"--nodelist={fold(nodes)}",
            "--overlap", f"--time={minutes(time_limit_s)}"]
    if settings.container:
        argv.append(f"--container-image={settings.container}")
    return [*argv, *settings.srun_args]


def srun_per_node_argv(job_id: str, nodes: Sequence[str], command: Sequence[str], settings: FabricSettings,
                       *, time_limit_s: float, job_name: str) -> list[str]:
    """One step, one task per node, each an independent process (``--mpi=none``), labelled."""
    argv = _srun_common(job_id, nodes, settings, time_limit_s)
    argv += [f"--ntasks={len(nodes)}", "--ntasks-per-node=1", "--mpi=none", "--kill-on-bad-exit=0",
             "--label", f"--job-name={job_name}"]
    if settings.srun_gpus_per_node:
        argv.append(f"--gpus-per-node={settings.srun_gpus_per_node}")
    return [*argv, "sh", "-c", PER_NODE_TASK, "sh", *command]


def srun_job_argv(job_id: str, nodes: Sequence[str], command: Sequence[str], settings: FabricSettings,
                  *, time_limit_s: float, job_name: str) -> list[str]:
    """One multi-node MPI job: ``ranks_per_node`` ranks on each node (catalog: srun --mpi=pmix)."""
    argv = _srun_common(job_id, nodes, settings, time_limit_s)
    argv += [f"--ntasks={len(nodes) * settings.ranks_per_node}",
             f"--ntasks-per-node={settings.ranks_per_node}", "--kill-on-bad-exit=1", f"--job-name={job_name}"]
    if settings.mpi:
        argv.append(f"--mpi={settings.mpi}")
    if settings.srun_gpus_per_node:
        argv.append(f"--gpus-per-node={settings.srun_gpus_per_node}")
    return [*argv, *command]


# ---------------------------------------------------------------- mpirun


def mpirun_argv(nodes: Sequence[str], topology: Topology, settings: FabricSettings, collective: str, *,
                ib_hca: str | None = None, evidence: NcclEvidence | None = None,
                timeout_s: float | None = None) -> list[str]:
    """``timeout T mpirun -np N -N R --host a:R,b:R -x K=V ... <perf> -g G`` (catalog NCCL-03)."""
    per = settings.ranks_per_node
    argv = [settings.mpirun, "-np", str(len(nodes) * per), "-N", str(per),
            "--host", ",".join(f"{node}:{per}" for node in nodes), *settings.mpirun_args]
    for key, value in nccl_env(topology, settings, ib_hca=ib_hca, evidence=evidence).items():
        argv += ["-x", f"{key}={value}"]
    short = evidence is not None and evidence.short
    argv += [perf_binary(settings, collective), *perf_args(settings, settings.gpus_per_rank, short=short)]
    return with_timeout(argv, settings.timeout_s if timeout_s is None else timeout_s)
