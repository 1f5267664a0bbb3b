"""Typed, frozen model of a node type (a topology) and its references.

A *reference* is an expectation with its provenance: a value, optional absolute
bounds, a unit, and where the figure comes from. Checks compare what they
measured against references; they never hard-code numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

# Plain frozen dataclasses, so the health probe can use them without importing
# pydantic; burnin.topology.load validates files into them with pydantic.
_FORBID: Any = {"extra": "forbid"}
_BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class AtLeast:
    """Field constraint ``>= bound`` that pydantic applies when it validates a file.

    Written as a plain class so that importing this module does not import
    pydantic (the health probe builds these dataclasses from a cache).
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.int_schema(ge=self.bound)


NonNegative = Annotated[int, AtLeast(0)]
Positive = Annotated[int, AtLeast(1)]


def _check_bus_id(value: str) -> None:
    if not _BUS_ID.match(value):
        raise ValueError(f"bus id {value!r} must look like 0000:1b:00.0 (lower-case hex)")


@dataclass(frozen=True, slots=True)
class Reference:
    """An expected value with bounds (``lower <= measured <= upper``), unit and source."""

    value: float
    source: str
    lower: float | None = None
    upper: float | None = None
    unit: str = ""

    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower bound {self.lower} is above upper bound {self.upper}")

    def admits(self, measured: float) -> bool:
        """True when ``measured`` lies within the bounds (inclusive)."""
        if self.lower is not None and measured < self.lower:
            return False
        return not (self.upper is not None and measured > self.upper)

    def describe(self) -> str:
        """Human form of the acceptable range, e.g. ``>= 400 Gb/s``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.lower is not None and self.upper is not None:
            if self.lower == self.upper:
                return f"{_num(self.lower)}{unit}"
            return f"{_num(self.lower)}..{_num(self.upper)}{unit}"
        if self.lower is not None:
            return f">= {_num(self.lower)}{unit}"
        if self.upper is not None:
            return f"<= {_num(self.upper)}{unit}"
        return f"{_num(self.value)}{unit}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    __pydantic_config__ = _FORBID
    index: NonNegative
    bus_id: str
    numa_node: NonNegative
    hca: str | None = None
    """Compute HCA on the same PCIe switch (PIX), if the design pairs one."""

    def __post_init__(self) -> None:
        _check_bus_id(self.bus_id)


@dataclass(frozen=True, slots=True)
class NvlinkSpec:
    __pydantic_config__ = _FORBID
    links_per_gpu: NonNegative
    pair_link: str
    """What ``nvidia-smi topo -m`` shows between two GPUs, e.g. ``NV18``."""


_FIRMWARE_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,30}$")


@dataclass(frozen=True, slots=True)
class GpuFirmware:
    """The qualified GPU firmware (INV-02); a version left out is judged for consistency across GPUs only."""

    __pydantic_config__ = _FORBID
    source: str
    """Where the versions come from (the golden node, the vendor's release notes)."""
    vbios: str | None = None
    """As NVML and ``nvidia-smi -q`` print it, e.g. ``96.00.74.00.01``."""
    inforom_image: str | None = None
    """InfoROM image version, e.g. ``G520.0200.00.05``."""

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("firmware needs a source: where the expected versions come from")
        if self.vbios is None and self.inforom_image is None:
            raise ValueError("firmware names no version: give vbios and/or inforom_image, or leave firmware out")
        for name in ("vbios", "inforom_image"):
            value = getattr(self, name)
            if value is not None and not _FIRMWARE_VERSION.match(value):
                raise ValueError(f"{name} {value!r} must be 1-31 letters, digits, '.', '_' or '-'")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    __pydantic_config__ = _FORBID
    count: Positive
    model: str
    devices: tuple[GpuDevice, ...]
    nvlink: NvlinkSpec | None = None
    firmware: GpuFirmware | None = None
    """Expected VBIOS / InfoROM versions (INV-02); None: every GPU must only agree with the others."""

    def __post_init__(self) -> None:
        if len(self.devices) != self.count:
            raise ValueError(f"count is {self.count} but {len(self.devices)} devices are listed")
        indexes = sorted(d.index for d in self.devices)
        if indexes != list(range(self.count)):
            raise ValueError(f"device indexes must be 0..{self.count - 1}, got {indexes}")


@dataclass(frozen=True, slots=True)
class Hca:
    __pydantic_config__ = _FORBID
    name: str
    bus_id: str
    numa_node: NonNegative
    link_layer: Literal["InfiniBand", "Ethernet"]
    role: Literal["compute", "storage"]
    netdev: str | None = None

    def __post_init__(self) -> None:
        _check_bus_id(self.bus_id)
        if not re.match(r"^[A-Za-z0-9_.-]+$", self.name):
            raise ValueError(f"HCA name {self.name!r} has characters other than letters, digits, '_', '.', '-'")


@dataclass(frozen=True, slots=True)
class NumaSpec:
    __pydantic_config__ = _FORBID
    nodes: Positive
    cpulists: dict[int, str]


@dataclass(frozen=True, slots=True)
class HostSpec:
    __pydantic_config__ = _FORBID
    driver_version: str
    fabric_manager: bool = True
    peermem: bool = True
    persistence: bool = True
    mig: bool = False
    ecc: bool = True
    acs_disabled: bool = True
    iommu: Literal["off", "passthrough", "any"] = "passthrough"
    cpu_governor: Literal["performance", "powersave", "schedutil", "ondemand", "conservative", "userspace"] | None = (
        "performance")
    """cpufreq scaling governor of every online CPU (TOP-06); None: no cpufreq driver, the BIOS owns P-states."""
    transparent_hugepage: tuple[Literal["always", "madvise", "never"], ...] = ("always", "madvise")
    """Transparent hugepage modes the site accepts (TOP-07, ``/sys/kernel/mm/transparent_hugepage/enabled``)."""

    def __post_init__(self) -> None:
        # The health probe builds this from cached JSON, where a tuple comes back as a list.
        object.__setattr__(self, "transparent_hugepage", tuple(self.transparent_hugepage))
        if not self.transparent_hugepage:
            raise ValueError("transparent_hugepage names no mode: list the accepted ones (always, madvise, never)")


class Checked:
    """Field check that pydantic runs when it validates a file, so its message names the field's key.

    ``check`` raises ValueError; a plain class for the same reason as :class:`AtLeast`.
    """

    def __init__(self, check: Callable[[Any], None]) -> None:
        self.check = check

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def validate(value: Any) -> Any:
            self.check(value)
            return value

        return core_schema.no_info_after_validator_function(validate, handler(source))


_FIRMWARE = re.compile(r"^\d+\.\d+\.\d+$")
_PSID = re.compile(r"^[A-Za-z0-9_]{1,16}$")
_PKEY = re.compile(r"^0x[0-9a-f]{4}$")


def check_firmware(firmware: str | None) -> None:
    if firmware is not None and not _FIRMWARE.match(firmware):
        raise ValueError(f"firmware {firmware!r} must look like 28.41.1000 (as sysfs fw_ver shows it)")


def check_psid(psid: str | None) -> None:
    if psid is not None and not _PSID.match(psid):
        raise ValueError(f"PSID {psid!r} must be 1-16 letters, digits or '_' (e.g. MT_0000000838)")


def check_pkeys(pkeys: tuple[str, ...] | None) -> None:
    """Partition keys as sysfs prints them (``0xffff``): not empty, no invalid key, one membership per partition."""
    if pkeys is None:
        return
    if not pkeys:
        raise ValueError("pkeys is empty: a port without a partition key talks to nobody")
    partitions: set[int] = set()
    for pkey in pkeys:
        if not _PKEY.match(pkey):
            raise ValueError(f"partition key {pkey!r} must look like 0xffff (0x and 4 lower-case hex digits)")
        base = int(pkey, 16) & 0x7FFF
        if base == 0:
            raise ValueError(f"partition key {pkey} is the invalid partition 0")
        if base in partitions:
            raise ValueError(f"partition 0x{base:04x} is listed twice (keys differ only in the membership bit)")
        partitions.add(base)


def _check_source(source: str) -> None:
    if not source.strip():
        raise ValueError("needs a source: where the expected values come from")


@dataclass(frozen=True, slots=True)
class HcaFirmware:
    """The qualified firmware of one role's HCAs: the compute HCAs' (``hca_firmware``, INV-09) or the storage
    HCAs' (``storage_hca_firmware``, INV-11); a value left out is judged for consistency only."""

    __pydantic_config__ = _FORBID
    source: Annotated[str, Checked(_check_source)]
    """Where the values come from (the golden node, the vendor's release notes)."""
    version: Annotated[str | None, Checked(check_firmware)] = None
    """As sysfs ``fw_ver`` (and ``ibstat`` ``Firmware version``) show it, e.g. ``28.41.1000``."""
    psid: Annotated[str | None, Checked(check_psid)] = None
    """The board's PSID, sysfs ``board_id``, e.g. ``MT_0000000838``."""

    def __post_init__(self) -> None:
        _check_source(self.source)
        check_firmware(self.version)
        check_psid(self.psid)
        if self.version is None and self.psid is None:
            raise ValueError("names nothing: give version and/or psid, or leave the section out")


@dataclass(frozen=True, slots=True)
class IbPartitions:
    """The partition keys every compute port's pkey table holds (IB-09)."""

    __pydantic_config__ = _FORBID
    pkeys: Annotated[tuple[str, ...], Checked(check_pkeys)]
    """As sysfs ``ports/1/pkeys/N`` shows them: ``0xffff`` is the default partition, full member."""
    source: Annotated[str, Checked(_check_source)]

    def __post_init__(self) -> None:
        check_pkeys(self.pkeys)
        _check_source(self.source)


@dataclass(frozen=True, slots=True)
class DcgmSpec:
    """Whether the node type runs NVIDIA DCGM (``nv-hostengine`` and ``dcgmi``): GPU-12 and GPU-13 read it.

    Left out, DCGM is expected: a node where ``dcgmi`` is missing or the host engine does not answer is
    then not measured (incomplete). A site without DCGM writes ``dcgm: {required: false}``, and the DCGM
    checks are not applicable to its nodes.
    """

    __pydantic_config__ = _FORBID
    required: bool = True
    """False: this node type runs no DCGM (GPU-12 and GPU-13 do not apply)."""
    source: str = ""
    """Why: the image that ships DCGM, or the site's decision to run without it."""


@dataclass(frozen=True, slots=True)
class SdcSpec:
    """GPU-14's SDC workload on this node type: the matrices' size (seconds on an H100; larger finds more)."""

    __pydantic_config__ = _FORBID
    size: Annotated[int, AtLeast(16)] = 1024
    """Rows and columns of the workload's matrices (the collector's ``sdc-size=N``)."""
    source: str = ""
    """Why this size."""


_KERNEL_RELEASE = re.compile(r"^[0-9][0-9A-Za-z._+~-]{0,63}$")
_OFED_RELEASE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}(?:-[A-Za-z][A-Za-z0-9_]{0,31}){0,3}"
                           r"-[0-9][0-9A-Za-z._-]{0,31}$")
