"""Simulated ``torchrun``, Megatron-LM ``pretrain_gpt.py`` and burnin's placement probe: real formats, node state.

Standard library only: each simulated node carries a copy as ``out/megatron/model.py``,
run by its ``bin/torchrun``, ``bin/pretrain_gpt.py`` and ``bin/burnin-placement-probe``
shims. It reads ``out/megatron/health.json`` of every member of the run, found next
to its own node directory (``<rack>/nodes/<member>/``).

- ``torchrun`` emulates every local rank of its node in one process and prints each
  rank's lines with ``--tee 3``'s ``[defaultN]:`` prefix; the entry after the options
  is Megatron (an argument named ``pretrain_gpt.py``) or the placement probe (the
  ``burnin-placement-probe`` stand-in, or ``python3 -c`` with burnin's probe). A
  ``numactl --cpunodebind`` wrapper in the entry means the ranks are bound.
- ``pretrain_gpt.py`` and ``burnin-placement-probe`` run alone are one rank each
  (srun: ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` or ``SLURM_PROCID``/``SLURM_LOCALID``);
  srun's ``SLURM_CPU_BIND*`` variables say whether the ranks are bound.

Who is in the run: ``BURNIN_SIM_JOB_NODES`` (a comma list), else the Slurm step's
nodes; else, for ``torchrun --nnodes N`` (N > 1) on each node, the nodes whose agents
meet at ``--master_addr``/``--master_port`` (``rendezvous.py``, a copy of
:mod:`burnin.sim.rendezvous`: the master's agent holds the store, each agent reports its
``--node_rank`` and node, as torchrun's static rendezvous does), in node rank order;
else this node (and ``--master_addr`` when it is another simulated node).

Megatron (the shape, batch and TP come from the arguments; the log lines are
Megatron's ``training_log`` format): every GPU reaches ``TFLOPS`` TFLOP/s (times
0.8 on a ``train-slow`` member; a multi-node run reaches 97% of its slowest member),
the iteration time follows from Megatron's FLOP formula, the loss falls from
ln(vocab) towards 7. Faults of any member: ``train-loss-nan`` (loss ``NAN`` and a NaN
iteration from iteration ``NAN_FROM``), ``train-hang`` (a few iterations, then nothing
until killed), ``nccl-timeout`` (rank 3 of the faulted node prints torch's watchdog
timeout after iteration ``NCCL_AT``, every rank exits 1).

The placement probe prints what burnin's probe prints. Bound ranks get their GPU's
NUMA node (CPUs, memory, first-touch pages); unbound ranks, or any rank of a
``cpu-bind-none`` node, every CPU and memory node with their pages on node 0;
``cpu-bind-wrong-numa@gpuN`` puts the rank of GPU N on the other NUMA node.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

TFLOPS = 430.0
SLOW_FACTOR = 0.8
MULTI_NODE_FACTOR = 0.97
NAN_FROM = 17
NCCL_AT = 12
HANG_AFTER = 3
RENDEZVOUS_WAIT_S = 120.0  # torchrun's agents wait this long for each other (its --rdzv-timeout is 900 s)
NOISE = 0.01
PROBE_MARKER = "BURNIN-PLACEMENT"
WATCHDOG = ("[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600013 milliseconds before timing out.")
_RANGE = re.compile(r"^([^\[]*)\[([0-9,\-]+)\](.*)$")
TORCHRUN_VALUE_OPTIONS = {"--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--node-rank",
                          "--master_addr", "--master-addr", "--master_port", "--master-port", "--tee",
                          "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_id",
                          "--rdzv-id", "--log_dir", "--log-dir", "--redirects", "--max_restarts", "--max-restarts"}


class SimFailure(Exception):
    pass


def expand(nodeset: str) -> list[str]:
    """``sim[01-03,07],gpu5`` -> names."""
    parts, depth, cur = [], 0, ""
    for ch in nodeset:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names: list[str] = []
    for part in filter(None, (p.strip() for p in parts)):
        match = _RANGE.match(part)
        if match is None:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            names += [f"{prefix}{i:0{len(lo)}d}{suffix}" for i in range(int(lo), int(hi or lo) + 1)]
    return names


def _nodes_dir() -> Path:
    return Path(__file__).resolve().parents[3]


def health(name: str) -> dict[str, Any]:
    path = _nodes_dir() / name / "out" / "megatron" / "health.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SimFailure(f"no simulated node {name!r} ({exc})") from None
    return data


def this_node() -> str:
    return str(health_of_self()["node"])


def health_of_self() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(__file__).resolve().parent / "health.json").read_text(encoding="utf-8"))
    return data


def members(master: str | None = None) -> list[str]:
    explicit = os.environ.get("BURNIN_SIM_JOB_NODES")
    if explicit:
        return [n for n in explicit.split(",") if n]
    step = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if step and (os.environ.get("SLURM_PROCID") is not None):
        return expand(step)
    me = this_node()
    if master and master != me and (_nodes_dir() / master / "out" / "megatron" / "health.json").is_file():
        return [master, me]
    return [me]


def _rendezvous() -> Any:
    """The rendezvous module: its copy next to this file on a node, the package module in the repository."""
    try:
        import rendezvous  # type: ignore[import-not-found]
    except ImportError:
        from burnin.sim import rendezvous
    return rendezvous


class Agents:
    """torchrun's agents of one multi-node run, met at the master's address and port (a static rendezvous)."""

    def __init__(self, master: str, port: str, nnodes: int, node_rank: int) -> None:
        self.rendezvous = _rendezvous()
        self.where = self.rendezvous.folder("torchrun", master, port)
        self.nnodes, self.node_rank = nnodes, node_rank
        self.generation: str | None = None

    def members(self) -> list[str]:
        """Every agent's node, in node rank order (the master's agent holds the store until :meth:`close`)."""
        record = {"node_rank": self.node_rank, "node": this_node(), "host": socket.gethostname()}
        try:
            if self.node_rank == 0:
                self.generation, records = self.rendezvous.open_store(self.where, self.nnodes, record,
                                                                      RENDEZVOUS_WAIT_S)
            else:
                records = self.rendezvous.join_store(self.where, self.node_rank, self.nnodes, record,
                                                     RENDEZVOUS_WAIT_S)
        except self.rendezvous.Missing as exc:
            raise SimFailure(f"torch.distributed.DistNetworkError: rendezvous failed: {exc}") from None
        return [str(r["node"]) for r in records]

    def close(self) -> None:
        if self.generation is not None:
            self.rendezvous.close_store(self.where, self.generation)


def has(node: dict[str, Any], fault: str) -> bool:
    return any(f == fault or f.startswith(fault + "@") for f in node.get("faults", []))


def fault_target(node: dict[str, Any], fault: str) -> int | None:
    for f in node.get("faults", []):
        if f.startswith(fault + "@gpu"):
            return int(f.rsplit("gpu", 1)[1])
    return None


# ---------------------------------------------------------------- Megatron


def _arg(args: list[str], name: str, default: str | None = None) -> str | None:
    for i, item in enumerate(args):
        if item == name and i + 1 < len(args):
            return args[i + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return default


def _int(args: list[str], name: str, default: int) -> int:
    value = _arg(args, name)
    return int(value) if value is not None else default


def flops_per_iteration(args: list[str]) -> float:
    """Megatron's num_floating_point_operations for one iteration (the same formula it logs with)."""
    layers, hidden = _int(args, "--num-layers", 32), _int(args, "--hidden-size", 4096)
    heads = _int(args, "--num-attention-heads", 32)
    groups = _int(args, "--num-query-groups", heads) if "--group-query-attention" in args else heads
    kv = _int(args, "--kv-channels", hidden // heads)
    ffn = _int(args, "--ffn-hidden-size", 4 * hidden)
    seq, batch = _int(args, "--seq-length", 8192), _int(args, "--global-batch-size", 128)
    tp = _int(args, "--tensor-model-parallel-size", 1)
    multiple = _int(args, "--make-vocab-size-divisible-by", 128) * tp
    vocab = -(-_int(args, "--vocab-size", 128256) // multiple) * multiple
    top_k = _int(args, "--moe-router-topk", 1) if "--num-experts" in args else 1
    gated = 1.5 if "--swiglu" in args else 1.0
    bracket = ((1 + groups / heads + seq / hidden) * (kv * heads / hidden) + ffn / hidden * top_k * gated
               + vocab / (2 * layers * hidden))
    return 12.0 * batch * seq * layers * hidden * hidden * bracket


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def iteration_line(t: float, it: int, total: int, consumed: int, ms: float, tflops: float, lr: float,
                   batch: int, loss: float, nan: int) -> str:
    loss_text = f"{loss:.6E}"
    return (f" [{_stamp(t)}] iteration {it:8d}/{total:8d} | consumed samples: {consumed:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
            f"learning rate: {lr:.6E} | global batch size: {batch:5d} | lm loss: {loss_text} | "
            f"loss scale: 1.0 | grad norm: {1.2 + 0.4 * math.exp(-it / 10):.3f} | "
            f"number of skipped iterations: {0:3d} | number of nan iterations: {nan:3d} |")


class Run:
    """One Megatron run over ``nodes``, as its ranks would print it."""

    def __init__(self, args: list[str], nodes: list[str], ranks_per_node: int) -> None:
        self.args = args
        self.nodes = nodes
        self.health = [health(n) for n in nodes]
        self.ranks_per_node = ranks_per_node
        self.world = ranks_per_node * len(nodes)
        self.total = _int(args, "--train-iters", 50)
        self.batch = _int(args, "--global-batch-size", 128)
        self.lr = float(_arg(args, "--lr", "3e-4") or 3e-4)
        vocab = _int(args, "--vocab-size", 128256)
        self.start_loss = math.log(vocab)
        rates = [TFLOPS * (SLOW_FACTOR if has(h, "train-slow") else 1.0) for h in self.health]
        self.tflops = min(rates) * (MULTI_NODE_FACTOR if len(nodes) > 1 else 1.0)
        self.flops = flops_per_iteration(args)
        self.nan = any(has(h, "train-loss-nan") for h in self.health)
        self.hang = any(has(h, "train-hang") for h in self.health)
        timeout = [i for i, h in enumerate(self.health) if has(h, "nccl-timeout")]
        self.watchdog_rank = timeout[0] * ranks_per_node + min(3, ranks_per_node - 1) if timeout else None
        self.random = random.Random("/".join(nodes) + str(self.world))  # noqa: S311 - simulated noise

    def lines(self, rank: int) -> tuple[list[str], bool, int]:
        """(lines, hangs, exit status) of one global rank."""
        out: list[str] = []
        tp = _int(self.args, "--tensor-model-parallel-size", 1)
        pp = _int(self.args, "--pipeline-model-parallel-size", 1)
        if rank == 0:
            out += [f"using world size: {self.world}, data-parallel size: {self.world // (tp * pp)}, "
                    f"context-parallel size: 1, tensor-model-parallel size: {tp}, "
                    f"pipeline-model-parallel size: {pp}",
                    "> initializing torch distributed ...",
                    f"[after model, optimizer, and learning rate scheduler are built] datetime: {_stamp(time.time())}",
                    "training ..."]
        last = rank == self.world - 1
        now = time.time()
        end = self.total
        if self.hang:
            end = HANG_AFTER
        if self.watchdog_rank is not None:
            end = NCCL_AT
        for it in range(1, end + 1):
            ms = self.flops / (self.tflops * (1 + self.random.uniform(-NOISE, NOISE)) * 1e12 * self.world) * 1000
            now += ms / 1000
            nan = self.nan and it >= NAN_FROM
            loss = float("nan") if nan else 7.0 + (self.start_loss - 7.0) * math.exp(-(it - 1) / 12) \
                + self.random.uniform(-0.02, 0.02)
            printed = self.flops / (ms / 1000 * self.world * 1e12)
            lr = self.lr * min(1.0, it / 5)
            if last:
                out.append(iteration_line(now, it, self.total, it * self.batch, ms, printed, lr, self.batch,
                                          loss, int(nan)))
        if self.hang:
            return out, True, 0
        if self.watchdog_rank is not None:
            if rank == self.watchdog_rank:
                stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + ".408271257"
                out.append(WATCHDOG.format(rank=rank, stamp=stamp))
                out.append(f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:1664] [PG 1 Rank {rank}] Exception "
                           "(either an error or timeout) detected by watchdog at work: 5, last enqueued NCCL work: "
                           "6, last completed NCCL work: 4.")
            return out, False, 1
        if rank == 0:
            out.append(f"[after training is done] datetime: {_stamp(now)}")
        return out, False, 0


# ---------------------------------------------------------------- placement probe


def _cpulist(cpus: list[int]) -> str:
    ordered = sorted(set(cpus))
    parts, i = [], 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _cpus(text: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def placement(node: dict[str, Any], rank: int, local: int, world: int, bound: bool) -> dict[str, Any]:
    gpus = node["gpus"]
    numa_cpus = {int(k): v for k, v in node["numa"].items()}
    record: dict[str, Any] = {"probe": "burnin-placement", "version": 1, "host": node["node"],
                              "pid": 40000 + rank, "rank": rank, "local_rank": local, "world_size": world,
                              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "nccl_ib_hca": os.environ.get("NCCL_IB_HCA"),
                              "binding_env": {}}
    if local >= len(gpus):
        record["gpu_error"] = f"no GPU visible for local rank {local} ({len(gpus)} GPUs on the node)"
        gpu_numa = sorted(numa_cpus)[0]
    else:
        gpu = gpus[local]
        record["gpu_bus_ids"] = [g["bus_id"] for g in gpus]
        record["gpu_bus_id"] = gpu["bus_id"]
        gpu_numa = gpu["numa_node"]
    every = sorted(numa_cpus)
    if not bound or has(node, "cpu-bind-none"):
        allowed = [c for n in every for c in _cpus(numa_cpus[n])]
        mems, pages = _cpulist(every), {str(every[0]): 16385}
    else:
        numa = gpu_numa
        if fault_target(node, "cpu-bind-wrong-numa") == local and len(every) > 1:
            numa = every[(every.index(gpu_numa) + 1) % len(every)]
        allowed = _cpus(numa_cpus[numa])
        mems, pages = str(numa), {str(numa): 16385}
    record.update({"cpus": _cpulist(allowed), "cpus_allowed_list": _cpulist(allowed), "mems": mems,
                   "memory": {"bytes": 64 << 20, "pages_by_node": pages},
                   "thread_cpus": _cpulist(allowed[local % len(allowed)::max(1, len(allowed) // 3)][:3])})
    return record


def probe_line(record: dict[str, Any]) -> str:
    return f"{PROBE_MARKER} {json.dumps(record, sort_keys=True)}"


# ---------------------------------------------------------------- entry points


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _srun_bound() -> bool:
    override = os.environ.get("BURNIN_SIM_BIND")
    if override:
        return override != "none"
    values = [os.environ.get(n, "") for n in ("SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND")]
    return any(values) and not any("none" in v.lower() for v in values)


def one_rank(kind: str, args: list[str]) -> int:
    """``pretrain_gpt.py`` or the probe started as one rank (srun) or alone."""
    rank = _env_int("RANK", "SLURM_PROCID") or 0
    local = _env_int("LOCAL_RANK", "SLURM_LOCALID") or 0
    world = _env_int("WORLD_SIZE", "SLURM_NTASKS") or 1
    if kind == "probe":
        print(probe_line(placement(health_of_self(), rank, local, world, _srun_bound())), flush=True)
        return 0
    nodes = members(os.environ.get("MASTER_ADDR"))
    per_node = max(1, world // max(1, len(nodes)))
    lines, hangs, status = Run(args, nodes, per_node).lines(rank)
    for line in lines:
        print(line, flush=True)
    if hangs:
        while True:
            time.sleep(3600)
    return status


def _entry_kind(entry: list[str]) -> str:
    if any(Path(a).name == "pretrain_gpt.py" for a in entry):
        return "train"
    if any(Path(a).name == "burnin-placement-probe" or PROBE_MARKER in a for a in entry):
        return "probe"
    raise SimFailure(f"torchrun (simulated) runs pretrain_gpt.py or the placement probe, not {entry[:3]}")


def torchrun(argv: list[str]) -> int:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        key, eq, value = argv[i].partition("=")
        if key in TORCHRUN_VALUE_OPTIONS and not eq:
            i += 1
            value = argv[i] if i < len(argv) else ""
        opts[key.replace("-", "_").lstrip("_")] = value
        i += 1
    entry = argv[i:]
    if not entry:
        print("torchrun: error: the following arguments are required: training_script", file=sys.stderr)
        return 2
    per_node = int(opts.get("nproc_per_node") or 1)
    node_rank = int(opts.get("node_rank") or 0)
    nnodes = int(opts.get("nnodes") or 1)
    kind = _entry_kind(entry)
    bound = any("--cpunodebind" in a for a in entry)
    lines: list[str] = []
    status, hangs = 0, False
    agents = None
    if kind == "probe":
        me = health_of_self()
        for local in range(per_node):
            rank = node_rank * per_node + local
            lines.append(f"[default{local}]:" + probe_line(placement(me, rank, local, per_node * nnodes, bound)))
    else:
        if nnodes > 1 and not os.environ.get("BURNIN_SIM_JOB_NODES") and os.environ.get("SLURM_PROCID") is None:
            agents = Agents(str(opts.get("master_addr") or this_node()), str(opts.get("master_port") or "29500"),
                            nnodes, node_rank)
            nodes = agents.members()
        else:
            nodes = members(opts.get("master_addr"))
        run = Run(entry, nodes, per_node)
        for local in range(per_node):
            rank_lines, rank_hangs, rank_status = run.lines(node_rank * per_node + local)
            lines += [f"[default{local}]:{line}" for line in rank_lines]
            hangs = hangs or rank_hangs
            status = status or rank_status
    try:
        for line in lines:
            print(line, flush=True)
        if hangs:
            while True:
                time.sleep(3600)
    finally:
        if agents is not None:  # the master's store lives as long as its agent
            agents.close()
    if status:
        print("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: pretrain_gpt.py FAILED",
              file=sys.stderr, flush=True)
    return status


def main(argv: list[str]) -> int:
    try:
        if not argv:
            raise SimFailure("usage: model.py torchrun|pretrain|probe ARGS")
        tool, rest = argv[0], argv[1:]
        if tool == "torchrun":
            return torchrun(rest)
        if tool == "pretrain":
            return one_rank("train", rest)
        if tool == "probe":
            return one_rank("probe", rest)
        raise SimFailure(f"unknown tool {tool!r}")
    except SimFailure as exc:
        print(f"burnin sim: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
