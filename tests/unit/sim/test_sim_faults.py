"""The fault registry: contract names, check ids, targets and spec parsing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from burnin.cli.main import main
from burnin.errors import UsageError
from burnin.sim import FAULTS, Fault, build_rack, faults_doc, parse_fault_spec, xid_is_fatal
from burnin.sim.faults import MUTATORS, XID_FATAL, XID_NONFATAL, gpu_fault, simulates, validate_fault
from burnin.sim.state import NodeState
from burnin.topology import Topology, find_topology

DOC = Path(__file__).resolve().parents[3] / "docs" / "faults.md"

CONTRACT = {
    "gpu-missing": "INV-01", "gpu-lost": "INV-01", "ecc-uncorrectable": "GPU-01",
    "row-remap-pending": "GPU-03", "row-remap-failure": "GPU-03", "xid:N": "GPU-04",
    "hw-slowdown": "GPU-05", "thermal": "GPU-06", "pcie-gen4": "GPU-08", "pcie-x8": "GPU-08",
    "nvlink-down": "GPU-10", "nvlink-errors": "GPU-11", "fabric-manager-down": "INV-04",
    "peermem-missing": "INV-05", "mig-enabled": "INV-07", "persistence-off": "INV-06",
    "driver-mismatch": "INV-03", "ib-port-down": "IB-01", "ib-rate-200": "IB-02", "ib-errors": "IB-04",
    "numa-mismatch": "TOP-01", "nic-affinity": "TOP-03", "acs-enabled": "TOP-04",
    "numa-balancing-on": "TOP-08", "ecc-disabled": "INV-08", "cpu-affinity": "TOP-02",
    "iommu-dma": "TOP-05", "ib-link-layer": "IB-03", "power-capped": "GPU-07",
}


def test_registry_holds_every_contract_fault_with_its_check() -> None:
    assert len(FAULTS) >= 24
    for name, check_id in CONTRACT.items():
        assert FAULTS[name].check_id == check_id, name
    for spec in FAULTS.values():
        assert re.match(r"^(INV|GPU|TOP|IB|NCCL|NVL|STO|BRN|MEG|PIN)-\d\d$", spec.check_id)
        assert spec.description and spec.changes
        assert (spec.default_target is None) == (spec.target_kind == "node")
        mutator = {"xid:N": "xid", "xid-at:MIN:N": "xid-at"}.get(spec.name, spec.name)
        assert mutator in MUTATORS


def test_docs_faults_md_table_is_what_burnin_faults_writes() -> None:
    page = DOC.read_text(encoding="utf-8")
    assert faults_doc.generated(page) == faults_doc.table(FAULTS.values()), (
        "docs/faults.md's table is stale: refresh it with `burnin faults --markdown --update docs/faults.md`")
    assert faults_doc.update(page, FAULTS.values()) == page  # what --update writes is the page as it is
    for spec in FAULTS.values():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{spec.name}` |"))
        assert spec.check_id in row and spec.suite in row and spec.changes in row and spec.description in row


def test_burnin_faults_markdown_prints_and_updates_the_table(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faults", "--markdown"]) == 0
    assert capsys.readouterr().out == faults_doc.table(FAULTS.values())
    page = tmp_path / "faults.md"
    page.write_text(f"# Faults\n\nprose\n\n{faults_doc.BEGIN}\n| stale |\n{faults_doc.END}\n\nmore prose\n")
    assert main(["faults", "--markdown", "--update", str(page)]) == 0
    text = page.read_text()
    assert "| stale |" not in text and text.startswith("# Faults\n\nprose\n") and text.endswith("more prose\n")
    assert faults_doc.generated(text) == faults_doc.table(FAULTS.values())
    (tmp_path / "plain.md").write_text("no markers\n")
    for args in (["--markdown", "--update", str(tmp_path / "plain.md")], ["--update", str(page)],
                 ["--markdown", "--update", str(tmp_path / "absent.md")]):
        assert main(["faults", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("burnin faults: ") and err.count("\n") == 1, err
    assert (tmp_path / "plain.md").read_text() == "no markers\n"


@pytest.mark.rack
def test_a_fault_declared_beside_its_mutator_is_registered_listed_and_applied(tmp_path: Path) -> None:
    spec = gpu_fault("test-sw-power-cap", "GPU-05", "a software power cap holds the clocks back (a test's fault)",
                     "nvmlDeviceGetCurrentClocksEventReasons adds 0x4 (SwPowerCap)")

    def sw_power_cap(state: NodeState, fault: Fault) -> None:
        assert fault.target is not None
        state.gpu(fault.target).clock_event_reasons |= 0x4

    try:
        assert simulates(spec)(sw_power_cap) is sw_power_cap
        assert FAULTS["test-sw-power-cap"] is spec and MUTATORS["test-sw-power-cap"] is sw_power_cap
        assert parse_fault_spec("test-sw-power-cap@gpu1") == Fault("test-sw-power-cap", "gpu1")
        assert "| `test-sw-power-cap` | GPU-05 | node | `gpu3` |" in faults_doc.table(FAULTS.values())
        with pytest.raises(RuntimeError, match="declared twice"):
            simulates(spec)(sw_power_cap)
        node = build_rack(tmp_path, find_topology("hgx-h100-8gpu"), ["t01"],
                          {"t01": [parse_fault_spec("test-sw-power-cap@gpu1")]})[0]
        assert [g.clock_event_reasons for g in node.state().gpus][:3] == [0x1, 0x5, 0x1]
    finally:
        FAULTS.pop("test-sw-power-cap", None)
        MUTATORS.pop("test-sw-power-cap", None)


@pytest.mark.parametrize(("text", "expected"), [
    ("nvlink-down@gpu3", Fault("nvlink-down", "gpu3")),
    ("nvlink-down", Fault("nvlink-down", "gpu3")),
    ("xid:79@gpu2", Fault("xid", "gpu2", 79)),
    ("xid:13", Fault("xid", "gpu3", 13)),
    ("ib-rate-200@mlx5_6", Fault("ib-rate-200", "mlx5_6")),
    ("ib-errors", Fault("ib-errors", "mlx5_2")),
    ("fabric-manager-down", Fault("fabric-manager-down", None)),
    (" thermal @ gpu0 ", Fault("thermal", "gpu0")),
])
def test_parse_fault_spec(text: str, expected: Fault) -> None:
    assert parse_fault_spec(text) == expected


def test_fault_properties_and_round_trip() -> None:
    fault = parse_fault_spec("xid:79@gpu2")
    assert (fault.name, fault.arg, fault.target, fault.check_id, fault.fatal) == ("xid", 79, "gpu2", "GPU-04", True)
    assert str(fault) == "xid:79@gpu2"
    assert parse_fault_spec(str(fault)) == fault
    assert parse_fault_spec("xid:63").fatal is False
    assert parse_fault_spec("peermem-missing").fatal is True
    assert str(parse_fault_spec("iommu-dma")) == "iommu-dma"


def test_xid_table_follows_the_catalog() -> None:
    for xid in (46, 48, 54, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 154, 156, 157, 158, 167, 169):
        assert xid_is_fatal(xid), xid
    for xid in (13, 31, 32, 43, 45, 63, 92, 94, 137):
        assert not xid_is_fatal(xid), xid
    assert not XID_FATAL & XID_NONFATAL
    assert not xid_is_fatal(999)  # not in the catalog's DRAIN set


@pytest.mark.parametrize(("text", "message"), [
    ("nvlink-dwn", "unknown fault 'nvlink-dwn'; valid faults: gpu-missing"),
    ("xid", "xid:N"),
    ("xid:abc@gpu1", "xid:N"),
    ("nvlink-down@mlx5_0", "targets a GPU"),
    ("ib-rate-200@gpu1", "targets an HCA"),
    ("peermem-missing@gpu1", "takes no @target"),
    ("thermal@", "empty target"),
])
def test_bad_specs_raise_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_fault_spec(text)


def test_targets_are_checked_against_the_topology(sim_topology: Topology) -> None:
    with pytest.raises(UsageError, match=r"bad target 'gpu8'; valid: gpu0, gpu1, .*gpu7"):
        parse_fault_spec("thermal@gpu8", sim_topology)
    with pytest.raises(UsageError, match=r"bad target 'mlx5_12'; valid: mlx5_0, .*mlx5_9"):
        parse_fault_spec("ib-errors@mlx5_12", sim_topology)
    assert parse_fault_spec("ib-errors@mlx5_9", sim_topology).target == "mlx5_9"
    assert validate_fault(Fault("nvlink-down"), sim_topology) == Fault("nvlink-down", "gpu3")
    with pytest.raises(UsageError):
        validate_fault(Fault("thermal", "gpu9"), sim_topology)


def test_one_error_line_lists_the_valid_names() -> None:
    with pytest.raises(UsageError) as info:
        parse_fault_spec("bogus")
    text = str(info.value)
    assert "\n" not in text
    for name in CONTRACT:
        assert name in text
