"""Formats and variants the reference folder does not hold: other collectives,
older tool and driver versions, other log styles. The samples are typed after
the tools' documented layouts; numbers are illustrative.
"""

from __future__ import annotations

import math

import pytest

from burnin.errors import ParseError
from burnin.parsers import to_jsonable
from burnin.parsers._common import compress_cpu_list, expand_cpu_list
from burnin.parsers.cpu import parse_lscpu, parse_numactl_hardware
from burnin.parsers.dcgmi import parse_dcgmi_diag
from burnin.parsers.dmesg import parse_xid_events
from burnin.parsers.ibstat import parse_ibstat, parse_ibstatus
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.megatron import parse_megatron_log
from burnin.parsers.nccl_tests import parse_nccl_tests
from burnin.parsers.nvbandwidth import parse_nvbandwidth, parse_p2p_bandwidth
from burnin.parsers.nvidia_smi import (
    numeric,
    parse_nvlink,
    parse_query_csv,
    parse_smi_query,
    parse_topo_matrix,
)

# ----------------------------------------------------------------------------- nccl-tests


def _ranks(n: int, host: str = "node01") -> str:
    return "".join(
        f"#  Rank {i:2d} Group  0 Pid {1000 + i:6d} on {host:>9} device {i:2d} [0x{i + 16:02x}] NVIDIA H100 80GB HBM3\n"
        for i in range(n)
    )


HEADER = (
    "#\n#                                                              out-of-place"
    "                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)       \n"
)

ALL_GATHER = (
    "# Collective test starting: all_gather_perf\n"
    "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5"
    " iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
    + _ranks(8)
    + HEADER
    + "     1048576         32768     float    none      -1    25.10   41.78   36.55      0"
    "    24.33   43.10   37.71      0\n"
    "  1073741824      33554432     float    none      -1   2905.1  369.61  323.41      0"
    "   2896.3  370.73  324.39      0\n"
    "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 180.02 \n#\n"
    "# Collective test concluded: all_gather_perf\n"
)


def test_nccl_all_gather_named_in_text() -> None:
    run = parse_nccl_tests(ALL_GATHER)
    assert run.collective == "all_gather" and run.nranks == 8
    assert run.ranks[3].bus_id == "0x13"  # older builds print only the bus number
    assert run.rows[1].redop == "none" and run.rows[1].root == -1
    assert run.rows[1].in_place.busbw_gbps == 324.39 and run.avg_busbw_gbps == 180.02


def test_nccl_collective_inference_and_hint() -> None:
    unnamed = "\n".join(ln for ln in ALL_GATHER.splitlines() if "Collective test" not in ln)
    assert parse_nccl_tests(unnamed).collective is None  # all_gather or alltoall: ambiguous
    assert parse_nccl_tests(unnamed, collective="alltoall").collective == "alltoall"
    scatter = unnamed.replace("none", " sum")
    assert parse_nccl_tests(scatter).collective == "reduce_scatter"


def _row(size: int, count: int, op: str, root: str, t: float, alg: float, bus: float) -> str:
    return (
        f"{size:12d}  {count:12d}     float  {op:>6}  {root:>6}  {t:7.1f}  {alg:6.2f}  {bus:6.2f}"
        f"      0  {t:7.1f}  {alg:6.2f}  {bus:6.2f}      0\n"
    )


@pytest.mark.parametrize(
    ("op", "root", "factor", "expected"),
    [
        ("sum", "-1", 1.75, "all_reduce"),
        ("none", "0", 1.0, "broadcast"),
        ("sum", "0", 1.0, "reduce"),
        ("", "-1", 1.0, "sendrecv"),  # sendrecv prints a blank redop column
    ],
)
def test_nccl_inferred_collectives(op: str, root: str, factor: float, expected: str) -> None:
    text = _ranks(8) + HEADER + _row(1 << 30, 1 << 28, op, root, 5000.0, 200.0, 200.0 * factor)
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 10.0\n"
    run = parse_nccl_tests(text)
    assert run.collective == expected
    assert run.rows[0].redop == (op or None) and run.rows[0].root == int(root)


