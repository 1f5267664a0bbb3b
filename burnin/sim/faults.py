"""The fault registry: names, the check that must catch each, targets and parsing.

A fault spec is written ``NAME[@TARGET]``: ``nvlink-down@gpu3``, ``ib-rate-200@mlx5_6``,
``xid:79@gpu2`` (``xid:N`` takes any Xid number), ``fabric-manager-down`` (whole node).
A GPU fault is persistent unless written ``transient:NAME[@gpuN]`` (``transient:xid:79@gpu3``): a
simulated GPU reset of its GPU (``nvidia-smi -r -i N``) or a simulated reboot clears a transient fault and
leaves a persistent one (burnin.sim.reset; the repair ladder, docs/repair.md).
Names are a contract: ``burnin faults`` lists them and the fault-matrix tests use them.

A fault is its :class:`FaultSpec` and the mutator that applies it to a node's
state. A new one is declared where its mutator is written, spec and mutator
together: ``@simulates(gpu_fault(...))`` above the mutator (docs/architecture.md,
"Recipe: a new fault"). The tables below hold the specs written before that, their
mutators registered by name in :data:`MUTATORS` (burnin.sim.inject).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from burnin.checks.xid import FATAL_XIDS, NONFATAL_XIDS, is_fatal
from burnin.errors import UsageError
from burnin.topology.model import Topology

if TYPE_CHECKING:
    from burnin.sim.state import NodeState

TargetKind = Literal["gpu", "hca", "node"]

DEFAULT_GPU = "gpu3"
DEFAULT_HCA = "mlx5_2"

# The Xid classification is the checks' own table (check-catalog GPU-04), not a copy.
XID_FATAL: frozenset[int] = FATAL_XIDS
XID_NONFATAL: frozenset[int] = NONFATAL_XIDS


def xid_is_fatal(xid: int) -> bool:
    """True when the catalog's GPU-04 table makes this Xid a FAIL (not in the DRAIN set: False)."""
    return is_fatal(xid)


@dataclass(frozen=True)
class FaultSpec:
    """One kind of fault: what it breaks and which check must catch it."""

    name: str
    check_id: str
    description: str
    target_kind: TargetKind
    default_target: str | None
    changes: str
    fatal: bool = True
    suite: str = "node"
    """The suite whose check catches it: ``node`` (facts) or ``fabric`` (nccl-tests, nvbandwidth)."""
    outcome: str = "fail"
    """What the check says on the faulted node: ``fail``, or ``incomplete`` (a hang is not a measurement)."""


def gpu_fault(name: str, check_id: str, description: str, changes: str, **options: Any) -> FaultSpec:
    """A fault of one GPU (``@gpuN``, default gpu3); ``options``: :class:`FaultSpec`'s ``suite``, ``outcome``..."""
    return FaultSpec(name, check_id, description, "gpu", DEFAULT_GPU, changes, **options)


def hca_fault(name: str, check_id: str, description: str, changes: str, **options: Any) -> FaultSpec:
    """A fault of one HCA (``@mlx5_N``, default mlx5_2)."""
    return FaultSpec(name, check_id, description, "hca", DEFAULT_HCA, changes, **options)


def node_fault(name: str, check_id: str, description: str, changes: str, **options: Any) -> FaultSpec:
    """A fault of the whole node (no target)."""
    return FaultSpec(name, check_id, description, "node", None, changes, **options)


_gpu, _hca, _node = gpu_fault, hca_fault, node_fault


