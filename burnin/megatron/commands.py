"""The commands burnin launches for the Megatron smoke run and the placement probe (pure: argv lists).

Two launch forms, as production launches training (check-catalog MEG-01, PIN-01):

- **srun** (Slurm dispatch): one job per run (a :class:`~burnin.launch.base.JobSpec` the Slurm launcher turns
  into one step), GPUs per node ranks on each node, ``--label`` so each rank's lines can be told apart,
  ``--cpu-bind=verbose,<policy>`` and ``--gpu-bind`` for the binding; a small ``sh -c`` wrapper turns
  ``SLURM_PROCID``/``SLURM_LOCALID``/``SLURM_NTASKS`` into the ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` that
  torch.distributed reads; a pyxis container is ``--container-image``.
- **torchrun** (SSH or local dispatch): one command per node with its ``--node_rank``, ``--tee 3`` so each
  line carries ``[defaultN]:``; binding is a ``numactl --cpunodebind=N --membind=N`` wrapper per local rank
  (N = the NUMA node of GPU ``LOCAL_RANK`` in the topology); docker or apptainer wrap the whole command.

A single-node run per node (TP ``single_node.tensor``) and one multi-node run per group (TP within the
node, DP across nodes). The environment (``CUDA_DEVICE_MAX_CONNECTIONS``, ``NCCL_IB_HCA`` = the compute
HCAs, the site's ``env``) is set inside the command, so every transport carries it the same way.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Literal

from burnin.launch.base import Container, JobSpec, NodeCommand, Note, PlanItem, SrunOptions, slack, with_timeout
from burnin.megatron.config import MegatronSettings, Parallelism
from burnin.topology.model import Topology

Form = Literal["srun", "torchrun"]
BindingKind = Literal["slurm", "numactl", "none"]
RunKind = Literal["single", "multi", "probe"]

RANK_WRAPPER = "burnin-rank"
BIND_WRAPPER = "burnin-bind"
PROBE_SHOWN = "<burnin placement probe>"


@dataclass(frozen=True, slots=True)
class Launch:
    """One run: a command per node (torchrun on each node), or one job of every rank (srun)."""

    kind: RunKind
    form: Form
    binding: BindingKind
    nodes: tuple[str, ...]
    commands: tuple[NodeCommand, ...]
    """torchrun: each node's command, started together; srun: none (see :attr:`job`)."""
    job: JobSpec | None
    """srun: the job the Slurm launcher starts as one step where burnin runs (its output under the first node)."""
    ranks_per_node: int
    timeout_s: float
    parallel: Parallelism | None = None

    @property
    def argv_by_node(self) -> Mapping[str, tuple[str, ...]]:
        """What runs on each node (srun: every rank's command, under the first node)."""
        if self.job is not None:
            return {self.nodes[0]: self.job.program}
        return {command.node: command.argv for command in self.commands}

    @property
    def world_size(self) -> int:
        return self.ranks_per_node * len(self.nodes)

    @property
    def label(self) -> str:
        what = {"single": "single-node run", "multi": "multi-node run", "probe": "placement probe"}[self.kind]
        return f"{what} on {','.join(self.nodes)}"

    def plan(self) -> list[PlanItem]:
        """What this run starts, as a launcher shows it (``--dry-run``, docs/megatron.md); the probe's source,
        passed to ``python3 -c`` whole, is shown as ``<burnin placement probe>``."""
        def shown(argv: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(PROBE_SHOWN if arg == probe_source() else arg for arg in argv)

        items: list[PlanItem] = [Note(self.label)]
        if self.job is not None:
            return [*items, replace(self.job, program=shown(self.job.program))]
        return [*items, *(replace(c, argv=shown(c.argv)) for c in self.commands)]


# ------------------------------------------------------------------ pieces


def numa_of_local_rank(topology: Topology) -> list[int]:
    """NUMA node of the GPU each local rank drives (rank i -> GPU index i)."""
    return [d.numa_node for d in sorted(topology.gpus.devices, key=lambda d: d.index)]


def nccl_ib_hca(settings: MegatronSettings, topology: Topology) -> str | None:
    """NCCL_IB_HCA: the site's, else exactly the topology's compute HCAs (``=mlx5_0:1,...``)."""
    if settings.nccl_ib_hca is not None:
        return settings.nccl_ib_hca
    compute = [h.name for h in topology.compute_hcas]
    return "=" + ",".join(f"{name}:1" for name in compute) if compute else None


def rank_environment(settings: MegatronSettings, topology: Topology) -> dict[str, str]:
    """Variables every rank gets (the site's ``env`` wins over burnin's)."""
    env: dict[str, str] = {}
    hca = nccl_ib_hca(settings, topology)
    if hca:
        env["NCCL_IB_HCA"] = hca
    env.update(settings.env)
    return env


def distributed_timeout_minutes(settings: MegatronSettings) -> int:
    """NCCL's collective timeout, half the launch timeout: a stuck collective is reported by the watchdog
    (MEG-04 names the rank) before burnin stops the run as hung."""
    return max(1, int(settings.timeout_s // 120))


def training_args(settings: MegatronSettings, parallel: Parallelism, world_size: int) -> list[str]:
    """``pretrain_gpt.py`` arguments: the catalog's recipe with mock data, no dataset or tokenizer files."""
    shape = settings.model
    batch = parallel.batch_for(world_size)  # ValueError when the model split does not divide the world
    args = ["--use-mcore-models", "--num-layers", str(shape.num_layers), "--hidden-size", str(shape.hidden_size),
            "--ffn-hidden-size", str(shape.ffn_hidden_size), "--num-attention-heads", str(shape.num_attention_heads)]
    if shape.num_query_groups is not None:
        args += ["--group-query-attention", "--num-query-groups", str(shape.num_query_groups)]
    if shape.kv_channels is not None:
        args += ["--kv-channels", str(shape.kv_channels)]
    args += ["--seq-length", str(shape.seq_length), "--max-position-embeddings", str(shape.positions),
             "--position-embedding-type", "rope", "--rotary-base", str(shape.rotary_base)]
    if shape.swiglu:
        args.append("--swiglu")
    if shape.num_experts is not None:
        args += ["--num-experts", str(shape.num_experts), "--moe-router-topk", str(shape.moe_router_topk)]
    args += ["--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-backend", "fused",
             "--bf16", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
             "--tensor-model-parallel-size", str(parallel.tensor),
             "--pipeline-model-parallel-size", str(parallel.pipeline),
             "--context-parallel-size", str(parallel.context)]
    if parallel.sequence_parallel and parallel.tensor > 1:
        args.append("--sequence-parallel")
    args += ["--micro-batch-size", str(parallel.micro_batch_size),
             "--global-batch-size", str(batch),
             "--train-iters", str(settings.train_iters), "--lr", f"{settings.lr:g}", "--min-lr", f"{settings.min_lr:g}",
             "--lr-decay-style", "cosine", "--lr-warmup-iters", str(settings.lr_warmup_iters),
             "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(shape.vocab_size),
             "--make-vocab-size-divisible-by", str(shape.make_vocab_size_divisible_by), "--split", "99,1,0",
             "--no-create-attention-mask-in-dataloader", "--num-workers", "1",
             "--log-interval", str(settings.log_interval), "--log-throughput", "--eval-iters", "0",
             "--distributed-timeout-minutes", str(distributed_timeout_minutes(settings))]
    return args + list(settings.extra_args)


def training_payload(settings: MegatronSettings, parallel: Parallelism, world_size: int) -> list[str]:
    """What each rank executes: ``python3 pretrain_gpt.py ARGS`` (or the script alone when ``python`` is None)."""
    head = [settings.python, settings.pretrain_script] if settings.python else [settings.pretrain_script]
    return head + training_args(settings, parallel, world_size)


def probe_payload(settings: MegatronSettings) -> list[str]:
    """What each rank of the placement probe executes: the site's ``probe`` or ``python3 -c <burnin's probe>``."""
    if settings.probe is not None:
        return list(settings.probe)
    return [settings.probe_python, "-c", probe_source()]


@cache
def probe_source() -> str:
    """The placement probe's source (standard library only), run with ``python3 -c``: nothing to install."""
    return (Path(__file__).resolve().parents[1] / "collector" / "placement.py").read_text(encoding="utf-8")


def _numa_case(topology: Topology, rank_var: str) -> str:
    by_node: dict[int, list[int]] = {}
    for rank, numa in enumerate(numa_of_local_rank(topology)):
        by_node.setdefault(numa, []).append(rank)
    arms = " ".join(f"{'|'.join(map(str, ranks))}) n={numa} ;;" for numa, ranks in sorted(by_node.items()))
    return (f'case "{rank_var}" in {arms} *) echo "{BIND_WRAPPER}: no GPU for local rank {rank_var}" >&2; '
            f"exit 1 ;; esac")


def _exports(env: Mapping[str, str]) -> str:
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + "; " if env else ""


def _numactl(settings: MegatronSettings) -> str:
    return f'exec {shlex.quote(settings.numactl)} --cpunodebind="$n" --membind="$n" "$@"'


def srun_rank_wrapper(settings: MegatronSettings, topology: Topology, env: Mapping[str, str],
                      binding: BindingKind) -> list[str]:
    """``sh -c '<exports>; RANK=$SLURM_PROCID ...; exec "$@"' burnin-rank`` (numactl inside with that binding)."""
    script = _exports(env) + ('export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID" '
                              'WORLD_SIZE="$SLURM_NTASKS"; ')
    if binding == "numactl":
        script += _numa_case(topology, "$SLURM_LOCALID") + "; " + _numactl(settings)
    else:
        script += 'exec "$@"'
    return ["sh", "-c", script, RANK_WRAPPER]


def numactl_wrapper(settings: MegatronSettings, topology: Topology) -> list[str]:
    """torchrun's per-rank binding: ``sh -c 'case $LOCAL_RANK ...; exec numactl ... "$@"' burnin-bind``."""
    return ["sh", "-c", _numa_case(topology, "$LOCAL_RANK") + "; " + _numactl(settings), BIND_WRAPPER]


KILL_AFTER_S = 10
TIMED_OUT_EXITS = (124, 137)
"""What ``timeout`` exits with when it stopped the command (137: it had to SIGKILL)."""


def time_limit(timeout_s: float) -> list[str]:
    """``timeout -k 10 T``: the limit travels inside the command, so a run is stopped on the node itself even
    when the transport's connection (ssh) is what burnin kills; torch gets 10 s to tear its ranks down."""
    return with_timeout([], timeout_s, kill_after_s=KILL_AFTER_S)


# ------------------------------------------------------------------ launches


def srun_job(settings: MegatronSettings, topology: Topology, nodes: Sequence[str], payload: list[str], *,
             binding: BindingKind, env: Mapping[str, str], timeout_s: float) -> JobSpec:
    """Every rank of a run as one srun job: the rank wrapper (torch's variables, numactl binding) around
    ``timeout`` and the payload; Slurm's binding, GPUs and a pyxis container as srun options."""
    container = settings.container
    pyxis = None
    if container is not None and container.runner == "pyxis":
        pyxis = Container(container.image, tuple(container.mounts), container.workdir, tuple(container.runner_args))
    options = SrunOptions(
        cpu_bind=f"verbose,{settings.srun_cpu_bind if binding == 'slurm' else 'none'}",
        distribution=settings.srun_distribution if binding == "slurm" and settings.srun_distribution else None,
        gpus_per_task=1 if settings.srun_gpu_bind is not None else None, gpu_bind=settings.srun_gpu_bind,
        container=pyxis, extra=tuple(settings.srun_args))
    full_env = {"MASTER_ADDR": nodes[0], "MASTER_PORT": str(settings.master_port), **env}
    program = srun_rank_wrapper(settings, topology, full_env, binding) + time_limit(timeout_s) + payload
    return JobSpec(tuple(nodes), tuple(program), timeout_s, ranks_per_node=topology.gpus.count, time_limit=False,
                   slack_s=slack(timeout_s), label=True, srun=options)


def _container_prefix(settings: MegatronSettings) -> list[str]:
    container = settings.container
    if container is None or container.runner == "pyxis":
        return []
    if container.runner == "docker":
        argv = ["docker", "run", "--rm", "--gpus", "all", "--network", "host", "--ipc", "host",
                "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "--cap-add", "SYS_NICE"]
        for mount in container.mounts:
            argv += ["-v", mount if ":" in mount else f"{mount}:{mount}"]
        if container.workdir:
            argv += ["-w", container.workdir]
    else:
        argv = ["apptainer", "exec", "--nv"]
        for mount in container.mounts:
            argv += ["--bind", mount]
        if container.workdir:
            argv += ["--pwd", container.workdir]
    return argv + list(container.runner_args) + [container.image]


def _torchrun(settings: MegatronSettings, topology: Topology, nodes: Sequence[str], node_rank: int,
              payload: list[str], *, binding: BindingKind, env: Mapping[str, str], timeout_s: float) -> list[str]:
    argv = _container_prefix(settings) + time_limit(timeout_s)
    if env:
        argv += ["env", *(f"{k}={v}" for k, v in env.items())]
    argv += [settings.torchrun, f"--nproc_per_node={topology.gpus.count}", f"--nnodes={len(nodes)}",
             f"--node_rank={node_rank}", f"--master_addr={nodes[0]}", f"--master_port={settings.master_port}",
             "--tee=3", "--no-python"]
    if binding == "numactl":
        argv += numactl_wrapper(settings, topology)
    return argv + payload


def _launch(settings: MegatronSettings, topology: Topology, nodes: Sequence[str], payload: list[str], *,
            kind: RunKind, form: Form, timeout_s: float, parallel: Parallelism | None) -> Launch:
    if not nodes:
        raise ValueError("a launch needs at least one node")
    binding = settings.binding_for(form)
    env = rank_environment(settings, topology)
    if form == "srun":
        job = srun_job(settings, topology, nodes, payload, binding=binding, env=env, timeout_s=timeout_s)
        return Launch(kind, form, binding, tuple(nodes), (), job, topology.gpus.count, timeout_s, parallel)
    commands = tuple(NodeCommand(node, tuple(_torchrun(settings, topology, nodes, rank, payload, binding=binding,
                                                       env=env, timeout_s=timeout_s)),
                                 timeout_s + slack(timeout_s))
                     for rank, node in enumerate(nodes))
    return Launch(kind, form, binding, tuple(nodes), commands, None, topology.gpus.count, timeout_s, parallel)


def training_launch(settings: MegatronSettings, topology: Topology, nodes: Sequence[str], *,
                    form: Form) -> Launch:
    """The training run on ``nodes``: single-node (one node) or multi-node (TP within a node, DP across)."""
    kind: RunKind = "single" if len(nodes) == 1 else "multi"
    parallel = settings.single_node if kind == "single" else settings.multi_node
    payload = training_payload(settings, parallel, topology.gpus.count * len(nodes))
    return _launch(settings, topology, nodes, payload, kind=kind, form=form, timeout_s=settings.timeout_s,
                   parallel=parallel)


def probe_launch(settings: MegatronSettings, topology: Topology, node: str, *, form: Form) -> Launch:
    """The placement probe on one node, with the binding options training uses (PIN-01..04)."""
    return _launch(settings, topology, [node], probe_payload(settings), kind="probe", form=form,
                   timeout_s=settings.probe_timeout_s, parallel=None)


def plan(settings: MegatronSettings, topology: Topology, nodes: Sequence[str],
         groups: Sequence[Sequence[str]] | None = None, *, form: Form) -> list[Launch]:
    """Every launch of the phase in order: the probe and the single-node run per node, then one
    multi-node run per group of two or more nodes (``groups`` default: all nodes)."""
    launches = [probe_launch(settings, topology, node, form=form) for node in nodes]
    launches += [training_launch(settings, topology, [node], form=form) for node in nodes]
    if settings.multi_node_run:
        for group in groups if groups is not None else [list(nodes)]:
            if len(group) >= 2:
                launches.append(training_launch(settings, topology, list(group), form=form))
    return launches