OLD_FORMAT = "\n".join(
    [
        "# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
        "#",
        "# Using devices",
        "#   Rank  0 Pid  12345 on       dgx1 device  0 [0x06] Tesla V100-SXM2-16GB",
        "#   Rank  1 Pid  12345 on       dgx1 device  1 [0x07] Tesla V100-SXM2-16GB",
        "#",
        "#                                                     out-of-place                       in-place",
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "           8             2   float     sum    37.05    0.00    0.00  0e+00    36.56    0.00    0.00  0e+00",
        "   134217728      33554432   float     sum   1425.6   94.15   94.15  5e-07   1422.3   94.37   94.37  5e-07",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 62.0143",
        "",
    ]
)


def test_nccl_old_format_without_group_and_root() -> None:
    run = parse_nccl_tests(OLD_FORMAT)
    assert run.nranks == 2 and run.ranks[1].host == "dgx1" and run.ranks[1].pid == 12345
    assert len(run.rows) == 2 and run.rows[1].root is None and run.rows[1].redop == "sum"
    assert run.rows[1].out_of_place.wrong == pytest.approx(5e-7)
    assert run.collective == "all_reduce"  # 2 ranks: busbw == algbw * 2(n-1)/n == algbw


def test_nccl_alltoall_na_wrong_and_failures() -> None:
    text = (
        _ranks(8) + HEADER + " 8589934592     268435456     float    none      -1    20837  412.23  360.71      3"
        "    20817  412.64  361.06    N/A\n"
        + "node01: Test NCCL failure common.cu:1005 'unhandled cuda error'\n"
        + "node01:1234:1234 [0] NCCL WARN Cuda failure 'an illegal memory access'\n"
        + "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 360.71\n"
    )
    run = parse_nccl_tests(text, collective="alltoall")
    assert run.rows[0].out_of_place.wrong == 3 and run.rows[0].in_place.wrong is None
    assert run.out_of_bounds == 3
    assert any("NCCL WARN" in w for w in run.warnings)
    assert any("Test NCCL failure" in w for w in run.warnings)
    assert any("FAILED" in w for w in run.warnings)


def test_nccl_crash_after_header_is_a_truncated_record() -> None:
    text = _ranks(2) + HEADER + "node01: Test CUDA failure common.cu:891 'out of memory'\n"
    run = parse_nccl_tests(text)
    assert run.rows == () and run.truncated is True and run.avg_busbw_gbps is None
    assert run.warnings == ("node01: Test CUDA failure common.cu:891 'out of memory'",)


def test_nccl_srun_label_and_tag_output_prefixes() -> None:
    labelled = "".join(f"0: {ln}\n" for ln in ALL_GATHER.splitlines())
    tagged = "".join(f"[1,0]<stdout>:{ln}\n" for ln in ALL_GATHER.splitlines())
    base = to_jsonable(parse_nccl_tests(ALL_GATHER))
    assert to_jsonable(parse_nccl_tests(labelled)) == base
    assert to_jsonable(parse_nccl_tests(tagged)) == base


# ----------------------------------------------------------------------------- dmesg


DMESG_MIXED = """\
[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.
[ 1234.600000] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
Feb 23 16:24:18 gpu-node-01 kernel: NVRM: Xid (PCI:0000:9b:00): 48, pid=2190, name=python3, \
An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6.
2025-02-23T16:24:18+0000 gpu-node-01 kernel: NVRM: Xid (PCI:0000:9b:00): 94, pid='<unknown>', \
name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No
NVRM: Xid (PCI:0000:18:00): 74, NVLink: fatal error detected on link 5(0x10000, 0x0, 0x0)
[ 2317.531452] nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 12028, Non-fatal, Link 41 egress \
non-posted PRIV error (First)
[ 2317.531460] nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 20034, Severity 1 Engine instance 30
[ 2318.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd
"""


