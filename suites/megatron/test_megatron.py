"""Megatron smoke run (MEG): a short Megatron-LM GPT run with mock data, launched the way training is.

The Megatron phase of `burnin run --suite megatron` ran the single-node run on every
node and one multi-node run per group before these tests; each test judges one node.
A hung run is incomplete with the tail of each rank's log.
"""

import pytest

from burnin.evaluate.verdict import Verdict
from burnin.suite import assert_passed


@pytest.mark.check("MEG-01")
def test_megatron_launch(verdict: Verdict) -> None:
    """Every rank of the node's runs exited 0 within the launch timeout."""
    assert_passed(verdict)


@pytest.mark.check("MEG-02")
def test_megatron_log_parsed(verdict: Verdict) -> None:
    """Every iteration 1..train_iters was logged with its time, throughput and loss."""
    assert_passed(verdict)


@pytest.mark.check("MEG-03")
def test_megatron_mfu(verdict: Verdict) -> None:
    """MFU from the model shape and iteration time meets its floor; the log's TFLOP/s/GPU agrees."""
    assert_passed(verdict)


@pytest.mark.check("MEG-04")
def test_megatron_run_health(verdict: Verdict) -> None:
    """Finite falling loss, no NaN or skipped iteration, no NCCL error, throughput at its reference and no
    straggler, the multi-node run within tolerance of single-node."""
    assert_passed(verdict)
