"""`burnin run --sim N --suite fabric`: nccl-tests, nvbandwidth and ib_write_bw shims, localisation, the gate.

Local dispatch: single-node runs on each simulated node, multi-node runs as
simulated jobs (one local process per job, its members named in the
environment). One faulted rack holds every fabric fault; each must be caught by
its check on its node only, and the healthy nodes must be admitted. Small racks
(2-4 nodes) reject exactly their bad nodes: a node that fails a single-node
check stays out of the multi-node runs, IB-08 names a slow HCA on a node alone,
and a pair nothing can separate leaves both nodes incomplete, never failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.sim import FAULTS

PLAN = {"sim02": "nvlink-down", "sim03": "nccl-wrong", "sim04": "slow-hca", "sim05": "nccl-hang",
        "sim06": "slow-nvlink", "sim07": "ib-rate-200", "sim08": "p2p-disabled", "sim09": "nvlink-flaky-under-load"}
HEALTHY = ["sim01", "sim10"]
MULTI = ["NCCL-03", "NCCL-04"]
# The exact verdicts on each faulted node: (failed, incomplete). A node that fails or cannot complete a
# single-node check is left out of the multi-node runs, so NCCL-03/04 are incomplete on it (never failed,
# never charged to the others). ib-rate-200 is invisible to IB-08 (loopback stays in the HCA): the group
# and pairwise localisation name it.
EXPECTED = {
    "sim02": (["NCCL-01", "NVL-04"], MULTI),            # NVLS lost: ring rate (+ straggler); 17/18 links after
    "sim03": (["NCCL-05"], MULTI),
    "sim04": (["IB-08"], MULTI),                        # mlx5_2 at half rate, GPU and host memory
    "sim05": ([], ["NCCL-01", "NCCL-05", *MULTI]),      # hung: nothing measured, nothing failed
    "sim06": (["NCCL-01", "NVL-01", "NVL-03"], MULTI),  # nvbandwidth and the CUDA sample agree
    "sim07": (MULTI, []),
    "sim08": (["NCCL-01", "NVL-03"], ["NVL-01", *MULTI]),  # no peer access: nvbandwidth prints N/A for its pairs
    "sim09": (["NVL-04"], MULTI),                       # clean at rest, link 7 of gpu3 retrains under traffic
}


def burnin(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def properties(junit: Path) -> dict[str, dict[str, str]]:
    from burnin.report.junit import read_cases

    return read_cases(junit)


def fabric_run(out: Path, nodes: int, *faults: str, config: str | None = None) -> dict[str, Any]:
    """``burnin run --sim N --suite fabric --fault ...``: the process, gate.json and fabric.json."""
    args = ["run", "--sim", str(nodes), "--suite", "fabric", "--out", str(out / "run")]
    if config is not None:
        (out / "fabric.yaml").write_text(config)
        args += ["--fabric-config", str(out / "fabric.yaml")]
    for fault in faults:
        args += ["--fault", fault]
    proc = burnin(*args)
    gate_file, fabric_file = out / "run" / "gate.json", out / "run" / "fabric.json"
    return {"proc": proc, "out": out / "run",
            "gate": json.loads(gate_file.read_text()) if gate_file.exists() else None,
            "fabric": json.loads(fabric_file.read_text()) if fabric_file.exists() else None}


def verdicts(gate: dict[str, Any], node: str) -> tuple[list[str], list[str]]:
    decision = gate["nodes"][node]
    return sorted(decision["failed"]), sorted(decision["incomplete"])


def assert_admitted(gate: dict[str, Any], *nodes: str) -> None:
    for node in nodes:
        decision = gate["nodes"][node]
        assert decision["admitted"] and decision["failed"] == [] and decision["incomplete"] == [], decision


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # the hung node costs 3 s per launch, not 60
    return fabric_run(tmp_path_factory.mktemp("fabric"), 10, *(f"{n}:{f}" for n, f in PLAN.items()),
                      config="timeout_s: 3\n")


def test_faulted_rack_rejects_exactly_the_faulted_nodes(faulted: dict[str, Any]) -> None:
    proc, gate = faulted["proc"], faulted["gate"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert gate["rejected"] == "sim[02-09]" and gate["admitted"] == "sim[01,10]", gate
    assert_admitted(gate, *HEALTHY)


@pytest.mark.parametrize("node", sorted(EXPECTED))
def test_each_faulted_node_has_exactly_its_verdicts(faulted: dict[str, Any], node: str) -> None:
    failed, incomplete = EXPECTED[node]
    assert verdicts(faulted["gate"], node) == (sorted(failed), sorted(incomplete)), faulted["gate"]["nodes"][node]


# Fabric faults a rack of their own shows better than the faulted rack above, each with its test below.
OWN_RACK = {"rail-degraded": "test_a_switch_side_rail_fault_is_seen_only_by_multi_node_runs"}


def test_the_plan_covers_every_fabric_fault() -> None:
    assert {name for name, spec in FAULTS.items() if spec.suite == "fabric"} <= set(PLAN.values()) | set(OWN_RACK)
    assert all(name in globals() for name in OWN_RACK.values())


@pytest.mark.parametrize(("node", "fault"), sorted((n, f) for n, f in PLAN.items() if FAULTS[f].suite == "fabric"))
def test_each_fabric_fault_is_caught_by_its_check(faulted: dict[str, Any], node: str, fault: str) -> None:
    spec = FAULTS[fault]
    decision = faulted["gate"]["nodes"][node]
    assert not decision["admitted"]
    assert spec.check_id in decision[{"fail": "failed", "incomplete": "incomplete"}[spec.outcome]], decision


def test_left_out_nodes_say_why_in_their_multi_node_checks(faulted: dict[str, Any]) -> None:
    reasons = faulted["gate"]["nodes"]["sim04"]["reasons"]
    assert any(r.startswith("NCCL-03 could not be measured: left out of multi-node runs and localisation: "
                            "IB-08 failed on this node") for r in reasons), reasons
    doc = faulted["fabric"]
    assert set(doc["excluded"]) == {"sim02", "sim03", "sim04", "sim05", "sim06", "sim08", "sim09"}
    assert "mlx5_2" in doc["excluded_reasons"]["sim04"][0]
    assert doc["excluded"]["sim09"] == "left out of multi-node runs and localisation: NVL-04 failed on this node"
    assert doc["group"]["nodes"] == ["sim01", "sim07", "sim10"]


def test_nvlink_down_fails_nccl_01(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim02"]["reasons"] if r.startswith("NCCL-01"))
    assert "GB/s at 8 GiB" in reason and ">= 440 GB/s" in reason


def test_nccl_wrong_fails_nccl_05(faulted: dict[str, Any]) -> None:
    reasons = faulted["gate"]["nodes"]["sim03"]["reasons"]
    assert any(r.startswith("NCCL-05") and "wrong" in r for r in reasons)


def test_slow_hca_named_by_ib_08_with_the_hca(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim04"]["reasons"] if r.startswith("IB-08"))
    assert "mlx5_2 gpu2 memory" in reason and "mlx5_2 host memory" in reason and ">= 360 Gb/s" in reason
    assert "mlx5_1" not in reason


def test_a_slow_link_is_named_by_localisation_with_its_rail(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim07"]["reasons"] if r.startswith("NCCL-04"))
    assert "slow HCA mlx5_2" in reason and "sim07+" in reason


def test_nccl_hang_is_incomplete_with_the_last_output_lines(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim05"]["reasons"] if r.startswith("NCCL-01"))
    assert "hung on sim05" in reason and "no result within 3 s" in reason
    assert "last output:" in reason and "float sum" in reason  # the rows it printed before it stopped


def test_slow_nvlink_fails_nvl_01(faulted: dict[str, Any]) -> None:
    reasons = faulted["gate"]["nodes"]["sim06"]["reasons"]
    assert any(r.startswith("NVL-01") and "gpu3" in r for r in reasons)
    p2p = next(r for r in reasons if r.startswith("NVL-03"))
    assert p2p.startswith("NVL-03 gpu3 fails with all 14 pairs it is in: 22") and "GB/s P2P writes" in p2p
    assert "(expected P2P access on all 56 ordered pairs, P2P writes >= 330 GB/s, latency <= 5 us per pair)" in p2p


def test_p2p_disabled_fails_nvl_03_naming_the_gpu(faulted: dict[str, Any]) -> None:
    reasons = faulted["gate"]["nodes"]["sim08"]["reasons"]
    reason = next(r for r in reasons if r.startswith("NVL-03"))
    assert reason.startswith("NVL-03 gpu3 fails with all 14 pairs it is in: no P2P access (connectivity 0), 3")
    assert "GB/s P2P writes" in reason and "us P2P write latency at worst" in reason
    assert reason.endswith("(expected P2P access on all 56 ordered pairs, P2P writes >= 330 GB/s, latency <= 5 us "
                           "per pair)")
    facts = json.loads((faulted["out"] / "facts" / "sim08.json").read_text())
    p2p = facts["fabric"]["p2p"]
    assert p2p["status"] == "ok" and p2p["matrices"]["connectivity"][3] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert [3, 0] in p2p["refused"] and len(p2p["refused"]) == 14


def test_a_link_flaky_under_load_fails_nvl_04_with_the_growth(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim09"]["reasons"] if r.startswith("NVL-04"))
    assert reason == ("NVL-04 gpu3 grew during all_reduce_perf, nvbandwidth, p2pBandwidthLatencyTest, ib_write_bw: "
                      "recovery +3 (link 7), replay +450 (link 7) (expected 18 links up after the traffic; counter "
                      "growth during it: recovery <= 0 errors, replay <= 100 errors, crc_flit <= 100 errors per GPU)")
    facts = json.loads((faulted["out"] / "facts" / "sim09.json").read_text())
    before = facts["nvml"]["gpus"][3]["nvlink"][7]
    after = facts["fabric"]["nvlink_after"]["nvml"]["gpus"][3]["nvlink"][7]
    assert (before["recovery"], before["replay"]) == (0, 0) and (after["recovery"], after["replay"]) == (3, 450)
    healthy = json.loads((faulted["out"] / "facts" / "sim10.json").read_text())["fabric"]["nvlink_after"]
    assert all(link["replay"] == 0 for gpu in healthy["nvml"]["gpus"] for link in gpu["nvlink"])


def test_nvlink_down_fails_nvl_04_as_down_before_and_after(faulted: dict[str, Any]) -> None:
    reason = next(r for r in faulted["gate"]["nodes"]["sim02"]["reasons"] if r.startswith("NVL-04"))
    assert reason.startswith("NVL-04 gpu3 17/18 NVLink links up after all_reduce_perf, nvbandwidth, "
                             "p2pBandwidthLatencyTest, ib_write_bw (down: 7, already down before it)")


def test_a_link_flaky_under_load_is_clean_at_rest(tmp_path: Path) -> None:
    """The node suite judges NVLink at rest (GPU-10/11 pass); only the fabric suite's second look catches it."""
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "3", "--suite", "node", "--suite", "fabric", "--fault",
                  "sim02:nvlink-flaky-under-load", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim02" and gate["admitted"] == "sim[01,03]", gate
    assert gate["nodes"]["sim02"]["failed"] == ["NVL-04"]
    cases = properties(out / "junit.xml")
    assert cases["test_nvlink_links[sim02]"]["verdict"] == "pass"
    assert cases["test_nvlink_errors[sim02]"]["verdict"] == "pass"
    assert cases["test_nvlink_after_traffic[sim02]"]["verdict"] == "fail"
    assert cases["test_nvlink_after_traffic[sim01]"]["verdict"] == "pass"