def test_dmesg_formats_and_sxid() -> None:
    rep = parse_xid_events(DMESG_MIXED)
    assert [(e.xid, e.pci, e.pid, e.timestamp) for e in rep.events] == [
        (79, "0000:3b:00", 0, "1234.567890"),
        (48, "0000:9b:00", 2190, "Feb 23 16:24:18"),
        (94, "0000:9b:00", None, "2025-02-23T16:24:18+0000"),
        (74, "0000:18:00", None, None),
    ]
    assert rep.events[0].text == "GPU has fallen off the bus."
    assert rep.events[1].process == "python3" and rep.events[2].process is None
    assert rep.events[3].text.startswith("NVLink: fatal error detected on link 5")
    first, second = rep.sxid_events
    assert (first.sxid, first.device, first.severity) == (12028, "nvidia-nvswitch3", "Non-fatal")
    assert first.pci == "0000:8a:00.0" and first.text.startswith("Link 41 egress")
    assert second.severity is None and second.text == "Severity 1 Engine instance 30"


def test_dmesg_without_xid_is_empty_not_an_error() -> None:
    rep = parse_xid_events("[    0.000000] Linux version 5.15.0\n[    1.0] pci 0000:00:00.0: ok\n")
    assert rep.events == () and rep.sxid_events == () and rep.lines == 2
    assert parse_xid_events("").events == ()


# ----------------------------------------------------------------------------- lscpu / numactl


LSCPU_CLASSIC = """\
Architecture:                    x86_64
CPU op-mode(s):                  32-bit, 64-bit
CPU(s):                          224
On-line CPU(s) list:             0-223
Thread(s) per core:              2
Core(s) per socket:              56
Socket(s):                       2
NUMA node(s):                    2
Vendor ID:                       GenuineIntel
CPU max MHz:                     3800.0000
Model name:                      Intel(R) Xeon(R) Platinum 8480C
NUMA node0 CPU(s):               0-55,112-167
NUMA node1 CPU(s):               56-111,168-223
Flags:                           fpu vme de pse tsc msr pae mce cx8 apic sep
"""


def test_lscpu_classic() -> None:
    cpu = parse_lscpu(LSCPU_CLASSIC)
    assert cpu.style == "classic" and cpu.cpus == 224 and cpu.numa_node_count == 2
    assert cpu.numa_nodes == {0: "0-55,112-167", 1: "56-111,168-223"}
    assert len(expand_cpu_list(cpu.numa_nodes[1])) == 112
    assert cpu.fields["CPU max MHz"] == "3800.0000"


