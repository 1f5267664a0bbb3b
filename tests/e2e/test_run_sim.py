"""`burnin run --sim`: the real collector, checks, pytest suites and gate on simulated nodes.

Every simulated fault must be caught by its check, on the faulted node only,
with a reason that says measured vs expected; a healthy rack passes whole.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from burnin.sim import FAULTS

NON_FATAL_XID = 63
FATAL_XID = 79

# Every per-GPU check: a GPU that NVML cannot answer for (lost) or does not list (missing)
# is not measured by any of them, so each is incomplete on that node, by design.
PER_GPU_CHECKS = frozenset({"GPU-01", "GPU-03", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10", "GPU-11",
                            "GPU-14", "INV-02", "INV-04", "INV-06", "INV-07", "INV-08", "INV-11"})

# fault -> (the exact failed checks, the exact incomplete checks) on the faulted node.
# Extras are listed here on purpose: anything else failing or unmeasured there is a bug.
EXPECTED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # NVML's count (INV-01) and the PCI census (TOP-10) both see the GPU gone from the bus
    "gpu-missing": (frozenset({"INV-01", "TOP-10"}),
                    # the absent GPU's NUMA node, CPU list, HCA pairing and PCIe path cannot be read
                    PER_GPU_CHECKS | {"TOP-01", "TOP-02", "TOP-03", "TOP-04"}),
    "gpu-lost": (frozenset({"INV-01"}), PER_GPU_CHECKS),
    "ecc-uncorrectable": (frozenset({"GPU-01"}), frozenset()),
    # DCGM's deployment test 'Page Retirement/Row Remap' reads the same remap state as NVML (GPU-13 beside GPU-03)
    "row-remap-pending": (frozenset({"GPU-03", "GPU-13"}), frozenset()),
    "row-remap-failure": (frozenset({"GPU-03", "GPU-13"}), frozenset()),
    f"xid:{FATAL_XID}": (frozenset({"GPU-04"}), frozenset()),
    "hw-slowdown": (frozenset({"GPU-05"}), frozenset()),
    "thermal": (frozenset({"GPU-06"}), frozenset()),
    "power-capped": (frozenset({"GPU-07"}), frozenset()),
    "pcie-gen4": (frozenset({"GPU-08"}), frozenset()),
    "pcie-x8": (frozenset({"GPU-08"}), frozenset()),
    "nvlink-down": (frozenset({"GPU-10"}), frozenset()),
    "nvlink-errors": (frozenset({"GPU-11"}), frozenset()),
    "dcgm-health-warn": (frozenset({"GPU-12"}), frozenset()),
    "dcgm-health-fail": (frozenset({"GPU-12"}), frozenset()),
    "dcgm-diag-fail": (frozenset({"GPU-13"}), frozenset()),
    # GPU-14: the GPU's BF16 matmul digest differs from the run's other GPUs'
    "sdc": (frozenset({"GPU-14"}), frozenset()),
    "mig-enabled": (frozenset({"INV-07"}), frozenset()),
    "persistence-off": (frozenset({"INV-06"}), frozenset()),
    "ecc-disabled": (frozenset({"INV-08"}), frozenset()),
    # INV-11: the node's inventory differs from the fleet's (the other nodes of the run)
    "vbios-mismatch": (frozenset({"INV-02", "INV-11"}), frozenset()),
    "numa-mismatch": (frozenset({"TOP-01"}), frozenset()),
    "cpu-affinity": (frozenset({"TOP-02"}), frozenset()),
    "nic-affinity": (frozenset({"TOP-03"}), frozenset()),
    "acs-enabled": (frozenset({"TOP-04"}), frozenset()),
    "fabric-manager-down": (frozenset({"INV-04"}), frozenset()),
    "sxid-fatal": (frozenset({"INV-04"}), frozenset()),
    "peermem-missing": (frozenset({"INV-05"}), frozenset()),
    "driver-mismatch": (frozenset({"INV-03", "INV-11"}), frozenset()),
    "numa-balancing-on": (frozenset({"TOP-08"}), frozenset()),
    "iommu-dma": (frozenset({"TOP-05"}), frozenset()),
    "governor-powersave": (frozenset({"TOP-06"}), frozenset()),
    "hugepages-reserved": (frozenset({"TOP-07"}), frozenset()),
    "dimm-missing": (frozenset({"TOP-09"}), frozenset()),
    "nvme-missing": (frozenset({"TOP-10"}), frozenset()),
    # a port that is down has no rate, MTU, partitions or subnet manager to judge: IB-02, IB-05 and IB-09 say so
    "ib-port-down": (frozenset({"IB-01"}), frozenset({"IB-02", "IB-05", "IB-09"})),
    "ib-rate-200": (frozenset({"IB-02"}), frozenset()),
    # an Ethernet port where InfiniBand is designed has no subnet manager to judge: IB-05 says so
    "ib-link-layer": (frozenset({"IB-03"}), frozenset({"IB-05"})),
    "ib-errors": (frozenset({"IB-04"}), frozenset()),
    "hca-fw-mismatch": (frozenset({"INV-09", "INV-11"}), frozenset()),
    "storage-fw-drift": (frozenset({"INV-11"}), frozenset()),
    "hca-pcie-x8": (frozenset({"IB-06"}), frozenset()),
    "ib-mtu-2048": (frozenset({"IB-09"}), frozenset()),
    "ib-pkey-limited": (frozenset({"IB-09"}), frozenset()),
    # a port no subnet manager swept stays INIT: IB-01 fails it too, IB-02 and IB-09 judge ACTIVE ports only
    "sm-unreachable": (frozenset({"IB-01", "IB-05"}), frozenset({"IB-02", "IB-09"})),
    "sm-split": (frozenset({"IB-05"}), frozenset()),
    "kernel-drift": (frozenset({"INV-10", "INV-11"}), frozenset()),  # INV-11: the other nodes run the golden kernel
    # storage fabric (STO): each changes only what its check reads
    "storage-route-via-ib": (frozenset({"STO-01"}), frozenset()),
    "nccl-hca-leak": (frozenset({"STO-02"}), frozenset()),
    "storage-mtu-1500": (frozenset({"STO-04"}), frozenset()),
    "qos-pfc-off": (frozenset({"STO-05"}), frozenset()),
    "bf-nic-mode": (frozenset({"STO-06"}), frozenset()),
    "arp-leak": (frozenset({"STO-07"}), frozenset()),
}


def burnin(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _matrix() -> list[tuple[str, str]]:
    """(fault spec, check id) for every fault, with xid:N as one fatal and one non-fatal Xid."""
    rows = []
    for name, spec in FAULTS.items():
        if spec.suite != "node":
            continue  # fabric faults: tests/e2e/test_fabric_sim.py
        if name.startswith("xid"):
            rows.append((f"xid:{FATAL_XID}", spec.check_id))
        else:
            rows.append((name, spec.check_id))
    return rows


@pytest.fixture(scope="module")
def fault_matrix_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run: sim01 healthy, one fault per node after it, a non-fatal Xid, a healthy last node."""
    matrix = _matrix()
    count = len(matrix) + 3
    width = max(2, len(str(count)))
    names = [f"sim{i:0{width}d}" for i in range(1, count + 1)]
    plan = {names[i + 1]: matrix[i] for i in range(len(matrix))}
    nonfatal_node = names[len(matrix) + 1]
    out = tmp_path_factory.mktemp("matrix")
    args = ["run", "--sim", str(count), "--out", str(out)]
    for node, (fault, _) in plan.items():
        args += ["--fault", f"{node}:{fault}"]
    args += ["--fault", f"{nonfatal_node}:xid:{NON_FATAL_XID}"]
    proc = burnin(*args)
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else None
    return {"proc": proc, "gate": gate, "plan": plan, "names": names, "nonfatal": nonfatal_node, "out": out}


