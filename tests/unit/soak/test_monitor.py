"""Judging each monitoring sample: which event, which check id, when; nothing for what was not measured."""

from __future__ import annotations

from dataclasses import replace

import pytest

from burnin.soak.monitor import Limits, judge_sample
from burnin.soak.signals import GpuReading, KernelEvent, NodeSample

BUS = "0000:1b:00.0"
NAMES = {"0000:1b:00": "gpu0"}
LIMITS = Limits()
GOOD_GPU = GpuReading(index=0, bus_id=BUS, temperature_c=60, gpu_max_c=85, memory_temperature_c=68, memory_max_c=95,
                      power_w=650, clock_reasons=0, ecc_corrected=0, ecc_uncorrected=0, sram_uncorrected=0,
                      remap_pending=False, remap_failure=False, pcie_replay=0, nvlink_replay=0, nvlink_recovery=0,
                      nvlink_crc=0)
GOOD_IB = {"mlx5_0": {"link_downed": 0, "excessive_buffer_overrun_errors": 0, "local_link_integrity_errors": 0,
                      "port_rcv_remote_physical_errors": 0, "symbol_error": 0, "link_error_recovery": 0,
                      "port_rcv_errors": 0}}


def sample(t: float, gpu: GpuReading = GOOD_GPU, *, ib: dict[str, dict[str, int]] | None = None,
           kernel: tuple[KernelEvent, ...] = (), uptime: float = 100000.0, edac: tuple[int, int] = (0, 0),
           error: str | None = None) -> NodeSample:
    return NodeSample("n1", t, "gpu", 0, error=error, uptime_s=uptime + t, boot_id="b", gpus=(gpu,),
                      ib=GOOD_IB if ib is None else ib, edac_ce=edac[0], edac_ue=edac[1], kernel=kernel)


def judge(now: NodeSample, history: list[NodeSample] | None = None, seen: frozenset[str] = frozenset()
          ) -> list[tuple[str, str, bool]]:
    base = sample(0.0)
    events = judge_sample(now, history=history or [base], baseline=base, limits=LIMITS, names=NAMES,
                          compute_hcas=["mlx5_0"], seen=seen.__contains__)
    return [(e.check, e.subject, e.fatal) for e in events]


def test_a_healthy_sample_has_no_event() -> None:
    assert judge(sample(600.0)) == []


@pytest.mark.parametrize(("change", "check"), [
    ({"ecc_uncorrected": 1}, "GPU-01"),
    ({"sram_uncorrected": 2}, "GPU-01"),
    ({"ecc_corrected": 101}, "GPU-02"),
    ({"remap_pending": True}, "GPU-03"),
    ({"remap_failure": True}, "GPU-03"),
    ({"clock_reasons": 0x8}, "GPU-05"),
    ({"clock_reasons": 0x40}, "GPU-05"),
    ({"clock_reasons": 0x80}, "GPU-05"),
    ({"temperature_c": 81}, "GPU-06"),
    ({"memory_temperature_c": 91}, "GPU-06"),
    ({"pcie_replay": 101}, "GPU-09"),
    ({"nvlink_recovery": 1}, "GPU-11"),
    ({"nvlink_replay": 101}, "GPU-11"),
    ({"nvlink_crc": 101}, "GPU-11"),
])
def test_each_gpu_signal_fails_with_its_check(change: dict[str, object], check: str) -> None:
    assert judge(sample(600.0, replace(GOOD_GPU, **change))) == [(check, "gpu0", True)]  # type: ignore[arg-type]


@pytest.mark.parametrize("change", [
    {"ecc_corrected": 100}, {"pcie_replay": 100}, {"nvlink_replay": 100}, {"temperature_c": 80},
    {"memory_temperature_c": 90}, {"clock_reasons": 0x4 | 0x20 | 0x1},  # SW power cap, SW thermal, idle: normal
])
def test_at_the_limit_or_harmless_bits_pass(change: dict[str, object]) -> None:
    assert judge(sample(600.0, replace(GOOD_GPU, **change))) == []  # type: ignore[arg-type]


def test_unread_values_raise_nothing_here() -> None:
    blank = GpuReading(index=0, bus_id=BUS)
    assert judge(sample(600.0, blank)) == []
    assert judge(sample(600.0, error="ssh: connect timed out")) == []