_NCCL_VERSION = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$")
_DOTTED_VERSION = re.compile(r"^[0-9]{1,4}(?:\.[0-9]{1,6}){1,3}$")


def check_kernel_release(release: str | None) -> None:
    if release is not None and not _KERNEL_RELEASE.match(release):
        raise ValueError(f"kernel {release!r} must look like 5.15.0-105-generic (as uname -r prints it)")


def check_ofed_release(release: str | None) -> None:
    if release is not None and not _OFED_RELEASE.match(release):
        raise ValueError(f"ofed {release!r} must look like MLNX_OFED_LINUX-23.10-1.1.9.0 (as ofed_info -s prints "
                         "it, without the colon)")


def check_nccl_version(version: str | None) -> None:
    if version is not None and not _NCCL_VERSION.match(version):
        raise ValueError(f"nccl {version!r} must look like 2.18.5 (the version in libnccl.so.2.18.5)")


def check_dcgm_version(version: str | None) -> None:
    if version is not None and not _DOTTED_VERSION.match(version):
        raise ValueError(f"dcgm {version!r} must look like 3.3.1 (dcgmi --version: 'Version : 3.3.1')")


@dataclass(frozen=True, slots=True)
class SoftwareManifest:
    """The golden host software stack (INV-10); a component left out is not judged.

    Quote the versions in YAML (``nccl: "2.18.5"``): an unquoted ``3.3`` is a number, not a version.
    """

    __pydantic_config__ = _FORBID
    source: Annotated[str, Checked(_check_source)]
    """Where the versions come from (the golden node, the site's release manifest)."""
    kernel: Annotated[str | None, Checked(check_kernel_release)] = None
    """The running kernel, ``/proc/sys/kernel/osrelease`` (``uname -r``), e.g. ``5.15.0-105-generic``."""
    ofed: Annotated[str | None, Checked(check_ofed_release)] = None
    """The OFED release as ``ofed_info -s`` prints it, without the colon: ``MLNX_OFED_LINUX-23.10-1.1.9.0``."""
    nccl: Annotated[str | None, Checked(check_nccl_version)] = None
    """The host's NCCL, from the name of ``libnccl.so.X.Y.Z`` in the standard library folders, e.g. ``2.18.5``."""
    dcgm: Annotated[str | None, Checked(check_dcgm_version)] = None
    """DCGM, as ``dcgmi --version`` prints it (and its host engine, when it answers), e.g. ``3.3.1``."""

    def __post_init__(self) -> None:
        _check_source(self.source)
        check_kernel_release(self.kernel)
        check_ofed_release(self.ofed)
        check_nccl_version(self.nccl)
        check_dcgm_version(self.dcgm)
        if all(getattr(self, name) is None for name in SOFTWARE_COMPONENTS):
            raise ValueError("software names nothing: give kernel, ofed, nccl and/or dcgm, or leave software out")