def _lscpu_rows() -> list[tuple[int, int, int, int]]:
    # 2 sockets x 2 cores x 2 threads; NUMA node == socket.
    rows = []
    for thread in range(2):
        for core in range(4):
            rows.append((thread * 4 + core, core // 2, core // 2, core))
    return rows


def test_lscpu_extended_and_parsable() -> None:
    table = "CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ\n" + "".join(
        f"{c:3d} {n:4d} {s:6d} {k:4d} {k}:{k}:{k}:{s}          yes 3800.0000 800.0000\n" for c, n, s, k in _lscpu_rows()
    )
    parsable = (
        "# The following is the parsable format, which can be fed to other\n"
        "# programs. Each different item in every column has an unique ID\n"
        "# starting from zero.\n# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n"
        + "".join(f"{c},{k},{s},{n},,{k},{k},{k},{s}\n" for c, n, s, k in _lscpu_rows())
    )
    for text, style in ((table, "table"), (parsable, "parsable")):
        cpu = parse_lscpu(text)
        assert cpu.style == style and cpu.cpus == 8 and cpu.sockets == 2
        assert cpu.cores_per_socket == 2 and cpu.threads_per_core == 2
        assert cpu.numa_nodes == {0: "0-1,4-5", 1: "2-3,6-7"}


NUMACTL = """\
available: 2 nodes (0-1)
node 0 cpus: 0 1 2 3 112 113
node 0 size: 1031710 MB
node 0 free: 1012345 MB
node 1 cpus: 56 57 168 169
node 1 size: 1032146 MB
node 1 free: 1020000 MB
node distances:
node   0   1
  0:  10  21
  1:  21  10
"""


def test_numactl_hardware() -> None:
    hw = parse_numactl_hardware(NUMACTL)
    assert hw.available == 2 and [n.node for n in hw.nodes] == [0, 1]
    assert hw.nodes[0].cpus == (0, 1, 2, 3, 112, 113) and hw.nodes[1].size_mb == 1032146
    assert hw.nodes[0].free_mb == 1012345
    assert hw.distances == {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}
    assert parse_numactl_hardware("No NUMA available on this system\n").available == 0
    with pytest.raises(ParseError):
        parse_numactl_hardware("numactl: command not found\n")


def test_cpu_list_helpers() -> None:
    assert expand_cpu_list("0-2,5") == (0, 1, 2, 5) and compress_cpu_list([5, 0, 1, 2]) == "0-2,5"
    for bad in ("3-1", "a-b", "0-99999999"):
        with pytest.raises(ParseError):
            expand_cpu_list(bad)


# ----------------------------------------------------------------------------- dcgmi -j


DCGM3_JSON = """Successfully ran diagnostic for group.
{
  "DCGM GPU Diagnostic" : {
    "test_categories" : [
      {"category" : "Deployment",
       "tests" : [ {"name" : "Denylist", "results" : [ {"gpu_ids" : "0,1", "status" : "PASS"} ]} ]},
      {"category" : "Hardware",
       "tests" : [ {"name" : "GPU Memory",
                    "results" : [ {"gpu_ids" : "0", "status" : "Fail",
                                   "warnings" : [ {
                                     "warning" : "GPU 0 has uncorrectable memory errors",
                                     "error_id" : 24} ]},
                                  {"gpu_ids" : "1", "status" : "Pass", "info" : ["ok"]} ]},
                   {"name" : "Diagnostic", "results" : [ {"gpu_ids" : "0", "status" : "Skip"},
                                                          {"gpu_ids" : "1", "status" : "Skip"} ]} ]}
    ],
    "version" : "3.3.5",
    "Driver Version Detected" : "535.161.08"
  }
}
"""


def test_dcgmi_json() -> None:
    diag = parse_dcgmi_diag(DCGM3_JSON)
    assert diag.format == "json" and diag.truncated is False
    assert diag.results == {"Denylist": "Pass", "GPU Memory": "Fail", "Diagnostic": "Skip"}
    mem = diag.tests[1]
    assert mem.category == "Hardware" and mem.gpu_results == {"Fail": (0,), "Pass": (1,)}
    assert diag.warnings == ("GPU 0 has uncorrectable memory errors",)
    assert diag.metadata["version"] == "3.3.5"


def test_dcgmi_json_dcgm4_entities() -> None:
    doc = (
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": ['
        '{"name": "memory", "results": [{"entity_id": 0, "status": "Pass"},'
        ' {"entity_id": 1, "status": "Warn", "warnings": ["slow"]}]}]}]}}'
    )
    diag = parse_dcgmi_diag(doc)
    assert diag.results == {"memory": "Warn"} and diag.tests[0].gpu_results["Warn"] == (1,)
    with pytest.raises(ParseError):
        parse_dcgmi_diag('{"DCGM GPU Diagnostic": {"version": "4.2.3"}}')


DCGM_TABLE = """\
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| Page Retirement/Row Remap | Fail                                           |
| Error                     | GPU 3 has uncorrectable memory errors and row  |
|                           |  remappings are pending                        |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
| Diagnostic                | Skip - All                                     |
+-----  Stress  ------------+------------------------------------------------+
| Targeted Stress           | Warn - GPUs: 0, 1                              |
| Warning                   | GPU 0 short of target                          |
+---------------------------+------------------------------------------------+
"""


DCGM4_TABLE = """\
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.1.1                                          |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Fail                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Fail                                     |
| Warning: GPU1             | Uncorrectable ECC errors found                 |
+---------------------------+------------------------------------------------+
"""


def test_dcgmi_dcgm4_per_gpu_lines() -> None:
    diag = parse_dcgmi_diag(DCGM4_TABLE)
    assert diag.results == {"software": "Pass", "memory": "Fail"}
    assert diag.tests[1].gpu_results == {"Fail": (1,), "Pass": (0,)}
    assert diag.tests[0].gpu_results == {"Pass": (0, 1)}
    assert diag.warnings == ("Uncorrectable ECC errors found",)
    assert diag.metadata == {"DCGM Version": "4.1.1"}


def test_dcgmi_full_table() -> None:
    diag = parse_dcgmi_diag(DCGM_TABLE)
    assert diag.truncated is False
    assert diag.results == {
        "Denylist": "Pass",
        "Page Retirement/Row Remap": "Fail",
        "GPU Memory": "Pass",
        "Diagnostic": "Skip",
        "Targeted Stress": "Warn",
    }
    remap = diag.tests[1]
    assert remap.details[0].kind == "Error" and remap.category == "Deployment"
    assert remap.details[0].text.endswith("row remappings are pending")
    assert diag.tests[-1].category == "Stress" and diag.tests[-1].gpu_results == {"Warn": (0, 1)}
    assert diag.warnings == ("GPU 0 short of target",)


# ----------------------------------------------------------------------------- nvidia-smi


OLD_Q = """\
==============NVSMI LOG==============

Timestamp                                 : Mon Jan  9 10:00:00 2023
Driver Version                            : 470.57.02
CUDA Version                              : 11.4

Attached GPUs                             : 2
GPU 00000000:07:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    Persistence Mode                      : Disabled
    Clocks Throttle Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 3
                Register File             : 0
                Total                     : 3
            Double Bit
                Device Memory             : 1
                Total                     : 1
        Aggregate
            Single Bit
                Total                     : 10
            Double Bit
                Total                     : 2
    Temperature
        GPU Current Temp                  : 41 C
        GPU Shutdown Temp                 : 90 C
        GPU Slowdown Temp                 : 87 C
        GPU Max Operating Temp            : 83 C
    Power Readings
        Power Management                  : Supported
        Power Draw                        : 55.12 W
        Power Limit                       : 300.00 W
        Enforced Power Limit              : 250.00 W
Unable to determine the device handle for GPU0000:08:00.0: Unknown Error
"""


def test_smi_q_older_driver_names() -> None:
    q = parse_smi_query(OLD_Q)
    assert q.driver_version == "470.57.02" and q.attached_gpus == 2 and len(q.gpus) == 1
    assert q.errors == ("Unable to determine the device handle for GPU0000:08:00.0: Unknown Error",)
    g = q.gpus[0]
    assert g.clock_event_reasons == {"Idle": False, "SW Power Cap": True, "HW Slowdown": False}
    assert g.ecc_volatile is not None and g.ecc_volatile.single_bit_total == 3
    assert g.ecc_volatile.uncorrectable_total == 1 and g.ecc_volatile.sram_correctable is None
    assert g.ecc_aggregate is not None and g.ecc_aggregate.correctable_total == 10
    assert g.temperature is not None
    assert (g.temperature.shutdown_c, g.temperature.slowdown_c) == (90, 87)
    assert g.temperature.max_operating_c == 83 and g.temperature.slowdown_tlimit_c is None
    assert g.power_limit_w == 250.0 and g.power_draw_w == 55.12
    assert g.fabric_state is None and g.remapped_rows is None and g.pcie_gen_current is None


def test_smi_q_failures() -> None:
    for text in (
        "No devices were found\n",
        "NVIDIA-SMI has failed because it couldn't communicate",
    ):
        with pytest.raises(ParseError, match="the tool printed"):
            parse_smi_query(text)


def test_topo_old_driver_uses_hca_names() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\n"
        "GPU0\t X \tNV2\tPIX\tSYS\t0-19\n"
        "GPU1\tNV2\t X \tSYS\tPIX\t20-39\n"
        "mlx5_0\tPIX\tSYS\t X \tSYS\t\n"
        "mlx5_1\tSYS\tPIX\tSYS\t X \t\n"
    )
    topo = parse_topo_matrix(text)
    assert topo.gpus == ("GPU0", "GPU1") and topo.nics == ("mlx5_0", "mlx5_1")
    assert topo.nic_names == {"mlx5_0": "mlx5_0", "mlx5_1": "mlx5_1"}
    assert topo.links["mlx5_1"]["GPU1"] == "PIX" and topo.cpu_affinity["GPU1"] == "20-39"
    assert topo.numa_affinity == {}


def test_nvlink_inactive_links() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
        "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n\t Link 0: 26.562 GB/s\n"
    )
    rep = parse_nvlink(text)
    assert [(lk.link, lk.active, lk.speed_gbps) for lk in rep.gpus[0].links] == [
        (0, True, 26.562),
        (1, False, None),
    ]
    assert rep.gpus[1].uuid == "GPU-2" and rep.elided is False