_SPECS: tuple[FaultSpec, ...] = (
    _gpu("gpu-missing", "INV-01", "a GPU is absent from the bus",
         "NVML count drops by one (later GPUs shift down an index); the GPU's sysfs device, "
         "nvidia-smi and lspci entries disappear"),
    _gpu("gpu-lost", "INV-01", "a GPU has fallen off the bus (still enumerated)",
         "NVML calls on the GPU return NVML_ERROR_GPU_IS_LOST; nvidia-smi prints "
         "'Unable to determine the device handle for GPU ...: GPU is lost' and exits 15"),
    _gpu("ecc-uncorrectable", "GPU-01", "uncorrectable DRAM ECC errors since the last reset",
         "NVML volatile and aggregate uncorrected DRAM counters = 2; nvidia-smi -q ECC Errors agree"),
    _gpu("row-remap-pending", "GPU-03", "a remapped HBM row awaits a GPU reset",
         "nvmlDeviceGetRemappedRows: uncorrectable 1, pending 1; nvidia-smi -q 'Pending: Yes'"),
    _gpu("row-remap-failure", "GPU-03", "row remapping failed (no spare rows): RMA",
         "nvmlDeviceGetRemappedRows: failureOccurred 1; nvidia-smi -q "
         "'Remapping Failure Occurred: Yes'"),
    FaultSpec("xid:N", "GPU-04", "Xid N logged against the GPU (fatal or not per the catalog)",
              "gpu", DEFAULT_GPU,
              "an 'NVRM: Xid (PCI:0000:BB:00): N, pid=..., <text>' line in dmesg; fatal when N is in "
              "the catalog's FAIL set (46,48,54,62,64,74,79,95,109,110,119,120,136,140,143,154,"
              "156,157,158,167,169,171,172)"),
    _gpu("thermal", "GPU-06", "GPU temperature above its GPU_MAX operating limit",
         "NVML GPU temperature = GPU_MAX threshold + 1 C (86 C on H100); nvidia-smi -q agrees"),
    _gpu("power-capped", "GPU-07", "the GPU was left power-capped below its default limit",
         "enforced and management power limit 500000 mW (default stays 700000 mW); "
         "nvidia-smi -q 'Current Power Limit: 500.00 W'"),
    _gpu("pcie-gen4", "GPU-08", "the GPU's PCIe link trained at Gen4",
         "NVML current and max link generation 4 (GPU max stays 5); sysfs current_link_speed "
         "'16.0 GT/s PCIe' on the GPU and on its switch port, whose max_link_speed is 16.0 too (the "
         "GPU's own max stays 32.0, as on a Gen4 switch); lspci LnkSta 16GT/s (downgraded); "
         "a 'limited by 16.0 GT/s PCIe x16 link' dmesg line"),
    _gpu("pcie-x8", "GPU-08", "the GPU's PCIe link trained at x8",
         "NVML current link width 8 (max 16); sysfs current_link_width 8 on the GPU and its switch "
         "port; lspci 'Width x8 (downgraded)'; a 'limited by 32.0 GT/s PCIe x8 link' dmesg line"),
    _gpu("nvlink-down", "GPU-10", "one NVLink link of the GPU is down",
         "nvmlDeviceGetNvLinkState(link 7) = 0; topo -m shows NV17 between that GPU and its peers; "
         "nvidia-smi nvlink --status shows '<inactive>'; fabric suite: single-node all_reduce loses NVLS "
         "(ring rate x 17/18, NCCL-01 fails) and nvbandwidth pairs with the GPU drop by 1/18"),
    _gpu("nvlink-errors", "GPU-11", "NVLink errors on one link",
         "link 7: DL recovery 3, DL replay 250, CRC flit 0 (nvmlDeviceGetNvLinkErrorCounter); "
         "nvidia-smi nvlink -e agrees"),
    _gpu("mig-enabled", "INV-07", "MIG mode left enabled",
         "nvmlDeviceGetMigMode = (1, 1); nvidia-smi -q 'MIG Mode Current: Enabled'"),
    _gpu("persistence-off", "INV-06", "persistence mode disabled",
         "nvmlDeviceGetPersistenceMode = 0; nvidia-smi -q 'Persistence Mode: Disabled'"),
    _gpu("ecc-disabled", "INV-08", "ECC turned off",
         "nvmlDeviceGetEccMode = (0, 0); nvidia-smi -q 'ECC Mode Current: Disabled'"),
    _gpu("vbios-mismatch", "INV-02", "the GPU runs another VBIOS than the node's other GPUs (an RMA swap)",
         "nvmlDeviceGetVbiosVersion = 96.00.74.00.0D (the 8x H100 capture on driver 535.161.08; 96.00.89.00.01 "
         "when the node already runs that); nvidia-smi -q 'VBIOS Version' agrees; InfoROM unchanged"),
    _gpu("numa-mismatch", "TOP-01", "the BIOS published no NUMA proximity for the GPU",
         "sysfs numa_node of the GPU = -1 (its bridges keep the right node); NVML NUMA id "
         "unsupported; topo -m NUMA Affinity 'N/A'"),
    _gpu("cpu-affinity", "TOP-02", "the GPU's local CPUs point at the other socket",
         "sysfs local_cpulist/local_cpus of the GPU, NVML CPU affinity and topo -m 'CPU Affinity' "
         "show the other NUMA node's CPUs (numa_node unchanged)"),
    _gpu("nic-affinity", "TOP-03", "the GPU's paired HCA sits behind another root port",
         "the paired HCA moves from the GPU's PCIe switch to its own root port on the same socket: "
         "sysfs hierarchy and topo -m show NODE (not PIX) between them"),
    _gpu("acs-enabled", "TOP-04", "ACS redirect enabled on the GPU's PCIe switch",
         "lspci -vvv ACSCtl 'SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ ...' on the "
         "downstream ports of the GPU's switch; setpci ECAP_ACS+0x6.w = 001d"),
    _node("fabric-manager-down", "INV-04", "nvidia-fabricmanager is not running",
          "systemctl is-active nvidia-fabricmanager -> 'inactive' (exit 3); NVML fabric state "
          "NOT_STARTED (1) on every GPU; nvidia-smi -q 'Fabric State: Not Started'"),
    _node("sxid-fatal", "INV-04", "an NVSwitch logged a fatal SXid (the fabric manager and NVML still look fine)",
          "kernel log: 'nvidia-nvswitch2: SXid (PCI:<third NVSwitch>): 24007, Fatal, Link 40 sourcetrack TCEN0 "
          "crumbstore ECC DBE Error' and its 'Severity 0 Engine instance' continuation line"),
    _node("peermem-missing", "INV-05", "nvidia_peermem is not loaded",
          "/sys/module/nvidia_peermem absent; no nvidia_peermem line in /proc/modules"),
    _node("driver-mismatch", "INV-03", "kernel module and NVML driver versions differ",
          "/proc/driver/nvidia/version, /sys/module/nvidia/version and the dmesg NVRM load line "
          "say 535.161.08 while NVML reports the topology's driver"),
    _node("numa-balancing-on", "TOP-08", "automatic NUMA balancing enabled",
          "/proc/sys/kernel/numa_balancing = 1"),
    _node("iommu-dma", "TOP-05", "IOMMU in translated (DMA) mode",
          "every /sys/kernel/iommu_groups/*/type = 'DMA'; /proc/cmdline loses iommu=pt"),
    _hca("ib-port-down", "IB-01", "the HCA's port is down",
         "ports/1/state '1: DOWN', phys_state '2: Polling', rate '40 Gb/sec (4X QDR)', lid 0; "
         "ibstat 'State: Down', 'Physical state: Polling'"),
    _hca("ib-rate-200", "IB-02", "the HCA's link trained at HDR 200",
         "ports/1/rate '200 Gb/sec (4X HDR)'; ibstat 'Rate: 200'"),
    _hca("ib-link-layer", "IB-03", "the HCA's port runs the wrong link layer",
         "ports/1/link_layer flips (InfiniBand <-> Ethernet), with RoCE-style lid 0 and GUIDs; "
         "ibstat 'Link layer' agrees"),
    _hca("ib-errors", "IB-04", "link errors on the HCA's port",
         "ports/1/counters: link_downed 2, symbol_error 250, link_error_recovery 3"),
    _hca("hca-fw-mismatch", "INV-09", "the HCA runs other firmware than the node's other HCAs (a swapped card)",
         "sysfs fw_ver, ibstat 'Firmware version' and ibv_devinfo fw_ver say 28.39.4082 (28.43.3608 when the node "
         "already runs that; on a BlueField 32.38.3056 / 32.41.1000); PSID unchanged"),
    _node("storage-fw-drift", "INV-11", "the node's storage HCAs all run another firmware than the topology names "
          "(flashed apart; caught on a majority of the rack too)",
          "sysfs fw_ver, ibstat 'Firmware version' and ibv_devinfo fw_ver of every storage HCA say 32.38.3056 "
          "(32.41.1000 when the node already runs that): alike within the node, so INV-09 passes; PSID unchanged"),
    _hca("hca-pcie-x8", "IB-06", "the HCA's PCIe link trained at x8",
         "sysfs current_link_width 8 on the HCA and on its switch port (max stays 16); lspci 'Width x8 "
         "(downgraded)'; a mlx5_core 'limited by 32.0 GT/s PCIe x8 link' dmesg line"),
    _hca("ib-mtu-2048", "IB-09", "the HCA's port runs IB MTU 2048 (its switch port is capped there)",
         "ibv_devinfo active_mtu '2048 (4)' (max_mtu stays 4096 (5)); sysfs and ibstat unchanged"),
    _hca("ib-pkey-limited", "IB-09", "the HCA's port is only a limited member of its partition",
         "sysfs ports/1/pkeys/0 0x7fff instead of 0xffff (the full-member bit of its first full-member key "
         "cleared); the rest of the 128-entry table stays 0x0000"),
    _hca("sm-unreachable", "IB-05", "no subnet manager swept the HCA's port (it stays in INIT without a LID)",
         "ports/1/state '2: INIT' (phys_state stays '5: LinkUp', rate unchanged), lid 0x0, sm_lid 0x0; ibstat "
         "'State: Initializing', 'Base lid: 0', 'SM lid: 0'; ibv_devinfo PORT_INIT, sm_lid 0, port_lid 0"),
    _hca("sm-split", "IB-05", "the HCA's port is managed by another subnet manager than the node's other ports",
         "ports/1/sm_lid 0x5 (0x6 when the node's SM already has LID 5); ibstat 'SM lid: 5' and ibv_devinfo "
         "sm_lid 5 agree; the port stays ACTIVE with its LID"),
    FaultSpec("slow-hca", "IB-08", "the HCA moves data at half its rate while its port looks healthy",
              "hca", DEFAULT_HCA,
              "no fast source changes (ibstat and sysfs say ACTIVE, 400 Gb/s, clean counters); ib_write_bw "
              "loopback through the HCA reaches 50% from GPU and host memory (IB-08 names the HCA on the node "
              "alone, which then stays out of multi-node runs); multi-node nccl-tests runs through it reach 50% "
              "of a rail (NCCL-04 names node and HCA when IB-08 does not run first)", suite="fabric"),
    FaultSpec("rail-degraded", "NCCL-04", "the leaf switch port of the HCA's rail passes half its bandwidth",
              "hca", DEFAULT_HCA,
              "nothing on the node changes (ibstat and sysfs say ACTIVE, 400 Gb/s, clean counters; the switch's own "
              "counters are not the node's) and ib_write_bw loopback through the HCA stays at full rate (IB-08 "
              "passes: the traffic never reaches the switch); every multi-node nccl-tests run through the rail "
              "reaches 50% of a rail, so only a multi-node run sees it: NCCL-03 and NCCL-04 name the node and "
              "the HCA (in racks of 3 nodes or more)", suite="fabric"),
    FaultSpec("slow-nvlink", "NVL-01", "the GPU's NVLink delivers 60% of its bandwidth with all links up",
              "gpu", DEFAULT_GPU,
              "NVML and nvidia-smi still show 18/18 links at 26.562 GB/s; nvbandwidth pairs with the GPU at 60% "
              "(NVL-01), single-node all_reduce at 60% of the NVLS rate (NCCL-01)", suite="fabric"),
    FaultSpec("p2p-disabled", "NVL-03", "CUDA refuses peer access between the GPU and every other GPU",
              "gpu", DEFAULT_GPU,
              "NVML and nvidia-smi unchanged (18/18 links up); p2pBandwidthLatencyTest prints 'Device=N CANNOT Access "
              "Peer Device=M' and 0 in the connectivity matrix for every pair with the GPU, whose P2P=Enabled copies "
              "fall back through host memory (38 GB/s, 14.5 us: NVL-03); nvbandwidth prints N/A for those pairs "
              "(NVL-01 incomplete) and single-node nccl-tests run through host memory (24 GB/s: NCCL-01)",
              suite="fabric"),
    FaultSpec("nvlink-flaky-under-load", "NVL-04", "one NVLink link of the GPU retrains under traffic, not at rest",
              "gpu", DEFAULT_GPU,
              "at rest NVML shows 18/18 links and clean counters (GPU-10/11 pass); each nccl-tests, nvbandwidth or "
              "p2pBandwidthLatencyTest run on the node adds DL recovery 1 and DL replay 150 on link 7 "
              "(nvmlDeviceGetNvLinkErrorCounter, the node's NVML state file); the link comes back up and bandwidth "
              "is unchanged: NVL-04 compares the counters before and after the single-node traffic",
              suite="fabric"),
    FaultSpec("nccl-wrong", "NCCL-05", "collectives through the node return corrupted data", "node", None,
              "every nccl-tests run with the node prints non-zero #wrong from 1 KiB up and 'Out of bounds "
              "values : N FAILED'; bandwidth unchanged", suite="fabric"),
    FaultSpec("nccl-hang", "NCCL-01", "nccl-tests runs with the node hang", "node", None,
              "every *_perf run with the node prints its header and first rows, then stops until killed: the "
              "launch timeout makes NCCL-01 incomplete with the last output lines", suite="fabric",
              outcome="incomplete"),
    # Workload faults (suite "megatron"): only the Megatron and placement-probe stand-ins change (burnin.sim.megatron).
    FaultSpec("train-loss-nan", "MEG-04", "training with the node diverges to NaN", "node", None,
              "the pretrain_gpt.py stand-in logs 'lm loss: NAN' and 'number of nan iterations: 1' from iteration 17 "
              "of every run with the node; throughput unchanged", suite="megatron"),
    FaultSpec("train-hang", "MEG-04", "training with the node hangs", "node", None,
              "every Megatron run with the node logs 3 iterations, then nothing until killed: the launch timeout "
              "makes its MEG checks incomplete with each rank's last lines", suite="megatron", outcome="incomplete"),
    FaultSpec("train-slow", "MEG-04", "the node trains 20% slower than its peers", "node", None,
              "the stand-in's iterations take 1/0.8 of a healthy node's time (344 vs 430 TFLOP/s/GPU): a straggler "
              "against the run's median, MFU still above its floor", suite="megatron"),
    FaultSpec("nccl-timeout", "MEG-04", "a collective of a run with the node times out", "node", None,
              "after iteration 12 rank 3 of the node logs torch's 'Watchdog caught collective operation timeout: "
              "WorkNCCL(...)' lines and every rank exits 1 (MEG-01 and MEG-02 fail too)", suite="megatron"),
    FaultSpec("cpu-bind-none", "PIN-01", "the launcher leaves the node's ranks unbound", "node", None,
              "the placement-probe stand-in reports every CPU and memory node for every rank, its pages on NUMA 0 "
              "(PIN-02 fails too for the ranks of GPUs on NUMA 1)", suite="megatron"),
    FaultSpec("cpu-bind-wrong-numa", "PIN-01", "the rank of the GPU is bound to the other NUMA node", "gpu",
              DEFAULT_GPU, "the placement-probe stand-in reports the other NUMA node's CPUs, memory node and pages "
              "for the rank that drives the GPU (PIN-02 fails too)", suite="megatron"),
    # Faults that unfold over a soak's simulated hours (burnin soak only; burnin.sim.soak applies them).
    FaultSpec("xid-at:MIN:N", "GPU-04", "Xid N logged against the GPU at minute MIN of a soak", "gpu", DEFAULT_GPU,
              "at soak minute MIN an 'NVRM: Xid (PCI:0000:BB:00): N, ...' line in dmesg, stamped with the node's "
              "uptime at that minute", suite="soak"),
    FaultSpec("ecc-growth", "GPU-02", "correctable DRAM ECC errors keep growing under load", "gpu", DEFAULT_GPU,
              "NVML volatile and aggregate corrected DRAM counters grow by 500 per simulated hour", suite="soak"),
    FaultSpec("thermal-creep", "GPU-06", "the GPU runs hotter hour after hour (cooling degrading)", "gpu",
              DEFAULT_GPU, "GPU and memory temperature rise 2.5 C per simulated hour under load, by at most 15 C",
              suite="soak"),
    FaultSpec("throughput-drift", "BRN-02", "the GPU's compute throughput falls over the soak", "gpu", DEFAULT_GPU,
              "gpu_burn's Gflop/s for the GPU fall 3% per simulated hour, by at most 20%; NVML unchanged",
              suite="soak"),
    FaultSpec("nvlink-errors-growth", "GPU-11", "NVLink replay errors keep growing under load", "gpu", DEFAULT_GPU,
              "link 7 DL replay counter grows by 300 per simulated hour (nvmlDeviceGetNvLinkErrorCounter)",
              suite="soak"),
    FaultSpec("mce", "BRN-04", "a machine check with an uncorrectable memory error a third into the soak", "node",
              None, "kernel log 'mce: [Hardware Error]: Machine check events logged' and 'EDAC MC0: 1 UE memory read "
              "error ...' lines; /sys/devices/system/edac/mc/mc0/ue_count 1", suite="soak"),
)

