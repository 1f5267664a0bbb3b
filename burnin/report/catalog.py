"""The check catalog, read from the code: every check id, what it catches, where its data comes from,
its thresholds per node type with their sources, which suites judge it and whether the probe runs it.

Nothing here is written by hand twice. The ids, titles, fact sources and the
topology references each check reads come from the check registry
(:mod:`burnin.checks`); what a check catches, from the simulator's faults,
each of which names the check that must catch it (:data:`burnin.sim.FAULTS`);
the suites, from the ``@pytest.mark.check`` marks of the shipped suites; the
probe's set, from :func:`burnin.checks.probe_check_ids` of the collector's fast
sources (what :func:`burnin.probe.fast_check_ids` runs); the thresholds, from
the topology files. ``burnin checks`` prints it, and ``docs/checks.md`` is
its Markdown (a test regenerates and compares it).

Checks that only ``burnin soak`` judges (GPU-02, GPU-09, BRN-*) are not in
the registry: the soak judges them from its time series. Their ids come from
the soak's own tables (:data:`burnin.soak.verdicts.MONITORED`,
:data:`burnin.soak.plan.STAGE_CHECK`) and :data:`SOAK_OWN`; their titles are
:data:`SOAK_TITLES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from burnin.topology.model import Topology

SOAK_OWN = ("IB-04", "BRN-06", "BRN-07")
"""Checks the soak judges besides its monitored signals and its stages: IB-04's growth, its duration, coverage."""
SOAK_TITLES = {
    "GPU-02": "Correctable ECC errors do not keep growing under load",
    "GPU-09": "PCIe replays do not keep growing under load",
    "BRN-01": "DCGM diagnostics pass during the soak",
    "BRN-02": "GPU compute stress: no errors, no throughput drift, no slow GPU or node",
    "BRN-03": "Interconnect soak: all_reduce busbw above its floor, without drift",
    "BRN-04": "CPU and memory: stress-ng, STREAM per socket, no machine check or EDAC error",
    "BRN-05": "Local disks healthy (NVMe SMART) after the soak",
    "BRN-06": "The node soaked its whole duration under load",
    "BRN-07": "The node was monitored throughout (at least twice per judging window)",
}
AREAS = ("INV", "GPU", "TOP", "PIN", "IB", "NCCL", "NVL", "STO", "MEG", "BRN")
"""The catalog's sections, in its order: inventory, GPU health, topology, pinning, InfiniBand, NCCL, NVLink,
storage fabric, Megatron, burn-in."""
_MARK = re.compile(r"""@pytest\.mark\.check\(\s*["']([A-Z]+-\d+)["']""")


@dataclass(frozen=True, slots=True)
class Threshold:
    key: str
    """The topology reference (``ib_rate_gbps``)."""
    bound: str
    """What passes (``>= 400 Gb/s``)."""
    source: str
    """Where the figure comes from, as the topology (or the catalog's fixed value) says."""


@dataclass(frozen=True, slots=True)
class CheckEntry:
    check: str
    title: str
    sources: tuple[str, ...]
    """Fact sources the check reads: collector sources (``nvml``) or the phase that measures (``fabric``)."""
    catches: tuple[str, ...]
    """The simulator's faults this check must catch (``pcie-x8: the GPU's PCIe link trained at x8``)."""
    suites: tuple[str, ...]
    """Shipped suites with a test that judges it (``node``, ``fabric``, ...; ``soak`` for ``burnin soak``)."""
    probe: bool
    """Run by ``burnin probe``."""
    thresholds: dict[str, tuple[Threshold, ...]] = field(default_factory=dict)
    """Node type -> the thresholds it sets for the check."""
    missing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Node type -> references the check reads that the node type defines nowhere (it cannot judge the check)."""
    not_applicable: dict[str, str] = field(default_factory=dict)
    """Node type -> why the check does not apply to it, by its own declaration."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def suite_marks(suites_dir: Path) -> dict[str, tuple[str, ...]]:
    """Check id -> the suites (folder names) whose test files mark a test with it."""
    found: dict[str, set[str]] = {}
    for path in sorted(suites_dir.glob("*/test_*.py")):
        for check_id in _MARK.findall(path.read_text(encoding="utf-8")):
            found.setdefault(check_id, set()).add(path.parent.name)
    return {check_id: tuple(sorted(suites)) for check_id, suites in found.items()}


