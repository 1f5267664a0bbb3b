"""The soak's nodes through Slurm (``burnin soak --via slurm``): one allocation for the whole soak.

- :meth:`SlurmNodes.open` reads the nodes' states, allocates the ones Slurm
  will run a job on, once, for as long as the soak may last (``salloc
  --no-shell --exclusive`` through the launcher's
  :class:`~burnin.transport.slurm_jobs.SlurmJobs`: its partition, reservation
  and, under ``--gate slurm``, the recheck of nodes burnin drained), or uses the
  allocation burnin runs in, and ships the collector there with ``sbcast``
  (unless ``--collector`` names one already on the nodes). A node Slurm will
  start no job on (drained or down by someone else, unknown) stays in the soak,
  unreachable, so it is judged incomplete with the cause; the others go on.
- Each stage command is an srun step per node
  (:class:`~burnin.transport.slurm.SlurmStepTransport`), every node at once,
  so one node's failure or hang stays its own. Input a command reads on stdin
  (burnin's portable GPU stress on ``python3 -``) is shipped once with
  ``sbcast`` and redirected from that file.
- Each sample is one collector step over the nodes asked for, split back per
  node; if that step reaches no node at all (one node's slurmd gone can fail
  a whole step), each node is sampled in a step of its own.
- :meth:`close` removes what was shipped and releases the allocation (also
  after an interrupt: ``scancel`` still runs then); a node burnin rechecked is
  drained again with its old reason unless the soak drained it meanwhile.

Every client command goes to ``OUT/slurm-commands.log``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.soak.nodes import SAMPLE_SOURCES
from burnin.transport.base import CommandResult
from burnin.transport.slurm import (
    QUICK_TIMEOUT,
    SlurmRunner,
    SlurmStepTransport,
    collect_command,
    sbcast_argv,
    split_step,
    srun_argv,
)
from burnin.transport.slurm_jobs import Allocation, SlurmJobs, read_nodes, recheckable

ALLOCATION_WAIT_S = 300.0
"""How long the soak waits for its allocation."""
STAGE_DIR = "/tmp"  # node-local folder for what is shipped (collector, a command's input)
SBCAST_TIMEOUT_S = 60.0
STEP_SLACK_S = 30.0  # srun start-up and output transfer, beyond a command's own timeout
CLEANUP_TIMEOUT_S = 30.0
# Runs "$@" with its stdin read from the file $1 (the shipped input).
STDIN_FROM_FILE = 'f=$1; shift; exec "$@" < "$f"'


class _LoggedClient:
    """The Slurm client with every command and its outcome appended to a log file."""

    def __init__(self, client: SlurmRunner, log_file: Path | None) -> None:
        self._client = client
        self._log_file = log_file
        self._lock = threading.Lock()

    def run(self, argv: Sequence[str], *, timeout: float = QUICK_TIMEOUT) -> CommandResult:
        result = self._client.run(list(argv), timeout=timeout)
        if self._log_file is not None:
            status = "timed out" if result.timed_out else f"exit {result.exit_status}"
            failure = f"; {result.tail(3)}" if not result.ok and result.tail(3) else ""
            line = (f"{time.strftime('%H:%M:%S')} $ {' '.join(argv[:14])}{' ...' if len(argv) > 14 else ''}\n"
                    f"  -> {status} in {result.duration_s:.2f} s{failure}\n")
            try:
                with self._lock, self._log_file.open("a", encoding="utf-8") as handle:
                    handle.write(line)
            except OSError:
                pass  # the log is an aid; an unwritable one must not stop the soak
        return result

    def call(self, argv: list[str], timeout: float) -> CommandResult:
        """``run`` in the shape :class:`~burnin.transport.slurm_jobs.Allocation` takes."""
        return self.run(argv, timeout=timeout)


class SlurmNodes:
    """The soak's nodes in one Slurm allocation; see the module docstring."""

    def __init__(self, jobs: SlurmJobs, nodes: Sequence[str], *, log_file: Path | None = None,
                 stage_dir: str = STAGE_DIR) -> None:
        self.nodes: list[str] = list(nodes)
        self._jobs = jobs
        self._client = _LoggedClient(jobs.client, log_file)
        self._stage_dir = stage_dir.rstrip("/") or "/"
        self._allocation: Allocation | None = None
        self._steps: SlurmStepTransport | None = None
        self._held: dict[str, str] = {}  # node -> why Slurm runs nothing there
        self._collector: str | None = jobs.collector
        self._shipped: dict[str, str] = {}  # digest -> path on the nodes
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()

    # -- opening and closing --------------------------------------------------------------

    def open(self, *, time_limit_s: float, wait_s: float = ALLOCATION_WAIT_S) -> None:
        """Allocate the nodes and ship the collector; a UsageError (one line) when the soak cannot start."""
        self._held = self._refused()
        usable = [n for n in self.nodes if n not in self._held]
        if not usable:
            raise UsageError("no node of the soak can run a Slurm job: "
                             + "; ".join(self._held[n] for n in self.nodes))
        allocation = self._jobs.allocation(usable, label="soak", exclusive=True, tasks_per_node=1,
                                           purpose="the soak", run=self._client.call)
        self._allocation = allocation
        failure = allocation.open(time_limit_s=time_limit_s, wait_s=wait_s, slack_s=STEP_SLACK_S)
        if failure is not None or allocation.job_id is None:
            self.close()
            raise UsageError(failure or "no Slurm allocation for the soak")
        self._steps = SlurmStepTransport(self._client, allocation.job_id, job_name=allocation.name)
        if self._collector is None:
            try:
                self._collector = self._ship(_collector_bytes(), "collector.pyz")
            except _NotShipped as exc:
                self.close()
                raise UsageError(f"cannot ship the collector to the soak's nodes: {exc}") from None

    def _refused(self) -> dict[str, str]:
        """Nodes Slurm will start no job on (and that burnin does not recheck), with why."""
        current, error = read_nodes(self.nodes, timeout=QUICK_TIMEOUT, client=self._client)
        if error and not current:
            return {}  # salloc says what is wrong
        held: dict[str, str] = {}
        for node in self.nodes:
            info = current.get(node)
            if info is None:
                held[node] = f"{node} is not a node of this Slurm cluster (scontrol: not found)"
            elif not info.schedulable and not (self._jobs.recheck_drained and recheckable(info)):
                reason = f", Reason={info.reason!r}" if info.reason else ""
                hint = "; run with --gate slurm to soak a node burnin drained" if info.ours else ""
                held[node] = f"Slurm will start no job on {node}: State={info.state}{reason}{hint}"
        return held

    def close(self) -> None:
        """Remove what was shipped, release the allocation, drain rechecked nodes again."""
        allocation, self._allocation = self._allocation, None
        try:
            if allocation is not None and allocation.job_id and self._shipped:
                usable = [n for n in self.nodes if n not in self._held]
                # A step of its own, after every other one: nodes sharing a file system
                # must not lose a file another node still reads.
                self._client.run(srun_argv(allocation.job_id, usable, ["rm", "-f", *sorted(self._shipped.values())],
                                           time_limit_s=CLEANUP_TIMEOUT_S, job_name=allocation.name, label=False),
                                 timeout=CLEANUP_TIMEOUT_S)
                self._shipped.clear()
        finally:
            if allocation is not None:
                allocation.close()
            if self._scratch is not None:
                self._scratch.cleanup()
                self._scratch = None

    # -- shipping -------------------------------------------------------------------------

    def _ship(self, data: bytes, label: str) -> str:
        """``data`` as a file on every allocated node (once per content); its path there."""
        assert self._allocation is not None and self._allocation.job_id is not None
        digest = hashlib.sha256(data).hexdigest()[:16]
        with self._lock:
            known = self._shipped.get(digest)
            if known is not None:
                return known
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="burnin-soak-")
            local = Path(self._scratch.name) / digest
            local.write_bytes(data)
            job_id = self._allocation.job_id
            dest = f"{self._stage_dir}/burnin-soak-{job_id}-{digest}-{label}"
            shipped = self._client.run(sbcast_argv(job_id, str(local), dest, timeout_s=SBCAST_TIMEOUT_S / 2),
                                       timeout=SBCAST_TIMEOUT_S)
            if not shipped.ok:
                raise _NotShipped(f"sbcast failed: {shipped.describe_failure()}")
            self._shipped[digest] = dest
            return dest

    # -- the SoakNodes protocol -----------------------------------------------------------

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float,
            stdin: bytes | None = None) -> dict[str, CommandResult]:
        if not nodes:
            return {}
        steps = self._steps
        command = list(argv)
        failure = None if steps is not None else "the soak holds no Slurm allocation"
        if stdin is not None and failure is None:
            try:
                command = ["sh", "-c", STDIN_FROM_FILE, "sh", self._ship(stdin, "stdin"), *argv]
            except _NotShipped as exc:
                failure = f"cannot ship the command's input to the nodes: {exc}"

        def one(node: str) -> CommandResult:
            why = self._held.get(node) or failure
            if why is not None or steps is None:
                return CommandResult(node, tuple(argv), None, "", "", 0.0, error=why)
            try:
                result = steps.run(node, command, timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - one node's failure must not stop the soak
                return CommandResult(node, tuple(argv), None, "", "", 0.0, error=f"{type(exc).__name__}: {exc}")
            return dataclasses.replace(result, argv=tuple(argv))

        # every node at once: a stage loads the whole soak together
        with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="burnin-soak-step") as pool:
            return dict(zip(nodes, pool.map(one, nodes), strict=True))

    def sample(self, *, timeout: float, nodes: Sequence[str] | None = None) -> dict[str, Facts]:
        wanted = list(self.nodes if nodes is None else nodes)
        facts = {node: Facts.unreachable_node(node, self._held[node]) for node in wanted if node in self._held}
        reachable = [node for node in wanted if node not in self._held]
        if reachable:
            results = self._collect(reachable, timeout)
            if len(reachable) > 1 and not any(r.ok for r in results.values()):
                with ThreadPoolExecutor(max_workers=len(reachable), thread_name_prefix="burnin-soak-sample") as pool:
                    singles = pool.map(lambda node: self._collect([node], timeout)[node], reachable)
                    results = dict(zip(reachable, singles, strict=True))
            facts.update({node: _facts(result) for node, result in results.items()})
        return {node: facts[node] for node in wanted}

    def _collect(self, nodes: list[str], timeout: float) -> dict[str, CommandResult]:
        allocation = self._allocation
        if allocation is None or allocation.job_id is None or self._collector is None:
            return {n: CommandResult(n, ("srun",), None, "", "", 0.0, error="the soak holds no Slurm allocation")
                    for n in nodes}
        args = ["--sources", SAMPLE_SOURCES, "--timeout", f"{max(1.0, timeout / 2):g}"]
        step = self._client.run(srun_argv(allocation.job_id, nodes, collect_command(self._collector, args, timeout),
                                          time_limit_s=timeout + 2 * STEP_SLACK_S, job_name=allocation.name),
                                timeout=timeout + STEP_SLACK_S)
        return split_step(step, nodes, node_timeout_s=timeout, node_argv=["python3", self._collector, *args])


class _NotShipped(Exception):
    """sbcast could not put a file on the nodes."""


def _collector_bytes() -> bytes:
    from burnin.transport.payload import collector_zipapp

    return collector_zipapp()


def _facts(result: CommandResult) -> Facts:
    from burnin.runner import facts_from_result

    return facts_from_result(result)
