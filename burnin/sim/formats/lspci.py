"""``lspci`` stanzas for the simulated PCI functions, in the layout of ``lspci -vvv``.

The shim filters a pre-rendered database (``-s``, ``-d``, ``-D``, ``-n``/``-nn``,
``-v``...) with one awk pass. Each record in the database is::

    @<domain:bus:dev.fn> <vendor> <device>
    H<header after the slot, names>
    N<header for -n>
    B<header for -nn>
    <body lines of -vvv, tab indented>
"""

from __future__ import annotations

from burnin.sim.pcie import SPEED_LSPCI, PciDevice, acs_flags
from burnin.sim.state import NodeState

_NAMES = {
    ("0x8086", "0x352a"): ("PCI bridge", "Intel Corporation Device 352a"),
    ("0x1000", "0xc030"): ("PCI bridge", "Broadcom / LSI PEX890xx PCIe Gen 5 Switch"),
    ("0x10de", "0x2330"): ("3D controller", "NVIDIA Corporation Device 2330"),
    ("0x15b3", "0x1021"): ("", "Mellanox Technologies MT2910 Family [ConnectX-7]"),
    ("0x15b3", "0xa2dc"): ("", "Mellanox Technologies MT43244 BlueField-3 integrated ConnectX-7 "
                               "network controller"),
    ("0x10de", "0x22a3"): ("Bridge", "NVIDIA Corporation Device 22a3"),
    ("0x1344", "0x51c3"): ("Non-Volatile memory controller", "Micron Technology Inc Device 51c3"),
}
_CLASS_NAMES = {"0x020700": "Infiniband controller", "0x020000": "Ethernet controller",
                "0x060400": "PCI bridge", "0x030200": "3D controller", "0x068000": "Bridge",
                "0x010802": "Non-Volatile memory controller"}
_DRIVERS = {"root_port": "pcieport", "switch_up": "pcieport", "switch_down": "pcieport",
            "gpu": "nvidia", "hca": "mlx5_core", "nvswitch": "nvidia-nvswitch", "nvme": "nvme"}
_MODULES = {"gpu": "nvidiafb, nouveau, nvidia_drm, nvidia", "hca": "mlx5_core", "nvswitch": "nvidia", "nvme": "nvme"}
_EXPRESS = {"root_port": "Root Port (Slot-)", "switch_up": "Upstream Port",
            "switch_down": "Downstream Port (Slot+)", "gpu": "Endpoint", "hca": "Endpoint",
            "nvswitch": "Endpoint", "nvme": "Endpoint"}


def _headers(device: PciDevice) -> tuple[str, str, str]:
    class_name, name = _NAMES.get((device.vendor, device.device), ("", f"Device {device.device[2:]}"))
    class_name = _CLASS_NAMES.get(device.class_code, class_name or "Non-VGA unclassified device")
    rev = int(device.revision, 16)
    rev_text = f" (rev {rev:02x})" if rev else ""
    prog = {"0x060400": " (prog-if 00 [Normal decode])", "0x010802": " (prog-if 02 [NVM Express])"}.get(
        device.class_code, "")
    cls = device.class_code[2:6]
    ids = f"{device.vendor[2:]}:{device.device[2:]}"
    return (f"{class_name}: {name}{rev_text}{prog}",
            f"{cls}: {ids}{rev_text}",
            f"{class_name} [{cls}]: {name} [{ids}]{rev_text}{prog}")


def _status(cap_gen: int, cap_width: int, gen: int, width: int) -> str:
    speed = "ok" if gen >= cap_gen else "downgraded"
    lanes = "ok" if width >= cap_width else "downgraded"
    return f"Speed {SPEED_LSPCI[gen]} ({speed}), Width x{width} ({lanes})"