# The storage fabric's faults (check-catalog 8; burnin.sim.storage renders them). Node faults: they need the
# topology's storage section and change its first BlueField netdev or first target.
_STORAGE_SPECS: tuple[FaultSpec, ...] = (
    FaultSpec("storage-route-via-ib", "STO-01", "a storage target is routed over the compute fabric (IPoIB)", "node",
              None, "a host route sends the first storage target through the IPoIB netdev of compute HCA mlx5_2 "
              "(ibp79s0, gateway 192.168.2.254): ip route get shows dev ibp79s0; sysfs, MTU and NCCL config unchanged"),
    FaultSpec("nccl-hca-leak", "STO-02", "NCCL is configured to use a storage device", "node", None,
              "/etc/nccl.conf NCCL_IB_HCA lists the compute HCAs plus the first BlueField RDMA device (mlx5_8:1)"),
    FaultSpec("storage-mtu-1500", "STO-04", "a BlueField netdev runs MTU 1500 instead of 9000", "node", None,
              "/sys/class/net/<first BlueField netdev>/mtu 1500; ip link agrees"),
    FaultSpec("bf-nic-mode", "STO-06", "a BlueField runs in NIC mode where DPU mode is designed", "node", None,
              "mlxconfig -d <first BlueField> q: INTERNAL_CPU_OFFLOAD_ENGINE DISABLED(1) (DPU mode: ENABLED(0))",
              suite="node"),
    FaultSpec("qos-pfc-off", "STO-05", "PFC is off on a BlueField netdev (storage RoCE no longer lossless)", "node",
              None, "mlnx_qos -i <first BlueField netdev>: PFC enabled 0 on every priority (designed: 3); trust and "
              "ECN unchanged"),
    FaultSpec("storage-traffic-on-ib", "STO-03", "storage I/O moves over a compute HCA instead of the BlueField "
              "netdevs", "node", None, "the write tool's bytes land on compute HCA mlx5_2's port_xmit_data/"
              "port_rcv_data (4-byte units) instead of the BlueField netdevs' tx_bytes/rx_bytes", suite="storage"),
    FaultSpec("arp-leak", "STO-07", "ARP answers and announces across fabrics (arp_ignore/arp_announce 0)", "node",
              None, "net.ipv4.conf.{all,default,<each netdev>}.arp_ignore 0 and arp_announce 0 (designed: 1 and 2)"),
)