SOFTWARE_COMPONENTS = ("kernel", "ofed", "nccl", "dcgm")
"""The components of the software manifest, in the order reasons name them."""


_NETDEV = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
_PCI_DEVICE_ID = re.compile(r"^0x[0-9a-f]{4}$")


def _check_name(what: str, value: str, pattern: re.Pattern[str] = _NETDEV) -> None:
    if not pattern.match(value):
        raise ValueError(f"{what} {value!r} must be 1-15 letters, digits, '_', '.', ':', '@' or '-'")


@dataclass(frozen=True, slots=True)
class StorageNetdev:
    """One BlueField netdev of the storage fabric (check-catalog 8: STO-01, 04, 05, 06)."""

    __pydantic_config__ = _FORBID
    name: str
    """The netdev, e.g. ``enp41s0f0np0``."""
    bus_id: str
    """Its PCI function, e.g. ``0000:29:00.0``: routes to storage must leave through this function."""
    mode: Literal["dpu", "nic"]
    """BlueField operating mode by design: DPU (Arm cores own the NIC) or NIC (STO-06)."""
    mtu: Annotated[int, AtLeast(68)] = 9000
    hca: str | None = None
    """Its RDMA device (``mlx5_8``), when the topology lists it under ``hcas`` too."""

    def __post_init__(self) -> None:
        _check_name("netdev", self.name)
        _check_bus_id(self.bus_id)
        if self.mtu > 65535:
            raise ValueError(f"mtu {self.mtu} is above 65535")


