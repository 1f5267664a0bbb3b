"""Edges of STO-03 that planted bugs slipped through (bench/mutants on burnin/checks/storage_traffic.py).

Each test pins one decision: a write too small to attribute (1% of it under one
byte: it used to fail every compute HCA, even one that moved nothing), the mounts
a verdict names, an IPoIB counter pair of which one was read, the counters a
compute HCA is named by when port and IPoIB agree, and the BlueField floor itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_sto03_traffic import GIB, section

from burnin.checks.storage_traffic import judge_traffic
from burnin.evaluate.verdict import Status, Unmeasurable

QUIET = {"mlx5_0": {"xmit": 0, "rcv": 0}}


@pytest.mark.parametrize("written", [0, 1, 99])
def test_a_write_under_100_bytes_is_too_few_to_attribute(written: int) -> None:
    with pytest.raises(Unmeasurable, match=f"^the storage write moved {written} bytes: too few to attribute$"):
        judge_traffic("n1", section(compute=QUIET, storage={"bf0": {"tx": written, "rx": 0}}, written=written))


def test_a_write_of_100_bytes_is_judged() -> None:
    verdict = judge_traffic("n1", section(compute=QUIET, storage={"bf0": {"tx": 90, "rx": 0}}, written=100))
    assert verdict.status is Status.PASS, verdict.reason
    noisy = judge_traffic("n1", section(compute={"mlx5_0": {"xmit": 1, "rcv": 0}}, storage={"bf0": {"tx": 90, "rx": 0}},
                                        written=100))
    assert noisy.status is Status.FAIL and "mlx5_0 compute HCA moved 1 bytes" in noisy.reason
    assert "each compute HCA < 1 bytes (1% of the 100 written)" in noisy.reason


@pytest.mark.parametrize(("mounts", "named"), [
    (["/mnt/home"], "on /mnt/home:"),
    (["/mnt/home", "/mnt/scratch"], "on /mnt/home, /mnt/scratch:"),
    ([], "on the storage mounts:"),
    (None, "on the storage mounts:"),
])
def test_a_pass_names_the_mounts_written(mounts: Any, named: str) -> None:
    verdict = judge_traffic("n1", {**section(), "mounts": mounts})
    assert verdict.status is Status.PASS
    assert verdict.reason == (f"STO-03 ok: {GIB} bytes written {named} BlueField netdevs transmitted "
                              f"{GIB + 5_000_000}, compute HCAs under 1%")


@pytest.mark.parametrize("present", ["ipoib_tx", "ipoib_rx"])
def test_one_ipoib_counter_without_the_other_is_incomplete(present: str) -> None:
    compute = {"mlx5_2": {"xmit": 0, "rcv": 0, present: 5}}
    verdict = judge_traffic("n1", section(compute=compute))
    assert verdict.status is Status.INCOMPLETE, verdict.reason
    missing = "IPoIB rx_bytes delta" if present == "ipoib_tx" else "IPoIB tx_bytes delta"
    assert "mlx5_2" in verdict.reason and missing in verdict.reason, verdict.reason


def test_port_and_ipoib_counters_that_agree_name_the_port_counters() -> None:
    compute = {"mlx5_2": {"xmit": GIB, "rcv": 0, "ipoib_tx": GIB, "ipoib_rx": 0}}
    verdict = judge_traffic("n1", section(compute=compute))
    assert verdict.status is Status.FAIL
    assert f"mlx5_2 compute HCA moved {GIB} bytes (xmit {GIB}, rcv 0)" in verdict.reason
    assert "IPoIB" not in verdict.reason


def test_the_bluefield_netdevs_pass_at_exactly_90_percent() -> None:
    floor = int(GIB * 0.9)
    at = judge_traffic("n1", section(storage={"bf0": {"tx": floor, "rx": 0}}))
    assert at.status is Status.PASS, at.reason
    under = judge_traffic("n1", section(storage={"bf0": {"tx": floor - 1, "rx": 0}}))
    assert under.status is Status.FAIL
    assert f"BlueField netdevs (bf0) transmitted {floor - 1} bytes while {GIB} bytes were written" in under.reason