# Host configuration and population (TOP-06, 07, 09, 10; burnin.sim.host renders and applies them).
_HOST_SPECS: tuple[FaultSpec, ...] = (
    _node("governor-powersave", "TOP-06", "the CPUs run the cpufreq powersave governor (no tuned profile applied)",
          "every CPU's cpufreq/scaling_governor 'powersave' (intel_pstate's default) instead of 'performance'"),
    _node("hugepages-reserved", "TOP-07", "32 GiB of static hugepages left reserved (a stale boot setting)",
          "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages 16384; /proc/meminfo HugePages_Total 16384, "
          "Hugetlb 33554432 kB; node0/meminfo HugePages_Total 16384; THP unchanged"),
    _node("dimm-missing", "TOP-09", "a 64 GB DIMM of the last NUMA node is missing (failed at POST)",
          "the last node's node<N>/meminfo MemTotal and /proc/meminfo MemTotal 67108864 kB lower "
          "(1951 instead of 2015 GiB); CPUs unchanged"),
    _node("nvme-missing", "TOP-10", "an NVMe drive is absent from the PCI bus",
          "the NVMe function with the highest address (0000:ea:00.0 on hgx-h100-8gpu) and its sysfs and lspci "
          "entries disappear; its root port stays"),
    _node("kernel-drift", "INV-10", "the node booted another kernel than its fleet's (a stale boot entry)",
          "/proc/sys/kernel/osrelease, /proc/version, the kernel log's 'Linux version' line and BOOT_IMAGE on "
          "/proc/cmdline say 5.15.0-91-generic (5.15.0-112-generic when the node already runs that); OFED, "
          "NCCL, DCGM and the NVIDIA driver unchanged"),
)

