"""STO-02 runtime evidence: the network devices NCCL itself said it opened (check-catalog 8, STO-02 runtime).

The fabric phase's evidence runs (:mod:`burnin.fabric.nccl_evidence`) leave a
``nccl_runtime`` facts section on each node that took part: per run, the
devices of NCCL's ``NET/IB : Using`` and ``NET/Socket : Using`` lines from
that node's host, and the lines themselves. STO-02 (:mod:`burnin.checks.storage`)
adds one finding per run to its static judgement:

- fail: NCCL opened a storage device (a BlueField function's RDMA device or an
  HCA of role storage), a device that is not one of the compute HCAs NCCL must
  use, a compute HCA over another transport than its link layer (``/RoCE`` on
  an InfiniBand port), or a storage netdev for its sockets; the reason quotes
  NCCL's line;
- incomplete: the run happened but this node's INFO lines could not be read;
- pass: compute HCAs only.

A node without the section (no fabric phase, or not in a multi-node run) is
judged on its static configuration alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from burnin.evaluate.verdict import Finding, bad, ok, unknown
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import Topology

SECTION = "nccl_runtime"
EXPECTED = "NCCL opening compute HCAs only (its NCCL_DEBUG=INFO lines of the fabric suite's multi-node runs)"
QUOTE_CHARS = 320
RUNS = {"group": "NCCL in the multi-node all_reduce",
        "node-config": "NCCL with the node's own configuration"}
"""How a finding names the evidence run (burnin.fabric.commands.NcclEvidence)."""


def runtime_findings(facts: Facts, topology: Topology, *, compute: Sequence[str], storage_rdma: Mapping[str, str],
                     storage_netdevs: Sequence[str]) -> list[Finding] | None:
    """One finding per evidence run in the node's ``nccl_runtime`` facts; None when there is no such section."""
    section = facts.data.get(SECTION)
    if section is None:
        return None
    runs = section.get("runs") if isinstance(section, dict) else None
    if not isinstance(runs, list) or not runs:
        return [unknown("NCCL runtime", f"{SECTION} facts unreadable (no runs)", EXPECTED)]
    return [_judge_run(run, topology, compute, storage_rdma, storage_netdevs) for run in runs]


def _names(devices: object, net: str, subject: str) -> list[tuple[str, str | None]]:
    """(name, transport) of each device of ``net``; ValueError when the record is not readable."""
    entries = devices.get(net) if isinstance(devices, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError(f"{subject}: {net} devices unreadable")
    out: list[tuple[str, str | None]] = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{subject}: a {net} device without a name")
        transport = entry.get("transport")
        out.append((name, transport if isinstance(transport, str) else None))
    return out


def _judge_run(run: Any, topology: Topology, compute: Sequence[str], storage_rdma: Mapping[str, str],
               storage_netdevs: Sequence[str]) -> Finding:
    if not isinstance(run, dict):
        return unknown("NCCL runtime", f"{SECTION} facts: a run record unreadable", EXPECTED)
    name = run.get("run")
    subject = RUNS.get(name, f"NCCL in the {printable(name or '?', limit=40)} run") if isinstance(name, str) \
        else "NCCL runtime"
    if run.get("status") != "read":
        return unknown(subject, printable(run.get("reason") or "its NCCL INFO lines could not be read", limit=300),
                       EXPECTED)
    devices, lines, used = run.get("devices"), run.get("lines"), run.get("used")
    try:
        ib = _names(devices, "IB", subject)
        sockets = _names(devices, "Socket", subject)
    except ValueError as exc:
        return unknown(subject, str(exc), EXPECTED)
    if not ib and not sockets:
        return unknown(subject, "no network device in NCCL's lines", EXPECTED)
    carried = set(used.get("IB") or ()) if isinstance(used, dict) else set()
    hcas = {h.name: h for h in topology.hcas}
    problems: list[str] = []
    named: str | None = None
    for name, transport in ib:
        shown = printable(name, limit=64)
        if name in storage_rdma:
            channels = ", which carried channels" if name in carried else ""
            problems.append(f"storage device {shown} ({printable(storage_rdma[name])}{channels})")
        elif name not in compute:
            problems.append(f"non-compute device {shown}")
        else:
            hca = hcas.get(name)
            if hca is None or transport is None or transport == ("RoCE" if hca.link_layer == "Ethernet" else "IB"):
                continue
            problems.append(f"{shown} over /{printable(transport, limit=16)} (topology: {hca.link_layer})")
        named = named or name
    line = lines.get("NET/IB") if isinstance(lines, dict) else None
    leaked = [printable(name, limit=64) for name, _ in sockets if name in storage_netdevs]
    if leaked:
        problems.append(f"storage netdev {', '.join(leaked)} for its sockets")
        if named is None:
            named = next(name for name, _ in sockets if name in storage_netdevs)
            line = lines.get("NET/Socket") if isinstance(lines, dict) else None
    if problems:
        quoted = f': "{quote_line(str(line), named or "")}"' if line else ""
        return bad(subject, f"opened {'; '.join(problems)}{quoted}", EXPECTED)
    what = f"{len(ib)} compute HCAs" if ib else f"sockets over {', '.join(printable(n) for n, _ in sockets)}"
    return ok(subject, f"opened {what}", EXPECTED)


def quote_line(line: str, device: str) -> str:
    """NCCL's line, printable; a long one cut to what precedes its ``Using`` list and the entry of ``device``."""
    text = printable(line)
    if len(text) <= QUOTE_CHARS:
        return text
    head, sep, listing = text.partition(" Using ")
    entry = next((word for word in listing.split()
                  if word.startswith("[") and word.partition("]")[2].split(":")[0] == device), None)
    if not sep or entry is None:
        return text[:QUOTE_CHARS - 3] + "..."
    return f"{head} Using ... {printable(entry, limit=100)} ..."
