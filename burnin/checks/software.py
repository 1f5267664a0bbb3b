"""INV-10 host software stack manifest: each component the topology names runs at its golden version.

The topology's ``software`` section (the golden manifest, check-catalog 0) names
the versions; the collector's ``software`` source (fast, in the probe) reads them
on the node:

- ``kernel``: ``/proc/sys/kernel/osrelease`` (what ``uname -r`` prints);
- ``ofed``: ``ofed_info -s`` (``MLNX_OFED_LINUX-23.10-1.1.9.0:``; compared without the colon);
- ``nccl``: the version in the name of every ``libnccl.so*`` in the standard
  library folders (``libnccl.so.2.18.5``); two installs of different versions
  are named both;
- ``dcgm``: ``dcgmi --version`` (``Version : 3.3.1``), and its host engine's
  version when the host engine answered.

A component the topology does not name is not judged; one it names that the
node cannot report (tool missing, output unreadable, no library found) is
incomplete with the cause. A topology without a ``software`` section declares
INV-10 not applicable. The NVIDIA driver version is INV-03's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from burnin.checks.base import bad, check, declare_applicability, ok, unknown
from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, incomplete, roll_up
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import SoftwareManifest, Topology

CHECK_ID = "INV-10"
SHOWN = 64
"""Characters of a node-reported version shown in a reason."""
_NCCL_FILE = re.compile(r"^libnccl\.so\.([0-9]+\.[0-9]+\.[0-9]+)$")

Reading = list[tuple[str, str]]
"""What a component reads on the node: (label, version) pairs, e.g. [("DCGM", "3.3.1"), ("DCGM hostengine", ...)]."""


def software_not_applicable(topology: Topology) -> str | None:
    """INV-10 applies where the topology has a golden software manifest (its ``software`` section)."""
    if topology.software is None:
        return f"topology {topology.name} declares no software manifest (no software section)"
    return None


declare_applicability((CHECK_ID,), software_not_applicable)


def _quote(value: object) -> str:
    return printable(repr(value), limit=40)


def _shown(value: str) -> str:
    return printable(value, limit=SHOWN)


def _section(facts: Facts) -> dict[str, Any]:
    section = facts._require("software")
    if not isinstance(section, dict):
        raise Unmeasurable(f"software facts unreadable: {_quote(section)}")
    return section


def _tool_output(section: dict[str, Any], key: str, argv: str) -> str:
    """What a tool printed on stdout; Unmeasurable when it did not run or exited non-zero."""
    record = section.get(key)
    if not isinstance(record, dict):
        raise Unmeasurable(f"{argv} not run")
    if record.get("error"):
        raise Unmeasurable(printable(str(record["error"]), limit=160))
    stdout = record.get("stdout")
    if record.get("exit_status") != 0 or not isinstance(stdout, str):
        tail = str(record.get("stderr") or record.get("stdout") or "").strip().splitlines()[-1:]
        detail = f": {printable(tail[0], limit=160)}" if tail else ""
        raise Unmeasurable(f"{argv} exited {record.get('exit_status')}{detail}")
    return stdout


def read_kernel(section: dict[str, Any]) -> Reading:
    release = section.get("kernel_release")
    if not isinstance(release, str) or not release.strip():
        raise Unmeasurable(f"/proc/sys/kernel/osrelease unreadable ({_quote(release)})")
    return [("kernel", release.strip())]


def read_ofed(section: dict[str, Any]) -> Reading:
    from burnin.parsers.ofed_info import parse_ofed_info

    try:
        return [("OFED", parse_ofed_info(_tool_output(section, "ofed_info", "ofed_info -s")).release)]
    except ParseError as exc:
        raise Unmeasurable(f"ofed_info -s output unreadable: {exc}") from None


def read_nccl(section: dict[str, Any]) -> Reading:
    found = section.get("nccl")
    libraries = found.get("libraries") if isinstance(found, dict) else None
    if not isinstance(libraries, list):
        raise Unmeasurable(f"NCCL libraries not listed ({_quote(found)})")
    if not libraries:
        searched = found.get("searched") if isinstance(found, dict) else None
        where = ", ".join(map(str, searched)) if isinstance(searched, list) and searched else "the library folders"
        raise Unmeasurable(f"no libnccl.so* in {printable(where, limit=200)}")
    versions: dict[str, list[str]] = {}  # version -> where
    for library in libraries:
        name = library.get("file") if isinstance(library, dict) else None
        match = _NCCL_FILE.match(name) if isinstance(name, str) else None
        if match is None:
            raise Unmeasurable(f"NCCL library {_quote(name)} names no version (libnccl.so.X.Y.Z)")
        where = str(library.get("real_path") or library.get("path") or name)
        versions.setdefault(match.group(1), []).append(where.rpartition("/")[0] or where)
    if len(versions) == 1:
        return [("NCCL", next(iter(versions)))]
    return [(f"NCCL in {printable(', '.join(places), limit=120)}", version) for version, places in versions.items()]


def read_dcgm(section: dict[str, Any]) -> Reading:
    from burnin.parsers.dcgmi_version import parse_dcgmi_version

    try:
        report = parse_dcgmi_version(_tool_output(section, "dcgmi", "dcgmi --version"))
    except ParseError as exc:
        raise Unmeasurable(f"dcgmi --version output unreadable: {exc}") from None
    reading = [("DCGM", report.version)]
    if report.hostengine_version is not None:
        reading.append(("DCGM hostengine", report.hostengine_version))
    return reading


@dataclass(frozen=True, slots=True)
class Component:
    key: str
    """Its name in the topology's ``software`` section."""
    label: str
    """How reasons name it."""
    read: Callable[[dict[str, Any]], Reading]