def test_junit_names_the_node_and_carries_measured_values(faulted: dict[str, Any]) -> None:
    cases = properties(faulted["out"] / "junit.xml")
    case = cases["test_nccl_single_node_all_reduce[sim02]"]
    assert case["node"] == "sim02" and case["check"] == "NCCL-01" and case["verdict"] == "fail"
    assert "GB/s" in case["measured"] and ">= 440" in case["expected"]
    for name, props in cases.items():
        assert name.endswith(f"[{props['node']}]"), name
        assert {"node", "check"} <= set(props)


def test_fabric_json_and_command_log(faulted: dict[str, Any]) -> None:
    out = faulted["out"]
    doc = faulted["fabric"]
    assert "sim05" in doc["excluded"]
    assert doc["localization"]["named"] == ["sim07"] and doc["localization"]["unresolved"] == []
    assert doc["localization"]["rounds"] >= 3 and doc["regroup"]["nodes"] == ["sim01", "sim10"]
    assert doc["regroup_passed"]
    facts = json.loads((out / "facts" / "sim07.json").read_text())
    assert facts["fabric"]["multi"]["localization"]["slow_hcas"][0]["hca"] == "mlx5_2"
    gdr = json.loads((out / "facts" / "sim04.json").read_text())["fabric"]["ib_write_bw"]
    assert set(gdr) == {f"mlx5_{i}" for i in range(8)} and gdr["mlx5_2"]["cuda"]["cuda_device"] == 2
    assert gdr["mlx5_2"]["host"]["bw_average_gbps"] < 0.6 * gdr["mlx5_1"]["host"]["bw_average_gbps"]
    log = (out / "fabric-commands.log").read_text()
    assert "NCCL_IB_HCA==mlx5_0:1," in log and "NCCL_IB_HCA==mlx5_2:1" in log and "mlx5_8" not in log
    assert "ib_write_bw -d mlx5_2 -F --report_gbits" in log and "--use_cuda=2" in log
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in log


