"""Classification: the checks' one Xid table decides evict / drain / record; site policy for IB."""

from __future__ import annotations

import pytest

from burnin.checks import xid as xid_table
from burnin.watch.events import Action, Kind, Policy, WatchEvent, classify, gpu_bus


def _xid(code: int, text: str = "") -> WatchEvent:
    return WatchEvent("kmsg", Kind.XID, "0000:1b:00", code, text, 1000.0, label="gpu3")


@pytest.mark.parametrize("code", sorted(xid_table.XID_MEANING))
def test_every_catalogued_xid_follows_the_table(code: int) -> None:
    decision = classify(_xid(code))
    assert decision.check_id == "GPU-04"
    if code in xid_table.EVICT_XIDS:
        assert decision.action is Action.EVICT
    elif xid_table.is_fatal(code):
        assert decision.action is Action.DRAIN
    else:
        assert decision.action is Action.RECORD
    assert decision.cause == f"gpu3 {xid_table.describe(code)}"


def test_the_issues_fatal_classes_evict_and_xid_63_only_records() -> None:
    for code in (79, 48, 94, 95, 119, 120):
        assert classify(_xid(code)).action is Action.EVICT, code
    # the same uncontained-ECC family: 140 (an unrecoverable ECC error escaped), 171/172 (Xid 48's detail)
    for code in (140, 171, 172):
        assert classify(_xid(code)).action is Action.EVICT, code
    assert {48, 79, 94, 95, 119, 120, 140, 171, 172} == xid_table.EVICT_XIDS
    assert classify(_xid(63)).action is Action.RECORD
    assert classify(_xid(13)).action is Action.RECORD
    assert classify(_xid(74)).action is Action.DRAIN


def test_evicting_xids_are_fatal_or_the_contained_ecc_error_that_killed_the_job() -> None:
    assert {94} == xid_table.EVICT_XIDS - xid_table.FATAL_XIDS
    assert set(xid_table.XID_MEANING) >= xid_table.EVICT_XIDS


def test_xid_154_that_clears_the_recovery_action_is_not_a_drain() -> None:
    cleared = "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    assert classify(_xid(154, cleared)).action is Action.RECORD
    assert classify(_xid(154, "changed from 0x0 (None) to 0x1 (GPU Reset Required)")).action is Action.DRAIN


def test_unlisted_xid_is_recorded_and_named() -> None:
    decision = classify(_xid(999))
    assert decision.action is Action.RECORD and "Xid 999 (unlisted)" in decision.cause


def test_reason_is_burnin_check_id_cause() -> None:
    assert classify(_xid(79)).reason() == "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"


def test_nvml_kinds() -> None:
    def kind(k: Kind, code: int | None = None) -> tuple[Action, str]:
        decision = classify(WatchEvent("nvml", k, "0000:1b:00", code, "", 0.0, label="gpu3"))
        return decision.action, decision.check_id

    assert kind(Kind.ECC_DBE) == (Action.EVICT, "GPU-01")
    assert kind(Kind.ECC_SBE) == (Action.RECORD, "GPU-01")
    assert kind(Kind.GPU_LOST) == (Action.EVICT, "INV-01")
    assert kind(Kind.ROW_REMAP_FAILURE) == (Action.DRAIN, "GPU-03")
    assert kind(Kind.ROW_REMAP) == (Action.RECORD, "GPU-03")
    assert kind(Kind.POISON_FATAL) == (Action.EVICT, "GPU-01")
    assert kind(Kind.RECOVERY_ACTION, 0) == (Action.RECORD, "GPU-04")
    assert kind(Kind.RECOVERY_ACTION, 2) == (Action.DRAIN, "GPU-04")


def test_ib_port_down_evicts_unless_the_site_says_drain() -> None:
    down = WatchEvent("kmsg", Kind.IB_PORT_DOWN, "0000:4f:00.0", None, "Cable unplugged", 0.0, label="mlx5_2")
    assert classify(down).action is Action.EVICT
    decision = classify(down, Policy(ib_port_down=Action.DRAIN))
    assert decision.action is Action.DRAIN and decision.check_id == "IB-01"
    assert decision.cause == "mlx5_2 port down (Cable unplugged)"
    up = WatchEvent("kmsg", Kind.IB_PORT_UP, "ib6", None, "ib6: Gained carrier", 0.0)
    assert classify(up).action is Action.RECORD


