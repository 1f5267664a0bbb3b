"""The one Xid table: NVIDIA's Xid catalog as summarised in check-catalog GPU-04.

FAIL Xids keep a node out of the pool; WARN/INFO Xids are recorded but do not
reject it. GPU-04 judges with this table and the simulator imports it (which
Xids its ``xid:N`` fault makes fatal), so the two cannot drift apart; a test
compares it with the catalog's table.
"""

from __future__ import annotations

import re

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
"""Suite verdict FAIL in the catalog (171/172 are details of Xid 48)."""

NONFATAL_XIDS: frozenset[int] = frozenset(XID_MEANING) - FATAL_XIDS
"""Suite verdict WARN or INFO: 13, 31, 32, 43, 45, 63, 92, 94, 137."""

EVICT_XIDS: frozenset[int] = frozenset({48, 79, 94, 95, 119, 120, 140, 171, 172})
"""The job on the GPU cannot go on: fallen off the bus (79), an ECC error that killed the
application or escaped (48, 94, 95, 140; 171/172 detail 48), GSP hung (119, 120). ``burnin
watch`` evicts (drain + requeue now) on these; the other FATAL_XIDS drain, the rest is recorded."""

RECOVERY_ACTION_XID = 154
# "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
_RECOVERY_TO = re.compile(r"\bto\s+0x([0-9a-fA-F]+)\b")


def recovery_action_cleared(message: str) -> bool:
    """True when an Xid 154 message says the recovery action is now None (0x0)."""
    match = _RECOVERY_TO.search(message)
    return match is not None and int(match.group(1), 16) == 0


def is_fatal(xid: int, message: str = "") -> bool:
    """True when the catalog says this Xid keeps a node out of the pool.

    Xid 154 reports the driver's recovery action: FAIL unless that action is None.
    """
    if xid == RECOVERY_ACTION_XID and recovery_action_cleared(message):
        return False
    return xid in FATAL_XIDS


def describe(xid: int) -> str:
    return f"Xid {xid} ({XID_MEANING.get(xid, 'unlisted')})"
