"""burnin.parsers.hostmem: /proc/meminfo, node<N>/meminfo, THP settings and hugepage pool names.

../shared/reference holds no captured meminfo or THP file, so the samples below are
written in the kernel's own layouts (fs/proc/meminfo.c ``show_val_kb``: a 16-column
label, the value right-aligned in 8, `` kB``; drivers/base/node.c: the same after
``Node <N> ``; mm/huge_memory.c: the active mode in brackets), and the simulator's
rendering is read back through the same parser.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from burnin.errors import ParseError
from burnin.parsers.hostmem import hugepage_size_kib, parse_kernel_choice, parse_meminfo

PROC_MEMINFO = """\
MemTotal:       2113059436 kB
MemFree:        2056710448 kB
MemAvailable:   2069232912 kB
Buffers:          412820 kB
Cached:         10583248 kB
SwapCached:            0 kB
Active(anon):     845216 kB
Inactive(file):  5521120 kB
HugePages_Total:      64
HugePages_Free:       64
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:          131072 kB
DirectMap1G:    2099249152 kB
"""

NODE1_MEMINFO = """\
Node 1 MemTotal:       1056529712 kB
Node 1 MemFree:        1031211532 kB
Node 1 MemUsed:         25318180 kB
Node 1 Active(anon):      412608 kB
Node 1 HugePages_Total:     0
Node 1 HugePages_Free:      0
Node 1 HugePages_Surp:      0
"""


def test_proc_meminfo_sizes_and_counts() -> None:
    info = parse_meminfo(PROC_MEMINFO)
    assert info.node is None
    assert info.kib("MemTotal") == 2113059436
    assert info.kib("Active(anon)") == 845216
    assert info.count("HugePages_Total") == 64 and info.kib("HugePages_Total") is None
    assert info.count("MemTotal") is None  # a size is not a count
    assert info.kib("Hugetlb") == 131072 and info.kib("Nope") is None


def test_node_meminfo_names_its_node() -> None:
    info = parse_meminfo(NODE1_MEMINFO)
    assert info.node == 1 and info.kib("MemTotal") == 1056529712 and info.count("HugePages_Total") == 0


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty input"),
    ("MemFree: 12 kB\n", "no 'MemTotal: N kB' line"),
    ("MemTotal: 12\n", "no 'MemTotal: N kB' line"),  # a count, not a size
    ("MemTotal: 12 MB\n", "no 'MemTotal: N kB' line"),
    ("MemTotal: -12 kB\n", "no 'MemTotal: N kB' line"),
    (NODE1_MEMINFO + "Node 0 MemFree: 1 kB\n", "several NUMA nodes (0, 1)"),
])
def test_unreadable_meminfo(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_meminfo(text)


def test_first_value_of_a_repeated_key_wins_and_foreign_lines_are_skipped() -> None:
    info = parse_meminfo("MemTotal:  100 kB\nsomething else\nMemTotal: 5 kB\r\n")
    assert info.kib("MemTotal") == 100


@pytest.mark.parametrize(("text", "active", "choices"), [
    ("always [madvise] never", "madvise", ("always", "madvise", "never")),
    ("[always] madvise never\n", "always", ("always", "madvise", "never")),
    ("always defer defer+madvise [madvise] never", "madvise", ("always", "defer", "defer+madvise", "madvise", "never")),
    ("[never]", "never", ("never",)),
])
def test_kernel_choice(text: str, active: str, choices: tuple[str, ...]) -> None:
    setting = parse_kernel_choice(text)
    assert (setting.active, setting.choices) == (active, choices)


@pytest.mark.parametrize("text", ["always madvise never", "[always] [madvise]", "always [madvise never",
                                  "always] madvise", "", "[ALWAYS]", "always [mad\x1bvise]"])
def test_kernel_choice_without_exactly_one_active_mode(text: str) -> None:
    with pytest.raises(ParseError):
        parse_kernel_choice(text)


@pytest.mark.parametrize(("name", "size"), [("hugepages-2048kB", 2048), ("hugepages-1048576kB", 1048576)])
def test_hugepage_pool_size(name: str, size: int) -> None:
    assert hugepage_size_kib(name) == size


@pytest.mark.parametrize("name", ["hugepages-2MB", "hugepages-0kB", "hugepages-kB", "nr_hugepages", ""])
def test_not_a_hugepage_pool(name: str) -> None:
    with pytest.raises(ParseError):
        hugepage_size_kib(name)


@given(st.text(max_size=400))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    for parser in (parse_meminfo, parse_kernel_choice, hugepage_size_kib):
        try:
            parser(text)
        except ParseError:
            pass


def test_the_simulators_files_read_back(h100_topology: object) -> None:
    from burnin.sim.host import host_files
    from burnin.sim.state import healthy_state

    state = healthy_state(h100_topology, "sim01")  # type: ignore[arg-type]
    state.host.hugepages[2048] = 16384
    files, links = host_files(state, 224)
    proc = parse_meminfo(files["proc/meminfo"])
    nodes = [parse_meminfo(files[f"sys/devices/system/node/node{n}/meminfo"]) for n in (0, 1)]
    assert [n.node for n in nodes] == [0, 1]
    assert proc.kib("MemTotal") == sum(n.kib("MemTotal") or 0 for n in nodes) == 2015 * 1024 * 1024
    assert proc.count("HugePages_Total") == 16384 and proc.kib("Hugetlb") == 16384 * 2048
    assert nodes[0].count("HugePages_Total") == 16384 and nodes[1].count("HugePages_Total") == 0
    assert parse_kernel_choice(files["sys/kernel/mm/transparent_hugepage/enabled"]).active == "madvise"
    assert files["sys/devices/system/cpu/cpufreq/policy223/scaling_governor"] == "performance"
    assert links["sys/devices/system/cpu/cpu223/cpufreq"] == "sys/devices/system/cpu/cpufreq/policy223"
    # the kernel's columns: label padded to 16, value right-aligned in 8
    assert "SwapCached:            0 kB\n" in files["proc/meminfo"]
    assert "Node 1 MemUsed:        " in files["sys/devices/system/node/node1/meminfo"]
