"""What the watch hears and what it does about it: events, actions, classification (pure).

Classification uses the tables the checks use: the Xid table of
``burnin.checks.xid`` (GPU-04), the check ids of the catalog (GPU-01 ECC,
GPU-03 row remapping, INV-01 GPU present, IB-01 HCA port, INV-04 NVSwitch SXids). Three actions:

- ``evict``: the job on the node cannot go on (GPU fallen off the bus,
  uncorrectable ECC, GSP hung, a fatal NVSwitch SXid, IB port down by default): drain the node and
  requeue its jobs now;
- ``drain``: the node must not take the next job, the running one may finish;
- ``record``: written to the event journal only (Xid 63, single-bit ECC, ...).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from burnin.checks import xid as xid_table

# nvmlEventType* bits (nvml.h), the ones the watch subscribes to.
NVML_SINGLE_BIT_ECC = 0x1
NVML_DOUBLE_BIT_ECC = 0x2
NVML_XID = 0x8
NVML_DRAM_RETIREMENT = 0x400
NVML_DRAM_RETIREMENT_FAILURE = 0x800
NVML_NONFATAL_POISON = 0x1000
NVML_FATAL_POISON = 0x2000
NVML_GPU_UNAVAILABLE = 0x4000
NVML_GPU_RECOVERY_ACTION = 0x8000
NVML_WANTED = (NVML_SINGLE_BIT_ECC | NVML_DOUBLE_BIT_ECC | NVML_XID | NVML_DRAM_RETIREMENT
               | NVML_DRAM_RETIREMENT_FAILURE | NVML_NONFATAL_POISON | NVML_FATAL_POISON
               | NVML_GPU_UNAVAILABLE | NVML_GPU_RECOVERY_ACTION)


class Action(enum.IntEnum):
    """Ordered: a later event may escalate record -> drain -> evict, never repeat."""

    RECORD = 0
    DRAIN = 1
    EVICT = 2

    @property
    def word(self) -> str:
        return self.name.lower()


class Kind(str, enum.Enum):
    XID = "xid"
    ECC_SBE = "ecc-sbe"
    ECC_DBE = "ecc-dbe"
    ROW_REMAP = "row-remap"
    ROW_REMAP_FAILURE = "row-remap-failure"
    POISON = "poison"
    POISON_FATAL = "poison-fatal"
    GPU_LOST = "gpu-lost"
    RECOVERY_ACTION = "recovery-action"
    IB_PORT_DOWN = "ib-port-down"
    IB_PORT_UP = "ib-port-up"
    SXID_FATAL = "sxid-fatal"
    SXID = "sxid"
    PROBE_FAIL = "probe-fail"
    STALL = "stall"
    STALL_ENDED = "stall-ended"


STALL_CHECK = "NCCL-05"  # the catalog's "correctness and hangs": a collective that stops progressing


NVML_KINDS: dict[int, Kind] = {
    NVML_SINGLE_BIT_ECC: Kind.ECC_SBE,
    NVML_DOUBLE_BIT_ECC: Kind.ECC_DBE,
    NVML_XID: Kind.XID,
    NVML_DRAM_RETIREMENT: Kind.ROW_REMAP,
    NVML_DRAM_RETIREMENT_FAILURE: Kind.ROW_REMAP_FAILURE,
    NVML_NONFATAL_POISON: Kind.POISON,
    NVML_FATAL_POISON: Kind.POISON_FATAL,
    NVML_GPU_UNAVAILABLE: Kind.GPU_LOST,
    NVML_GPU_RECOVERY_ACTION: Kind.RECOVERY_ACTION,
}

# kind -> (action, check id, what it is); Xid, IB and probe events are decided apart.
_FIXED: dict[Kind, tuple[Action, str, str]] = {
    Kind.ECC_SBE: (Action.RECORD, "GPU-01", "single-bit ECC error"),
    Kind.ECC_DBE: (Action.EVICT, "GPU-01", "double-bit (uncorrectable) ECC error"),
    Kind.ROW_REMAP: (Action.RECORD, "GPU-03", "row remapping event"),
    Kind.ROW_REMAP_FAILURE: (Action.DRAIN, "GPU-03", "row remapping failure"),
    Kind.POISON: (Action.RECORD, "GPU-01", "contained poison error"),
    Kind.POISON_FATAL: (Action.EVICT, "GPU-01", "fatal poison error"),
    Kind.GPU_LOST: (Action.EVICT, "INV-01", "GPU is lost"),
    Kind.IB_PORT_UP: (Action.RECORD, "IB-01", "port up"),
    # An NVSwitch's fatal error takes down the NVLink traffic through it: the job cannot go on (INV-04).
    Kind.SXID_FATAL: (Action.EVICT, "INV-04", "fatal SXid"),
    Kind.SXID: (Action.RECORD, "INV-04", "non-fatal SXid"),
}


_GPU_BUS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}")


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One thing the watch heard, as heard.

    ``device``: the GPU's PCI bus (``0000:1b:00``, no function), an HCA
    (``mlx5_2``) or interface (``ib6``), or ``""`` for the node.
    ``label``: how to name the device (``gpu3``), when known.
    """

    source: str  # nvml | kmsg | probe | sampler
    kind: Kind
    device: str
    code: int | None
    text: str
    detected_at: float  # time.time() when the watch read it
    label: str | None = None
    kernel_usec: int | None = None
    kernel_seq: int | None = None
    checks: tuple[str, ...] = ()  # probe events: the failed check ids
    foreign: str = ""  # why the device is not this node's ("not a GPU of this node"): recorded, never acted on
    details: dict[str, Any] | None = field(default=None, compare=False)  # a stall's figures (burnin.watch.stall)

    @property
    def subject(self) -> str:
        if self.label:
            return self.label
        if _GPU_BUS.fullmatch(self.device):
            return f"PCI {self.device}"
        return self.device or "node"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    check_id: str
    cause: str
    key: tuple[str, ...]  # one incident: (check id, kind, device, code)

    def reason(self) -> str:
        """The Slurm reason: ``burnin: <check id> <cause>``."""
        return f"burnin: {self.check_id} {self.cause}"