@dataclass(frozen=True, slots=True)
class StorageTarget:
    """A storage destination: one address or a subnet (with the address routed and pinged for it)."""

    __pydantic_config__ = _FORBID
    name: str
    address: str | None = None
    subnet: str | None = None
    probe: str | None = None
    """For a subnet: the address inside it whose route stands for the subnet (default: its first host)."""
    mount: str | None = None
    """Where the target is mounted on the node (STO-03 writes there)."""

    def __post_init__(self) -> None:
        import ipaddress

        if (self.address is None) == (self.subnet is None):
            raise ValueError(f"storage target {self.name!r} needs exactly one of address or subnet")
        try:
            if self.address is not None:
                ipaddress.ip_address(self.address)
                if self.probe is not None:
                    raise ValueError("probe is only for a subnet target (the address is routed itself)")
            else:
                network = ipaddress.ip_network(str(self.subnet), strict=True)
                probe = ipaddress.ip_address(self.probe) if self.probe is not None else None
                if probe is not None and probe not in network:
                    raise ValueError(f"probe {self.probe} is not inside subnet {self.subnet}")
        except ValueError as exc:
            raise ValueError(f"storage target {self.name!r}: {exc}") from None
        if self.mount is not None and not self.mount.startswith("/"):
            raise ValueError(f"storage target {self.name!r}: mount {self.mount!r} must be an absolute path")

    @property
    def destination(self) -> str:
        """The address whose route is checked: the address, the probe, or the subnet's first host."""
        if self.address is not None:
            return self.address
        if self.probe is not None:
            return self.probe
        import ipaddress

        network = ipaddress.ip_network(str(self.subnet))
        return str(next(iter(network.hosts()), network.network_address))

    @property
    def label(self) -> str:
        """How reasons name the target: its address, or its subnet with the address routed for it."""
        return self.address if self.address is not None else f"{self.subnet} ({self.destination})"


