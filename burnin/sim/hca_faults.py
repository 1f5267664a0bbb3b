"""Mutators of the HCA faults (INV-09, IB-05, IB-06, IB-09): each changes what its check reads, on its HCA only.

sysfs, ``ibstat``, ``ibv_devinfo`` and ``lspci`` all render from the one HcaState and
PciDevice, so every source agrees (burnin.sim.inject applies these like its own).
"""

from __future__ import annotations

from collections.abc import Callable

from burnin.errors import UsageError
from burnin.sim.faults import Fault
from burnin.sim.state import HcaState, KernelMessage, NodeState

# Real firmware versions: ConnectX-7 28.39.4082 / 28.43.3608 (fielded CX-7 fleets), BlueField-3 32.38.3056
# (shared/reference/infiniband ibstat) / 32.41.1000.
ALT_FIRMWARE = {"compute": ("28.39.4082", "28.43.3608"), "storage": ("32.38.3056", "32.41.1000")}
FULL_MEMBER = 0x8000


def _hca(state: NodeState, fault: Fault) -> HcaState:
    assert fault.target is not None
    return state.hca(fault.target)


def hca_fw_mismatch(state: NodeState, fault: Fault) -> None:
    hca = _hca(state, fault)
    first, second = ALT_FIRMWARE["storage" if hca.role == "storage" else "compute"]
    hca.fw_ver = first if hca.fw_ver != first else second


def hca_pcie_x8(state: NodeState, fault: Fault) -> None:
    hca = _hca(state, fault)
    index = state.pci_index()
    endpoint = index.get(hca.bus_id)
    if endpoint is None:
        raise UsageError(f"fault {fault.label!r}: {hca.name} ({hca.bus_id}) is not on the PCI bus")
    port = index.get(endpoint.parent or "")
    for device in (endpoint, port):
        if device is not None:
            device.cur_width = 8
    at = port.bdf if port is not None else hca.bus_id
    state.host.messages.append(KernelMessage(
        uptime_s=4.217 + 0.01 * len(state.host.messages),
        text=f"mlx5_core {hca.bus_id}: 252.048 Gb/s available PCIe bandwidth, limited by 32.0 GT/s PCIe x8 "
             f"link at {at} (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
    ))


def ib_mtu_2048(state: NodeState, fault: Fault) -> None:
    _hca(state, fault).active_mtu = 2048


def ib_pkey_limited(state: NodeState, fault: Fault) -> None:
    hca = _hca(state, fault)
    for position, key in enumerate(hca.pkeys):
        value = int(key, 16)
        if value & FULL_MEMBER:
            hca.pkeys[position] = f"0x{value & ~FULL_MEMBER:04x}"
            return
    raise UsageError(f"fault {fault.label!r}: {hca.name} is a full member of no partition "
                     f"({', '.join(hca.pkeys)}): nothing to make limited")


OTHER_SM_LIDS = (5, 6)  # the LID of a second subnet manager (sm-split)


def sm_unreachable(state: NodeState, fault: Fault) -> None:
    """A port no subnet manager swept: the link trained (LinkUp) but the port stays INIT without LIDs."""
    hca = _hca(state, fault)
    if hca.link_layer != "InfiniBand":
        raise UsageError(f"fault {fault.label!r}: {hca.name} runs {hca.link_layer}, which has no subnet manager")
    hca.state = "2: INIT"
    hca.lid = hca.sm_lid = 0


def sm_split(state: NodeState, fault: Fault) -> None:
    """The port answers to another subnet manager (split subnets, a rogue SM) than the node's other ports."""
    hca = _hca(state, fault)
    if hca.link_layer != "InfiniBand":
        raise UsageError(f"fault {fault.label!r}: {hca.name} runs {hca.link_layer}, which has no subnet manager")
    others = {h.sm_lid for h in state.hcas if h.name != hca.name and h.link_layer == "InfiniBand"}
    hca.sm_lid = next(lid for lid in OTHER_SM_LIDS if lid not in others)


MUTATORS: dict[str, Callable[[NodeState, Fault], None]] = {
    "hca-fw-mismatch": hca_fw_mismatch,
    "hca-pcie-x8": hca_pcie_x8,
    "ib-mtu-2048": ib_mtu_2048,
    "ib-pkey-limited": ib_pkey_limited,
    "sm-unreachable": sm_unreachable,
    "sm-split": sm_split,
}
