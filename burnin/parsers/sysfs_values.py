"""Single sysfs values as the kernel prints them: a PCIe link speed, an InfiniBand partition key.

Pure: text in, a number (or None when the text is no reading) out.
"""

from __future__ import annotations

import re

# drivers/pci: "32.0 GT/s PCIe" (kernels since 4.19), "8 GT/s" / "8.0 GT/s" before; "Unknown" when not trained.
_LINK_SPEED = re.compile(r"^(\d{1,3}(?:\.\d{1,3})?) ?GT/s(?: PCIe)?$")
_PKEY = re.compile(r"^0x([0-9a-fA-F]{1,4})$")


def link_speed_gts(text: str | None) -> float | None:
    """``32.0 GT/s PCIe`` (sysfs ``current_link_speed``) -> 32.0; None for ``Unknown`` or anything else."""
    match = _LINK_SPEED.match((text or "").strip())
    return float(match.group(1)) if match else None


def pkey(text: str | None) -> int | None:
    """``0xffff`` (sysfs ``ports/N/pkeys/I``) -> 0xffff; None when it is not a 16-bit hex key."""
    match = _PKEY.match((text or "").strip())
    return int(match.group(1), 16) if match else None


def pkey_text(value: int) -> str:
    """0xffff -> ``0xffff``: how sysfs and the topology write a key."""
    return f"0x{value:04x}"