@dataclass(frozen=True, slots=True)
class StorageRouting:
    """Where storage routes live: a VRF device, or a policy-routing table chosen by ``ip rule``."""

    __pydantic_config__ = _FORBID
    vrf: str | None = None
    table: Annotated[int, AtLeast(1)] | None = None

    def __post_init__(self) -> None:
        if (self.vrf is None) == (self.table is None):
            raise ValueError("routing needs exactly one of vrf (a VRF device) or table (policy routing)")
        if self.vrf is not None:
            _check_name("vrf", self.vrf)
        if self.table is not None and self.table in (253, 254, 255):
            raise ValueError(f"table {self.table} is the kernel's default/main/local table, not a storage table")


@dataclass(frozen=True, slots=True)
class StorageQos:
    """Expected RoCE QoS of the storage netdevs (STO-05): trust mode, lossless priorities, ECN."""

    __pydantic_config__ = _FORBID
    trust: Literal["pcp", "dscp"] = "dscp"
    pfc_priorities: tuple[Annotated[int, AtLeast(0)], ...] = (3,)
    """Priorities with PFC on; every other priority must have it off."""
    ecn_priorities: tuple[Annotated[int, AtLeast(0)], ...] = (3,)
    """Priorities whose ECN reaction and notification points (roce_rp, roce_np) must be on."""

    def __post_init__(self) -> None:
        for prio in (*self.pfc_priorities, *self.ecn_priorities):
            if prio > 7:
                raise ValueError(f"priority {prio} is not 0..7")


@dataclass(frozen=True, slots=True)
class StorageSysctl:
    """Expected effective values (max of ``all`` and the device's) on every fabric netdev (STO-07)."""

    __pydantic_config__ = _FORBID
    rp_filter: Annotated[int, AtLeast(0)] | None = 2
    arp_ignore: Annotated[int, AtLeast(0)] | None = 1
    arp_announce: Annotated[int, AtLeast(0)] | None = 2

    def __post_init__(self) -> None:
        for name, top in (("rp_filter", 2), ("arp_ignore", 8), ("arp_announce", 2)):
            value = getattr(self, name)
            if value is not None and value > top:
                raise ValueError(f"{name} {value} is not a value the kernel takes (0..{top})")

    def expected(self) -> dict[str, int]:
        values = {"rp_filter": self.rp_filter, "arp_ignore": self.arp_ignore, "arp_announce": self.arp_announce}
        return {name: value for name, value in values.items() if value is not None}


