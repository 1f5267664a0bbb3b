"""The sweep: start a job on each idle node of the set, judge and gate each node as its job ends, until the
window closes or every node is settled.

Each round it reads the untested nodes' states (one ``scontrol show node``), starts a job on idle ones (at
most ``at_once`` jobs of the sweep at a time: the site's share of the partition), and waits for a job to
end or for the next round (``poll_s``), whichever comes first. A node whose job was preempted is tried again
when it is idle again. No job is started that could not run its collector to the end before the window
closes; when it closes, the sweep's jobs still running are cancelled, and before it returns nothing of the
sweep is left in Slurm's queue.

With fabric groups (``fabric_group`` N >= 2), each round first starts one group job over the nodes the node suite
admitted in this sweep that are idle together (N at least, up to the room left under the share), then node jobs
in the room that is left; a group's members are judged by the fabric suite together when it ends and gated
(only the nodes a check failed for are drained).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnin.atomic import write_text_atomic
from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.launch.base import SHIP_TIMEOUT_S, SLACK_S
from burnin.launch.log import CommandLog
from burnin.nodes import fold
from burnin.report.reasons import condense
from burnin.sweep.group_job import GroupEnd, GroupSpec, run_group_job
from burnin.sweep.judge import gate_failed, gate_node, group_dir, judge, judge_group, node_dir
from burnin.sweep.node_job import SETTLE_POLL_S, SETTLE_WAIT_S, JobBook, JobEnd, run_node_job
from burnin.sweep.plan import (
    Attempt,
    NodeRecord,
    counts,
    fabric_counts,
    groups_possible,
    limit,
    pick,
    pick_group,
)
from burnin.sweep.slurm_state import jobs_named_argv, outside, parse_jobs_named, read_nodes, read_partition
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmRunner, scancel_argv
from burnin.transport.slurm_jobs import SlurmJobs

if TYPE_CHECKING:
    from burnin.fabric.phase import FabricOptions
    from burnin.gate.registry import Gate

SWEEP_FILE = "sweep.json"
RELEASE_WAIT_S = 10.0
"""How long a stopped sweep waits for the threads of the jobs it cancelled to release them (so that what they
shipped and could not remove is in ``sweep.json``): a bound, never a measurement; a thread hung on a node is
left behind."""
LOG_FILE = "slurm-commands.log"
NICE = 2147483645
"""``--nice``: Slurm's largest, so every other pending job comes first."""
_CONFIG_ERROR = re.compile(r"(?i)invalid (?:qos|partition|account)[^\n]*")
"""salloc refusing the sweep's own settings: every job would fail the same way, so the sweep stops (exit 2)."""


def minimum_window(timeout_s: float) -> float:
    """The least window left for a job to start: the collector's own bound (``timeout_s``), its start and end."""
    return timeout_s + 2 * SLACK_S


@dataclass(frozen=True)
class SweepConfig:
    """What a sweep covers and how (``burnin sweep``'s options)."""

    nodes: list[str]
    partition: str
    window_s: float
    share: float
    topology_ref: str
    out_dir: Path
    sources: str
    timeout_s: float = 120.0
    poll_s: float = 10.0
    qos: str | None = None
    collector: str | None = None
    gate: Gate | None = None
    fabric_group: int = 0
    """Run the fabric suite's multi-node checks over at least this many admitted nodes idle together (0: off)."""
    fabric_options: FabricOptions | None = None

    @property
    def needed_s(self) -> float:
        return minimum_window(self.timeout_s)

    @property
    def time_limit_s(self) -> float:
        """A job's Slurm time limit: the collector's, shipping it, and slack."""
        return self.needed_s + SHIP_TIMEOUT_S + SLACK_S


