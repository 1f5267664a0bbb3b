"""Builders for megatron facts sections (the shapes burnin.megatron.record writes; docs/megatron.md)."""

from __future__ import annotations

import copy
import math
from typing import Any

from burnin.megatron.config import ModelShape
from burnin.megatron.mfu import flops_per_iteration
from burnin.megatron.record import MEMBERS_KEY

SHAPE = ModelShape()
GBS = 64
FLOPS_TP2 = flops_per_iteration(SHAPE, GBS, tensor_parallel=2)
FLOPS_TP8 = flops_per_iteration(SHAPE, GBS, tensor_parallel=8)


def iterations(n: int = 50, *, tflops: float = 430.0, gpus: int = 8, flops: float = FLOPS_TP2,
               logged_factor: float = 1.0, nan_from: int | None = None, skipped_at: int | None = None,
               flat_loss: bool = False) -> list[dict[str, Any]]:
    out = []
    for it in range(1, n + 1):
        ms = flops / (tflops * 1e12 * gpus) * 1000
        nan = nan_from is not None and it >= nan_from
        loss: float | str = "NAN" if nan else (11.5 if flat_loss else 7.0 + 4.76 * math.exp(-(it - 1) / 12))
        out.append({"iteration": it, "total": n, "elapsed_ms": round(ms, 1), "tflops_per_gpu": tflops * logged_factor,
                    "lm_loss": loss, "grad_norm": 1.2, "skipped": int(skipped_at == it), "nan": int(nan)})
    return out


def run(kind: str = "single", nodes: tuple[str, ...] = ("n1",), **overrides: Any) -> dict[str, Any]:
    world = 8 * len(nodes)
    record: dict[str, Any] = {
        "kind": kind, "nodes": list(nodes), "form": "torchrun", "binding": "numactl", "world_size": world,
        "ranks_per_node": 8, "tensor": 2 if kind == "single" else 8, "pipeline": 1, "data": world // 2,
        "global_batch_size": GBS, "micro_batch_size": 1, "train_iters": 50, "log_interval": 1, "warmup_iters": 10,
        "model": SHAPE.model_dump(), "flops_per_iteration": FLOPS_TP2 if kind == "single" else FLOPS_TP8,
        "command": {nodes[0]: ["torchrun", "..."]}, "exit_status": 0, "timed_out": False, "error": None,
        "duration_s": 200.0, "timeout_s": 900.0, "node_exits": dict.fromkeys(nodes, 0),
        "iterations": iterations(gpus=world, flops=FLOPS_TP2 if kind == "single" else FLOPS_TP8),
        "parse_error": None, "nccl_errors": [], "tails": {"0": ["training ..."], "7": ["iteration 50/50 |"]},
        "log_dir": f"megatron/{kind}/{'+'.join(nodes)}",
    }
    record.update(overrides)
    return record


def members(median: float = 430.0, count: int = 3) -> dict[str, float]:
    """A ``multi`` entry's members' median single-node TFLOP/s/GPU (burnin.megatron.judge.attach_group)."""
    return {"median": median, "count": float(count)}


def section(single: dict[str, Any] | None = None, *, multi: dict[str, Any] | str | None = "default",
            median: float | None = 430.0, count: int = 8) -> dict[str, Any]:
    data: dict[str, Any] = {"single": single if single is not None else run()}
    if multi == "default":
        group = ["n1", "n2", "n3"]
        record = run("multi", tuple(group), iterations=iterations(gpus=24, tflops=420.0, flops=FLOPS_TP8))
        data["multi"] = {"applicable": True, "reason": "", "excluded": None, "group": group, "run": record,
                         MEMBERS_KEY: members()}
    elif multi is not None:
        data["multi"] = multi
    data["fleet"] = {"single.tflops_per_gpu": {"median": median, "count": float(count)} if median else {}}
    return copy.deepcopy(data)


def hung(record: dict[str, Any]) -> dict[str, Any]:
    record = dict(record, timed_out=True, exit_status=None, iterations=record["iterations"][:3],
                  tails={"0": ["training ..."], "7": [" iteration        3/      50 |"], "3": []})
    return record
