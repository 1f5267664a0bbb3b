"""The health probe: fast, read-only checks on the local node, one line out.

Runs every few minutes on every production node (Slurm HealthCheckProgram),
beside training jobs. It imports only the collector, the fast checks and the
cached topology: no pytest, no pydantic, no YAML parser on the hot path.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from burnin.checks import load_all
from burnin.checks.base import not_applicable_reason
from burnin.collector.core import FAST_SOURCES, collect
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import Topology

EXIT_OK, EXIT_FAIL, EXIT_INCOMPLETE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ProbeResult:
    node: str
    verdicts: tuple[Verdict, ...]
    duration_s: float

    @property
    def failed(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.status is Status.FAIL)

    @property
    def incomplete(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.status is Status.INCOMPLETE)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_FAIL
        return EXIT_INCOMPLETE if self.incomplete else EXIT_OK

    def line(self, limit: int = 400) -> str:
        """``burnin: OK ...`` or ``burnin: FAIL <ids> <causes>``: one line."""
        if self.exit_code == EXIT_OK:
            return f"burnin: OK ({len(self.verdicts)} checks, {self.duration_s:.2f} s)"
        bad = self.failed or self.incomplete
        word = "FAIL" if self.failed else "INCOMPLETE"
        ids = ",".join(v.check_id for v in bad)
        causes = "; ".join(v.reason for v in bad)
        # What the node printed (a GPU name, a dmesg line) is shown escaped, on one line.
        text = printable(" ".join(f"burnin: {word} {ids} {causes}".split()))
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def drain_reason(self, limit: int = 200) -> str:
        """Slurm drain reason: ``burnin: <ids> <first cause>``."""
        bad = self.failed or self.incomplete
        first = bad[0].reason if bad else ""
        if bad and first.startswith(bad[0].check_id):
            first = first[len(bad[0].check_id):].strip()
        text = printable(" ".join(f"burnin: {','.join(v.check_id for v in bad)} {first}".split()))
        return text if len(text) <= limit else text[: limit - 3] + "..."


def fast_check_ids() -> list[str]:
    return [cid for cid, spec in load_all(node_only=True).items() if spec.fast]


def local_node_name() -> str:
    return os.environ.get("BURNIN_SIM_NODE") or socket.gethostname().split(".")[0]


def run_probe(topology: Topology, *, root: str | None = None, timeout: float = 5.0,
              checks: list[str] | None = None, record_baseline: bool = False) -> ProbeResult:
    from burnin import counters

    started = time.monotonic()
    node = local_node_name()
    root = root or os.environ.get("BURNIN_ROOT", "/")
    storage = topology.storage.collector_tokens() if topology.storage is not None else ()
    data = collect(root, (*FAST_SOURCES, *storage), timeout)
    if record_baseline:
        counters.record(data, node, root)
    baseline = counters.load(node, root)
    if baseline is not None:
        counters.subtract(data, baseline)
    facts = Facts(node, data)
    registry = load_all(node_only=True)
    # A check the node type itself declares not applicable (no storage fabric) is not run.
    ids = [cid for cid in (checks or fast_check_ids()) if not_applicable_reason(cid, topology) is None]
    verdicts = tuple(registry[cid].func(facts, topology) for cid in ids)
    return ProbeResult(node, verdicts, time.monotonic() - started)