@dataclass(frozen=True, slots=True)
class StorageFabric:
    """The node's storage fabric: BlueField netdevs, storage targets, routing, QoS and NCCL's HCAs (STO)."""

    __pydantic_config__ = _FORBID
    netdevs: tuple[StorageNetdev, ...]
    targets: tuple[StorageTarget, ...]
    bluefield_device_ids: tuple[str, ...] = ("0xa2dc",)
    """PCI device ids (vendor 0x15b3) of BlueField functions; 0xa2dc is BlueField-3."""
    routing: StorageRouting | None = None
    qos: StorageQos | None = None
    """None: storage does not run RDMA over Ethernet, so STO-05 does not apply."""
    nccl_ib_hca: tuple[str, ...] = ()
    """The exact HCAs NCCL must use (empty: the topology's compute HCAs)."""
    sysctl: StorageSysctl = field(default_factory=StorageSysctl)
    source: str = ""

    def __post_init__(self) -> None:
        if not self.netdevs:
            raise ValueError("a storage fabric needs at least one netdev")
        if not self.targets:
            raise ValueError("a storage fabric needs at least one target")
        for kind, names in (("netdev", [n.name for n in self.netdevs]), ("target", [t.name for t in self.targets])):
            doubled = sorted({n for n in names if names.count(n) > 1})
            if doubled:
                raise ValueError(f"{kind} {doubled[0]!r} is listed twice")
        for device_id in self.bluefield_device_ids:
            if not _PCI_DEVICE_ID.match(device_id):
                raise ValueError(f"PCI device id {device_id!r} must look like 0xa2dc (lower-case hex)")

    def netdev(self, name: str) -> StorageNetdev | None:
        return next((n for n in self.netdevs if n.name == name), None)

    def collector_tokens(self) -> tuple[str, ...]:
        """What the collector's ``--sources`` needs to route-check this fabric's targets on the node."""
        tokens = tuple(f"storage-route={t.destination}" for t in self.targets)
        if self.routing is not None and self.routing.vrf is not None:
            tokens += (f"storage-vrf={self.routing.vrf}",)
        return tokens


def storage_from_dict(data: Any) -> StorageFabric | None:
    """A StorageFabric from its JSON form (the health probe's cached topology); None when absent."""
    if not data:
        return None
    routing, qos, sysctl = data.get("routing"), data.get("qos"), data.get("sysctl")
    return StorageFabric(
        netdevs=tuple(StorageNetdev(**n) for n in data["netdevs"]),
        targets=tuple(StorageTarget(**t) for t in data["targets"]),
        bluefield_device_ids=tuple(data.get("bluefield_device_ids", ("0xa2dc",))),
        routing=StorageRouting(**routing) if routing else None,
        qos=StorageQos(trust=qos["trust"], pfc_priorities=tuple(qos["pfc_priorities"]),
                       ecn_priorities=tuple(qos["ecn_priorities"])) if qos else None,
        nccl_ib_hca=tuple(data.get("nccl_ib_hca", ())),
        sysctl=StorageSysctl(**sysctl) if sysctl else StorageSysctl(),
        source=data.get("source", ""),
    )