def test_query_csv_noheader_nounits() -> None:
    text = "NVIDIA H100 80GB HBM3, 81559, 5, 16\nNVIDIA H100 80GB HBM3, 81559, 4, 8\n"
    cols = ("name", "memory.total", "pcie.link.gen.current", "pcie.link.width.current")
    q = parse_query_csv(text, columns=cols)
    assert q.columns == cols and q.rows[1]["pcie.link.gen.current"] == "4"
    with pytest.raises(ParseError, match="no CSV header"):
        parse_query_csv(text)  # noheader output without the column names
    assert numeric("[N/A]") is None and numeric("0x1F") == 31.0 and numeric("700.00 W") == 700.0
    with pytest.raises(ParseError):
        parse_query_csv("No devices were found\n")


# ----------------------------------------------------------------------------- lspci / ib


LSPCI_NN = """\
0000:19:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:16c1]
\tNUMA node: 1
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <4us
\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)
\t\tLnkCap2: Supported Link Speeds: 2.5-32GT/s, Crosslink- Retimer+ 2Retimers+ DRS-
\tKernel driver in use: nvidia

1b:00.0 Ethernet controller: Mellanox Technologies MT28908 Family [ConnectX-6]
\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\tLnkSta:\tSpeed 8GT/s, Width x16, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
"""


