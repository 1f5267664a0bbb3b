"""Typed access to a node's facts document (what the collector gathered).

Accessors raise :class:`Unmeasurable` with the collector's own reason when a
source failed or is absent, so a check can never mistake "no data" for "ok".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from burnin.evaluate.verdict import Unmeasurable


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
    def unreachable_node(cls, node: str, reason: str) -> Facts:
        return cls(node, {"unreachable": reason})

    @property
    def unreachable(self) -> str | None:
        value = self.data.get("unreachable")
        return str(value) if value else None

    def _require(self, source: str, key: str | None = None) -> Any:
        if self.unreachable:
            raise Unmeasurable(self.unreachable)
        status = self.data.get("sources", {}).get(source)
        if status is None:
            raise Unmeasurable(f"source {source!r} was not collected")
        if not status.get("ok"):
            raise Unmeasurable(f"{source}: {status.get('error') or 'failed'}")
        value = self.data.get(key or source)
        if value is None:
            raise Unmeasurable(f"{source}: no data")
        return value

    def nvml(self) -> dict[str, Any]:
        value: dict[str, Any] = self._require("nvml")
        return value

    def gpus(self) -> list[dict[str, Any]]:
        gpus: list[dict[str, Any]] = self.nvml().get("gpus", [])
        return gpus

    def pci_devices(self) -> dict[str, dict[str, Any]]:
        devices: dict[str, dict[str, Any]] = self._require("pci").get("devices", {})
        return devices

    def hcas(self) -> dict[str, dict[str, Any]]:
        hcas: dict[str, dict[str, Any]] = self._require("infiniband").get("hcas", {})
        return hcas

    def numa(self) -> dict[str, Any]:
        value: dict[str, Any] = self._require("numa")
        return value

    def kernel(self) -> dict[str, Any]:
        value: dict[str, Any] = self._require("kernel")
        return value

    def host(self) -> dict[str, Any]:
        """CPU governors, memory and hugepage settings (collector source ``host``)."""
        value: dict[str, Any] = self._require("host")
        return value

    def pci_census(self) -> dict[str, Any]:
        """Every PCI function's vendor, device and class (collector source ``pci-census``)."""
        value: dict[str, Any] = self._require("pci-census", "pci_census")
        return value

    def command(self, name: str, *, ok_exit: tuple[int, ...] = (0,)) -> str:
        """The stdout of a tool run by the collector; Unmeasurable if it did not run cleanly."""
        if self.unreachable:
            raise Unmeasurable(self.unreachable)
        record = self.data.get("commands", {}).get(name)
        if record is None:
            status = self.data.get("sources", {}).get(name)
            if status and status.get("error"):
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
        record: dict[str, Any] | None = self.data.get("commands", {}).get(name)
        return record