@dataclass(frozen=True, slots=True)
class Topology:
    """A node type: its devices, layout, host settings and every threshold."""

    __pydantic_config__ = _FORBID
    name: str
    gpus: GpuSpec
    numa: NumaSpec
    host: HostSpec
    references: dict[str, Reference]
    description: str = ""
    hcas: tuple[Hca, ...] = field(default=())
    storage: StorageFabric | None = None
    """The storage fabric; None: this node type has none, and the STO checks do not apply."""
    hca_firmware: HcaFirmware | None = None
    """Expected compute-HCA firmware and PSID (INV-09); None: the compute HCAs must only agree."""
    storage_hca_firmware: HcaFirmware | None = None
    """Expected storage-HCA (BlueField) firmware and PSID (INV-11: a node off it fails, whatever most nodes run);
    None: the run's nodes must only agree (when most were flashed apart, the mode is theirs)."""
    ib_partitions: IbPartitions | None = None
    """Expected partition keys of the compute ports (IB-09); None: the compute ports must only agree."""
    software: SoftwareManifest | None = None
    """The golden host software stack (INV-10); None: INV-10 does not apply to this node type."""
    dcgm: DcgmSpec = field(default_factory=DcgmSpec)
    """Whether DCGM runs on this node type (GPU-12, GPU-13); expected unless the topology says ``required: false``."""
    sdc: SdcSpec = field(default_factory=SdcSpec)
    """GPU-14's SDC workload size on this node type."""

    def __post_init__(self) -> None:
        names = {h.name for h in self.hcas}
        for dev in self.gpus.devices:
            if dev.hca is not None and dev.hca not in names:
                raise ValueError(f"gpu {dev.index} names hca {dev.hca!r}, which is not in hcas")
            if dev.numa_node >= self.numa.nodes:
                raise ValueError(f"gpu {dev.index} is on NUMA {dev.numa_node}, topology has {self.numa.nodes}")

    @property
    def compute_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "compute")

    @property
    def storage_hcas(self) -> tuple[Hca, ...]:
        return tuple(h for h in self.hcas if h.role == "storage")

    def ref(self, key: str) -> Reference | None:
        """The reference named ``key``, or None when the topology does not define it."""
        return self.references.get(key)


def storage_mismatch(topology: Topology) -> tuple[str, str] | None:
    """Where the storage section disagrees with the HCAs, as (key path, message); None when it agrees.

    Its netdevs must sit on storage HCAs, NCCL's list name compute HCAs only. Checked when a file is
    loaded (burnin.topology.load), not on every dataclass built, so topologies derived in code stay free.
    """
    storage = topology.storage
    if storage is None:
        return None
    by_name = {h.name: h for h in topology.hcas}
    for i, netdev in enumerate(storage.netdevs):
        if netdev.hca is None:
            continue
        where = f"storage.netdevs[{i}].hca"
        hca = by_name.get(netdev.hca)
        if hca is None:
            return where, f"{netdev.hca!r} is not in hcas"
        if hca.role != "storage":
            return where, f"{hca.name} is a {hca.role} HCA, not a storage one"
        if hca.bus_id != netdev.bus_id:
            return where, f"{hca.name} is at {hca.bus_id}, the netdev at {netdev.bus_id}"
        if hca.netdev is not None and hca.netdev != netdev.name:
            return where, f"{hca.name}'s netdev is {hca.netdev}, not {netdev.name}"
    for i, name in enumerate(storage.nccl_ib_hca):
        where = f"storage.nccl_ib_hca[{i}]"
        hca = by_name.get(name)
        if hca is None:
            return where, f"{name!r} is not in hcas"
        if hca.role != "compute":
            return where, f"{name} is a {hca.role} HCA; NCCL must use compute HCAs only"
    return None


def dcgm_mismatch(topology: Topology) -> tuple[str, str] | None:
    """A DCGM version in the software manifest of a node type that declares no DCGM, as (key path, message).

    INV-10 would look for a DCGM that GPU-12/13 were told is not there, and hold every node as not
    measured: one of the two sections is wrong, so the file is refused where it is loaded.
    """
    if topology.software is None or topology.software.dcgm is None or topology.dcgm.required:
        return None
    return "software.dcgm", (f"names DCGM {topology.software.dcgm}, but dcgm.required is false: "
                             "leave software.dcgm out, or expect DCGM")