# NVIDIA DCGM (GPU-12, GPU-13; burnin.sim.dcgm renders them): what only DCGM's own tools report.
_DCGM_SPECS: tuple[FaultSpec, ...] = (
    _gpu("dcgm-diag-fail", "GPU-13", "the GPU's InfoROM is corrupt: a DCGM deployment test fails on it",
         "dcgmi diag -r 1: 'Inforom' Fail with Error 'A corrupt InfoROM has been detected in GPU N.' (N: DCGM's id, "
         "the GPU's NVML position); NVML, nvidia-smi and dcgmi health unchanged"),
    _gpu("dcgm-health-warn", "GPU-12", "DCGM's passive PCIe watch saw more than 8 replays a minute on the GPU",
         "dcgmi health -c: Overall Health Warning, GPU N PCIe system Warning 'Detected more than 8 PCIe replays per "
         "minute for GPU N : 13'; NVML PCIe replay counter 13 (no node check reads it)"),
    _gpu("dcgm-health-fail", "GPU-12", "DCGM's memory watch holds an uncontained error (Xid 95) on the GPU",
         "dcgmi health -c: Overall Health Failure, GPU N Memory system Failure 'GPU had an uncontained error "
         "(XID 95)'; the Xid line itself has left the kernel ring buffer (dmesg unchanged), NVML unchanged"),
)

