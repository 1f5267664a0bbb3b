"""Dispatch through Slurm: one allocation, one job step over all nodes.

``gather`` allocates the nodes (or uses the allocation it runs in), ships the
collector zipapp with ``sbcast`` (unless ``--collector`` names one already on
the nodes), runs it in ONE ``srun`` step with one task per node, removes it in
a second short step, and releases the allocation. Each node's facts come back
through srun's labelled stdout; a node whose task fails or times out is
``unreachable`` (so ``incomplete``) on its own, and the other nodes go on.

Slurm starts no job on a drained node. A node that burnin itself drained is
rechecked when the run gates (``--gate slurm``, not ``--dry-run``): it is moved
into a maintenance reservation of its own, resumed there (so no other job can
land on it), checked, drained again with its old reason, and the reservation
is dropped (:class:`burnin.transport.slurm_jobs.Allocation`); the gate then
resumes it if it passed. Nodes held by anyone else, down or not responding are
not touched and come back ``unreachable``.

Phases launch through :meth:`SlurmDispatcher.launcher`: srun steps in an
allocation of their own (or the one burnin runs in), with the same recheck.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from burnin.dispatch.base import DispatchContext, JobLauncher, preset_from_facts
from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.nodes import expand
from burnin.runner import facts_from_result
from burnin.transport.base import CommandResult
from burnin.transport.slurm import (
    QUICK_TIMEOUT,
    SlurmClient,
    collect_command,
    sbcast_argv,
    split_step,
    srun_argv,
)
from burnin.transport.slurm_jobs import Allocation, SlurmJobs, SlurmNode, read_nodes, recheckable

STAGE_DIR = "/tmp"  # node-local directory the collector is copied to
SBCAST_TIMEOUT = 60.0
CLEANUP_TIMEOUT = 30.0
STEP_SLACK = 30.0  # srun start-up and output transfer, beyond the per-node timeout
# A resumed node shows idle* for a moment; if the health check drains it again meanwhile
# (it still fails a fast check), the recheck allocation can never start: do not wait long.
RECHECK_WAIT = 20.0
USAGE = "--via slurm [--nodes NODESET]"


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--nodes", metavar="NODESET", help="slurm: nodes to run on (default: $SLURM_JOB_NODELIST)")
    group.add_argument("--partition", metavar="P", help="slurm: partition")
    group.add_argument("--reservation", metavar="R", help="slurm: reservation")
    group.add_argument("--collector", metavar="PATH",
                       help="slurm: collector zipapp already on the nodes (default: ship it with sbcast)")


def open_dispatcher(args: argparse.Namespace, context: DispatchContext) -> SlurmDispatcher:
    return SlurmDispatcher.from_args(args, context.topology_ref, context.out_dir)


@dataclass
class _Group:
    """Nodes that share one allocation: the normal ones, or the ones rechecked."""

    nodes: list[str]
    recheck: dict[str, str] = field(default_factory=dict)  # node -> the burnin reason it had


class SlurmDispatcher:
    """Runs the collector on Slurm nodes; see the module docstring for the flow."""

    def __init__(
        self,
        nodes: list[str],
        *,
        job_id: str | None = None,
        partition: str | None = None,
        reservation: str | None = None,
        collector: str | None = None,
        recheck_drained: bool = False,
        stage_dir: str = STAGE_DIR,
        client: SlurmClient | None = None,
        log_file: Path | None = None,
    ) -> None:
        self.nodes = nodes
        self.topology_by_node: dict[str, str] = {}
        self.job_id = job_id
        self.partition = partition
        self.reservation = reservation
        self.collector = collector
        self.recheck_drained = recheck_drained
        self.stage_dir = stage_dir.rstrip("/") or "/"
        self.client: SlurmClient = client or SlurmClient()
        self.log_file = log_file
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, topology_name: str, out_dir: Path) -> SlurmDispatcher:
        """Nodes from ``--nodes``, else the allocation this runs in (``SLURM_JOB_NODELIST``)."""
        del topology_name  # every node is judged against the run's topology
        if shutil.which("srun") is None:
            raise UsageError("srun not found on PATH: --via slurm needs Slurm's client commands "
                             "(Debian: apt-get install slurm-client)")
        job_nodes = os.environ.get("SLURM_JOB_NODELIST", "")
        job_id = os.environ.get("SLURM_JOB_ID") or None
        if args.nodes:
            nodes = expand(args.nodes)
            inside = bool(job_id and job_nodes and set(nodes) <= set(expand(job_nodes)))
        elif job_nodes and job_id:
            nodes, inside = expand(job_nodes), True
        else:
            raise UsageError("--via slurm needs --nodes NODESET, or run inside an allocation "
                             "(salloc/sbatch set SLURM_JOB_NODELIST)")
        if not nodes:
            raise UsageError("--via slurm: the node set is empty")
        return cls(
            nodes,
            job_id=job_id if inside else None,
            partition=getattr(args, "partition", None),
            reservation=getattr(args, "reservation", None),
            collector=getattr(args, "collector", None),
            recheck_drained=getattr(args, "gate", "none") == "slurm" and not getattr(args, "dry_run", False),
            log_file=out_dir / "slurm-commands.log",
        )

    # -- gathering -------------------------------------------------------------------------

    def gather(self, *, sources: str = "all", timeout: float = 120.0,
               on_done: Callable[[str], None] | None = None) -> dict[str, Facts]:
        token = secrets.token_hex(4)
        facts: dict[str, Facts] = {}

        def done(node: str, node_facts: Facts) -> None:
            facts[node] = node_facts
            if on_done is not None:
                on_done(node)

        skipped: dict[str, str] = {}
        if self.job_id:
            groups = [_Group(list(self.nodes))]
        else:
            groups, skipped = self._plan_groups()
        for node, reason in skipped.items():
            done(node, Facts.unreachable_node(node, reason))
        collector_args = ["--sources", sources, "--timeout", f"{max(1.0, timeout / 2):g}"]
        with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:
            futures = [pool.submit(self._run_group, group, token, collector_args, timeout)
                       for group in groups if group.nodes]
            for future in as_completed(futures):
                for node, result in future.result().items():
                    done(node, facts_from_result(result))
        return {node: facts[node] for node in self.nodes}

    def _plan_groups(self) -> tuple[list[_Group], dict[str, str]]:
        """Split the nodes by what Slurm will do with them: run, recheck, or refuse."""
        current, error = read_nodes(self.nodes, timeout=QUICK_TIMEOUT, client=self.client)
        self._log_line(f"# node states: {error or 'ok'}")
        if error and not current:
            return [_Group(list(self.nodes))], {}  # let salloc say what is wrong
        normal = _Group([])
        recheck = _Group([])
        skipped: dict[str, str] = {}
        for node in self.nodes:
            info = current.get(node)
            if info is None:
                skipped[node] = f"{node} is not a node of this Slurm cluster (scontrol: not found)"
            elif info.schedulable:
                normal.nodes.append(node)
            elif self.recheck_drained and recheckable(info):
                recheck.nodes.append(node)
                recheck.recheck[node] = info.reason
            else:
                skipped[node] = _refusal(info, self.recheck_drained)
        return [normal, recheck], skipped

    def _run_group(self, group: _Group, token: str, collector_args: list[str],
                   timeout: float) -> dict[str, CommandResult]:
        name = f"burnin-{'recheck-' if group.recheck else ''}{token}"
        allocation = Allocation(self.client, group.nodes, name=name, job_id=self.job_id, partition=self.partition,
                                reservation=self.reservation, drained=group.recheck, run=self._run)
        try:
            wait = min(timeout, RECHECK_WAIT) if group.recheck else timeout
            failure = allocation.open(time_limit_s=2 * timeout + 4 * STEP_SLACK, wait_s=wait, slack_s=STEP_SLACK)
            if failure:
                return _all_failed(group.nodes, failure)
            assert allocation.job_id is not None
            return self._collect(group.nodes, allocation.job_id, name, collector_args, timeout)
        finally:
            allocation.close()

    def _collect(self, nodes: list[str], job_id: str, name: str, collector_args: list[str],
                 timeout: float) -> dict[str, CommandResult]:
        path = self.collector
        if path is None:
            path = f"{self.stage_dir}/burnin-collector-{job_id}-{name.rsplit('-', 1)[-1]}.pyz"
            shipped = self._run(sbcast_argv(job_id, str(self._payload()), path,
                                            timeout_s=SBCAST_TIMEOUT / 2), SBCAST_TIMEOUT)
            if not shipped.ok:
                return _all_failed(nodes, f"sbcast of the collector failed: {shipped.describe_failure()}")
        step = self._run(srun_argv(job_id, nodes, collect_command(path, collector_args, timeout),
                                   time_limit_s=timeout + 2 * STEP_SLACK, job_name=name),
                         timeout + STEP_SLACK)
        results = split_step(step, nodes, node_timeout_s=timeout,
                             node_argv=["python3", path, *collector_args])
        if self.collector is None:
            # A step of its own, after every task ended: nodes that share a file system
            # must not lose the file while another node still reads it.
            self._run(srun_argv(job_id, nodes, ["rm", "-f", path], time_limit_s=CLEANUP_TIMEOUT,
                                job_name=name, label=False), CLEANUP_TIMEOUT)
        return results

    # -- helpers ---------------------------------------------------------------------------

    def _payload(self) -> Path:
        """The collector zipapp as a local file, for sbcast."""
        from burnin.transport.payload import collector_zipapp

        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="burnin-slurm-")
        path = Path(self._scratch.name) / "collector.pyz"
        if not path.exists():
            path.write_bytes(collector_zipapp())
        return path

    def _run(self, argv: list[str], timeout: float) -> CommandResult:
        result = self.client.run(argv, timeout=timeout)
        status = "timed out" if result.timed_out else f"exit {result.exit_status}"
        self._log_line(f"$ {' '.join(argv[:12])}{' ...' if len(argv) > 12 else ''}\n"
                       f"  -> {status} in {result.duration_s:.2f} s"
                       + (f"; {result.tail(3)}" if not result.ok and result.tail(3) else ""))
        return result

    def _log_line(self, text: str) -> None:
        if self.log_file is None:
            return
        try:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with self.log_file.open("a", encoding="utf-8") as handle:
                handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
        except OSError:
            pass  # the log is an aid; a read-only out dir must not stop the run

    def launcher(self, facts: Mapping[str, Facts]) -> JobLauncher:
        """srun steps from here, in an allocation of the phase's own (or the one burnin runs in)."""
        jobs = SlurmJobs(self.client, job_id=self.job_id, partition=self.partition, reservation=self.reservation,
                         recheck_drained=self.recheck_drained, collector=self.collector)
        return JobLauncher("slurm", "srun", preset_from_facts(facts), slurm=jobs)

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
        self.client.close()


def _refusal(info: SlurmNode, rechecking: bool) -> str:
    held = f"Slurm will start no job on {info.name}: State={info.state}"
    if info.reason:
        held += f", Reason={info.reason!r}"
    if info.ours and not rechecking:
        held += "; run with --gate slurm to recheck a node burnin drained"
    return held


def _all_failed(nodes: list[str], why: str) -> dict[str, CommandResult]:
    return {node: CommandResult(node, ("srun",), None, "", "", 0.0, error=why) for node in nodes}