@dataclass(frozen=True, slots=True)
class Policy:
    """Site choices: what an IB port going down does (the catalog makes it fatal: evict); what a stall does
    (default alert: recorded and reported, the stuck rank's node often not the faulty one; or drain)."""

    ib_port_down: Action = Action.EVICT
    stall: Action = Action.RECORD


_BUS = re.compile(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.[0-7])?")


def gpu_bus(text: str) -> str:
    """A GPU's PCI address as ``dddd:bb:dd`` (lower case, no function), from NVML or kernel forms.

    ``00000000:1B:00.0`` (NVML), ``0000:1b:00`` (NVRM Xid lines), ``1b:00`` -> ``0000:1b:00``;
    anything else is returned stripped and in lower case.
    """
    lowered = text.strip().lower()
    match = _BUS.fullmatch(lowered)
    if match is None:
        return lowered
    domain, bus, device = match.groups()
    return f"{(domain or '0')[-4:].rjust(4, '0')}:{bus.rjust(2, '0')}:{device.rjust(2, '0')}"


def _xid_decision(event: WatchEvent) -> tuple[Action, str]:
    code = event.code if event.code is not None else -1
    what = xid_table.describe(code)
    if code in xid_table.EVICT_XIDS:
        return Action.EVICT, what
    if xid_table.is_fatal(code, event.text):
        return Action.DRAIN, what
    return Action.RECORD, what


def classify(event: WatchEvent, policy: Policy | None = None) -> Decision:
    """The action, check id and cause for ``event`` (the checks' tables, the site's policy)."""
    policy = policy or Policy()
    key_code = "" if event.code is None else str(event.code)
    if event.kind is Kind.XID:
        action, what = _xid_decision(event)
        check_id = "GPU-04"
    elif event.kind is Kind.RECOVERY_ACTION:
        # nvmlDeviceGetGpuRecoveryAction: 0 none, else reset, reboot or drain is needed.
        action = Action.DRAIN if event.code else Action.RECORD
        check_id, what = "GPU-04", f"GPU recovery action {event.code}"
    elif event.kind is Kind.IB_PORT_DOWN:
        action, check_id = policy.ib_port_down, "IB-01"
        what = f"port down ({event.text.strip()[:80]})" if event.text.strip() else "port down"
    elif event.kind is Kind.PROBE_FAIL:
        check_ids = ",".join(event.checks) or "probe"
        return Decision(Action.DRAIN, check_ids, event.text, (check_ids, event.kind.value, "", ""))
    elif event.kind in (Kind.STALL, Kind.STALL_ENDED):
        action = policy.stall if event.kind is Kind.STALL else Action.RECORD
        since = str((event.details or {}).get("since", ""))  # one incident per stall
        return Decision(action, STALL_CHECK, event.text, (STALL_CHECK, event.kind.value, "", since))
    else:
        action, check_id, what = _FIXED[event.kind]
        if event.kind in (Kind.SXID_FATAL, Kind.SXID) and event.code is not None:
            what = f"{what} {event.code}"
    cause = what if event.kind is Kind.IB_PORT_DOWN and not event.device else f"{event.subject} {what}"
    if event.foreign:
        action, cause = Action.RECORD, f"{cause}, {event.foreign}"
    return Decision(action, check_id, cause, (check_id, event.kind.value, event.device, key_code))
