"""Outputs of storage-fabric tools that have no real sample yet, as the simulator prints them.

``../shared/reference-pending/SOURCES.md`` lists the formats without any real
sample: ``ip route get``, ``ip -d link`` with a VRF, ``ip rule``, ``mlxconfig q``
on a BlueField, ``mlnx_qos -i``. Until one arrives, the registry-wide parser tests
read the simulator's rendering of them (burnin.sim.formats.storage_tools, written
after the tools' documented formats; tests/unit/storage cites the public
excerpts they follow).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from burnin.sim.formats import ibv_devinfo, storage_tools
from burnin.sim.state import NodeState, healthy_state
from burnin.sim.storage import SimStorage, derive
from burnin.topology.load import find_topology


@cache
def _node() -> tuple[NodeState, SimStorage]:
    state = healthy_state(find_topology("hgx-h100-8gpu"), "sim01")
    return state, derive(state)


def _ip(name: str) -> str:
    return storage_tools.ip_outputs(_node()[1])[f"storage/ip/{name}"]


def _sysctl() -> str:
    lines = [f"net.ipv4.conf.{scope}.{key} = {value}"
             for scope, values in sorted(_node()[1].sysctl.items()) for key, value in sorted(values.items())]
    return "\n".join(lines) + "\n"



def _dcgmi_health() -> str:
    """``dcgmi health -c`` of a node with a warning and a failure on one GPU (burnin.sim.dcgm)."""
    from burnin.sim import dcgm
    from burnin.sim.faults import Fault

    state = healthy_state(find_topology("hgx-h100-8gpu"), "sim01")
    dcgm.dcgm_health_warn(state, Fault("dcgm-health-warn", "gpu2"))
    dcgm.dcgm_health_fail(state, Fault("dcgm-health-fail", "gpu2"))
    return dcgm.health_report(state)[0]


#: tool -> the simulator's output of it
NO_REAL_SAMPLE: dict[str, Callable[[], str]] = {
    "ip-addr": lambda: _ip("addr.json"),
    "ip-link": lambda: _ip("link-d.txt"),
    "mlxconfig": lambda: storage_tools.mlxconfig(_node()[1].bluefields[0]),
    "mlnx-qos": lambda: storage_tools.mlnx_qos(_node()[1].bluefields[0]),
    "sysctl": _sysctl,
    # not a storage tool: ibv_devinfo (IB-09) has no real sample in ../shared either (burnin.sim.formats.ibv_devinfo
    # follows rdma-core's libibverbs/examples/devinfo.c)
    "ibv-devinfo": lambda: ibv_devinfo.ibv_devinfo(_node()[0]),
    # dcgmi health -c (GPU-12): no real capture either; burnin.sim.dcgm renders the shape DCGM's sources print
    "dcgmi-health": _dcgmi_health,
}
