"""Error-counter baselines for the health probe.

InfiniBand and NVLink error counters are cumulative since boot (or driver
load). A node that once logged a burst keeps it until reboot, so a probe that
judged raw totals could keep draining a node that has long been healthy. After
a clean acceptance run an operator records a baseline (``burnin probe
--baseline``); from then on the probe judges the growth since that baseline.
The baseline is fixed (not advanced by each probe), so a node with a real
error event stays failed instead of flapping back into the pool, and it is
dropped when the node reboots (the counters restart from zero).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, TypeGuard

from burnin.facts import Facts
from burnin.facts.gpu import NVLINK_COUNTERS


def state_dir() -> Path:
    configured = os.environ.get("BURNIN_STATE_DIR")
    if configured:
        return Path(configured)
    system = Path("/var/lib/burnin")
    if os.geteuid() == 0:
        return system
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "burnin"


def baseline_file(node: str) -> Path:
    return state_dir() / f"counters-{node}.json"


def boot_id(root: str) -> str:
    try:
        return Path(root, "proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def extract(facts: dict[str, Any]) -> dict[str, Any]:
    """The cumulative counters of a facts document (InfiniBand ports, NVLink links)."""
    document = Facts.of("", facts)
    ib: dict[str, dict[str, dict[str, int]]] = {}
    for hca in document.hcas_reported():
        for port in hca.ports():
            ib.setdefault(hca.name, {})[port.number] = dict(port.counters or {})
    nvlink: dict[str, dict[str, dict[str, int]]] = {}
    for gpu in document.gpus_reported():
        bus = gpu.bus_id
        for link in gpu.links():
            values = {name: link[name] for name in NVLINK_COUNTERS if isinstance(link.get(name), int)}
            if bus and values:
                nvlink.setdefault(bus, {})[str(link.get("link"))] = values
    return {"ib": ib, "nvlink": nvlink}


def record(facts: dict[str, Any], node: str, root: str) -> Path:
    """Store the current counters as the node's baseline (atomic write)."""
    path = baseline_file(node)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"boot_id": boot_id(root), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           **extract(facts)}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(path)
    return path


def load(node: str, root: str) -> dict[str, Any] | None:
    """The node's baseline, or None (absent, unreadable, or from an earlier boot)."""
    try:
        doc: dict[str, Any] = json.loads(baseline_file(node).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if doc.get("boot_id", "") != boot_id(root):
        return None
    return doc


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def growth(now: object, before: object) -> object:
    """How much a cumulative counter grew since ``before``.

    A counter below its baseline was reset (driver reload without a reboot):
    everything it counts now is new. A value that is not a count is returned
    as is, for the check to report as not measured; a baseline that is not a
    count is ignored (the whole value is judged).
    """
    if not _is_count(now) or not _is_count(before):
        return now
    return now - before if now >= before else now


def subtract(facts: dict[str, Any], baseline: dict[str, Any]) -> None:
    """Replace cumulative counters in ``facts`` by their growth since ``baseline`` (in place)."""
    document = Facts.of("", facts)
    base_ib = baseline.get("ib") or {}
    for hca in document.hcas_reported():
        for port in hca.ports():
            before = (base_ib.get(hca.name) or {}).get(port.number) or {}
            counters = port.counters or {}
            for name, value in counters.items():
                counters[name] = growth(value, before.get(name))
    base_nvlink = baseline.get("nvlink") or {}
    for gpu in document.gpus_reported():
        links = base_nvlink.get(gpu.get("bus_id")) or {}
        for link in gpu.links():
            before = links.get(str(link.get("link"))) or {}
            for name in NVLINK_COUNTERS:
                if name in link:
                    link[name] = growth(link[name], before.get(name))
    facts["counter_baseline"] = baseline.get("created", "")