def soak_checks() -> tuple[str, ...]:
    """The ids ``burnin soak`` judges on every node."""
    from burnin.soak.plan import STAGE_CHECK
    from burnin.soak.verdicts import MONITORED

    return tuple(dict.fromkeys((*MONITORED, *SOAK_OWN, *STAGE_CHECK.values())))


def thresholds(references: Iterable[str], topology: Topology) -> tuple[tuple[Threshold, ...], tuple[str, ...]]:
    """The thresholds ``topology`` sets for these reference keys, and the keys it defines nowhere."""
    from burnin.checks.references import CATALOG_DEFAULTS

    found: list[Threshold] = []
    missing: list[str] = []
    for key in references:
        reference = topology.ref(key) or CATALOG_DEFAULTS.get(key)
        if reference is None:
            missing.append(key)
        else:
            found.append(Threshold(key, reference.describe(), reference.source))
    return tuple(found), tuple(missing)


def _catches() -> dict[str, list[str]]:
    from burnin.sim import FAULTS

    catches: dict[str, list[str]] = {}
    for spec in FAULTS.values():
        how = "" if spec.outcome == "fail" else f" ({spec.outcome})"
        catches.setdefault(spec.check_id, []).append(f"{spec.name}{how}: {spec.description}")
    return catches


def build(topologies: Sequence[Topology]) -> list[CheckEntry]:
    """Every check, in id order, with the thresholds and applicability of each of ``topologies``."""
    from burnin.checks import load_all, probe_check_ids
    from burnin.checks.base import not_applicable_reason
    from burnin.collector.core import FAST_SOURCES
    from burnin.resources import suites_dir

    registry = load_all()
    probe = set(probe_check_ids(FAST_SOURCES))  # burnin.probe.fast_check_ids, read below the probe
    marks = suite_marks(suites_dir())
    catches = _catches()
    soak = soak_checks()
    entries = []
    for check_id, spec in registry.items():
        per_type: dict[str, tuple[Threshold, ...]] = {}
        missing: dict[str, tuple[str, ...]] = {}
        not_applicable: dict[str, str] = {}
        for topology in topologies:
            per_type[topology.name], unset = thresholds(spec.references, topology)
            if unset:
                missing[topology.name] = unset
            reason = not_applicable_reason(check_id, topology)
            if reason is not None:
                not_applicable[topology.name] = reason
        suites = (*marks.get(check_id, ()), *(("soak",) if check_id in soak else ()))
        entries.append(CheckEntry(check_id, spec.title, spec.sources, tuple(catches.get(check_id, ())), suites,
                                  check_id in probe, per_type, missing, not_applicable))
    for check_id in soak:
        if check_id not in registry:
            entries.append(CheckEntry(check_id, SOAK_TITLES.get(check_id, ""), ("soak samples",),
                                      tuple(catches.get(check_id, ())), ("soak",), False))
    return sorted(entries, key=_order)


def _order(entry: CheckEntry) -> tuple[int, str, int]:
    area, _, number = entry.check.partition("-")
    return (AREAS.index(area) if area in AREAS else len(AREAS), area, int(number) if number.isdigit() else 0)