FAULTS: dict[str, FaultSpec] = {spec.name: spec for spec in (*_SPECS, *_STORAGE_SPECS, *_HOST_SPECS, *_DCGM_SPECS)}

Mutator = Callable[["NodeState", "Fault"], None]
"""Changes a node's state as the fault would (burnin.sim.inject applies it)."""
MUTATORS: dict[str, Mutator] = {}
"""Fault name -> its mutator (``xid`` and ``xid-at`` for the Xid faults)."""
M = TypeVar("M", bound=Mutator)


def simulates(spec: FaultSpec) -> Callable[[M], M]:
    """Declare a fault where its mutator is written: ``spec`` joins :data:`FAULTS`, the mutator :data:`MUTATORS`."""

    def register(mutator: M) -> M:
        if spec.name in FAULTS or spec.name in MUTATORS:
            raise RuntimeError(f"fault {spec.name} declared twice")
        FAULTS[spec.name] = spec
        MUTATORS[spec.name] = mutator
        return mutator

    return register

TRANSIENT = "transient:"
"""The flavour prefix of a fault a GPU reset or a reboot clears (``transient:xid:79@gpu3``)."""
_XID = re.compile(r"^xid:(\d+)$")
_XID_AT = re.compile(r"^xid-at:(\d+):(\d+)$")
_GPU_TARGET = re.compile(r"^gpu(\d+)$")
_SDC_GPU = re.compile(r"^sdc-(gpu\d+)$")
"""``sdc-gpuN``: the ``sdc`` fault with its GPU in the name (``sdc@gpuN``)."""
_HCA_TARGET = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Fault:
    """One fault to inject: a registry name, its target and (for ``xid``) the Xid number."""

    name: str
    target: str | None = None
    arg: int | None = None
    defaulted: bool = field(default=False, compare=False, repr=False)
    """The target was filled in from the registry's default, not written: a topology may move it."""
    minute: int | None = None
    """``xid-at:MIN:N``: the soak minute the Xid appears at."""
    transient: bool = False
    """Cleared by a simulated reset of its GPU or a simulated reboot (persistent: survives both)."""

    @property
    def spec(self) -> FaultSpec:
        return FAULTS[{"xid": "xid:N", "xid-at": "xid-at:MIN:N"}.get(self.name, self.name)]

    @property
    def check_id(self) -> str:
        return self.spec.check_id

    @property
    def fatal(self) -> bool:
        """Whether the catching check must FAIL the node (non-fatal Xids only warn)."""
        if self.name in ("xid", "xid-at"):
            return self.arg is not None and xid_is_fatal(self.arg)
        return self.spec.fatal

    @property
    def label(self) -> str:
        """The fault's name as written in a spec, e.g. ``xid:79`` (``transient:xid:79`` for a transient one)."""
        flavour = TRANSIENT if self.transient else ""
        if self.name == "xid-at":
            return f"{flavour}xid-at:{self.minute}:{self.arg}"
        return flavour + (f"xid:{self.arg}" if self.name == "xid" else self.name)

    def __str__(self) -> str:
        return f"{self.label}@{self.target}" if self.target else self.label


