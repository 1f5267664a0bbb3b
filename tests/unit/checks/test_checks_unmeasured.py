"""Values a node did not report, or that cannot be true, are `incomplete` with the value quoted.

Each row changes one input of a healthy node and names what the reason must
say. Rows marked "was pass" passed on the code before issue 9: they are the
regression tests for the fail-open defects (GPU-11 read an unreadable counter
as 0, IB-04 skipped absent counters, NaN admitted by every bound, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checks_support import INCOMPLETE, PASS, TOPOLOGY, assert_status, gpu, judge, port, unmeasured_subjects

Facts = dict[str, Any]
NAN, INF = float("nan"), float("inf")
LAST = 7  # the last GPU: a loop that stops one short never reaches it


def gpu_set(*path: str, value: object, index: int = LAST) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        target = gpu(facts, index)
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def gpu_error(*path: str, error: str, index: int = LAST) -> Callable[[Facts], None]:
    """What the collector writes when NVML refuses a call: None plus the error by field name."""
    def change(facts: Facts) -> None:
        gpu_set(*path, value=None, index=index)(facts)
        gpu(facts, index)["errors"][path[-1] if len(path) == 1 else "_".join(path)] = error

    return change


def link_set(counter: str, value: object, link: int = 17) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        gpu(facts, LAST)["nvlink"][link][counter] = value

    return change


def ib_counter(name: str, value: object, hca: str = "mlx5_7") -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        port(facts, hca)["counters"][name] = value

    return change


def ib_port(key: str, value: object, hca: str = "mlx5_7") -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        port(facts, hca)[key] = value

    return change


def kernel(key: str, value: object) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        if value is KeyError:
            del facts["kernel"][key]
        else:
            facts["kernel"][key] = value

    return change


def nvml(key: str, value: object) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        if value is KeyError:
            del facts["nvml"][key]
        else:
            facts["nvml"][key] = value

    return change


def pci_set(bus: str, key: str, value: object) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        facts["pci"]["devices"][bus][key] = value

    return change


def numa(key: str, value: object) -> Callable[[Facts], None]:
    def change(facts: Facts) -> None:
        facts["numa"][key] = value

    return change


def links_unreadable(facts: Facts) -> None:
    g = gpu(facts, LAST)
    del g["nvlink"][4]
    g["errors"]["nvlink_4_state"] = "NVML_ERROR_UNKNOWN"


def counter_unreadable(facts: Facts) -> None:
    g = gpu(facts, LAST)
    g["nvlink"][3]["recovery"] = None
    g["errors"]["nvlink_3_recovery"] = "NVML_ERROR_NOT_SUPPORTED"


def memory_refused(facts: Facts) -> None:
    gpu(facts, LAST)["memory_total_mib"] = None
    gpu(facts, LAST)["errors"]["memory"] = "NVML_ERROR_UNKNOWN"


GPU7_BUS = "0000:df:00.0"

# (check, what, change, words the reason must contain)
ROWS: list[tuple[str, str, Callable[[Facts], None], str]] = [
    # GPU-01
    ("GPU-01", "volatile NaN (was pass)", gpu_set("ecc_errors", "volatile_uncorrected", value=NAN), "nan"),
    ("GPU-01", "volatile inf", gpu_set("ecc_errors", "volatile_uncorrected", value=INF), "inf"),
    ("GPU-01", "volatile negative (was pass)", gpu_set("ecc_errors", "volatile_uncorrected", value=-1), "-1"),
    ("GPU-01", "volatile fraction", gpu_set("ecc_errors", "volatile_uncorrected", value=0.5), "0.5"),
    ("GPU-01", "volatile text", gpu_set("ecc_errors", "volatile_uncorrected", value="0"), "'0'"),
    ("GPU-01", "volatile 2**64", gpu_set("ecc_errors", "volatile_uncorrected", value=2**64), str(2**64)),
    ("GPU-01", "volatile unreadable", gpu_error("ecc_errors", "volatile_uncorrected",
                                                error="NVML_ERROR_NOT_SUPPORTED"), "NVML_ERROR_NOT_SUPPORTED"),
    ("GPU-01", "SRAM unreadable (was pass)", gpu_set("ecc_errors", "sram_aggregate_uncorrected", value=None),
     "sram_aggregate_uncorrected"),
    ("GPU-01", "SRAM NaN (was pass)", gpu_set("ecc_errors", "sram_aggregate_uncorrected", value=NAN), "nan"),
    ("GPU-01", "ECC section missing", gpu_set("ecc_errors", value=None), "ecc_errors"),
    # GPU-03
    ("GPU-03", "pending unreadable", gpu_set("remapped_rows", value=None), "remapped_rows"),
    ("GPU-03", "pending not a flag", gpu_set("remapped_rows", "pending", value="no"), "'no'"),
    ("GPU-03", "failure NaN", gpu_set("remapped_rows", "failure", value=NAN), "nan"),
    # GPU-05
    ("GPU-05", "reasons NaN (was a crash)", gpu_set("clock_event_reasons", value=NAN), "nan"),
    ("GPU-05", "reasons negative", gpu_set("clock_event_reasons", value=-1), "-1"),
    ("GPU-05", "reasons unreadable", gpu_set("clock_event_reasons", value=None), "clock_event_reasons"),
    # GPU-06
    ("GPU-06", "temperature NaN (was pass)", gpu_set("temperature_c", value=NAN), "nan"),
    ("GPU-06", "temperature -inf (was pass)", gpu_set("temperature_c", value=-INF), "-inf"),
    ("GPU-06", "temperature negative (was pass)", gpu_set("temperature_c", value=-40), "-40"),
    ("GPU-06", "temperature 151 C", gpu_set("temperature_c", value=151), "151"),
    ("GPU-06", "temperature unreadable", gpu_set("temperature_c", value=None), "temperature_c"),
    ("GPU-06", "thresholds unreadable", gpu_set("temperature_thresholds", value=None), "temperature_thresholds"),
    ("GPU-06", "no threshold at all", gpu_set("temperature_thresholds", value={"gpu_max": None, "slowdown": None}),
     "threshold not reported"),
    ("GPU-06", "threshold NaN (was pass)", gpu_set("temperature_thresholds", "gpu_max", value=NAN), "nan"),
    ("GPU-06", "threshold 0 C", gpu_set("temperature_thresholds", "gpu_max", value=0), "0"),
    # GPU-07
    ("GPU-07", "limit NaN (was pass)", gpu_set("power", "enforced_limit_mw", value=NAN), "nan"),
    ("GPU-07", "limit inf", gpu_set("power", "enforced_limit_mw", value=INF), "inf"),
    ("GPU-07", "limit negative", gpu_set("power", "enforced_limit_mw", value=-700_000), "-700000"),
    ("GPU-07", "limit as a flag", gpu_set("power", "enforced_limit_mw", value=True), "True is not a number"),
    ("GPU-07", "limit 999 mW", gpu_set("power", "enforced_limit_mw", value=999), "999 outside"),
    ("GPU-07", "limit 0 W", gpu_set("power", "enforced_limit_mw", value=0), "0"),
    ("GPU-07", "limit unreadable", gpu_set("power", "enforced_limit_mw", value=None), "enforced_limit_mw"),
    # GPU-08
    ("GPU-08", "max gen NaN (was pass)", gpu_set("pcie", "max_gen", value=NAN), "nan"),
    ("GPU-08", "width NaN (was pass)", gpu_set("pcie", "curr_width", value=NAN), "nan"),
    ("GPU-08", "width 0", gpu_set("pcie", "curr_width", value=0), "0"),
    ("GPU-08", "width 64", gpu_set("pcie", "curr_width", value=64), "64"),
    ("GPU-08", "gen 0", gpu_set("pcie", "max_gen", value=0), "0"),
    ("GPU-08", "gen 8", gpu_set("pcie", "max_gen", value=8), "8"),
    ("GPU-08", "gen as text", gpu_set("pcie", "max_gen", value="5"), "'5'"),
    # GPU-10
    ("GPU-10", "link state unreadable", links_unreadable, "NVML_ERROR_UNKNOWN"),
    ("GPU-10", "active not a flag", link_set("active", None), "active"),
    ("GPU-10", "no NVLink list", gpu_set("nvlink", value=None), "nvlink"),
    ("GPU-10", "NVLink entries not records", gpu_set("nvlink", value=[1, 2]), "NVLink list unreadable"),
    ("GPU-10", "NVLink map instead of list", gpu_set("nvlink", value={"0": {"active": True}}),
     "NVLink list unreadable"),
    ("GPU-11", "NVLink entries not records", gpu_set("nvlink", value=["up"]), "NVLink list unreadable"),
    # GPU-11
    ("GPU-11", "counter unreadable (was pass as 0)", counter_unreadable, "NVML_ERROR_NOT_SUPPORTED"),
    ("GPU-11", "counter missing (was pass as 0)", link_set("replay", None), "replay counter: not reported"),
    ("GPU-11", "counter NaN (was pass)", link_set("crc_flit", NAN), "nan"),
    ("GPU-11", "counter negative (was pass)", link_set("replay", -50), "-50"),
    ("GPU-11", "counter 2**64", link_set("recovery", 2**64), str(2**64)),
    ("GPU-11", "link state unreadable", links_unreadable, "NVML_ERROR_UNKNOWN"),
    ("GPU-11", "no links at all (was pass)", gpu_set("nvlink", value=[]), "no NVLink links"),
    # INV-01
    ("INV-01", "memory NaN (was pass)", gpu_set("memory_total_mib", value=NAN), "nan"),
    ("INV-01", "memory unreadable", memory_refused, "gpu7: memory: NVML_ERROR_UNKNOWN"),
    ("INV-01", "GPU entry not a record", nvml("gpus", ["GPU 0"] * 8), "NVML GPU entry unreadable"),
    ("INV-01", "memory 0", gpu_set("memory_total_mib", value=0), "0"),
    ("INV-01", "name unreadable (was fail 'None')", gpu_set("name", value=None), "name"),
    ("INV-01", "bus id unreadable", gpu_set("bus_id", value=None), "bus id"),
    ("INV-01", "device count missing (was fail '0 GPUs')", nvml("device_count", KeyError), "device count"),
    ("INV-01", "device count NaN", nvml("device_count", NAN), "nan"),
    ("INV-01", "GPU list missing", nvml("gpus", KeyError), "listed"),
    # INV-02 (more in test_checks_firmware.py)
    ("INV-02", "VBIOS unreadable", gpu_error("vbios", error="NVML_ERROR_UNKNOWN"),
     "gpu7: VBIOS version: NVML_ERROR_UNKNOWN"),
    ("INV-02", "InfoROM image unreadable", gpu_error("inforom", "image", error="NVML_ERROR_CORRUPTED_INFOROM"),
     "NVML_ERROR_CORRUPTED_INFOROM"),
    ("INV-02", "VBIOS as a number", gpu_set("vbios", value=96), "is not a version"),
    # INV-04, INV-06..08
    ("INV-04", "fabric state unreadable", gpu_set("fabric", value=None), "fabric"),
    ("INV-04", "fabric state NaN", gpu_set("fabric", "state", value=NAN), "nan"),
    ("INV-06", "persistence unreadable", gpu_set("persistence_mode", value=None), "persistence_mode"),
    ("INV-06", "persistence as text", gpu_set("persistence_mode", value="Enabled"), "'Enabled'"),
    ("INV-07", "MIG unreadable", gpu_set("mig_mode", value=None), "mig_mode"),
    ("INV-07", "MIG NaN", gpu_set("mig_mode", "current", value=NAN), "nan"),
    ("INV-08", "ECC unreadable", gpu_set("ecc_mode", value=None), "ecc_mode"),
    ("INV-08", "ECC pending as number", gpu_set("ecc_mode", "pending", value=1), "1"),
    # TOP-01..05
    ("TOP-01", "NUMA online unreadable (was fail '0 nodes')", numa("online", None), "online"),
    ("TOP-01", "NUMA node unreadable", pci_set(GPU7_BUS, "numa_node", None), "numa_node"),
    ("TOP-01", "NUMA node NaN", pci_set(GPU7_BUS, "numa_node", NAN), "nan"),
    ("TOP-01", "NUMA node -2", pci_set(GPU7_BUS, "numa_node", -2), "-2"),
    ("TOP-03", "PCI path unreadable", pci_set(GPU7_BUS, "path", None), "PCI path"),
    ("TOP-03", "PCI path not text", pci_set(GPU7_BUS, "path", 42), "PCI path"),
    ("TOP-05", "IOMMU groups not read (was pass)", kernel("iommu_group_types", KeyError), "iommu_groups"),
    ("TOP-05", "IOMMU group type unreadable (was pass)", kernel("iommu_group_types", {"unknown": 20}), "unknown"),
    ("TOP-08", "numa_balancing NaN (was pass)", kernel("numa_balancing", NAN), "nan"),
    ("TOP-08", "numa_balancing -1 (was pass)", kernel("numa_balancing", -1), "-1"),
    # IB-01..04
    ("IB-01", "state unreadable", ib_port("state", None), "state"),
    ("IB-01", "phys_state empty", ib_port("phys_state", ""), "phys_state"),
    ("IB-01", "port 1 missing", lambda f: f["infiniband"]["hcas"]["mlx5_7"]["ports"].clear(), "port 1"),
    ("IB-02", "rate unreadable", ib_port("rate", None), "rate"),
    ("IB-02", "state unreadable (was pass 'not judged')", ib_port("state", None), "not ACTIVE"),
    ("IB-03", "link layer unreadable", ib_port("link_layer", None), "link_layer"),
    ("IB-04", "fatal counter absent (was pass)", lambda f: port(f, "mlx5_7")["counters"].pop("link_downed"),
     "link_downed"),
    ("IB-04", "error counter absent (was pass)", lambda f: port(f, "mlx5_7")["counters"].pop("symbol_error"),
     "symbol_error"),
    ("IB-04", "counter NaN (was pass)", ib_counter("link_downed", NAN), "nan"),
    ("IB-04", "counter inf", ib_counter("port_rcv_errors", INF), "inf"),
    ("IB-04", "counter negative (was pass)", ib_counter("symbol_error", -3), "-3"),
    ("IB-04", "counter 2**64", ib_counter("symbol_error", 2**64), str(2**64)),
    ("IB-04", "counter as text", ib_counter("link_error_recovery", "0"), "'0'"),
    ("IB-04", "no counters at all", lambda f: port(f, "mlx5_7")["counters"].clear(), "no counters"),
    # INV-09, IB-06, IB-09 (more in test_checks_hca.py)
    ("INV-09", "firmware unreadable", lambda f: f["infiniband"]["hcas"]["mlx5_7"].update(fw_ver=None), "fw_ver"),
    ("INV-09", "PSID not text", lambda f: f["infiniband"]["hcas"]["mlx5_7"].update(board_id=838),
     "board_id unreadable (838)"),
    ("IB-06", "link width NaN", pci_set("0000:dc:00.0", "current_link_width", NAN), "nan"),
    ("IB-06", "link speed Unknown", pci_set("0000:dc:00.0", "current_link_speed", "Unknown"), "'Unknown'"),
    ("IB-09", "pkey entry unreadable",
     lambda f: f["ib_pkeys"]["hcas"]["mlx5_7"]["1"].update(unreadable=["5"]), "pkeys/5 unreadable"),
    ("IB-09", "pkey table missing", lambda f: f["ib_pkeys"]["hcas"]["mlx5_7"].clear(), "pkeys not present"),
    # IB-05, INV-10 (more in test_checks_ib_subnet.py, test_checks_software.py)
    ("IB-05", "SM LID unreadable", lambda f: port(f, "mlx5_7").update(sm_lid=None), "sm_lid not readable"),
    ("IB-05", "LID not as sysfs prints it", lambda f: port(f, "mlx5_7").update(lid="128"), "'128' is not a LID"),
    ("INV-10", "kernel release unreadable", lambda f: f["software"].update(kernel_release=None),
     "osrelease unreadable"),
    ("INV-10", "ofed_info missing", lambda f: f["software"]["ofed_info"].update(error="ofed_info: command not found"),
     "ofed_info: command not found"),
]


def _node_checks() -> set[str]:
    suites = Path(__file__).resolve().parents[3] / "suites" / "node"
    return {m for path in suites.glob("test_*.py")
            for m in re.findall(r'@pytest\.mark\.check\("([A-Z]+-\d+)"\)', path.read_text())}


def _with_fleet_of_one(facts: Facts) -> None:
    """What the node suite's phase records for INV-11 when the node is the run's only one."""
    from burnin.checks.fleet import SECTION, fleet_sections
    from burnin.facts import Facts as NodeFacts

    facts[SECTION] = fleet_sections({"sim01": NodeFacts("sim01", facts)}, {"sim01": TOPOLOGY})["sim01"]


def _digests_of_one(facts: Facts) -> None:
    """What the node suite's phase records for GPU-14 when the node is the run's only one."""
    from burnin.checks.sdc import SECTION, sdc_sections
    from burnin.facts import Facts as NodeFacts

    facts[SECTION] = sdc_sections({"sim01": NodeFacts("sim01", facts)})["sim01"]


@pytest.mark.parametrize("check_id", sorted(_node_checks()))
def test_every_node_check_passes_on_the_healthy_node(facts: Facts, check_id: str) -> None:
    """The contrast to the rows below: the same facts, unchanged, pass."""
    if check_id == "INV-11":  # it judges the node suite's phase's counts (burnin.phases.fleet)
        _with_fleet_of_one(facts)
    if check_id == "GPU-14":  # the same phase's SDC digest counts (burnin.checks.sdc)
        _digests_of_one(facts)
    verdict = judge(check_id, facts)
    assert verdict.status is PASS, verdict.reason


@pytest.mark.parametrize(("check_id", "what", "change", "needle"), ROWS, ids=[f"{c}-{w}" for c, w, _, _ in ROWS])
def test_unreadable_or_impossible_input_is_incomplete(facts: Facts, check_id: str, what: str,
                                                      change: Callable[[Facts], None], needle: str) -> None:
    change(facts)
    verdict = judge(check_id, facts)
    assert_status(verdict, INCOMPLETE, needle)
    assert len(unmeasured_subjects(verdict)) <= 1, verdict.reason  # only the subject whose input was changed


def test_every_node_check_has_an_unreadable_input_row() -> None:
    """Every check the node suite runs has a row here (or in its own file, named below)."""
    # The catalog's node checks of burnin/checks/{inventory,gpu,host,infiniband}.py.
    node_checks = {c for c in _node_checks() if c.split("-")[0] in ("INV", "GPU", "TOP", "IB")}
    assert len(node_checks) >= 26, node_checks
    covered = {row[0] for row in ROWS} | {"INV-03", "INV-05", "TOP-02", "TOP-04", "GPU-04"}  # own test files
    covered |= {"STO-01", "STO-02", "STO-04", "STO-05", "STO-06", "STO-07"}  # tests/unit/storage/test_sto_unmeasured.py
    covered |= {"TOP-06", "TOP-07", "TOP-09", "TOP-10"}  # tests/unit/checks/test_checks_host_config.py
    covered |= {"INV-11"}  # tests/unit/checks/test_checks_fleet.py
    covered |= {"GPU-12", "GPU-13"}  # tests/unit/checks/test_checks_dcgm.py
    covered |= {"GPU-14"}  # tests/unit/checks/test_sdc_judge.py
    assert node_checks <= covered, sorted(node_checks - covered)


def test_unreadable_link_states_are_listed_up_to_four(facts: Facts) -> None:
    g = gpu(facts, LAST)
    for link in (1, 2, 3, 4, 5):
        g["errors"][f"nvlink_{link}_state"] = f"NVML_ERROR_{link}"
    g["nvlink"] = [entry for entry in g["nvlink"] if entry["link"] not in (1, 2, 3, 4, 5)]
    verdict = judge("GPU-10", facts)
    assert_status(verdict, INCOMPLETE, "nvlink_1: NVML_ERROR_1", "nvlink_4: NVML_ERROR_4")
    assert "NVML_ERROR_5" not in verdict.reason


def test_an_unreadable_counter_does_not_make_link_state_unmeasured(facts: Facts) -> None:
    """GPU-10 reads link states only: a counter NVML refused is GPU-11's business."""
    counter_unreadable(facts)
    assert judge("GPU-10", facts).status is PASS
    assert judge("GPU-11", facts).status is INCOMPLETE