def test_lspci_nn_domain_and_old_marks() -> None:
    gpu, nic = parse_lspci(LSPCI_NN).devices
    assert gpu.address == "0000:19:00.0" and gpu.vendor_id == "10de" and gpu.device_id == "2330"
    assert gpu.name == "NVIDIA Corporation GH100 [H100 SXM5 80GB]" and gpu.revision == "a1"
    assert gpu.device_class == "3D controller" and gpu.numa_node == 1
    assert (gpu.lnksta_speed_gts, gpu.lnksta_width, gpu.lnksta_downgraded) == (16.0, 8, True)
    # Old lspci prints no (ok)/(downgraded) marks: compared against LnkCap instead.
    assert nic.address == "0000:1b:00.0" and nic.lnksta_downgraded is True
    assert nic.numa_node is None


def test_ibstat_two_ports_and_ibstatus_down() -> None:
    text = (
        "CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 2\n\tFirmware version: 20.31.1014\n"
        "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 200\n"
        "\t\tLink layer: InfiniBand\n"
        "\tPort 2:\n\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 2.5\n"
        "\t\tLink layer: InfiniBand\n"
    )
    (ca,) = parse_ibstat(text).cas
    assert ca.num_ports == 2 and [p.state for p in ca.ports] == ["Active", "Down"]
    assert ca.ports[1].rate_gbps == 2.5
    status = (
        "Infiniband device 'mlx5_1' port 1 status:\n\tdefault gid:\t unknown\n"
        "\tstate:\t\t 1: DOWN\n\tphys state:\t 3: Disabled\n\trate:\t\t 10 Gb/sec (4X SDR)\n"
        "\tlink_layer:\t InfiniBand\n"
    )
    (port,) = parse_ibstatus(status).ports
    assert (port.state, port.state_code, port.physical_state) == ("DOWN", 1, "Disabled")
    assert port.rate_gbps == 10.0 and port.rate_text == "4X SDR"
    with pytest.raises(ParseError, match="ibpanic"):
        parse_ibstat("ibpanic: [123] main: stat of IB device 'mlx5_0' failed: No such file\n")


# ----------------------------------------------------------------------------- bandwidth


