"""``ibstat`` output (infiniband-diags), one ``CA '<name>'`` block per HCA in name order."""

from __future__ import annotations

from burnin.sim.state import HcaState, NodeState

_STATE_WORD = {"1": "Down", "2": "Initializing", "3": "Armed", "4": "Active", "5": "Active Defer"}
_PHYS_WORD = {"1": "Sleep", "2": "Polling", "3": "Disabled", "4": "PortConfigurationTraining",
              "5": "LinkUp", "6": "LinkErrorRecovery", "7": "Phy Test"}


def _word(sysfs_value: str, table: dict[str, str]) -> str:
    number = sysfs_value.split(":", 1)[0].strip()
    return table.get(number, sysfs_value.split(":", 1)[-1].strip())


def rate_number(rate: str) -> str:
    """``400 Gb/sec (4X NDR)`` -> ``400``."""
    return rate.split()[0]


def ca_block(hca: HcaState) -> str:
    return (
        f"CA '{hca.name}'\n"
        f"\tCA type: {hca.hca_type}\n"
        "\tNumber of ports: 1\n"
        f"\tFirmware version: {hca.fw_ver}\n"
        f"\tHardware version: {'1' if hca.hca_type == 'MT41692' else '0'}\n"
        f"\tNode GUID: 0x{hca.node_guid:016x}\n"
        f"\tSystem image GUID: 0x{hca.node_guid:016x}\n"
        "\tPort 1:\n"
        f"\t\tState: {_word(hca.state, _STATE_WORD)}\n"
        f"\t\tPhysical state: {_word(hca.phys_state, _PHYS_WORD)}\n"
        f"\t\tRate: {rate_number(hca.rate)}\n"
        f"\t\tBase lid: {hca.lid}\n"
        "\t\tLMC: 0\n"
        f"\t\tSM lid: {hca.sm_lid}\n"
        f"\t\tCapability mask: 0x{hca.cap_mask:08x}\n"
        f"\t\tPort GUID: 0x{hca.port_guid:016x}\n"
        f"\t\tLink layer: {hca.link_layer}\n"
    )


def ordered(state: NodeState) -> list[HcaState]:
    """HCAs as ibstat lists them: sorted by name, only those whose PCI function is present."""
    present = state.pci_index()
    return sorted((h for h in state.hcas if h.bus_id in present), key=lambda h: h.name)


def ibstat(state: NodeState) -> str:
    return "".join(ca_block(h) for h in ordered(state))


def ca_list(state: NodeState) -> str:
    """``ibstat -l``."""
    return "".join(f"{h.name}\n" for h in ordered(state))