def test_one_incident_has_one_key_whichever_source_saw_it() -> None:
    nvml = WatchEvent("nvml", Kind.XID, gpu_bus("00000000:1B:00.0"), 79, "NVML event", 1.0, label="gpu3")
    kernel = WatchEvent("kmsg", Kind.XID, gpu_bus("0000:1b:00"), 79, "NVRM: Xid ...", 1.1)
    assert classify(nvml).key == classify(kernel).key
    assert classify(kernel).cause == "PCI 0000:1b:00 Xid 79 (GPU has fallen off the bus)"


@pytest.mark.parametrize(("text", "bus"), [
    ("00000000:1B:00.0", "0000:1b:00"), ("0000:9b:00", "0000:9b:00"), ("9b:00", "0000:9b:00"),
    ("0000:10:1c", "0000:10:1c"), ("00000001:C3:00.1", "0001:c3:00"), ("1b:0", "0000:1b:00"),
    ("1:1b:00", "0001:1b:00"), (" 0000:1B:00 ", "0000:1b:00"), ("NVSwitch", "nvswitch"), ("0000:1b", "0000:1b"),
    ("0000:1b:00.9", "0000:1b:00.9"), ("0000:1b:00:00", "0000:1b:00:00"),
])
def test_gpu_bus_normalises_nvml_and_kernel_forms(text: str, bus: str) -> None:
    assert gpu_bus(text) == bus


def test_the_nvml_event_bits_are_nvml_hs() -> None:
    """The watch's nvmlEventType* values are pynvml's (nvml.h): a wrong bit would register nothing."""
    import pynvml

    from burnin.watch import events

    pairs = [
        (events.NVML_SINGLE_BIT_ECC, pynvml.nvmlEventTypeSingleBitEccError),
        (events.NVML_DOUBLE_BIT_ECC, pynvml.nvmlEventTypeDoubleBitEccError),
        (events.NVML_XID, pynvml.nvmlEventTypeXidCriticalError),
        (events.NVML_DRAM_RETIREMENT, pynvml.nvmlEventTypeDramRetirementEvent),
        (events.NVML_DRAM_RETIREMENT_FAILURE, pynvml.nvmlEventTypeDramRetirementFailure),
        (events.NVML_NONFATAL_POISON, pynvml.nvmlEventTypeNonFatalPoisonError),
        (events.NVML_FATAL_POISON, pynvml.nvmlEventTypeFatalPoisonError),
        (events.NVML_GPU_UNAVAILABLE, pynvml.nvmlEventTypeGpuUnavailableError),
        (events.NVML_GPU_RECOVERY_ACTION, pynvml.nvmlEventTypeGpuRecoveryAction),
    ]
    assert [ours for ours, _ in pairs] == [theirs for _, theirs in pairs]
    assert set(events.NVML_KINDS) == {ours for ours, _ in pairs}
    assert sum(events.NVML_KINDS) == events.NVML_WANTED


def test_an_sxid_without_a_code_and_a_node_event_without_a_device() -> None:
    sxid = classify(WatchEvent("kmsg", Kind.SXID_FATAL, "nvidia-nvswitch3", None, "", 0.0))
    assert sxid.cause == "nvidia-nvswitch3 fatal SXid"
    ecc = classify(WatchEvent("nvml", Kind.ECC_SBE, "0000:1b:00", 7, "", 0.0, label="gpu3"))
    assert ecc.cause == "gpu3 single-bit ECC error"
    unnamed = classify(WatchEvent("nvml", Kind.XID, "", 79, "NVML event 0x8 data 79", 0.0))
    assert unnamed.cause == "node Xid 79 (GPU has fallen off the bus)"
    port = classify(WatchEvent("probe", Kind.IB_PORT_DOWN, "", None, "mlx5_2 port 1 Down", 0.0))
    assert port.cause == "port down (mlx5_2 port 1 Down)"
