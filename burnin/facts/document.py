"""A node's facts document (what the collector gathered, and what the phases recorded) and its accessors.

Two kinds of accessor, for two kinds of reader:

- the checks' (``nvml()``, ``gpus()``, ``hcas()``, ``command()``...) raise
  :class:`Unmeasurable` with the collector's own reason when a source failed,
  is absent or is not what it should be, so a check can never mistake "no
  data" for "ok";
- the readers that show what there is (the report, metrics.prom, a soak's
  samples, the probe's baseline: ``gpus_reported()``, ``hcas_reported()``,
  ``section()``, ``failed_sources()``) get empty values instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnin.evaluate.verdict import Unmeasurable
from burnin.facts.gpu import GpuFacts
from burnin.facts.hca import HcaFacts
from burnin.facts.values import mapping, quote
from burnin.text import printable


class NonFiniteNumber(ValueError):
    """A facts document holds NaN or an infinity, which no hardware reading can be."""


def _reject_constant(name: str) -> float:
    raise NonFiniteNumber(f"facts hold the non-finite number {name}")


def loads_facts(text: str) -> Any:
    """Parse a facts document, rejecting ``NaN``, ``Infinity`` and ``-Infinity``.

    Python's json accepts those constants by default; a node that sends them
    sends values that cannot be true, so the document is refused
    (:class:`NonFiniteNumber`, a ValueError) instead of judged.
    """
    return json.loads(text, parse_constant=_reject_constant)


class Facts:
    """One node's facts. ``unreachable`` is set when nothing could be gathered."""

    def __init__(self, node: str, data: dict[str, Any]) -> None:
        self.node = node
        self.data = data

    @classmethod
    def load(cls, path: Path) -> Facts:
        """A node's facts file; one holding NaN or an infinity is an unreachable node with that cause."""
        try:
            data = loads_facts(path.read_text(encoding="utf-8"))
        except NonFiniteNumber as exc:
            return cls.unreachable_node(path.stem, f"{path.name}: {exc}")
        return cls(path.stem, data)

    @classmethod
    def of(cls, node: str, document: object) -> Facts:
        """Any document, to read what it holds: an object as it is, anything else as an empty document."""
        if isinstance(document, dict):
            return cls(node, document)
        return cls(node, dict(document) if isinstance(document, Mapping) else {})

    @classmethod
    def unreachable_node(cls, node: str, reason: str) -> Facts:
        return cls(node, {"unreachable": reason})

    @property
    def unreachable(self) -> str | None:
        value = self.data.get("unreachable")
        return str(value) if value else None

    # ------------------------------------------------------------------ for checks: Unmeasurable when unread

    def _require(self, source: str, key: str | None = None) -> Any:
        """The value a collector source wrote (under ``key``, default the source's name), whatever it is.

        Unmeasurable with the collector's reason when the node was unreachable, or the
        source was not collected, failed, or wrote nothing.
        """
        if self.unreachable:
            raise Unmeasurable(self.unreachable)
        status = mapping(self.data.get("sources")).get(source)
        if status is None:
            raise Unmeasurable(f"source {source!r} was not collected")
        if not isinstance(status, dict) or not status.get("ok"):
            raise Unmeasurable(f"{source}: {mapping(status).get('error') or 'failed'}")
        value = self.data.get(key or source)
        if value is None:
            raise Unmeasurable(f"{source}: no data")
        return value

    def require(self, source: str, key: str | None = None) -> dict[str, Any]:
        """The section a collector source wrote; Unmeasurable as :meth:`_require`, or when it is no object."""
        value = self._require(source, key)
        if not isinstance(value, dict):
            raise Unmeasurable(f"{source} facts unreadable: {printable(repr(value), limit=40)}")
        return value

    def nvml(self) -> dict[str, Any]:
        return self.require("nvml")

    def gpus(self) -> list[GpuFacts]:
        """Every GPU NVML listed; Unmeasurable when the list or an entry of it is unreadable."""
        listed = self.nvml().get("gpus", [])
        if not isinstance(listed, list):
            raise Unmeasurable(f"NVML GPU list unreadable: {quote(listed)}")
        gpus: list[GpuFacts] = []
        for entry in listed:
            if not isinstance(entry, dict):
                raise Unmeasurable(f"NVML GPU entry unreadable: {quote(entry)}")
            gpus.append(GpuFacts(entry))
        return gpus

    def pci_devices(self) -> dict[str, dict[str, Any]]:
        devices: dict[str, dict[str, Any]] = self.require("pci").get("devices", {})
        return devices

    def hcas(self) -> dict[str, dict[str, Any]]:
        """The HCAs' raw entries by name (checks read one through ``burnin.checks.base.per_hca``)."""
        hcas: dict[str, dict[str, Any]] = self.require("infiniband").get("hcas", {})
        return hcas

    def numa(self) -> dict[str, Any]:
        return self.require("numa")

    def kernel(self) -> dict[str, Any]:
        return self.require("kernel")

    def host(self) -> dict[str, Any]:
        """CPU governors, memory and hugepage settings (collector source ``host``)."""
        return self.require("host")

    def pci_census(self) -> dict[str, Any]:
        """Every PCI function's vendor, device and class (collector source ``pci-census``)."""
        return self.require("pci-census", "pci_census")

    def command(self, name: str, *, ok_exit: tuple[int, ...] = (0,)) -> str:
        """The stdout of a tool run by the collector; Unmeasurable if it did not run cleanly."""
        if self.unreachable:
            raise Unmeasurable(self.unreachable)
        record = self.command_record(name)
        if record is None:
            status = mapping(mapping(self.data.get("sources")).get(name))
            if status.get("error"):
                raise Unmeasurable(f"{name}: {status['error']}")
            raise Unmeasurable(f"{name} was not collected")
        if record.get("error"):
            raise Unmeasurable(str(record["error"]))
        if record.get("exit_status") not in ok_exit:
            tail = (record.get("stderr") or record.get("stdout") or "").strip().splitlines()[-1:]
            detail = f": {tail[0][:160]}" if tail else ""
            raise Unmeasurable(f"{' '.join(record.get('argv', [name]))} exited {record.get('exit_status')}{detail}")
        return str(record.get("stdout", ""))

    def command_record(self, name: str) -> dict[str, Any] | None:
        record = mapping(self.data.get("commands")).get(name)
        return record if isinstance(record, dict) else None

    @property
    def counter_baseline(self) -> str | None:
        """When the counters a check judges were read from (the probe's baseline); None: since boot."""
        value = self.data.get("counter_baseline")
        return str(value) if value else None

    # ------------------------------------------------------------------ for readers: what there is

    def section(self, name: str) -> Any:
        """A top-level entry as the document holds it (a phase's section, ``hostname``...); None when absent."""
        return self.data.get(name)

    def gpus_reported(self) -> list[GpuFacts]:
        """The GPUs NVML listed whose entries are objects; empty when there are none."""
        gpus = mapping(self.data.get("nvml")).get("gpus")
        return [GpuFacts(entry) for entry in gpus if isinstance(entry, dict)] if isinstance(gpus, list) else []

    def hcas_reported(self) -> list[HcaFacts]:
        """The HCAs whose entries are objects, in the document's order; empty when there are none."""
        hcas = mapping(mapping(self.data.get("infiniband")).get("hcas"))
        return [HcaFacts(str(name), entry) for name, entry in hcas.items() if isinstance(entry, dict)]

    def failed_sources(self) -> dict[str, str]:
        """Source -> why, for every collector source that did not succeed."""
        return {str(name): str(mapping(status).get("error") or "failed")
                for name, status in mapping(self.data.get("sources")).items() if not mapping(status).get("ok")}
