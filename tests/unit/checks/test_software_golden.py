"""``burnin topologies --from-facts`` drafts the software manifest (INV-10) from a golden node's facts."""

from __future__ import annotations

import copy
from typing import Any

from burnin.facts import Facts
from burnin.golden import draft_topology
from burnin.topology.load import find_topology
from burnin.topology.model import SoftwareManifest


def _draft(facts: dict[str, Any]) -> dict[str, Any] | None:
    topology = find_topology("hgx-h100-8gpu")
    software: dict[str, Any] | None = draft_topology(Facts("gold01", facts), topology, "site")["software"]
    return software


def test_the_draft_takes_the_golden_nodes_stack(healthy_facts: dict[str, Any]) -> None:
    drafted = _draft(copy.deepcopy(healthy_facts))
    assert drafted is not None
    assert {k: v for k, v in drafted.items() if k != "source"} == {
        "kernel": "5.15.0-112-generic", "ofed": "MLNX_OFED_LINUX-24.04-0.6.6.0", "nccl": "2.21.5", "dcgm": "3.3.5"}
    assert drafted["source"].startswith("measured on golden node gold01")
    SoftwareManifest(**drafted)  # the topology holds it as drafted


def test_the_draft_leaves_out_what_the_node_cannot_report_once(healthy_facts: dict[str, Any]) -> None:
    facts = copy.deepcopy(healthy_facts)
    software = facts["software"]
    software["dcgmi"] = {"argv": ["dcgmi"], "exit_status": None, "stdout": "", "stderr": "",
                         "error": "dcgmi: command not found"}
    software["nccl"]["libraries"].append({"path": "/usr/local/lib/libnccl.so", "file": "libnccl.so.2.18.5",
                                          "real_path": "/usr/local/lib/libnccl.so.2.18.5"})
    software["ofed_info"]["stdout"] = "MLNX_OFED_LINUX-24.04-0.6.6.0-extra.suffix.that.is.far.too.long.for.it:\n"
    drafted = _draft(facts)
    assert drafted is not None and set(drafted) == {"source", "kernel"}


def test_the_draft_leaves_the_manifest_out_when_nothing_is_reported(healthy_facts: dict[str, Any]) -> None:
    facts = copy.deepcopy(healthy_facts)
    facts["software"] = {"kernel_release": None}
    assert _draft(facts) is None
    del facts["software"]
    assert _draft(facts) is None