def test_fault_matrix_exit_code(fault_matrix_run: dict[str, Any]) -> None:
    proc = fault_matrix_run["proc"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_at_least_24_faults_are_simulated() -> None:
    required = {"gpu-missing", "gpu-lost", "ecc-uncorrectable", "row-remap-pending", "row-remap-failure",
                "hw-slowdown", "thermal", "pcie-gen4", "pcie-x8", "nvlink-down", "nvlink-errors",
                "fabric-manager-down", "peermem-missing", "mig-enabled", "persistence-off", "driver-mismatch",
                "ib-port-down", "ib-rate-200", "ib-errors", "numa-mismatch", "nic-affinity", "acs-enabled",
                "numa-balancing-on"}
    assert required <= set(FAULTS)
    assert any(name.startswith("xid") for name in FAULTS)
    assert len(FAULTS) >= 24


def test_every_node_fault_has_an_expected_outcome() -> None:
    """A new fault must say here what the faulted node's verdicts are, extras included."""
    missing = sorted({fault for fault, _ in _matrix()} - set(EXPECTED))
    assert not missing, f"list the exact failed and incomplete checks of {missing} in EXPECTED"
    assert {fault for fault, _ in _matrix()} == set(EXPECTED)
    for fault, check_id in _matrix():
        failed, unmeasured = EXPECTED[fault]
        assert check_id in failed, fault
        assert not failed & unmeasured, fault


@pytest.mark.parametrize(("fault", "check_id"), _matrix(), ids=[f for f, _ in _matrix()])
def test_fault_gives_exactly_its_verdicts_on_that_node(fault_matrix_run: dict[str, Any], fault: str,
                                                       check_id: str) -> None:
    gate, plan = fault_matrix_run["gate"], fault_matrix_run["plan"]
    assert gate is not None, fault_matrix_run["proc"].stderr[-2000:]
    node = next(n for n, (f, _) in plan.items() if f == fault)
    decision = gate["nodes"][node]
    assert fault in EXPECTED, f"add EXPECTED[{fault!r}] = (failed, incomplete): here it gave {decision}"
    failed, unmeasured = EXPECTED[fault]
    assert not decision["admitted"]
    assert set(decision["failed"]) == failed, decision
    assert set(decision["incomplete"]) == unmeasured, decision
    assert len(decision["failed"]) == len(failed) and len(decision["incomplete"]) == len(unmeasured)
    reason = next(r for r in decision["reasons"] if r.startswith(check_id))
    assert "expected" in reason, reason
    for other in unmeasured:
        why = next(r for r in decision["reasons"] if r.startswith(other))
        assert "could not be measured" in why, why


def test_every_node_without_a_fatal_fault_is_admitted_whole(fault_matrix_run: dict[str, Any]) -> None:
    """Healthy nodes and the node with a non-fatal Xid: admitted, nothing failed or unmeasured."""
    gate, plan = fault_matrix_run["gate"], fault_matrix_run["plan"]
    clean = [n for n in fault_matrix_run["names"] if n not in plan]
    assert fault_matrix_run["nonfatal"] in clean and len(clean) == 3
    for node in clean:
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}, node
    assert set(gate["nodes"]) == set(fault_matrix_run["names"])
    rejected = {n for n, d in gate["nodes"].items() if not d["admitted"]}
    assert rejected == set(plan)


