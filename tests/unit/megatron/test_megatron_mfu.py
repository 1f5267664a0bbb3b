"""MFU arithmetic against check-catalog MEG-03's worked example (Llama-3-8B, s = 8192, V = 128256)."""

from __future__ import annotations

import math

import pytest

from burnin.megatron.config import ModelShape
from burnin.megatron.mfu import (
    flops_bracket,
    flops_per_iteration,
    flops_per_sequence,
    iteration_ms_for,
    mfu,
    padded_vocab_size,
    tflops_per_gpu,
)

LLAMA3_8B = ModelShape(seq_length=8192)  # the catalog's recipe shape (the default smoke uses 4096)


def test_bracket_is_the_catalogs_sum() -> None:
    # 1 + 5.25 + 0.25 + 2 + 0.489 = 8.99
    assert flops_bracket(LLAMA3_8B) == pytest.approx(1 + 5.25 + 0.25 + 2 + 128256 / (2 * 32 * 4096))
    assert round(flops_bracket(LLAMA3_8B), 2) == 8.99


def test_per_sequence_and_per_token_figures() -> None:
    base = 12 * LLAMA3_8B.seq_length * LLAMA3_8B.num_layers * LLAMA3_8B.hidden_size ** 2
    assert base == pytest.approx(5.28e13, rel=1e-3)
    assert flops_per_sequence(LLAMA3_8B) == pytest.approx(4.74e14, rel=2e-3)
    assert flops_per_sequence(LLAMA3_8B) / 8192 / 1e9 == pytest.approx(57.9, abs=0.05)  # GFLOP per token


def test_forty_percent_mfu_is_6_8k_tokens_per_second_per_gpu() -> None:
    tokens_per_s = 0.40 * 989e12 / (flops_per_sequence(LLAMA3_8B) / 8192)
    assert tokens_per_s == pytest.approx(6.8e3, rel=0.01)


def test_throughput_and_mfu_from_an_iteration_time() -> None:
    flops = flops_per_iteration(LLAMA3_8B, 128, tensor_parallel=2)
    # 128 sequences on 8 GPUs at 40% MFU take F / (0.4 * 989e12 * 8) seconds
    ms = flops / (0.40 * 989e12 * 8) * 1000
    assert tflops_per_gpu(flops, ms, 8) == pytest.approx(395.6)
    assert mfu(tflops_per_gpu(flops, ms, 8), 989) == pytest.approx(0.40)
    assert iteration_ms_for(LLAMA3_8B, 128, 8, 395.6, tensor_parallel=2) == pytest.approx(ms)


def test_vocab_padding_follows_megatron() -> None:
    assert padded_vocab_size(LLAMA3_8B, 1) == 128256  # 128256 = 1002 x 128
    assert padded_vocab_size(LLAMA3_8B, 2) == 128256  # 501 x 256
    assert padded_vocab_size(LLAMA3_8B, 8) == 129024  # rounded up to 126 x 1024
    assert flops_per_iteration(LLAMA3_8B, 1, tensor_parallel=8) > flops_per_iteration(LLAMA3_8B, 1)


@pytest.mark.parametrize(("shape", "expected"), [
    # multi-head attention, no SwiGLU (GPT-3 style): 1 + 4 + 1 + s/h + V/(2Lh)
    (ModelShape(num_layers=24, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16,
                num_query_groups=None, kv_channels=None, seq_length=2048, vocab_size=50304, swiglu=False),
     1 + 1 + 2048 / 2048 + 4 + 50304 / (2 * 24 * 2048)),
    # MoE top-2 with SwiGLU: the MLP term is f/h x 2 x 1.5
    (ModelShape(num_experts=8, moe_router_topk=2), 1 + 0.25 + 1 + 3.5 * 2 * 1.5 + 128256 / (2 * 32 * 4096)),
    # kv_channels x heads != hidden scales the attention term (newer Megatron)
    (ModelShape(kv_channels=64), (1 + 0.25 + 1) * 0.5 + 5.25 + 128256 / (2 * 32 * 4096)),
])
def test_bracket_terms(shape: ModelShape, expected: float) -> None:
    assert flops_bracket(shape) == pytest.approx(expected)


@pytest.mark.parametrize(("ms", "gpus"), [(0.0, 8), (-1.0, 8), (math.nan, 8), (math.inf, 8), (10.0, 0)])
def test_no_throughput_from_impossible_times(ms: float, gpus: int) -> None:
    with pytest.raises(ValueError, match="no throughput"):
        tflops_per_gpu(1e15, ms, gpus)


def test_mfu_needs_a_peak() -> None:
    for peak in (0.0, -989.0, math.nan):
        with pytest.raises(ValueError, match="not a peak"):
            mfu(400.0, peak)