def test_rates_count_within_the_trailing_hour_only() -> None:
    grown = replace(GOOD_GPU, ecc_corrected=150)
    # 150 gained since t=0, but 60 within the last hour (the sample at 1 h had 90): passes
    history = [sample(0.0), sample(3600.0, replace(GOOD_GPU, ecc_corrected=90))]
    assert judge(sample(7200.0, grown), history) == []
    # without a sample within the hour the window starts at the baseline: 150 > 100 fails
    assert judge(sample(7200.0, grown), [sample(0.0)]) == [("GPU-02", "gpu0", True)]


def test_ib_fatal_counters_any_gain_error_counters_per_hour() -> None:
    downed = {"mlx5_0": {**GOOD_IB["mlx5_0"], "link_downed": 1}}
    assert judge(sample(600.0, ib=downed)) == [("IB-04", "mlx5_0", True)]
    noisy = {"mlx5_0": {**GOOD_IB["mlx5_0"], "symbol_error": 101}}
    assert judge(sample(600.0, ib=noisy)) == [("IB-04", "mlx5_0", True)]
    assert judge(sample(600.0, ib={"mlx5_0": {**GOOD_IB["mlx5_0"], "symbol_error": 100}})) == []


def test_edac_uncorrectable_and_corrected_rate() -> None:
    assert judge(sample(600.0, edac=(0, 1))) == [("BRN-04", "node", True)]
    assert judge(sample(600.0, edac=(11, 0))) == [("BRN-04", "node", True)]
    assert judge(sample(600.0, edac=(10, 0))) == []


def test_a_new_fatal_xid_fails_at_its_own_time() -> None:
    # the node's uptime at the sample is 100000 + 3600; the Xid was logged 600 s earlier
    xid = KernelEvent("xid", "Xid 79: GPU has fallen off the bus.", 100000.0 + 3000.0, 79, "0000:1b:00")
    now = sample(3600.0, kernel=(xid,))
    events = judge_sample(now, history=[sample(0.0)], baseline=sample(0.0), limits=LIMITS, names=NAMES,
                          compute_hcas=[], seen=frozenset().__contains__)
    assert [(e.check, e.subject, e.fatal, e.t) for e in events] == [("GPU-04", "gpu0", True, 3000.0)]
    assert events[0].reason == ("GPU-04 gpu0 Xid 79 (GPU has fallen off the bus) at +00:50:00 "
                                "(expected no fatal Xid)")
    assert judge(now, seen=frozenset({xid.key})) == []  # judged once


def test_non_fatal_xid_and_corrected_lines_are_noted_not_failed() -> None:
    xid13 = KernelEvent("xid", "Xid 13: Graphics SM Warp Exception", 100100.0, 13, "0000:1b:00")
    ce = KernelEvent("edac-ce", "EDAC MC0: 1 CE memory read error", 100200.0)
    assert judge(sample(600.0, kernel=(xid13, ce))) == [("GPU-04", "gpu0", False), ("BRN-07", "node", False)]


@pytest.mark.parametrize(("kind", "check"), [("mce", "BRN-04"), ("edac-ue", "BRN-04"), ("aer-uncorrected", "GPU-09")])
def test_kernel_lines_that_fail(kind: str, check: str) -> None:
    assert judge(sample(600.0, kernel=(KernelEvent(kind, "text", None),))) == [(check, "node", True)]


def test_an_uncorrectable_error_before_the_load_fails_the_first_sample() -> None:
    first = sample(0.0, replace(GOOD_GPU, ecc_uncorrected=2))
    events = judge_sample(first, history=[], baseline=first, limits=LIMITS, names=NAMES, compute_hcas=[],
                          seen=frozenset().__contains__)
    assert [(e.check, e.measured) for e in events] == [
        ("GPU-01", "2 volatile uncorrectable ECC errors when the soak started")]
    later = sample(600.0, replace(GOOD_GPU, ecc_uncorrected=2))
    assert judge_sample(later, history=[first], baseline=first, limits=LIMITS, names=NAMES, compute_hcas=[],
                        seen=frozenset().__contains__) == []  # judged once, at the start