def test_healthy_rack_passes_with_localize_and_every_collective(tmp_path: Path) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("collectives: [all_reduce, all_gather, reduce_scatter, alltoall, sendrecv]\n")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "4", "--suite", "fabric", "--localize", "--fabric-config", str(config),
                  "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["admitted"] == "sim[01-04]"
    doc = json.loads((out / "fabric.json").read_text())
    assert doc["group_passed"] and doc["localization"]["rounds"] == 1 and doc["localization"]["named"] == []
    assert set(doc["single"]["sim01"]) == {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"}
    cases = properties(out / "junit.xml")
    assert len(cases) == 11 * 4  # 10 fabric checks and STO-02 (NCCL's runtime evidence) on 4 nodes
    assert all(p["verdict"] == "pass" for p in cases.values())
    assert "GPUDirect min" in cases["test_gpudirect_rdma_bandwidth_per_hca[sim03]"]["measured"]
    assert "all_gather" in cases["test_nccl_single_node_other_collectives[sim02]"]["measured"]


def test_a_single_node_skips_the_multi_node_checks(tmp_path: Path) -> None:
    proc = burnin("run", "--sim", "1", "--suite", "fabric", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    checks = {v["check"] for v in verdicts if v["status"] != "not-applicable"}
    assert checks == {"NCCL-01", "NCCL-05", "NVL-01", "NVL-02", "NVL-03", "NVL-04", "IB-08",
                      "STO-02"}  # STO-02: nccl.conf alone
    assert all(v["status"] == "pass" for v in verdicts if v["check"] in checks)
    # the multi-node checks stand aside explicitly, with the reason (burnin.suite.not_applicable)
    aside = {v["check"]: v["reason"] for v in verdicts if v["status"] == "not-applicable"}
    assert {"NCCL-03", "NCCL-04"} <= set(aside) and all(aside.values()), aside


def test_other_collectives_and_host_bandwidth_catch_their_faults(tmp_path: Path) -> None:
    """NCCL-02 (all_gather & co.) and NVL-02 (host<->device) each catch a fault, on that node only."""
    config = tmp_path / "fabric.yaml"
    config.write_text("collectives: [all_reduce, all_gather, reduce_scatter]\n")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "4", "--suite", "fabric", "--fabric-config", str(config), "--out", str(out),
                  "--fault", "sim02:slow-nvlink", "--fault", "sim03:pcie-x8")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim[02-03]", gate
    assert "NCCL-02" in gate["nodes"]["sim02"]["failed"]
    # the x8 GPU halves its GPUDirect path too (IB-08 through its paired HCA mlx5_3)
    assert verdicts(gate, "sim03") == (["IB-08", "NVL-02"], MULTI)
    assert any(r.startswith("IB-08 mlx5_3 gpu3 memory") for r in gate["nodes"]["sim03"]["reasons"])
    reason = next(r for r in gate["nodes"]["sim03"]["reasons"] if r.startswith("NVL-02"))
    assert "expected" in reason
    for node in ("sim01", "sim04"):
        assert gate["nodes"][node]["admitted"]


# ---------------------------------------------------------------- small racks (issue 9, "Small racks")


@pytest.mark.parametrize("nodes", [2, 3])
def test_a_slow_hca_rejects_its_node_only_in_a_small_rack(tmp_path: Path, nodes: int) -> None:
    run = fabric_run(tmp_path, nodes, "sim01:slow-hca")
    gate = run["gate"]
    assert run["proc"].returncode == 1, run["proc"].stdout + run["proc"].stderr
    assert gate["rejected"] == ("sim[01-02]" if nodes == 2 else "sim01"), gate  # 2 nodes: sim02 unmeasured
    assert verdicts(gate, "sim01") == (["IB-08"], MULTI)
    reason = next(r for r in gate["nodes"]["sim01"]["reasons"] if r.startswith("IB-08"))
    assert "mlx5_2 gpu2 memory" in reason and "mlx5_2 host memory" in reason
    others = [f"sim{i:02d}" for i in range(2, nodes + 1)]
    assert run["fabric"]["excluded"] == {
        "sim01": "left out of multi-node runs and localisation: IB-08 failed on this node"}
    if nodes == 2:  # its only partner was left out: unmeasured multi-node, held incomplete, never failed
        sim02 = gate["nodes"]["sim02"]
        assert not sim02["admitted"] and not sim02["failed"] and sorted(sim02["incomplete"]) == sorted(MULTI), sim02
        assert all("no multi-node run: no partner: every other node was left out (sim01 IB-08 failed)" in r
                   for r in sim02["reasons"]), sim02
        assert run["fabric"]["group"] is None
    else:
        assert_admitted(gate, *others)
        assert run["fabric"]["group"]["nodes"] == others and run["fabric"]["group_passed"]


def test_a_lone_survivor_is_never_admitted_unmeasured(tmp_path: Path) -> None:
    """sim02 is left out (NVLS lost); sim01's switch-side rail fault is invisible to every single-node check,
    and with no partner no multi-node run can see it: sim01 is held incomplete, not admitted (issue 19)."""
    run = fabric_run(tmp_path, 2, "sim01:rail-degraded", "sim02:nvlink-down")
    gate = run["gate"]
    assert run["proc"].returncode == 1, run["proc"].stdout + run["proc"].stderr
    assert gate["admitted"] == "", gate
    sim01 = gate["nodes"]["sim01"]
    assert not sim01["failed"] and sorted(sim01["incomplete"]) == sorted(MULTI), sim01
    assert any("no partner: every other node was left out (sim02 NCCL-01 failed, NVL-04 failed)" in r
               for r in sim01["reasons"]), sim01
    assert verdicts(gate, "sim02")[0] == ["NCCL-01", "NVL-04"]


def test_two_slow_hcas_in_four_nodes_reject_exactly_those_two(tmp_path: Path) -> None:
    run = fabric_run(tmp_path, 4, "sim01:slow-hca", "sim02:slow-hca")
    gate = run["gate"]
    assert gate["rejected"] == "sim[01-02]" and gate["admitted"] == "sim[03-04]", gate
    for node in ("sim01", "sim02"):
        assert verdicts(gate, node) == (["IB-08"], MULTI)
    assert_admitted(gate, "sim03", "sim04")
    assert run["fabric"]["group"]["nodes"] == ["sim03", "sim04"] and run["fabric"]["group_passed"]


def test_nvlink_down_and_wrong_values_in_three_nodes(tmp_path: Path) -> None:
    run = fabric_run(tmp_path, 4, "sim01:nvlink-down", "sim03:nccl-wrong")
    gate = run["gate"]
    assert run["proc"].returncode == 1
    assert gate["rejected"] == "sim[01,03]" and gate["admitted"] == "sim[02,04]", gate
    assert verdicts(gate, "sim01") == (["NCCL-01", "NVL-04"], MULTI)
    assert verdicts(gate, "sim03") == (["NCCL-05"], MULTI)
    assert_admitted(gate, "sim02", "sim04")
    assert run["fabric"]["group"]["nodes"] == ["sim02", "sim04"] and run["fabric"]["group_passed"]


@pytest.mark.parametrize("nodes", [2, 3, 4])
def test_a_healthy_small_rack_admits_everyone(tmp_path: Path, nodes: int) -> None:
    run = fabric_run(tmp_path, nodes)
    assert run["proc"].returncode == 0, run["proc"].stdout + run["proc"].stderr
    names = [f"sim{i:02d}" for i in range(1, nodes + 1)]
    assert_admitted(run["gate"], *names)
    assert run["fabric"]["excluded"] == {} and run["fabric"]["group_passed"]
    for node in names:  # judged, not stood aside
        assert "not_applicable" not in run["gate"]["nodes"][node] or \
            set(run["gate"]["nodes"][node]["not_applicable"]) == {"NCCL-02"}


def test_a_pair_nothing_can_separate_is_incomplete_never_failed(tmp_path: Path) -> None:
    """Two nodes, their only pair slow, every per-node check passes (a slow link IB-08 cannot see)."""
    run = fabric_run(tmp_path, 2, "sim01:ib-rate-200")
    gate = run["gate"]
    assert run["proc"].returncode == 1 and gate["admitted"] == "", gate
    for node in ("sim01", "sim02"):
        assert verdicts(gate, node) == ([], MULTI), gate["nodes"][node]
    assert run["fabric"]["localization"]["unresolved"] == ["sim01", "sim02"]


def test_a_slow_link_in_three_nodes_is_named_and_the_others_cleared(tmp_path: Path) -> None:
    run = fabric_run(tmp_path, 3, "sim01:ib-rate-200")
    gate = run["gate"]
    assert gate["rejected"] == "sim01" and gate["admitted"] == "sim[02-03]", gate
    assert verdicts(gate, "sim01") == (MULTI, [])
    reason = next(r for r in gate["nodes"]["sim01"]["reasons"] if r.startswith("NCCL-04"))
    assert "slow HCA mlx5_2" in reason
    loc = run["fabric"]["localization"]
    assert loc["named"] == ["sim01"] and loc["cleared"] == ["sim02", "sim03"] and run["fabric"]["regroup_passed"]



def test_a_switch_side_rail_fault_is_seen_only_by_multi_node_runs(tmp_path: Path) -> None:
    """rail-degraded: the node and IB-08's loopback look healthy; the group, localisation and the rail runs name it."""
    run = fabric_run(tmp_path, 4, "sim03:rail-degraded@mlx5_5")
    gate = run["gate"]
    assert gate["rejected"] == "sim03" and gate["admitted"] == "sim[01-02,04]", gate
    assert verdicts(gate, "sim03") == (MULTI, [])
    reason = next(r for r in gate["nodes"]["sim03"]["reasons"] if r.startswith("NCCL-04"))
    assert "slow HCA mlx5_5" in reason
    facts = json.loads((run["out"] / "facts" / "sim03.json").read_text())["fabric"]
    loopback = [facts["ib_write_bw"][f"mlx5_{i}"]["host"]["bw_average_gbps"] for i in (4, 5)]
    assert loopback[1] > 0.97 * loopback[0], loopback