COMPONENTS = (
    Component("kernel", "kernel", read_kernel),
    Component("ofed", "OFED", read_ofed),
    Component("nccl", "NCCL", read_nccl),
    Component("dcgm", "DCGM", read_dcgm),
)


def wanted(manifest: SoftwareManifest, component: Component) -> str | None:
    value: str | None = getattr(manifest, component.key)
    return value


@check(CHECK_ID, "Host software stack (kernel, OFED, NCCL, DCGM) at the topology's golden versions",
       sources=("software",))
def software_manifest(facts: Facts, topology: Topology) -> Verdict:
    manifest = topology.software
    if manifest is None:
        return incomplete(CHECK_ID, facts.node, f"topology {topology.name} declares no software manifest")
    named = [(c, want) for c in COMPONENTS if (want := wanted(manifest, c)) is not None]
    expected = ", ".join(f"{c.label} {want}" for c, want in named) + f" per topology {topology.name}"
    section = _section(facts)
    findings: list[Finding] = []
    failing: dict[str, str] = {}  # component label -> its golden version
    for component, want in named:
        try:
            reading = component.read(section)
        except Unmeasurable as exc:
            findings.append(unknown(component.label, exc.reason, want))
            continue
        for label, version in reading:
            if version == want:
                findings.append(ok(label, _shown(version), want))
            else:
                findings.append(bad(label, _shown(version), want))
                failing[component.label] = want
    if failing:
        return roll_up(CHECK_ID, facts.node, findings, expected=next(iter(failing.values())) if len(failing) == 1
                       else "; ".join(f"{label} {want}" for label, want in failing.items()))
    unnamed = [c.label for c in COMPONENTS if wanted(manifest, c) is None]
    healthy = ", ".join(f"{f.subject} {f.measured}" for f in findings) + f" as topology {topology.name} names"
    if unnamed:
        healthy += f"; not judged (the topology names none): {', '.join(unnamed)}"
    return roll_up(CHECK_ID, facts.node, findings, expected=expected, healthy=healthy)
