"""Megatron-LM training logs: the per-interval ``iteration N/ M | ... |`` lines.

Both the current format (timestamp prefix, ``throughput per GPU (TFLOP/s/GPU)``)
and the older one without throughput are read. Fields are split on ``|`` and
matched by name, so extra fields (``load_balancing_loss``, ``num zeros`` ...)
and prefixes added by launchers (``[default0]:``, ``0:``) do not matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import (
    fail,
    head_excerpt,
    iter_lines,
    parse_float,
    parse_int,
    require_text,
)

TOOL = "megatron-log"


@dataclass(frozen=True, slots=True)
class MegatronIteration:
    iteration: int
    total: int
    elapsed_ms: float | None
    tflops_per_gpu: float | None
    lm_loss: float | None
    lr: float | None
    loss_scale: float | None
    grad_norm: float | None
    skipped: int | None
    nan: int | None
    timestamp: str | None
    consumed_samples: int | None
    global_batch_size: int | None
    extra: dict[str, str]  # every other "name: value" field, as printed


@dataclass(frozen=True, slots=True)
class MegatronLog:
    iterations: tuple[MegatronIteration, ...]
    skipped_total: int
    nan_total: int
    truncated: bool


_ITER = re.compile(r"\biteration\s+(\d{1,15})\s*/\s*(\d{1,15})\s*\|")
_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]")


def _field_name(key: str) -> str:
    k = key.strip().lower()
    if k.startswith("elapsed time per iteration"):
        return "elapsed_ms"
    if k.startswith("throughput per gpu") or "tflop" in k:
        return "tflops_per_gpu"
    if k == "learning rate":
        return "lr"
    if k == "lm loss":
        return "lm_loss"
    if k == "loss scale":
        return "loss_scale"
    if k == "grad norm":
        return "grad_norm"
    if k == "number of skipped iterations":
        return "skipped"
    if k == "number of nan iterations":
        return "nan"
    if k == "consumed samples":
        return "consumed_samples"
    if k == "global batch size":
        return "global_batch_size"
    return ""


def _iteration(line: str, m: re.Match[str]) -> MegatronIteration:
    floats: dict[str, float | None] = {}
    ints: dict[str, int | None] = {}
    extra: dict[str, str] = {}
    for part in line[m.end() :].split("|"):
        key, sep, value = part.partition(":")
        if not sep:
            continue
        name = _field_name(key)
        if name in ("skipped", "nan", "consumed_samples", "global_batch_size"):
            ints[name] = parse_int(value)
        elif name:
            floats[name] = parse_float(value)
        elif key.strip():
            extra[key.strip()] = value.strip()
    stamp = _STAMP.search(line[: m.start()])
    return MegatronIteration(
        iteration=int(m.group(1)),
        total=int(m.group(2)),
        elapsed_ms=floats.get("elapsed_ms"),
        tflops_per_gpu=floats.get("tflops_per_gpu"),
        lm_loss=floats.get("lm_loss"),
        lr=floats.get("lr"),
        loss_scale=floats.get("loss_scale"),
        grad_norm=floats.get("grad_norm"),
        skipped=ints.get("skipped"),
        nan=ints.get("nan"),
        timestamp=stamp.group(1) if stamp else None,
        consumed_samples=ints.get("consumed_samples"),
        global_batch_size=ints.get("global_batch_size"),
        extra=extra,
    )


def parse_megatron_log(text: str) -> MegatronLog:
    """Parse the iteration lines of a Megatron-LM log; other lines are ignored.

    A log without a single iteration line is a ParseError (training never logged
    progress, so nothing can be measured).
    """
    require_text(TOOL, text)
    iterations: list[MegatronIteration] = []
    last_line = ""
    for line in iter_lines(text):
        if "iteration" not in line:
            continue
        m = _ITER.search(line)
        if m is None:
            continue
        iterations.append(_iteration(line, m))
        last_line = line
    if not iterations:
        fail(TOOL, "no Megatron 'iteration N/ M |' lines found", head_excerpt(text))
    return MegatronLog(
        iterations=tuple(iterations),
        skipped_total=sum(it.skipped or 0 for it in iterations),
        nan_total=sum(it.nan or 0 for it in iterations),
        truncated=not last_line.rstrip().endswith("|"),
    )