P2P_FULL = """\
[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
Device: 0, NVIDIA H100 80GB HBM3, pciBusID: 19, pciDeviceID: 0, pciDomainID:0
Device: 1, NVIDIA H100 80GB HBM3, pciBusID: 3b, pciDeviceID: 0, pciDomainID:0
Device=0 CAN Access Peer Device=1
Device=1 CAN Access Peer Device=0

P2P Connectivity Matrix
     D\\D     0     1
     0\t     1     1
     1\t     1     1
Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
   D\\D     0      1
     0 2484.69  40.12
     1  40.26 2501.83
Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
   D\\D     0      1
     0 2510.73 741.45
     1 742.12 2520.30
P2P=Enabled Latency (P2P Writes) Matrix (us)
   GPU     0      1
     0   2.47   2.60
     1   2.64   2.42

   CPU     0      1
     0   2.73   2.10
     1   2.12   2.66

NOTE: The CUDA Samples are not meant for performance measurements.
"""


def test_p2p_full_output() -> None:
    rep = parse_p2p_bandwidth(P2P_FULL)
    assert [(d.index, d.pci_bus_id) for d in rep.devices] == [(0, "19"), (1, "3b")]
    kinds = [(m.kind, m.p2p_enabled, m.bidirectional, m.axis, m.unit) for m in rep.matrices]
    assert kinds == [
        ("connectivity", None, None, "D\\D", None),
        ("bandwidth", False, False, "D\\D", "GB/s"),
        ("bandwidth", True, True, "D\\D", "GB/s"),
        ("latency", True, None, "GPU", "us"),
        ("latency", True, None, "CPU", "us"),
    ]
    assert rep.matrices[2].matrix[1][0] == 742.12 and rep.matrices[4].matrix[0][1] == 2.10


def test_nvbandwidth_waived_and_versions() -> None:
    text = (
        "nvbandwidth Version: v0.7\nBuilt from Git version: v0.7\n\n"
        "CUDA Runtime Version: 12040\nCUDA Driver Version: 12040\nDriver Version: 550.54.15\n\n"
        "Device 0: NVIDIA H100 80GB HBM3 (00000000:19:00)\n\n"
        "Running device_to_device_memcpy_read_ce.\n"
        "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
        "           0         1\n 0       N/A    396.40\n 1    396.45       N/A\n\n"
        "SUM device_to_device_memcpy_read_ce 792.85\n\n"
        "Running host_device_latency_sm.\nWaived. \n"
    )
    rep = parse_nvbandwidth(text)
    assert rep.version == "v0.7" and rep.driver_version == "550.54.15"
    d2d, latency = rep.testcases
    assert d2d.sum == 792.85 and d2d.matrix == ((None, 396.40), (396.45, None))
    assert latency.name == "host_device_latency_sm" and latency.status == "waived"


# ----------------------------------------------------------------------------- megatron


def test_megatron_nan_skipped_prefixed_and_truncated() -> None:
    text = (
        "[default0]: [2024-05-01 10:00:00] iteration       10/    1000 | consumed samples: 1280 |"
        " elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 400.5 |"
        " learning rate: 1.000000E-04 | global batch size:   128 | loss scale: 65536.0 |"
        " number of skipped iterations:   1 | number of nan iterations:   0 |\n"
        "0:  iteration       20/    1000 | elapsed time per iteration (ms): 990.0 |"
        " learning rate: 1.0E-04 | lm loss: nan | loss scale: 32768.0 | grad norm: inf |"
        " number of skipped iterations:   0 | number of nan iterations:   2 |\n"
        " iteration       30/    1000 | elapsed time per iteration (ms): 98"
    )
    log = parse_megatron_log(text)
    first, second, third = log.iterations
    assert first.lm_loss is None and first.skipped == 1 and first.tflops_per_gpu == 400.5
    assert second.lm_loss is not None and math.isnan(second.lm_loss) and second.nan == 2
    assert second.grad_norm == math.inf
    assert third.iteration == 30 and third.elapsed_ms == 98.0 and third.nan is None
    assert log.truncated is True and log.skipped_total == 1 and log.nan_total == 2
    data = to_jsonable(log)
    assert isinstance(data, dict)
    assert data["iterations"][1]["lm_loss"] is None  # NaN becomes null in JSON
    with pytest.raises(ParseError):
        parse_megatron_log("building GPT model ...\n> learning rate decay style: cosine\n")
