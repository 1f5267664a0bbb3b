"""NVL-03: one ``p2pBandwidthLatencyTest`` launch -> the matrices it printed, or why there are none (pure).

The CUDA sample measures every ordered GPU pair: peer access (the connectivity
matrix), copy bandwidth with P2P disabled and enabled, one way and both ways,
and the latency of a small copy. The measurement keeps each matrix under a
stable name (:func:`matrix_name`); a launch that hung, could not start, exited
early or printed something else is ``unmeasured`` with its last output lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from burnin.errors import ParseError
from burnin.fabric.measure import OK, UNMEASURED, last_lines, launch_problem
from burnin.transport.base import CommandResult

if TYPE_CHECKING:
    from burnin.parsers.p2p_bandwidth import P2pMatrix

TOOL = "p2pBandwidthLatencyTest"
CONNECTIVITY = "connectivity"
UNIDIRECTIONAL = "unidirectional_p2p_enabled"
"""P2P writes, one way: the matrix NVL-03 judges against the reference."""
LATENCY = "latency_p2p_enabled_gpu"
"""P2P writes, the GPU-timed latency table (the CPU table times the submission)."""
REQUIRED = (CONNECTIVITY, UNIDIRECTIONAL)
Matrix = list[list[float | None]]


def matrix_name(m: P2pMatrix) -> str:
    """``connectivity``, ``unidirectional_p2p_enabled``, ``bidirectional_p2p_disabled``,
    ``latency_p2p_enabled_gpu``, ... (unknown flags are ``unknown``)."""
    if m.kind == CONNECTIVITY:
        return CONNECTIVITY
    p2p = {True: "p2p_enabled", False: "p2p_disabled", None: "p2p_unknown"}[m.p2p_enabled]
    if m.kind == "latency":
        return f"latency_{p2p}_{m.axis.lower()}"
    way = {True: "bidirectional", False: "unidirectional", None: "unknown"}[m.bidirectional]
    return f"{way}_{p2p}"


@dataclass(frozen=True, slots=True)
class P2pMeasurement:
    """One p2pBandwidthLatencyTest run on a node: its matrices by name (rows and columns = CUDA device ids)."""

    status: str
    matrices: dict[str, Matrix] = field(default_factory=dict)
    devices: int = 0
    """How many GPUs the test listed (``Device: N, ...`` lines)."""
    refused: tuple[tuple[int, int], ...] = ()
    """(device, peer) of every ``Device=D CANNOT Access Peer Device=P`` line."""
    reason: str = ""
    tail: tuple[str, ...] = ()
    duration_s: float = 0.0
    argv: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "matrices": self.matrices, "devices": self.devices,
                "refused": [list(pair) for pair in self.refused], "reason": self.reason, "tail": list(self.tail),
                "duration_s": self.duration_s, "argv": self.argv}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> P2pMeasurement:
        refused = tuple((int(pair[0]), int(pair[1])) for pair in data.get("refused") or ())
        return cls(str(data.get("status", UNMEASURED)), dict(data.get("matrices") or {}),
                   int(data.get("devices") or 0), refused, str(data.get("reason", "")),
                   tuple(data.get("tail") or ()), float(data.get("duration_s") or 0.0), str(data.get("argv", "")))


def p2p_measurement(result: CommandResult, *, timeout_s: float) -> P2pMeasurement:
    """Read one p2pBandwidthLatencyTest launch; the connectivity and P2P-enabled bandwidth matrices must be there."""
    from burnin.parsers.p2p_bandwidth import parse_p2p_bandwidth

    tail = last_lines(result)
    base: dict[str, Any] = {"tail": tail, "duration_s": round(result.duration_s, 3), "argv": " ".join(result.argv)}
    problem = launch_problem(result, TOOL, timeout_s)
    if problem is not None and result.exit_status == 127:
        problem = (f"{TOOL} not found on {result.node} (exit 127): build the CUDA samples or set p2p_bandwidth "
                   "in the fabric config")
    found: dict[str, Matrix] = {}
    devices = 0
    refused: tuple[tuple[int, int], ...] = ()
    if result.stdout.strip():
        try:
            report = parse_p2p_bandwidth(result.stdout)
        except ParseError as exc:
            problem = problem or f"{TOOL} output is not readable: {exc}"[:300]
        else:
            for m in report.matrices:
                found.setdefault(matrix_name(m), [list(row) for row in m.matrix])
            devices = len(report.devices)
            refused = tuple((p.device, p.peer) for p in report.peer_access if not p.can_access)
    missing = [name for name in REQUIRED if name not in found]
    if problem is None and missing:
        problem = f"{TOOL} printed no {' or '.join(missing)} matrix (exit {result.exit_status})"
    if problem is None and result.exit_status not in (0, None):
        problem = f"{TOOL} exited {result.exit_status}"
    if problem is not None:
        reason = f"{problem}; last output: {' | '.join(tail)}" if tail else problem
        return P2pMeasurement(UNMEASURED, found, devices, refused, reason, **base)
    return P2pMeasurement(OK, found, devices, refused, **base)
