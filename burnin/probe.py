"""The health probe: fast, read-only checks on the local node, one line out.

Runs every few minutes on every production node (Slurm HealthCheckProgram),
beside training jobs. It imports only the collector, the check registry (whose
fast checks it runs) and the cached topology: no pytest, no pydantic, no YAML
parser on the hot path. Which node it runs as, and below which root it reads,
come from :mod:`burnin.collector.node_env`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from burnin.checks import load_all, probe_check_ids
from burnin.checks.base import not_applicable_reason
from burnin.collector import node_env
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
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the collector gathered (the measurements ``--metrics`` exports)."""

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


NPD_OUTPUT_LIMIT = 80  # node-problem-detector's max_output_length in its shipped custom-plugin configs


def npd_message(result: ProbeResult, limit: int = NPD_OUTPUT_LIMIT) -> str:
    """The one line node-problem-detector's custom plugin protocol reads (docs/kubernetes.md): at most ``limit``
    bytes (NPD cuts stdout there), the failed check ids first. The exit code already is its protocol's:
    0 OK, 1 a problem (a check failed), 2 unknown (something could not be measured)."""
    if result.exit_code == EXIT_OK:
        text = f"burnin: OK ({len(result.verdicts)} checks)"
    else:
        bad = result.failed or result.incomplete
        word = "FAIL" if result.failed else "INCOMPLETE"
        # each cause without its own check id in front: the ids are said once, first (80 bytes go fast)
        causes = "; ".join(v.reason.removeprefix(v.check_id).strip() for v in bad)
        text = printable(" ".join(f"burnin: {word} {','.join(v.check_id for v in bad)} {causes}".split()))
    if len(text.encode("utf-8")) > limit:
        text = text[:limit - 3] + "..."
    while len(text.encode("utf-8")) > limit:
        text = text[: -4] + "..."
    return text


def fast_check_ids() -> list[str]:
    """The probe's checks, derived from what each check declares: fast, and reading only cheap local sources."""
    return probe_check_ids(FAST_SOURCES)


def local_node_name() -> str:
    return node_env.short_name()


def run_probe(topology: Topology, *, root: str | None = None, timeout: float = 5.0,
              checks: list[str] | None = None, record_baseline: bool = False) -> ProbeResult:
    from burnin import counters

    started = time.monotonic()
    node = local_node_name()
    root = root or node_env.root()
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
    return ProbeResult(node, verdicts, time.monotonic() - started, data)


def metrics_text(result: ProbeResult, *, timestamp: float) -> str:
    """The probe's verdicts and measurements as a Prometheus textfile (node_exporter's textfile collector)."""
    from burnin.report.metrics import exposition

    gate = {"nodes": {result.node: {"admitted": result.exit_code == EXIT_OK}}}
    outcomes = [v.to_json() for v in result.verdicts]
    return exposition(gate, outcomes, {result.node: result.facts}, timestamp=timestamp,
                      duration_s=result.duration_s)