def _valid_names() -> str:
    return ", ".join(FAULTS)


def _default_target(spec: FaultSpec, topology: Topology | None) -> str | None:
    if spec.target_kind == "node":
        return None
    if topology is None:
        return spec.default_target
    if spec.target_kind == "gpu":
        indexes = [d.index for d in topology.gpus.devices]
        default_index = int(DEFAULT_GPU[3:])
        return f"gpu{default_index if default_index in indexes else max(indexes)}"
    names = [h.name for h in topology.hcas]
    if not names:
        return None
    if DEFAULT_HCA in names:
        return DEFAULT_HCA
    compute = [h.name for h in topology.compute_hcas]
    return (compute or names)[-1]


def _check_target(spec: FaultSpec, label: str, target: str, topology: Topology | None) -> None:
    if spec.target_kind == "node":
        raise UsageError(f"fault {label!r} applies to the whole node and takes no @target (got @{target})")
    if spec.target_kind == "gpu":
        match = _GPU_TARGET.match(target)
        valid = [f"gpu{d.index}" for d in topology.gpus.devices] if topology else []
        if match is None or (topology is not None and target not in valid):
            where = ", ".join(valid) if valid else "gpuN"
            raise UsageError(f"fault {label!r} targets a GPU: bad target {target!r}; valid: {where}")
        if label == "nic-affinity" and topology is not None:
            device = next(d for d in topology.gpus.devices if f"gpu{d.index}" == target)
            if device.hca is None:
                paired = ", ".join(f"gpu{d.index}" for d in topology.gpus.devices if d.hca)
                raise UsageError(f"fault 'nic-affinity' needs a GPU with a paired HCA; "
                                 f"{target} has none (valid: {paired or 'none'})")
        return
    valid = [h.name for h in topology.hcas] if topology else []
    if _HCA_TARGET.match(target) is None or _GPU_TARGET.match(target) or (
        topology is not None and target not in valid
    ):
        where = ", ".join(valid) if valid else "an HCA name such as mlx5_0"
        raise UsageError(f"fault {label!r} targets an HCA: bad target {target!r}; valid: {where}")


