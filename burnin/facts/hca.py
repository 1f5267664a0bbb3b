"""One HCA of a facts document (an entry of ``infiniband.hcas``) and its ports, read through named fields.

A port entry is what sysfs ``/sys/class/infiniband/<hca>/ports/<n>/`` showed:
``state``, ``phys_state``, ``rate``, ``link_layer``, ``lid``, ``sm_lid`` and
``counters``. Every reader (the IB checks, the report, metrics.prom, a soak's
samples, the probe's baseline) walks them through :class:`HcaFacts` and
:class:`PortFacts`.
"""

from __future__ import annotations

import re
from typing import Any

from burnin.evaluate.verdict import Unmeasurable
from burnin.facts.values import count, mapping, text

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def rate_gbps(rate: str | None) -> float | None:
    """``400 Gb/sec (4X NDR)`` (sysfs ``rate``) -> 400.0; None when unreadable."""
    match = _RATE.match(rate or "")
    return float(match.group(1)) if match else None


class PortFacts:
    """One port of an HCA; ``number`` is its sysfs name (``"1"``), ``raw`` its entry."""

    __slots__ = ("number", "raw")

    def __init__(self, number: str, raw: dict[str, Any]) -> None:
        self.number = number
        self.raw = raw

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key``; ``default`` when absent."""
        return self.raw.get(key, default)

    @property
    def state(self) -> str | None:
        """``4: ACTIVE``, ``1: DOWN``... when it is text."""
        return text(self.raw.get("state"))

    @property
    def phys_state(self) -> str | None:
        return text(self.raw.get("phys_state"))

    @property
    def rate(self) -> str | None:
        """``400 Gb/sec (4X NDR)`` when it is text."""
        return text(self.raw.get("rate"))

    @property
    def rate_gbps(self) -> float | None:
        return rate_gbps(self.rate)

    @property
    def link_layer(self) -> str | None:
        return text(self.raw.get("link_layer"))

    @property
    def active(self) -> bool:
        """The state says ACTIVE."""
        return "ACTIVE" in (self.state or "")

    @property
    def counters(self) -> dict[str, Any] | None:
        """The port's counters as the collector read them; None when there is no counters object."""
        value = self.raw.get("counters")
        return value if isinstance(value, dict) else None

    def counter(self, name: str) -> int | None:
        """One counter when it is a count; None otherwise."""
        return count(mapping(self.raw.get("counters")).get(name))


class HcaFacts:
    """One HCA; ``name`` is its device name (``mlx5_0``), ``raw`` its entry."""

    __slots__ = ("name", "raw")

    def __init__(self, name: str, raw: dict[str, Any]) -> None:
        self.name = name
        self.raw = raw

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (``fw_ver``, ``board_id``, ``pci``...); ``default`` when absent."""
        return self.raw.get(key, default)

    def ports(self) -> list[PortFacts]:
        """The ports whose entries are JSON objects, in the document's order."""
        return [PortFacts(str(number), port) for number, port in mapping(self.raw.get("ports")).items()
                if isinstance(port, dict)]

    def port(self, number: str = "1") -> PortFacts | None:
        port = mapping(self.raw.get("ports")).get(number)
        return PortFacts(number, port) if isinstance(port, dict) else None

    def measured_port(self, number: str = "1") -> PortFacts:
        """The port; Unmeasurable when the HCA's facts have none by that number."""
        port = self.port(number)
        if port is None:
            raise Unmeasurable(f"port {number} not present")
        return port