def test_junit_is_valid_and_carries_properties(fault_matrix_run: dict[str, Any]) -> None:
    from junitparser import Error, Failure, JUnitXml

    suites = JUnitXml.fromfile(str(fault_matrix_run["out"] / "junit.xml"))
    outcomes = {"failure": 0, "error": 0}
    for suite in suites:
        for case in suite:
            for result in case.result:
                if isinstance(result, Failure):
                    outcomes["failure"] += 1
                elif isinstance(result, Error):
                    outcomes["error"] += 1
    assert outcomes["failure"] >= len(fault_matrix_run["plan"]) - 2  # every fault is at least one failure
    assert outcomes["error"] >= 1  # the lost GPU's unmeasured checks are errors, not failures
    from burnin.report.junit import read_cases

    cases = read_cases(fault_matrix_run["out"] / "junit.xml")
    names = fault_matrix_run["names"]
    assert len(cases) >= 25 * len(names)
    for name, props in cases.items():
        assert {"node", "check", "measured", "expected", "verdict"} <= set(props), name
        assert name.endswith(f"[{props['node']}]")
    tree = ET.parse(fault_matrix_run["out"] / "junit.xml")
    for case in tree.iter("testcase"):
        check = cases[case.get("name", "")]["check"]
        assert case.get("classname") == f"burnin.node.{check}"  # Jenkins: class GPU-10 in package burnin.node