def parse_fault_spec(text: str, topology: Topology | None = None) -> Fault:
    """Parse ``NAME[@TARGET]`` into a Fault with its default target filled in.

    With a topology, the target is checked against its GPUs and HCAs.
    Raises UsageError naming what is valid. ``transient:`` before the name makes a GPU fault transient.
    """
    raw = text.strip()
    if raw.startswith(TRANSIENT):
        fault = parse_fault_spec(raw[len(TRANSIENT):], topology)
        if fault.spec.target_kind != "gpu" or fault.spec.suite != "node" or fault.transient:
            raise UsageError(f"fault {raw!r}: only a node-suite GPU fault can be transient (a GPU reset or a "
                             f"reboot clears it), not {fault.label}")
        return replace(fault, transient=True)
    label, sep, target = raw.partition("@")
    label = label.strip()
    target = target.strip()
    if sep and not target:
        raise UsageError(f"fault {raw!r}: empty target after '@'")
    sdc_gpu = _SDC_GPU.match(label)
    if sdc_gpu is not None:
        if sep:
            raise UsageError(f"fault {raw!r}: sdc-gpuN names its GPU already (or write sdc@gpuN)")
        label, target = "sdc", sdc_gpu.group(1)
    arg: int | None = None
    xid = _XID.match(label)
    xid_at = _XID_AT.match(label)
    minute: int | None = None
    if xid is not None:
        name, arg = "xid", int(xid.group(1))
        spec = FAULTS["xid:N"]
    elif xid_at is not None:
        name, minute, arg = "xid-at", int(xid_at.group(1)), int(xid_at.group(2))
        spec = FAULTS["xid-at:MIN:N"]
    elif label.startswith("xid-at"):
        raise UsageError(f"fault {raw!r}: write xid-at:MIN:N (soak minute, Xid number), e.g. xid-at:600:79")
    elif label in ("xid", "xid:N") or label.startswith("xid:"):
        raise UsageError(f"fault {raw!r}: write xid:N with a decimal Xid number, e.g. xid:79")
    elif label in FAULTS:
        name, spec = label, FAULTS[label]
    else:
        raise UsageError(f"unknown fault {label!r}; valid faults: {_valid_names()}")
    if not target:
        default = _default_target(spec, topology)
        if default is None:
            if spec.target_kind != "node":
                raise UsageError(f"fault {label!r} needs a {spec.target_kind.upper()} target, "
                                 "but the topology has none")
            return Fault(name, None, arg, minute=minute)
        _check_target(spec, label, default, topology)
        return Fault(name, default, arg, defaulted=True, minute=minute)
    _check_target(spec, label, target, topology)
    return Fault(name, target, arg, minute=minute)


def validate_fault(fault: Fault, topology: Topology) -> Fault:
    """Check a Fault (maybe parsed without a topology) against ``topology``.

    A written target must exist there; a defaulted or missing one becomes the
    topology's default (``gpu3`` falls back to the last GPU on smaller nodes).
    """
    explicit = fault.target is not None and not fault.defaulted
    return parse_fault_spec(str(fault) if explicit else fault.label, topology)
