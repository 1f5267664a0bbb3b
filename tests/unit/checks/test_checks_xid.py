"""The one Xid table: equal to the catalog's GPU-04 table, used by GPU-04 and by the simulator."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from checks_support import FAIL, GPU_INDEXES, INCOMPLETE, PASS, assert_status, failing_subjects, gpu_bus, judge

from burnin.checks import xid
from burnin.sim import faults as sim_faults

REPO = Path(__file__).resolve().parents[3]
Facts = dict[str, Any]
# The catalog's GPU-04 table as of this writing, spelled out so that a change to the code's table
# cannot change which cases run (test_fatal_set_is_the_catalogs keeps both honest against the catalog).
CATALOG_FATAL = (46, 48, 54, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 154, 156, 157, 158,
                 167, 169, 171, 172)
CATALOG_WARN_OR_INFO = (13, 31, 32, 43, 45, 63, 92, 94, 137)


@pytest.fixture(scope="module")
def catalog_xids() -> dict[int, str]:
    """Xid -> suite verdict, read from the GPU-04 table of ../shared/docs/check-catalog.md."""
    path = Path(os.environ.get("BURNIN_CATALOG", REPO.parent / "shared" / "docs" / "check-catalog.md"))
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"check catalog not found at {path} (CI must have ../shared)")
        pytest.skip(f"check catalog not found at {path}")
    text = path.read_text(encoding="utf-8")
    section = text[text.index("### GPU-04"):text.index("### GPU-05")]
    verdicts: dict[int, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not re.fullmatch(r"\d+(\s*[/,]\s*\d+)*", cells[0]):
            continue
        for number in re.findall(r"\d+", cells[0]):
            verdicts[int(number)] = cells[-1]
    assert len(verdicts) >= 30, verdicts
    return verdicts


def _catalog_fatal(verdicts: dict[int, str]) -> set[int]:
    fatal = set()
    for number, verdict in verdicts.items():
        same_as = re.match(r"as (\d+)", verdict)
        if same_as:
            verdict = verdicts[int(same_as.group(1))]
        if verdict.startswith("FAIL"):
            fatal.add(number)
    return fatal


def test_fatal_set_is_the_catalogs(catalog_xids: dict[int, str]) -> None:
    assert _catalog_fatal(catalog_xids) == xid.FATAL_XIDS
    assert {48, 79, 95, 171, 172} <= xid.FATAL_XIDS


def test_warn_and_info_set_is_the_catalogs(catalog_xids: dict[int, str]) -> None:
    assert set(catalog_xids) - _catalog_fatal(catalog_xids) == xid.NONFATAL_XIDS
    assert {63, 92, 94} <= xid.NONFATAL_XIDS  # not fatal in NVIDIA's catalog


def test_every_catalog_xid_has_a_meaning(catalog_xids: dict[int, str]) -> None:
    assert set(xid.XID_MEANING) == set(catalog_xids)


def test_simulator_uses_the_checks_table() -> None:
    assert sim_faults.XID_FATAL is xid.FATAL_XIDS
    assert sim_faults.XID_NONFATAL is xid.NONFATAL_XIDS
    for number in range(200):
        assert sim_faults.xid_is_fatal(number) == xid.is_fatal(number), number


def _log_xid(facts: Facts, number: int, bus_id: str, text: str = "reported by the driver") -> None:
    pci = bus_id[:10]  # the kernel prints 0000:61:00 for 0000:61:00.0
    line = f"[ 4242.000001] NVRM: Xid (PCI:{pci}): {number}, pid='<unknown>', name=<unknown>, {text}\n"
    record = facts["commands"]["dmesg"]
    record["stdout"] += line
    record["lines_total"] = record.get("lines_total", 0) + 1


def test_spelled_out_lists_are_the_code_table() -> None:
    assert set(CATALOG_FATAL) == xid.FATAL_XIDS and set(CATALOG_WARN_OR_INFO) == xid.NONFATAL_XIDS


@pytest.mark.parametrize("number", CATALOG_FATAL)
def test_every_fatal_xid_fails_gpu04(facts: Facts, number: int) -> None:
    index = number % len(GPU_INDEXES)
    _log_xid(facts, number, gpu_bus(index))
    verdict = judge("GPU-04", facts)
    assert_status(verdict, FAIL, f"gpu{index} Xid {number}")
    assert failing_subjects(verdict) == {f"gpu{index}"}


@pytest.mark.parametrize("number", CATALOG_WARN_OR_INFO)
def test_every_warn_or_info_xid_passes_gpu04(facts: Facts, number: int) -> None:
    _log_xid(facts, number, gpu_bus(number % len(GPU_INDEXES)))
    assert judge("GPU-04", facts).status is PASS


@pytest.mark.parametrize("index", GPU_INDEXES)
@pytest.mark.parametrize("number", [48, 79])
def test_fatal_xid_on_every_gpu(facts: Facts, index: int, number: int) -> None:
    _log_xid(facts, number, gpu_bus(index))
    verdict = judge("GPU-04", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {f"gpu{index}"}


@pytest.mark.parametrize("printed", ["0000:61:00", "61:00", "0000:61:00.0", "0000:61:00"])
def test_xid_pci_address_forms_name_the_gpu(facts: Facts, printed: str) -> None:
    line = f"[ 10.5] NVRM: Xid (PCI:{printed}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    facts["commands"]["dmesg"]["stdout"] += line
    verdict = judge("GPU-04", facts)
    assert verdict.status is FAIL and failing_subjects(verdict) == {"gpu3"}, verdict.reason


def test_unlisted_xid_does_not_reject(facts: Facts) -> None:
    _log_xid(facts, 999, gpu_bus(0))
    verdict = judge("GPU-04", facts)
    assert verdict.status is PASS and "unlisted" in verdict.measured


def test_fatal_xid_on_an_address_outside_the_topology_fails_naming_it(facts: Facts) -> None:
    _log_xid(facts, 79, "0000:aa:00.0")
    assert_status(judge("GPU-04", facts), FAIL, "PCI 0000:aa:00", "Xid 79")


def test_fatal_after_a_nonfatal_xid_on_the_same_gpu_fails(facts: Facts) -> None:
    _log_xid(facts, 63, gpu_bus(3))
    _log_xid(facts, 63, gpu_bus(3))
    _log_xid(facts, 48, gpu_bus(3))
    verdict = judge("GPU-04", facts)
    assert_status(verdict, FAIL, "gpu3 Xid 48")
    assert "Xid 63" not in verdict.reason


@pytest.mark.parametrize(("text", "status"), [
    ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", FAIL),
    ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", FAIL),
    ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", PASS),
    ("GPU recovery action changed", FAIL),  # action not stated: not None
])
def test_xid_154_fails_unless_the_action_is_none(facts: Facts, text: str, status: Any) -> None:
    _log_xid(facts, 154, gpu_bus(6), text)
    assert judge("GPU-04", facts).status is status


def test_a_cleared_154_does_not_hide_a_fatal_one(facts: Facts) -> None:
    _log_xid(facts, 154, gpu_bus(6), "GPU recovery action changed from 0x0 (None) to 0x0 (None)")
    _log_xid(facts, 154, gpu_bus(6), "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    assert judge("GPU-04", facts).status is FAIL


def test_empty_kernel_log_is_not_a_clean_one(facts: Facts) -> None:
    facts["commands"]["dmesg"].update(stdout="", lines_total=0)
    assert_status(judge("GPU-04", facts), INCOMPLETE, "dmesg printed nothing")


def test_kernel_log_without_gpu_lines_is_clean(facts: Facts) -> None:
    """The collector keeps only GPU/HCA lines: nothing kept from a non-empty log is no Xid."""
    facts["commands"]["dmesg"].update(stdout="", lines_total=1200)
    assert judge("GPU-04", facts).status is PASS


def test_empty_kernel_log_without_a_line_count_is_not_a_clean_one(facts: Facts) -> None:
    facts["commands"]["dmesg"]["stdout"] = ""
    del facts["commands"]["dmesg"]["lines_total"]
    assert judge("GPU-04", facts).status is INCOMPLETE