REFERENCES = {
    "GPU-01": ("ecc_uncorrected_volatile", "sram_uncorrected_aggregate"),
    "GPU-06": ("gpu_temp_margin_c",),
    "GPU-07": ("power_limit_w",),
    "GPU-08": ("gpu_pcie_gen", "gpu_pcie_width"),
    "GPU-10": ("nvlink_links_active",),
    "GPU-11": ("nvlink_recovery_errors", "nvlink_replay_errors", "nvlink_crc_errors"),
    "IB-02": ("ib_rate_gbps",),
    "IB-04": ("ib_fatal_counter", "ib_error_counter"),
}
REFERENCE_ROWS = [(check_id, key) for check_id, keys in REFERENCES.items() for key in keys]


@pytest.mark.parametrize(("check_id", "key"), REFERENCE_ROWS, ids=[f"{c}-{k}" for c, k in REFERENCE_ROWS])
def test_a_topology_without_the_reference_is_incomplete(facts: Facts, check_id: str, key: str) -> None:
    from dataclasses import replace

    from checks_support import TOPOLOGY

    partial = replace(TOPOLOGY, references={k: v for k, v in TOPOLOGY.references.items() if k != key})
    verdict = judge(check_id, facts, partial)
    assert_status(verdict, INCOMPLETE, key)
