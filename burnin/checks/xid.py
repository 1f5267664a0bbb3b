"""Xid classification from NVIDIA's Xid catalog, as summarised in check-catalog GPU-04.

FAIL Xids drain the node; the others are recorded but do not reject it.
"""

from __future__ import annotations

XID_MEANING: dict[int, str] = {
    13: "graphics engine exception", 31: "GPU memory page fault", 32: "PBDMA error",
    43: "GPU stopped processing", 45: "preemptive cleanup", 46: "GPU timeout",
    48: "double-bit ECC error", 54: "aux power not connected", 62: "PMU halt",
    63: "row-remapping event", 64: "row-remapping failure", 74: "NVLink error",
    79: "GPU has fallen off the bus", 92: "high single-bit ECC rate",
    94: "contained ECC error", 95: "uncontained ECC error", 109: "context-switch timeout",
    110: "security fault", 119: "GSP RPC timeout", 120: "GSP error",
    136: "NVLink link training failed", 137: "NVLink privilege error",
    140: "unrecoverable ECC error escape", 143: "GPU initialization error",
    154: "GPU recovery action changed", 156: "resource retirement event",
    157: "resource retirement failure", 158: "GPU fatal timeout", 167: "PCIe fatal timeout",
    169: "SEC2 halt", 171: "uncorrectable DRAM error (Xid 48 detail)",
    172: "uncorrectable SRAM error (Xid 48 detail)",
}

FATAL_XIDS: frozenset[int] = frozenset({
    46, 48, 54, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 154, 156, 157, 158,
    167, 169, 171, 172,
})


def is_fatal(xid: int) -> bool:
    """True when the catalog says this Xid keeps a node out of the pool."""
    return xid in FATAL_XIDS


def describe(xid: int) -> str:
    return f"Xid {xid} ({XID_MEANING.get(xid, 'unlisted')})"
