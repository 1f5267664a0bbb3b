"""Storage facts a node did not report, or that cannot be true, make the STO check `incomplete` with the cause.

The counterpart of tests/unit/checks/test_checks_unmeasured.py for STO-01..07
(that file's coverage test names this one). Each row changes one input of a
healthy simulated node's facts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from burnin.checks import load_all
from burnin.evaluate.verdict import Status
from burnin.facts import Facts
from burnin.topology.model import Topology

Facts_ = dict[str, Any]


def storage(*path: str, value: object) -> Callable[[Facts_], None]:
    def change(facts: Facts_) -> None:
        target = facts["storage"]
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


def source_failed(name: str, error: str) -> Callable[[Facts_], None]:
    def change(facts: Facts_) -> None:
        facts["sources"][name] = {"ok": False, "error": error, "duration_s": 5.0}
        facts.pop(name.replace("-", "_"), None)

    return change


def tool(record_path: tuple[str, ...], *, error: str | None = None, exit_status: int | None = 0,
         stdout: str = "", stderr: str = "") -> Callable[[Facts_], None]:
    def change(facts: Facts_) -> None:
        target = facts
        for key in record_path[:-1]:
            target = target[key]
        target[record_path[-1]] = {"argv": ["x"], "exit_status": exit_status, "stdout": stdout, "stderr": stderr,
                                   "error": error}

    return change


BF = "enp41s0f0np0"
BF_BUS = "0000:29:00.0"
ROWS: list[tuple[str, str, Callable[[Facts_], None], str]] = [
    ("STO-01", "storage source timed out", source_failed("storage", "timed out after 10 s"), "timed out after 10 s"),
    ("STO-01", "ip missing", tool(("storage", "routes", "10.20.0.10"), error="ip: command not found", exit_status=None),
     "ip: command not found"),
    ("STO-01", "route output garbage", tool(("storage", "routes", "10.20.0.10"), stdout="<<garbage>>\n"),
     "unreadable"),
    ("STO-01", "route JSON without a device", tool(("storage", "routes", "10.20.0.10"),
                                                   stdout='[{"dst":"10.20.0.10","flags":[]}]'), "names no device"),
    ("STO-01", "vendor of the BlueField unreadable", storage("netdevs", BF, "vendor", value=None),
     "PCI vendor/device of 0000:29:00.0 unreadable"),
    ("STO-01", "routes section missing", storage("routes", value=KeyError), "no routes"),
    ("STO-02", "environment not read", storage("nccl", "environment", value=None), "environment not read"),
    ("STO-02", "nccl section missing", storage("nccl", value=KeyError), "no nccl"),
    ("STO-04", "MTU unreadable", storage("netdevs", BF, "mtu", value=None), "mtu not reported"),
    ("STO-04", "MTU impossible", storage("netdevs", BF, "mtu", value=70000), "outside its physical range"),
    ("STO-04", "MTU as text", storage("netdevs", BF, "mtu", value="9000"), "not a number"),
    ("STO-05", "storage-nic source failed", source_failed("storage-nic", "timed out after 10 s"),
     "storage-nic: timed out"),
    ("STO-05", "mlnx_qos missing", tool(("storage_nic", "mlnx_qos", BF), error="mlnx_qos: command not found",
                                        exit_status=None), "mlnx_qos: command not found"),
    ("STO-05", "mlnx_qos failed", tool(("storage_nic", "mlnx_qos", BF), exit_status=1,
                                       stderr="Netlink error: Operation not supported\n"), "Operation not supported"),
    ("STO-05", "ECN knobs unreadable", storage("netdevs", BF, "ecn", value={}), "ecn/roce_np unreadable"),
    ("STO-05", "ECN flag impossible", storage("netdevs", BF, "ecn", "roce_rp", "3", value=7), "ecn/roce_rp/enable/3"),
    ("STO-06", "mlxconfig missing", tool(("storage_nic", "mlxconfig", BF_BUS), error="mlxconfig: command not found",
                                         exit_status=None), "mlxconfig: command not found"),
    ("STO-06", "mlxconfig refused", tool(("storage_nic", "mlxconfig", BF_BUS), exit_status=1,
                                         stdout="-E- Failed to open device: 0000:29:00.0\n"), "Failed to open device"),
    ("STO-06", "parameter not reported", tool(("storage_nic", "mlxconfig", BF_BUS), stdout=(
        "Device #1:\n----------\n\nDevice type:    BlueField3\nDevice:         0000:29:00.0\n\n"
        "Configurations:                              Next Boot\n        INTERNAL_CPU_MODEL      EMBEDDED_CPU(1)\n")),
     "INTERNAL_CPU_OFFLOAD_ENGINE not reported"),
    ("STO-07", "sysctl of a netdev unreadable", storage("sysctl", BF, value={}), "net.ipv4.conf.enp41s0f0np0"),
    ("STO-07", "sysctl impossible", storage("sysctl", "all", "arp_ignore", value=99), "outside its physical range"),
    ("STO-07", "ip addr failed", tool(("storage", "ip_addr"), exit_status=255, stderr="Object \"addr\" is unknown\n"),
     "Object \"addr\" is unknown"),
    ("STO-07", "netdev missing from sysfs", storage("netdevs", "ibp24s0", value=KeyError), "ibp24s0"),
]


@pytest.mark.parametrize(("check_id", "what", "change", "needle"), ROWS, ids=[f"{c}-{w}" for c, w, _, _ in ROWS])
def test_unreadable_or_impossible_storage_input_is_incomplete(facts: Facts_, sto_topology: Topology, check_id: str,
                                                             what: str, change: Callable[[Facts_], None],
                                                             needle: str) -> None:
    change(facts)
    verdict = load_all()[check_id].func(Facts("sim01", facts), sto_topology)
    assert verdict.status is Status.INCOMPLETE, verdict.reason
    assert needle in verdict.reason, verdict.reason


def test_every_sto_check_has_a_row() -> None:
    from burnin.checks.storage import STO_CHECKS

    assert {row[0] for row in ROWS} == set(STO_CHECKS)


def test_an_unreachable_node_is_incomplete_everywhere(facts: Facts_, sto_topology: Topology) -> None:
    from burnin.checks.storage import STO_CHECKS

    for check_id in STO_CHECKS:
        verdict = load_all()[check_id].func(Facts.unreachable_node("sim01", "ssh: connection refused"), sto_topology)
        assert verdict.status is Status.INCOMPLETE and "connection refused" in verdict.reason