def expectations(topology_name: object) -> dict[str, str]:
    """Check id -> what it expects: the named topology's thresholds of the check, else its title.

    For a verdict that left ``expected`` empty (a check not measured on a node); a topology that cannot
    be loaded gives titles only.
    """
    from burnin.checks import load_all
    from burnin.errors import BurninError

    topology: Topology | None = None
    if isinstance(topology_name, str) and topology_name:
        from burnin.topology.load import find_topology

        try:
            topology = find_topology(topology_name)
        except (BurninError, OSError, ValueError):
            topology = None
    out: dict[str, str] = {}
    for check_id, spec in load_all().items():
        found = thresholds(spec.references, topology)[0] if topology is not None else ()
        bounds = "; ".join(f"{t.key} {t.bound}" for t in found)
        out[check_id] = f"{spec.title}: {bounds}" if bounds else spec.title
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(entries: Sequence[CheckEntry], topologies: Sequence[str]) -> str:
    """docs/checks.md: an index of every check, then each check with its thresholds per node type."""
    lines = ["# Check catalog", "",
             "<!-- Generated by `burnin checks --markdown` from the check registry, the simulator's faults, "
             "the suites and topologies/. Do not edit: run `burnin checks --markdown > docs/checks.md`. -->", "",
             "Every check burnin judges, by stable id: what it catches, where its data comes from, which "
             "suites judge it, whether the health probe (`burnin probe`) runs it, and its thresholds per "
             f"node type ({', '.join(f'`{t}`' for t in topologies)}). A threshold's source says where its "
             "figure comes from; `[V]` marks a verified figure, `[U]` one to calibrate on known-good nodes.",
             "", "| id | title | suites | probe | data |", "|---|---|---|---|---|"]
    for entry in entries:
        lines.append(f"| [{entry.check}](#{entry.check.lower()}) | {_cell(entry.title)} | "
                     f"{', '.join(entry.suites) or '-'} | {'yes' if entry.probe else 'no'} | "
                     f"{', '.join(entry.sources)} |")
    for entry in entries:
        lines += ["", f"## {entry.check}", "", f"{entry.title}.", ""]
        judged = ", ".join(f"the {s} suite" if s != "soak" else "`burnin soak`" for s in entry.suites)
        lines.append(f"- judged by: {judged or 'no shipped suite'}{'; run by `burnin probe`' if entry.probe else ''}")
        lines.append(f"- data: {', '.join(f'`{s}`' for s in entry.sources)}")
        if entry.catches:
            lines.append("- catches (the simulator's faults it must fail on; incomplete where marked):")
            for catch in entry.catches:
                name, _, description = catch.partition(":")
                fault, space, outcome = name.partition(" ")
                lines.append(f"  - `{fault}`{space}{outcome}:{description}")
        for topology in topologies:
            found = entry.thresholds.get(topology, ())
            if topology in entry.not_applicable:
                lines.append(f"- `{topology}`: not applicable ({_cell(entry.not_applicable[topology])})")
            elif found or topology in entry.missing:
                lines.append(f"- thresholds on `{topology}`:")
                lines += [f"  - `{t.key}` {_cell(t.bound)}: {_cell(t.source)}" for t in found]
                lines += [f"  - `{key}`: not defined, so the check is incomplete on this node type"
                          for key in entry.missing.get(topology, ())]
    return "\n".join(lines) + "\n"


def text(entries: Sequence[CheckEntry], topology: str | None = None) -> str:
    """The terminal listing: one line per check; with a topology, its thresholds under each."""
    width = max((len(e.check) for e in entries), default=6)
    out = []
    for entry in entries:
        flags = ("probe " if entry.probe else "      ") + ",".join(entry.suites)
        out.append(f"{entry.check:{width}}  {flags:28} {entry.title}")
        if topology is None:
            continue
        if topology in entry.not_applicable:
            out.append(f"{'':{width}}    not applicable: {entry.not_applicable[topology]}")
        for t in entry.thresholds.get(topology, ()):
            out.append(f"{'':{width}}    {t.key} {t.bound}  ({t.source})")
        for key in entry.missing.get(topology, ()):
            out.append(f"{'':{width}}    {key}: not defined (incomplete)")
    return "\n".join(out) + "\n"


def shipped_topologies() -> list[Topology]:
    """The node types in burnin's own topologies/ folder (not a site's), in name order."""
    from burnin.resources import topologies_dir
    from burnin.topology.load import load_topology

    return [load_topology(path) for path in sorted(topologies_dir().glob("*.yaml"))]