class Sweep:
    """One sweep over ``config.nodes`` through Slurm (``client`` runs every client command)."""

    def __init__(self, config: SweepConfig, client: SlurmRunner, *, say: Callable[[str], None] = print) -> None:
        self.config = config
        self.client = client
        self.say = say
        self.records = {node: NodeRecord(node) for node in config.nodes}
        self.book = JobBook()
        self.log = CommandLog(config.out_dir / LOG_FILE)
        self.label = f"sweep-{secrets.token_hex(3)}"
        self.most_at_once = 0
        self.at_once = 0
        self.started = time.time()
        self._host_names: dict[str, str] = {}
        self._groups = 0
        self._fleet: dict[str, Facts] = {}
        """The facts of every node whose job gathered them: the fleet INV-11 compares each node with."""
        self._jobs = SlurmJobs(client, partition=config.partition, qos=config.qos, nice=NICE,
                               collector=config.collector)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> dict[str, NodeRecord]:
        config = self.config
        partition, why = read_partition(self.client, config.partition)
        if partition is None:
            raise UsageError(f"--partition {config.partition}: Slurm does not know it ({why})")
        strangers = outside(config.nodes, partition)
        if strangers:
            raise UsageError(f"--nodes: {fold(strangers)} not in partition {config.partition} "
                             f"(Nodes={partition.nodes})")
        self.at_once = limit(config.share, partition.size)
        deadline = time.monotonic() + config.window_s
        self.say(f"burnin sweep: {fold(config.nodes)} ({len(config.nodes)}) in partition {config.partition}, "
                 f"at most {self.at_once} jobs at once, for {config.window_s:.0f} s")
        running: dict[Future[JobEnd | GroupEnd], tuple[str, ...]] = {}
        pool = ThreadPoolExecutor(max_workers=self.at_once)
        self._save()
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining < config.needed_s:
                    self.book.closed.set()
                if remaining <= 0:
                    self._cancel_open("the window closed")
                busy = {node for nodes in running.values() for node in nodes}
                waiting = [n for n in config.nodes if self._needs_job(n) and n not in busy]
                if not self.book.closed.is_set() and waiting:
                    self._start(pool, running, waiting, remaining)
                if not running and (self.book.closed.is_set() or not waiting):
                    break
                pause = max(0.1, min(config.poll_s, remaining if remaining > 0 else config.poll_s))
                done = wait(list(running), timeout=pause, return_when=FIRST_COMPLETED).done if running else set()
                if not running:
                    self.book.closed.wait(pause)
                for future in done:
                    running.pop(future)
                    ended = future.result()
                    if isinstance(ended, GroupEnd):
                        self._group_ended(ended)
                    else:
                        self._ended(ended)
        finally:
            self.book.closed.set()
            self._cancel_open("the sweep stopped")
            pool.shutdown(wait=not running, cancel_futures=True)
            self._cancel_strays()
            if running:  # jobs cancelled under them: each one's release notes what it shipped and could not remove
                wait(list(running), timeout=RELEASE_WAIT_S)
            self._ungrouped()
            self._save()
        return self.records

    def _needs_job(self, node: str) -> bool:
        """Not judged by the node suite yet, or admitted and waiting for a fabric group that can still form."""
        record = self.records[node]
        if not record.settled:
            return True
        return self.config.fabric_group >= 2 and record.awaits_group and groups_possible(
            self.records, self.config.fabric_group)

    def _ungrouped(self) -> None:
        """What the fabric part of a node that never got into a group came to."""
        if self.config.fabric_group < 2:
            return
        for record in self.records.values():
            if record.status == "admitted" and record.fabric == "pending":
                record.fabric = "ungrouped"
                record.fabric_why = (f"never {self.config.fabric_group} admitted nodes idle together while the "
                                     "window was open")

    def _start(self, pool: ThreadPoolExecutor, running: dict[Future[JobEnd | GroupEnd], tuple[str, ...]],
               waiting: list[str], time_limit_s: float) -> None:
        current, hosts, error = read_nodes(self.client, waiting)
        self._host_names.update(hosts)
        if error is not None:
            self.log.line(f"# node states: {error}")
            return
        for node in waiting:
            self.records[node].saw(current.get(node))
        in_jobs = [node for nodes in running.values() for node in nodes]
        group = pick_group(self.config.nodes, self.records, current, in_jobs, self.at_once, self.config.fabric_group)
        if group:
            running[self._start_group(pool, group, time_limit_s)] = tuple(group)
            in_jobs += group
        for node in pick(self.config.nodes, self.records, current, in_jobs, self.at_once):
            future: Future[JobEnd | GroupEnd] = pool.submit(
                run_node_job, self._jobs, node, label=f"{self.label}-{node}", host_name=self._host_names.get(node),
                sources=self.config.sources, timeout_s=self.config.timeout_s,
                time_limit_s=min(self.config.time_limit_s, time_limit_s), book=self.book, log=self.log)
            running[future] = (node,)
        self.most_at_once = max(self.most_at_once, sum(len(nodes) for nodes in running.values()))

    def _start_group(self, pool: ThreadPoolExecutor, group: list[str], time_limit_s: float
                     ) -> Future[JobEnd | GroupEnd]:
        from burnin.fabric.phase import FabricOptions
        from burnin.topology.load import find_topology

        self._groups += 1
        label = f"{self.label}-g{self._groups}"
        spec = GroupSpec(label, group_dir(self.config.out_dir, label), self.config.sources, self.config.timeout_s,
                         time_limit_s, find_topology(self.config.topology_ref),
                         self.config.fabric_options or FabricOptions())
        self.say(f"sweep: fabric group {label}: {fold(group)} ({len(group)} nodes idle together)")
        return pool.submit(run_group_job, self._jobs, group, spec, host_names=dict(self._host_names), book=self.book,
                           log=self.log)

    def _ended(self, end: JobEnd) -> None:
        record = self.records[end.node]
        if end.ending != "not-started":  # a job never granted is no attempt (the node is tried each round)
            record.attempts.append(Attempt(end.job_id, end.ending if end.ending in ("tested", "preempted")
                                           else f"{end.ending}: {end.why}"))
        if end.ending == "tested" and end.facts is not None:
            self._judge(record, end)
        elif end.ending == "preempted":
            record.status, record.why = "preempted", f"{end.why} by another job; tried again when idle"
            self.say(f"sweep: {end.node}: {end.why}; not tested, tried again when idle")
        elif end.ending == "ended":
            record.status, record.why = "ended", end.why
            self.say(f"sweep: {end.node}: not tested ({end.why})")
        else:
            refused = _CONFIG_ERROR.search(end.why)
            if refused:
                raise UsageError(f"Slurm refuses the sweep's jobs: {refused.group(0).strip()}")
            if record.status != "preempted":
                record.status, record.why = "busy", f"taken before its job could start ({end.why})"
        self._save()

    def _judge(self, record: NodeRecord, end: JobEnd) -> None:
        assert end.facts is not None
        result = judge(end.facts, topology_ref=self.config.topology_ref, out_dir=self.config.out_dir,
                       fleet=self._fleet)
        if not end.facts.unreachable:
            self._fleet[end.node] = end.facts
        decision = result.decisions[end.node]
        record.status = "admitted" if decision.admitted else "rejected"
        record.reasons = decision.reasons
        record.why = "" if decision.admitted else "; ".join(condense(decision.reasons)[:3])
        self.say(f"sweep: {end.node}: {'admitted' if decision.admitted else 'REJECTED ' + record.why} "
                 f"(job {end.job_id})")
        not_gated = gate_node(result, self.config.gate)
        if not_gated:
            self.say(f"sweep: {end.node}: {not_gated}")

    def _group_ended(self, end: GroupEnd) -> None:
        records = [self.records[node] for node in end.nodes]
        if end.ending != "not-started":
            for record in records:
                record.fabric_groups.append(Attempt(end.job_id, end.ending if end.ending in ("tested", "preempted")
                                                    else f"{end.ending}: {end.why}"))
        if end.ending == "tested":
            self._judge_group(end)
        elif end.ending in ("preempted", "ended"):
            retried = end.ending == "preempted"
            for record in records:
                record.fabric = end.ending
                record.fabric_why = f"{end.why}{' by another job; tried again when idle together' if retried else ''}"
            self.say(f"sweep: fabric group {end.label} ({fold(list(end.nodes))}): {end.why}; not tested"
                     + ("" if not retried else ", tried again when idle together"))
        else:
            refused = _CONFIG_ERROR.search(end.why)
            if refused:
                raise UsageError(f"Slurm refuses the sweep's jobs: {refused.group(0).strip()}")
            self.log.line(f"# fabric group {end.label} not started: {end.why}")
        self._save()

    def _judge_group(self, end: GroupEnd) -> None:
        folder = group_dir(self.config.out_dir, end.label)
        result = judge_group(end.facts, topology_ref=self.config.topology_ref, out_dir=folder)
        failed: list[str] = []
        for node in end.nodes:
            record, decision = self.records[node], result.decisions[node]
            record.fabric_results = str(folder)
            record.fabric_reasons = decision.reasons
            record.fabric_why = "" if decision.admitted else "; ".join(condense(decision.reasons)[:3])
            if decision.admitted:
                record.fabric = "passed"
            elif decision.failed:
                failed.append(node)
                record.fabric = "failed"
                record.status, record.reasons, record.why = "rejected", decision.reasons, record.fabric_why
            else:
                record.fabric = "incomplete"
            shown = "FAILED" if record.fabric == "failed" else record.fabric
            self.say(f"sweep: {node}: fabric {shown}{': ' + record.fabric_why if record.fabric_why else ''} "
                     f"(group {end.label}, job {end.job_id})")
        not_gated = gate_failed(result, failed, self.config.gate)
        if not_gated:
            self.say(f"sweep: fabric group {end.label}: {not_gated}")

    # -- cleaning up ------------------------------------------------------------------------

    def _cancel_open(self, why: str) -> None:
        cancelled: set[str] = set()
        for node, job_id in self.book.open_jobs().items():
            self.log.line(f"# {why}: cancelling job {job_id} of {node}")
            self.book.remove(node)
            if job_id not in cancelled:  # a group's members share one job
                cancelled.add(job_id)
                self._client(scancel_argv(job_id))

    def _cancel_strays(self) -> None:
        """Until Slurm's queue holds no job named for this sweep (one granted as the sweep stopped is cancelled;
        one being killed shows COMPLETING a while): at most :data:`SETTLE_WAIT_S`, so that the sweep leaves
        nothing of its own behind."""
        deadline = time.monotonic() + SETTLE_WAIT_S
        cancelled: set[str] = set()
        listed = self._client(jobs_named_argv())
        while listed.ok:
            left = parse_jobs_named(listed.stdout, f"burnin-{self.label}-")
            if not left or time.monotonic() > deadline:
                if left:
                    self.log.line(f"# still in the queue after {SETTLE_WAIT_S:g} s: jobs {', '.join(left)}")
                return
            for job_id in sorted(set(left) - cancelled):
                self._client(scancel_argv(job_id))
                cancelled.add(job_id)
            time.sleep(SETTLE_POLL_S)
            listed = self.client.run(jobs_named_argv(), timeout=QUICK_TIMEOUT)  # the polls go unlogged

    def _client(self, argv: list[str]) -> Any:
        result = self.client.run(argv, timeout=QUICK_TIMEOUT)
        self.log.command("", argv, result)
        return result

    # -- the record -------------------------------------------------------------------------

    def document(self) -> dict[str, object]:
        """``sweep.json``: the window, the settings, and every node's status, why and jobs."""
        by = counts(self.records)
        return {
            "started": self.started, "window_s": self.config.window_s, "partition": self.config.partition,
            "qos": self.config.qos, "at_once": self.at_once, "most_jobs_at_once": self.most_at_once,
            "fabric_group": self.config.fabric_group,
            "left_on_nodes": self.left_on_nodes(),
            "summary": {status: fold(nodes) for status, nodes in by.items()},
            "fabric_summary": ({status: fold(nodes) for status, nodes in fabric_counts(self.records).items()}
                               if self.config.fabric_group >= 2 else None),
            "nodes": {
                node: {"status": r.status, "tested": r.status in ("admitted", "rejected"), "why": r.why,
                       "reasons": list(r.reasons),
                       "results": str(node_dir(self.config.out_dir, node)) if r.status in ("admitted", "rejected")
                       else None,
                       "jobs": [{"job_id": a.job_id, "end": printable(a.end)} for a in r.attempts],
                       "fabric": self._fabric_document(r)}
                for node, r in self.records.items()
            },
        }

    def left_on_nodes(self) -> dict[str, list[str]]:
        """node -> the files its preempted, cancelled or timed-out jobs were shipped and no later job of the
        sweep could remove (``rm -f`` them, or let the node's reboot or tmp cleaner do it)."""
        return self._jobs.leftovers.remaining()

    def _fabric_document(self, record: NodeRecord) -> dict[str, object] | None:
        """A node's fabric part (None: fabric groups are off, or the node suite did not admit it)."""
        if self.config.fabric_group < 2 or (record.status != "admitted" and record.fabric == "pending"):
            return None
        return {"status": record.fabric, "tested": record.fabric in ("passed", "failed", "incomplete"),
                "why": printable(record.fabric_why), "reasons": [printable(r) for r in record.fabric_reasons],
                "results": record.fabric_results,
                "groups": [{"job_id": a.job_id, "end": printable(a.end)} for a in record.fabric_groups]}

    def _save(self) -> None:
        write_text_atomic(self.config.out_dir / SWEEP_FILE, json.dumps(self.document(), indent=1) + "\n")
