"""Megatron's FLOP count, TFLOP/s per GPU and MFU (pure arithmetic; check-catalog MEG-03).

Megatron-LM's ``num_floating_point_operations(args, batch_size)`` counts the
forward and backward passes of one iteration (B = global batch)::

    F = 12 * B * s * L * h^2 * ( (1 + q/a + s/h) * (c*a/h)      attention (c = kv_channels)
                                + (f/h) * k * g                  MLP (k = MoE top-k, g = 3/2 with SwiGLU)
                                + V / (2 * L * h) )              logits (V = padded vocabulary)

``--log-throughput`` prints ``F / (t_iter * N_gpus * 1e12)`` as ``throughput per GPU
(TFLOP/s/GPU)``; MFU is that over the GPU's dense peak (989 TFLOP/s BF16 on H100).
Older releases leave out the ``c*a/h`` factor, which is 1 for the Llama shapes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a pydantic model: the checks that read MFU figures do not build it
    from burnin.megatron.config import ModelShape


def padded_vocab_size(shape: ModelShape, tensor_parallel: int) -> int:
    """The vocabulary Megatron allocates: rounded up to ``make_vocab_size_divisible_by x TP``."""
    multiple = shape.make_vocab_size_divisible_by * tensor_parallel
    return -(-shape.vocab_size // multiple) * multiple


def flops_bracket(shape: ModelShape, vocab: int | None = None) -> float:
    """The bracket of the formula (8.99 for Llama-3-8B at s = 8192, V = 128256)."""
    h = shape.hidden_size
    a = shape.num_attention_heads
    attention = (1 + shape.query_groups / a + shape.seq_length / h) * (shape.head_channels * a / h)
    gated = 1.5 if shape.swiglu else 1.0
    top_k = shape.moe_router_topk if shape.num_experts else 1
    mlp = shape.ffn_hidden_size / h * top_k * gated
    logits = (vocab if vocab is not None else shape.vocab_size) / (2 * shape.num_layers * h)
    return attention + mlp + logits


def flops_per_sequence(shape: ModelShape, vocab: int | None = None) -> float:
    """Forward + backward FLOP of one sequence of ``seq_length`` tokens."""
    return 12.0 * shape.seq_length * shape.num_layers * shape.hidden_size ** 2 * flops_bracket(shape, vocab)


def flops_per_iteration(shape: ModelShape, global_batch_size: int, *, tensor_parallel: int = 1) -> float:
    """Megatron's ``num_floating_point_operations`` for one iteration of ``global_batch_size`` sequences."""
    return global_batch_size * flops_per_sequence(shape, padded_vocab_size(shape, tensor_parallel))


def tflops_per_gpu(flops: float, iteration_ms: float, gpus: int) -> float:
    """What ``--log-throughput`` prints: ``F / (t_iter * N_gpus * 1e12)``; ValueError on a time or count <= 0."""
    if not (math.isfinite(iteration_ms) and iteration_ms > 0) or gpus < 1:
        raise ValueError(f"no throughput from {iteration_ms!r} ms on {gpus} GPUs")
    return flops / (iteration_ms / 1000.0 * gpus * 1e12)


def mfu(tflops: float, peak_tflops: float) -> float:
    """Model FLOP utilisation: achieved TFLOP/s/GPU over the GPU's dense peak."""
    if not (math.isfinite(peak_tflops) and peak_tflops > 0):
        raise ValueError(f"peak {peak_tflops!r} TFLOP/s is not a peak")
    return tflops / peak_tflops


def iteration_ms_for(shape: ModelShape, global_batch_size: int, gpus: int, tflops: float, *,
                     tensor_parallel: int = 1) -> float:
    """The iteration time at which ``gpus`` GPUs reach ``tflops`` each (the simulator's inverse)."""
    return flops_per_iteration(shape, global_batch_size, tensor_parallel=tensor_parallel) / (
        tflops * 1e12 * gpus) * 1000.0
