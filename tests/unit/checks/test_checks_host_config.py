"""TOP-06, TOP-07, TOP-09, TOP-10 on a healthy simulated node's facts: pass, each fault at its bound, and
every unreadable input incomplete (never pass)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, PASS, TOPOLOGY, assert_status, failing_subjects, judge

from burnin.evaluate.verdict import Status
from burnin.topology.model import Reference, Topology

Facts = dict[str, Any]
NCPUS = 224
GIB = 1024 * 1024  # kB


def host(facts: Facts) -> dict[str, Any]:
    found: dict[str, Any] = facts["host"]
    return found


def with_host(**changes: Any) -> Topology:
    return replace(TOPOLOGY, host=replace(TOPOLOGY.host, **changes))


def with_reference(key: str, ref: Reference) -> Topology:
    return replace(TOPOLOGY, references={**TOPOLOGY.references, key: ref})


def test_the_healthy_node_passes_all_four(facts: Facts) -> None:
    expected = {
        "TOP-06": "governor performance on all 224 online CPUs",
        "TOP-07": "THP madvise; no static hugepages",
        "TOP-09": "MemTotal 2015.0 GiB, 224 CPUs online",
        "TOP-10": "8/8 GPUs, 4 NVSwitches, 8/8 compute HCAs, 2/2 storage NICs, 10 NVMe",
    }
    for check_id, measured in expected.items():
        verdict = judge(check_id, facts)
        assert verdict.status is PASS, verdict.reason
        assert measured in verdict.reason, verdict.reason


# ------------------------------------------------------------------ TOP-06


@pytest.mark.parametrize("cpu", [0, 17, NCPUS - 1])
def test_one_cpu_on_another_governor_fails_and_is_named(facts: Facts, cpu: int) -> None:
    host(facts)["governors"][str(cpu)] = "powersave"
    assert_status(judge("TOP-06", facts), FAIL, f"governor powersave on CPUs {cpu} (1/224 online)",
                  "expected governor performance on every online CPU")


def test_every_cpu_on_powersave_is_one_finding(facts: Facts) -> None:
    host(facts)["governors"] = dict.fromkeys(host(facts)["governors"], "powersave")
    verdict = judge("TOP-06", facts)
    assert verdict.reason == ("TOP-06 governor powersave on CPUs 0-223 (224/224 online) "
                              "(expected governor performance on every online CPU)")


def test_no_cpufreq_driver_fails_unless_the_topology_says_the_bios_owns_p_states(facts: Facts) -> None:
    host(facts)["governors"] = dict.fromkeys(host(facts)["governors"])
    assert_status(judge("TOP-06", facts), FAIL, "no cpufreq driver on CPUs 0-223")
    bios = with_host(cpu_governor=None)
    assert_status(judge("TOP-06", facts, bios), PASS, "no cpufreq driver on all 224 online CPUs")


def test_a_governor_where_the_bios_should_own_p_states_fails(facts: Facts) -> None:
    assert_status(judge("TOP-06", facts, with_host(cpu_governor=None)), FAIL, "governor performance on CPUs 0-223",
                  "expected no cpufreq driver")


def test_the_topology_names_the_governor(facts: Facts) -> None:
    host(facts)["governors"] = dict.fromkeys(host(facts)["governors"], "schedutil")
    assert judge("TOP-06", facts, with_host(cpu_governor="schedutil")).status is PASS
    assert judge("TOP-06", facts).status is FAIL


def test_an_offline_cpu_is_not_judged(facts: Facts) -> None:
    host(facts)["cpu_online"] = "0-16,18-223"
    host(facts)["governors"]["17"] = None  # an offline CPU has no cpufreq policy
    assert_status(judge("TOP-06", facts), PASS, "on all 223 online CPUs")


@pytest.mark.parametrize(("change", "needle"), [
    (lambda h: h.update(cpu_online=None), "cpu/online unreadable"),
    (lambda h: h.update(cpu_online=""), "cpu/online unreadable"),
    (lambda h: h.update(cpu_online="0-x"), "unreadable cpulist"),
    (lambda h: h.update(governors=None), "governors were not read"),
    (lambda h: h["governors"].pop("5"), "CPUs 5: /sys/devices/system/cpu/cpu5 absent although online"),
    (lambda h: h["governor_errors"].update({"9": "PermissionError: Permission denied"}), "CPUs 9: PermissionError"),
    (lambda h: h["governors"].update({"3": "perf\x1b[2Jormance"}), "is not a governor name"),
    (lambda h: h["governors"].update({"3": 7}), "7 is not a governor name"),
    (lambda h: h["governors"].update({"3": ""}), "is not a governor name"),
])
def test_unreadable_governor_input_is_incomplete(facts: Facts, change: Any, needle: str) -> None:
    change(host(facts))
    verdict = judge("TOP-06", facts)
    assert_status(verdict, INCOMPLETE, needle)
    assert "\x1b" not in verdict.reason


def test_a_known_wrong_governor_outweighs_an_unreadable_one(facts: Facts) -> None:
    host(facts)["governors"].update({"3": None, "4": 42})
    host(facts)["governors"]["3"] = "ondemand"
    assert_status(judge("TOP-06", facts), FAIL, "governor ondemand on CPUs 3", "not measured: CPUs 4")


# ------------------------------------------------------------------ TOP-07


@pytest.mark.parametrize(("text", "status"), [
    ("always [madvise] never", PASS),
    ("[always] madvise never", PASS),
    ("always madvise [never]", FAIL),
    ("always madvise never", INCOMPLETE),  # no active mode
    ("[always] [madvise] never", INCOMPLETE),
    ("always [madvise never", INCOMPLETE),
    ("", INCOMPLETE),
    (None, INCOMPLETE),
])
def test_transparent_hugepage_mode(facts: Facts, text: object, status: Status) -> None:
    host(facts)["thp_enabled"] = text
    verdict = judge("TOP-07", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert verdict.reason == ("TOP-07 THP never (expected THP always or madvise; static hugepages 0 GiB)")


def test_the_topology_names_the_accepted_thp_modes(facts: Facts) -> None:
    host(facts)["thp_enabled"] = "[always] madvise never"
    assert_status(judge("TOP-07", facts, with_host(transparent_hugepage=("madvise",))), FAIL, "THP always",
                  "expected THP madvise")


@pytest.mark.parametrize(("pools", "status", "needle"), [
    ({"hugepages-1048576kB": "1", "hugepages-2048kB": "0"}, FAIL, "static hugepages 1 GiB (1 x 1048576 kB)"),
    ({"hugepages-1048576kB": "0", "hugepages-2048kB": "1"}, FAIL, "(1 x 2048 kB)"),
    ({"hugepages-1048576kB": "0", "hugepages-2048kB": "0"}, PASS, "no static hugepages"),
    (None, PASS, "no hugetlb pools"),  # a kernel without hugetlbfs
    ({"hugepages-2048kB": None}, INCOMPLETE, "hugepages-2048kB/nr_hugepages unreadable"),
    ({"hugepages-2048kB": "-1"}, INCOMPLETE, "nr_hugepages unreadable"),
    ({"hugepages-2048kB": str(2**41)}, INCOMPLETE, "outside its physical range"),
    ({"hugepages-2MB": "0"}, INCOMPLETE, "is not a hugepage pool"),
    ("hugepages-2048kB", INCOMPLETE, "hugepage pools unreadable"),
])
def test_static_hugepages(facts: Facts, pools: object, status: Status, needle: str) -> None:
    host(facts)["hugepages"] = pools
    assert_status(judge("TOP-07", facts), status, needle)


@pytest.mark.parametrize(("pages", "status"), [(16384, PASS), (16385, FAIL)])
def test_a_site_that_reserves_hugepages_sets_its_bound(facts: Facts, pages: int, status: Status) -> None:
    host(facts)["hugepages"]["hugepages-2048kB"] = str(pages)
    site = with_reference("hugepages_gib", Reference(32, "site", lower=0, upper=32, unit="GiB"))
    assert judge("TOP-07", facts, site).status is status


# ------------------------------------------------------------------ TOP-09


def set_memtotal(text: str, kib: int, prefix: str = "") -> str:
    return re.sub(rf"(?m)^{prefix}MemTotal:\s+\d+ kB$", f"{prefix}MemTotal:       {kib} kB", text)


def set_node_memtotal(facts: Facts, node: int, kib: int) -> None:
    nodes = host(facts)["node_meminfo"]
    nodes[str(node)] = set_memtotal(nodes[str(node)], kib, prefix=f"Node {node} ")


@pytest.mark.parametrize(("gib", "status"), [(1995, PASS), (1994.99, FAIL), (2048, PASS), (2048.01, FAIL)])
def test_host_memory_at_its_bounds(facts: Facts, gib: float, status: Status) -> None:
    host(facts)["meminfo"] = set_memtotal(host(facts)["meminfo"], round(gib * GIB))
    verdict = judge("TOP-09", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert f"MemTotal {gib:.1f} GiB" in verdict.reason and "expected MemTotal 1995..2048 GiB" in verdict.reason


@pytest.mark.parametrize("node", [0, 1])
@pytest.mark.parametrize(("short", "status"), [(0.0099, PASS), (0.0101, FAIL)])
def test_numa_node_memory_within_one_percent_of_the_largest(facts: Facts, node: int, short: float,
                                                            status: Status) -> None:
    other = 1 - node
    largest = 1056440320
    set_node_memtotal(facts, other, largest)
    set_node_memtotal(facts, node, round(largest * (1 - short)))
    verdict = judge("TOP-09", facts)
    assert verdict.status is status, verdict.reason
    if status is FAIL:
        assert failing_subjects(verdict) == {f"numa{node}"}
        assert "1.0% below the largest node" in verdict.reason


def test_an_offline_cpu_fails_and_is_named(facts: Facts) -> None:
    host(facts)["cpu_online"] = "0-16,18-223"
    assert_status(judge("TOP-09", facts), FAIL, "223 CPUs online (offline: 17)", "224 CPUs online")


def test_more_cpus_than_designed_fail(facts: Facts) -> None:
    host(facts)["cpu_online"] = "0-255"
    assert_status(judge("TOP-09", facts), FAIL, "256 CPUs online")


@pytest.mark.parametrize(("change", "needle"), [
    (lambda h: h.update(meminfo=None), "/proc/meminfo unreadable"),
    (lambda h: h.update(meminfo="MemFree: 12 kB\n"), "no 'MemTotal: N kB' line"),
    (lambda h: h.update(meminfo="MemTotal:       0 kB\n"), "outside its physical range"),
    (lambda h: h.update(meminfo="MemTotal: 2113 MB\n"), "no 'MemTotal: N kB' line"),
    (lambda h: h.update(cpu_online=None), "cpu/online unreadable"),
    (lambda h: h["node_meminfo"].pop("1"), "numa1: /sys/devices/system/node/node1/meminfo absent"),
    (lambda h: h["node_meminfo"].update({"1": None}), "node1/meminfo unreadable"),
    (lambda h: h["node_meminfo"].update({"1": h["node_meminfo"]["0"]}), "node1/meminfo describes node 0"),
    (lambda h: h.update(node_meminfo=None), "NUMA node meminfo was not read"),
])
def test_unreadable_memory_or_cpu_input_is_incomplete(facts: Facts, change: Any, needle: str) -> None:
    change(host(facts))
    assert_status(judge("TOP-09", facts), INCOMPLETE, needle)


def test_a_missing_dimm_fails_total_and_balance(facts: Facts) -> None:
    dimm = 64 * GIB
    kib = int(re.search(r"(?m)^MemTotal:\s+(\d+)", host(facts)["meminfo"]).group(1))  # type: ignore[union-attr]
    host(facts)["meminfo"] = set_memtotal(host(facts)["meminfo"], kib - dimm)
    set_node_memtotal(facts, 1, 1056440320 - dimm)
    verdict = judge("TOP-09", facts)
    assert_status(verdict, FAIL, "MemTotal 1951.0 GiB", "numa1 MemTotal 943.5 GiB (6.4% below the largest node)")


# ------------------------------------------------------------------ TOP-10


def functions(facts: Facts) -> dict[str, list[str | None]]:
    found: dict[str, list[str | None]] = facts["pci_census"]["functions"]
    return found


def of_kind(facts: Facts, vendor: str | None, class_prefix: str) -> list[str]:
    return sorted(a for a, (v, _, c) in functions(facts).items()
                  if (vendor is None or v == vendor) and str(c).startswith(class_prefix))


GPUS = [(f"gpu{d.index}", d.bus_id) for d in TOPOLOGY.gpus.devices]
HCAS = [(h.name, h.bus_id, "compute HCAs" if h.role == "compute" else "storage NICs") for h in TOPOLOGY.hcas]


@pytest.mark.parametrize(("name", "bus"), GPUS, ids=[g[0] for g in GPUS])
def test_a_gpu_off_the_bus_is_named(facts: Facts, name: str, bus: str) -> None:
    del functions(facts)[bus]
    verdict = judge("TOP-10", facts)
    assert_status(verdict, FAIL, f"GPUs 7/8 on the bus (missing: {name} {bus})")
    assert failing_subjects(verdict) == {"GPUs"}


@pytest.mark.parametrize(("name", "bus", "kind"), HCAS, ids=[h[0] for h in HCAS])
def test_an_hca_or_storage_nic_off_the_bus_is_named(facts: Facts, name: str, bus: str, kind: str) -> None:
    del functions(facts)[bus]
    verdict = judge("TOP-10", facts)
    assert_status(verdict, FAIL, f"{kind} ", f"on the bus (missing: {name} {bus})")
    assert failing_subjects(verdict) == {kind}


def test_another_vendor_at_an_hca_address_fails(facts: Facts) -> None:
    bus = TOPOLOGY.compute_hcas[2].bus_id
    functions(facts)[bus] = ["0x8086", "0x1592", "0x020000"]
    assert_status(judge("TOP-10", facts), FAIL, f"mlx5_2 {bus} is 8086:1592 class 0200, not a Mellanox function")


def test_an_unexpected_gpu_fails(facts: Facts) -> None:
    functions(facts)["0000:f1:00.0"] = ["0x10de", "0x2330", "0x030200"]
    assert_status(judge("TOP-10", facts), FAIL, "GPUs 8/8; unexpected GPUs at 0000:f1:00.0")


def test_a_gpu_moved_to_another_address_is_missing_and_unexpected(facts: Facts) -> None:
    bus = TOPOLOGY.gpus.devices[5].bus_id
    functions(facts)["0000:f1:00.0"] = functions(facts).pop(bus)
    assert_status(judge("TOP-10", facts), FAIL, f"7/8 on the bus (missing: gpu5 {bus}); unexpected GPUs at 0000:f1")


@pytest.mark.parametrize(("kind", "vendor", "prefix", "expected"), [
    ("NVSwitches", "0x10de", "0x0680", 4), ("NVMe", None, "0x0108", 10)])
def test_counted_devices(facts: Facts, kind: str, vendor: str | None, prefix: str, expected: int) -> None:
    present = of_kind(facts, vendor, prefix)
    assert len(present) == expected
    del functions(facts)[present[-1]]
    assert_status(judge("TOP-10", facts), FAIL, f"{kind} {expected - 1} on the bus",
                  "expected 8 GPUs, 4 NVSwitches, 8 compute HCAs, 2 storage NICs, 10 NVMe")
    functions(facts)[present[-1]] = [vendor or "0x144d", "0x22a3" if vendor else "0xa80a", f"{prefix}00"]
    functions(facts)["0000:fe:00.0"] = [vendor or "0x144d", "0x22a3" if vendor else "0xa80a", f"{prefix}00"]
    assert_status(judge("TOP-10", facts), FAIL, f"{kind} {expected + 1} on the bus")


def test_nvidia_functions_of_other_classes_are_neither_gpus_nor_nvswitches(facts: Facts) -> None:
    functions(facts)["0000:f1:00.1"] = ["0x10de", "0x22be", "0x040300"]  # an audio function
    assert judge("TOP-10", facts).status is PASS


@pytest.mark.parametrize(("change", "needle"), [
    (lambda f: f["pci_census"].update(functions=None), "PCI function list unreadable"),
    (lambda f: f["pci_census"].update(functions={}), "lists no PCI function"),
    (lambda f: f["pci_census"]["functions"].update({"zz:00.0": ["0x10de", "0x2330", "0x030200"]}), "'zz:00.0'"),
    (lambda f: f["pci_census"]["functions"].update({GPUS[3][1]: [None, None, None]}),
     f"vendor/class unreadable at gpu3 {GPUS[3][1]}"),
    (lambda f: f["pci_census"]["functions"].update({"0000:f0:00.0": ["0x1344", None, "0x010802"]}),
     "vendor/class unreadable at 0000:f0:00.0"),
    (lambda f: f["pci_census"]["functions"].update({"0000:f0:00.0": "0x1344 0x51c3 0x010802"}),
     "vendor/class unreadable at 0000:f0:00.0"),
])
def test_unreadable_census_input_is_incomplete(facts: Facts, change: Any, needle: str) -> None:
    change(facts)
    assert_status(judge("TOP-10", facts), INCOMPLETE, needle)


def test_the_census_is_incomplete_without_its_source(facts: Facts) -> None:
    facts["sources"]["pci-census"] = {"ok": False, "error": "FileNotFoundError: /sys/bus/pci/devices"}
    assert_status(judge("TOP-10", facts), INCOMPLETE, "pci-census: FileNotFoundError")
    facts["sources"]["host"] = {"ok": False, "error": "timed out after 20 s"}
    for check_id in ("TOP-06", "TOP-07", "TOP-09"):
        assert_status(judge(check_id, facts), INCOMPLETE, "host: timed out after 20 s")


# ------------------------------------------------------------------ TOP-10 on a real HGX H100's bus

HGX_LSPCI = "lspci/lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt"
# lspci -vvv prints pci.ids names, not ids: the vendors and classes the census tells apart, by those names.
VENDOR_NAMES = {"NVIDIA Corporation": "0x10de", "Mellanox Technologies": "0x15b3"}
CLASS_NAMES = {"3D controller": "0x030200", "Bridge": "0x068000", "PCI bridge": "0x060400",
               "Non-Volatile memory controller": "0x010802", "Ethernet controller": "0x020000"}


def test_the_census_kinds_on_a_real_hgx_h100_bus(reference_dir: Any) -> None:
    """Real lspci of an HGX H100: 8 GPUs, 4 NVSwitches (class Bridge 0680, not PCI bridge 0604), 8 NVMe."""
    from burnin.checks.pci_census import read_census
    from burnin.parsers.lspci import parse_lspci

    report = parse_lspci((reference_dir / HGX_LSPCI).read_text(encoding="utf-8"))
    census: dict[str, list[str | None]] = {}
    for device in report.devices:
        vendor = next((code for name, code in VENDOR_NAMES.items() if device.name.startswith(name)), "0x8086")
        census[device.address] = [vendor, "0x0000", CLASS_NAMES.get(device.device_class, "0x088000")]
    found, unreadable = read_census({"functions": census})
    assert unreadable == [] and len(found) == 517
    gpus = sorted(a[5:7] for a, f in found.items() if f.is_gpu)
    assert gpus == ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]
    assert sorted(a[5:7] for a, f in found.items() if f.is_nvswitch) == ["83", "84", "85", "86"]
    assert sum(f.is_nvme for f in found.values()) == 8
    assert sum(f.vendor == "0x15b3" for f in found.values()) == 12  # 8 ConnectX-7 + 2 dual-port ConnectX-6 Dx
    assert TOPOLOGY.references["nvswitch_count"].admits(4)