def _body(device: PciDevice) -> list[str]:
    bridge = device.kind in ("root_port", "switch_up", "switch_down")
    lines = [
        "\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- "
        f"FastB2B- DisINTx{'-' if bridge else '+'}",
        "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- "
        "<PERR- INTx-",
        "\tLatency: 0",
        f"\tNUMA node: {device.numa_node}",
    ]
    if device.kind == "switch_down":
        lines[0:0] = [f"\tPhysical Slot: {device.port_number + 27}"]
    if bridge:
        primary = device.bdf.split(":")[1]
        lines.append(f"\tBus: primary={primary}, secondary={device.secondary_bus or 0:02x}, "
                     f"subordinate={device.subordinate_bus or 0:02x}, sec-latency=0")
    lines += [
        f"\tCapabilities: [68] Express (v2) {_EXPRESS[device.kind]}, MSI 00",
        "\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0" + ("" if bridge else ", Latency L0s <64ns, L1 <1us"),
        "\t\tDevCtl:\tCorrErr+ NonFatalErr+ FatalErr+ UnsupReq+",
        "\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+",
        "\t\t\tMaxPayload 256 bytes, MaxReadReq 4096 bytes",
        "\t\tDevSta:\tCorrErr- NonFatalErr- FatalErr- UnsupReq- AuxPwr- TransPend-",
        f"\t\tLnkCap:\tPort #{device.port_number}, Speed {SPEED_LSPCI[device.max_gen]}, Width x{device.max_width}, "
        "ASPM not supported",
        "\t\t\tClockPM- Surprise- LLActRep+ BwNot- ASPMOptComp+",
        "\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+",
        "\t\t\tExtSynch- ClockPM- AutWidDis- BWInt- AutBWInt-",
        f"\t\tLnkSta:\t{_status(device.max_gen, device.max_width, device.cur_gen, device.cur_width)}",
        f"\t\t\tTrErr- Train- SlotClk+ DLActive{'+' if bridge else '-'} BWMgmt- ABWMgmt-",
        f"\t\tLnkCap2: Supported Link Speeds: 2.5-{SPEED_LSPCI[device.max_gen]}, Crosslink- Retimer+ "
        "2Retimers+ DRS-",
        f"\t\tLnkCtl2: Target Link Speed: {SPEED_LSPCI[device.max_gen]}, EnterCompliance- SpeedDis-",
        "\tCapabilities: [100 v2] Advanced Error Reporting",
        "\t\tUESta:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- UnsupReq- ACSViol-",
        "\t\tCESta:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr-",
    ]
    if device.acs_cap is not None:
        lines += [
            "\tCapabilities: [220 v1] Access Control Services",
            f"\t\tACSCap:\t{acs_flags(device.acs_cap)}",
            f"\t\tACSCtl:\t{acs_flags(device.acs_ctl)}",
        ]
    lines.append(f"\tKernel driver in use: {_DRIVERS[device.kind]}")
    if device.kind in _MODULES:
        lines.append(f"\tKernel modules: {_MODULES[device.kind]}")
    return lines


def database(state: NodeState) -> str:
    """Every PCI function's record for the lspci shim, in bdf order."""
    out: list[str] = []
    for device in sorted(state.pci, key=lambda d: d.bdf):
        names, numeric, both = _headers(device)
        out.append(f"@{device.bdf} {device.vendor[2:]} {device.device[2:]}")
        out += [f"H{names}", f"N{numeric}", f"B{both}", *_body(device)]
    return "\n".join(out) + "\n"


def vvv(state: NodeState) -> str:
    """Plain ``lspci -vvv`` (what the shim prints with no filter), for tests and docs."""
    out: list[str] = []
    for device in sorted(state.pci, key=lambda d: d.bdf):
        out.append(f"{device.bdf[5:]} {_headers(device)[0]}")
        out += _body(device)
        out.append("")
    return "\n".join(out) + "\n"


def acs_register(state: NodeState) -> dict[str, str]:
    """``setpci -s BDF ECAP_ACS+0x6.w`` answers: the ACS control word per bridge with ACS."""
    return {d.bdf: f"{d.acs_ctl:04x}" for d in state.pci if d.acs_cap is not None}