def test_junit_validates_against_the_jenkins_xunit_schema(fault_matrix_run: dict[str, Any]) -> None:
    import os

    import xmlschema

    schema = Path(os.environ.get("BURNIN_SCHEMA_DIR", Path(__file__).resolve().parents[3] / "shared" / "schemas"))
    if not (schema / "junit-10.xsd").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"JUnit schema not found in {schema} (CI must have ../shared)")
        pytest.skip(f"JUnit schema not found in {schema}")
    xmlschema.XMLSchema(str(schema / "junit-10.xsd")).validate(str(fault_matrix_run["out"] / "junit.xml"))


def test_healthy_rack_is_admitted_whole(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "8", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["admitted"] == "sim[01-08]" and gate["rejected"] == ""
    for decision in gate["nodes"].values():
        assert decision == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}
    assert "admitted: sim[01-08] (8)" in proc.stdout


def test_issue_done_when_run(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "8", "--fault", "sim03:nvlink-down", "--fault", "sim06:ib-rate-200",
                  "--out", str(tmp_path))
    assert proc.returncode == 1
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["rejected"] == "sim[03,06]"
    assert gate["admitted"] == "sim[01-02,04-05,07-08]"
    assert gate["nodes"]["sim03"]["failed"] == ["GPU-10"]
    assert gate["nodes"]["sim06"]["failed"] == ["IB-02"]
    assert "17/18" in gate["nodes"]["sim03"]["reasons"][0]
    assert "200" in gate["nodes"]["sim06"]["reasons"][0] and "400" in gate["nodes"]["sim06"]["reasons"][0]
    assert "REJECTED sim03" in proc.stdout and "rejected: sim[03,06] (2)" in proc.stdout
    assert "<code>sim03</code>" in (tmp_path / "report.html").read_text()
    from burnin.report.junit import read_cases

    props = read_cases(tmp_path / "junit.xml")["test_nvlink_links[sim03]"]
    assert props["check"] == "GPU-10" and props["node"] == "sim03" and "17/18" in props["measured"]


def test_keyword_selects_a_subset(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "2", "--fault", "sim02:ib-rate-200", "-k", "nvlink", "--out", str(tmp_path))
    # a partial run admits nobody (tests/e2e/test_fail_closed_gate.py), yet judges what it selected
    assert proc.returncode == 1, proc.stdout + proc.stderr
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    assert {v["check"] for v in verdicts} == {"GPU-10", "GPU-11"}
    assert {v["status"] for v in verdicts} == {"pass"}


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--sim", "2", "--fault", "sim09:nvlink-down"], "no simulated node"),
    (["run", "--sim", "2", "--fault", "sim01:no-such-fault"], "no-such-fault"),
    (["run", "--sim", "2", "--fault", "sim01"], "NODE:FAULT"),
    (["run"], "no nodes"),
    (["run", "--sim", "2", "--topology", "nope"], "unknown topology"),
    (["run", "--sim", "2", "--suite", "nope"], "unknown suite"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = burnin(*args, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


SITE_TEST = '''
import pytest

@pytest.mark.check("SITE-01")
def test_numa_balancing_off(node, facts, topology):
    assert facts.kernel()["numa_balancing"] == 0, f"{node}: kernel.numa_balancing is on"
'''


def test_site_suite_folder_gates_like_a_builtin_check(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "test_site.py").write_text(SITE_TEST)
    proc = burnin("run", "--sim", "3", "--fault", "sim02:numa-balancing-on", "--suite", "node", "--suite", str(site),
                  "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert gate["rejected"] == "sim02"
    assert gate["nodes"]["sim02"]["failed"] == ["TOP-08", "SITE-01"]
    assert any("kernel.numa_balancing is on" in r for r in gate["nodes"]["sim02"]["reasons"])
