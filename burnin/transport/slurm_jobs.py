"""Slurm's job layer: node states, one allocation, and measuring nodes burnin drained.

Everything that reaches nodes through Slurm holds them through here: the Slurm
launcher (:mod:`burnin.launch.slurm`, which the collector step, every phase and
the soak run through) and the Slurm gate. Nothing here
starts a process itself: every command goes to a
:class:`~burnin.transport.slurm.SlurmRunner` (normally
:class:`~burnin.transport.slurm.SlurmClient`), bounded by a timeout.

- :func:`read_nodes` reads node states and drain reasons (``scontrol show node``);
- :class:`Allocation` holds one allocation (``salloc --no-shell``) of a node set
  for as long as a caller needs it, or uses the allocation burnin runs in;
- :class:`Recheck`: Slurm starts no job on a drained node. To measure a node
  burnin drained (reason ``burnin:...``) again, a maintenance reservation
  (``MAINT,IGNORE_JOBS``, for this user only) is put over it first, then it is
  resumed inside it, so no other job can land on it at any moment. Afterwards
  each node is drained again with the reason it had (unless something drained
  it again meanwhile, whose newer reason stays) and the reservation is deleted;
  the gate decides then. The reservation may cover more nodes than the drained
  ones (a phase needs all its nodes in one allocation); only the drained ones are
  resumed and drained again.

A drain reason burnin sets starts with ``burnin:`` (DESIGN.md, "Contracts");
what the gate does with it is :mod:`burnin.gate.slurm`.
"""

from __future__ import annotations

import os
import pwd
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from burnin.nodes import fold
from burnin.text import printable
from burnin.transport.base import CommandResult
from burnin.transport.slurm import (
    QUICK_TIMEOUT,
    SlurmClient,
    SlurmRunner,
    create_reservation_argv,
    delete_reservation_argv,
    granted_job_id,
    salloc_argv,
    scancel_argv,
    show_node_argv,
)

BURNIN_PREFIX = "burnin:"
REASON_LIMIT = 200
POLL_S = 0.5

# Runs one client command with a timeout (and logs it): the caller's own runner.
RunCommand = Callable[[list[str], float], CommandResult]

_STATE_RE = re.compile(r"(?:^|\s)State=(\S+)")
# Slurm prints ``Reason=<text> [user@time]``; the text itself may hold spaces and '='.
_REASON_RE = re.compile(r"(?:^|\s)Reason=(.*?) \[[^\]\s]*@[^\]\s]*\](?=\s|$)")
_REASON_TAIL_RE = re.compile(r"(?:^|\s)Reason=(.*)$")
_NAME_RE = re.compile(r"^NodeName=(\S+)")
_NOT_FOUND_RE = re.compile(r"Node (\S+) not found")
# Base states and flags under which Slurm starts no new job on a node.
_UNAVAILABLE = frozenset({"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN",
                          "POWERING_DOWN", "POWERING_UP", "REBOOT_ISSUED", "UNKNOWN"})
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


# ---------------------------------------------------------------- jobs

_JOB_FIELD = r"(?:^|\s){}=(\S*)"
JOB_LIVE_STATES = frozenset({"RUNNING", "CONFIGURING", "SUSPENDED", "RESIZING"})
"""States of a job whose allocation still holds its nodes (steps may run, or will once it is resumed)."""


def field_value(line: str, name: str) -> str | None:
    """``NAME=value`` of a ``scontrol --oneliner show`` line (None: no such field)."""
    match = re.search(_JOB_FIELD.format(re.escape(name)), line)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job as ``scontrol show job`` reports it."""

    job_id: str
    state: str
    nodes: str
    reason: str = ""

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def show_job_argv(job_id: str) -> list[str]:
    return ["scontrol", "--oneliner", "show", "job", job_id]


def parse_show_job(text: str, job_id: str) -> JobInfo | None:
    """The job ``job_id`` from ``scontrol --oneliner show job`` output (None: not there)."""
    for line in text.splitlines():
        if field_value(line, "JobId") == job_id:
            return JobInfo(job_id, field_value(line, "JobState") or "UNKNOWN", field_value(line, "NodeList") or "",
                           field_value(line, "Reason") or "")
    return None


def read_job(client: SlurmRunner, job_id: str) -> tuple[JobInfo | None, str | None]:
    """The job's state now; the error line when Slurm could not say."""
    result = client.run(show_job_argv(job_id), timeout=QUICK_TIMEOUT)
    info = parse_show_job(result.stdout, job_id)
    if info is None:
        return None, result.describe_failure() if not result.ok else f"job {job_id} not found"
    return info, None


def job_ended(run: RunCommand, job_id: str) -> str | None:
    """Why job ``job_id`` no longer holds its nodes (``job 7 CANCELLED``, ``job 7 is gone``); None while it does,
    and when Slurm could not say: a controller that does not answer for a moment ends no job. ``run``: the
    caller's runner (which logs the command)."""
    result = run(show_job_argv(job_id), QUICK_TIMEOUT)
    info = parse_show_job(result.stdout, job_id)
    if info is not None:
        if info.state in JOB_LIVE_STATES:
            return None
        reason = f" ({info.reason})" if info.reason not in ("", "None") else ""
        return f"job {job_id} {info.state}{reason}"
    if "Invalid job id" in result.stderr:
        return f"job {job_id} is gone (Slurm no longer knows it)"
    return None


# ---------------------------------------------------------------- node states


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """A node as ``scontrol show node`` reports it: ``State=IDLE+DRAIN``, its reason."""

    name: str
    state: str
    reason: str = ""

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(part.rstrip("*") for part in self.state.upper().split("+") if part)

    @property
    def drained(self) -> bool:
        """Drained or draining (DRAIN flag, with or without jobs still running)."""
        return "DRAIN" in self.flags

    @property
    def busy(self) -> bool:
        return bool(self.flags & _BUSY)

    @property
    def ours(self) -> bool:
        return self.reason.startswith(BURNIN_PREFIX)

    @property
    def held_by_others(self) -> bool:
        """Out of the pool for a reason burnin did not set (operator drain, down, fail)."""
        return bool(self.reason) and not self.ours and bool(self.flags & _UNAVAILABLE)

    @property
    def schedulable(self) -> bool:
        return not self.flags & _UNAVAILABLE


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """``scontrol --oneliner show node`` output -> nodes by name (unknown names omitted)."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        name = _NAME_RE.match(line.strip())
        if name is None:
            continue
        state = _STATE_RE.search(line)
        reason = _REASON_RE.search(line) or _REASON_TAIL_RE.search(line)
        nodes[name.group(1)] = SlurmNode(
            name.group(1), state.group(1) if state else "UNKNOWN",
            reason.group(1).strip() if reason else "",
        )
    return nodes


def unknown_nodes(text: str) -> list[str]:
    """Names scontrol said it does not know (``Node X not found``)."""
    return _NOT_FOUND_RE.findall(text)


def read_nodes(nodes: Sequence[str], *, timeout: float = QUICK_TIMEOUT,
               client: SlurmRunner | None = None) -> tuple[dict[str, SlurmNode], str | None]:
    """Current state of ``nodes`` in one scontrol call; the error line when it failed."""
    if not nodes:
        return {}, None
    result = (client or SlurmClient()).run(show_node_argv(fold(nodes)), timeout=timeout)
    found = parse_show_node(result.stdout)
    if result.error or result.timed_out or (not found and result.exit_status != 0):
        return found, result.describe_failure()
    return found, None


def burnin_reason(text: str, limit: int = REASON_LIMIT) -> str:
    """``burnin: <text>`` on one line, at most ``limit`` characters.

    The text carries what a node printed: line breaks become spaces and every
    other control character is shown escaped (``\\x1b``), never passed to Slurm raw.
    """
    text = printable(" ".join(text.split()))
    if not text.startswith(BURNIN_PREFIX):
        text = f"{BURNIN_PREFIX} {text}".rstrip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drain_argv(node: str, reason: str) -> list[str]:
    """``scontrol update`` draining ``node`` (a name or a folded set) with a burnin reason."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={burnin_reason(reason)}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


# ---------------------------------------------------------------- recheck


def recheckable(info: SlurmNode) -> bool:
    """Drained by burnin, no job left on it, and slurmd answering."""
    return (info.drained and info.ours and not info.busy
            and not info.flags & {"DOWN", "NOT_RESPONDING", "FAIL"})


@dataclass
class Recheck:
    """A reservation ``name`` over ``nodes``; ``drained`` maps each node to resume to its reason."""

    name: str
    nodes: list[str]
    drained: dict[str, str] = field(default_factory=dict)

    def open(self, run: RunCommand) -> str | None:
        """Reserve the nodes, then resume the drained ones inside; why not, on failure.

        Call :meth:`close` afterwards in every case, failed or not.
        """
        user = pwd.getpwuid(os.getuid()).pw_name
        made = run(create_reservation_argv(self.name, self.nodes, user), QUICK_TIMEOUT)
        if not made.ok:
            return f"cannot reserve the node to recheck it: {made.describe_failure()}"
        resumed = run(resume_argv(fold(list(self.drained))), QUICK_TIMEOUT)
        if not resumed.ok:
            return f"cannot resume the node inside reservation {self.name}: {resumed.describe_failure()}"
        return None

    def allocate(self, run: RunCommand, client: SlurmRunner, argv: list[str], timeout: float,
                 job_name: str) -> tuple[CommandResult, str]:
        """Run ``argv`` (salloc), given up as soon as a resumed node is drained again meanwhile.

        A resumed node is not schedulable for a moment (``idle*``); a health check
        that finds it still failing drains it again, and the allocation could never
        start. Returns salloc's result and, in that case, why it was cancelled.
        """
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(run, argv, timeout)
            while True:
                try:
                    return pending.result(timeout=POLL_S), ""
                except FutureTimeout:
                    pass
                current, _ = read_nodes(list(self.drained), timeout=QUICK_TIMEOUT, client=client)
                again = {n: info.reason for n, info in current.items() if info.drained}
                if again:
                    run(scancel_argv(job_name=job_name), QUICK_TIMEOUT)
                    reasons = "; ".join(f"{n}: {r}" for n, r in again.items())
                    return pending.result(), f"drained again while waiting to be rechecked ({reasons})"

    def close(self, run: RunCommand, client: SlurmRunner) -> None:
        """Drain each resumed node again with the reason it had, then drop the reservation.

        A node drained again meanwhile keeps that newer reason. If a drain fails
        the reservation is kept, so the node still takes no job.
        """
        restored = True
        current, error = read_nodes(list(self.drained), timeout=QUICK_TIMEOUT, client=client)
        by_reason: dict[str, list[str]] = {}
        for node, reason in self.drained.items():
            info = current.get(node)
            if error is None and info is not None and info.drained:
                continue
            by_reason.setdefault(reason, []).append(node)
        for reason, nodes in by_reason.items():
            restored &= run(drain_argv(fold(nodes), reason), QUICK_TIMEOUT).ok
        if restored:
            run(delete_reservation_argv(self.name), QUICK_TIMEOUT)


# ---------------------------------------------------------------- allocation


class Allocation:
    """One allocation of ``nodes`` for as long as the caller holds it, or the one burnin runs in.

    ``drained`` names nodes burnin drained that are measured too: the allocation
    is made inside a reservation (:class:`Recheck`) and each is drained again on
    :meth:`close`. ``run`` runs (and logs) every client command; default: the client.
    """

    def __init__(self, client: SlurmRunner, nodes: Sequence[str], *, name: str, job_id: str | None = None,
                 partition: str | None = None, reservation: str | None = None, exclusive: bool = False,
                 tasks_per_node: int | None = 1, drained: Mapping[str, str] | None = None,
                 purpose: str = "", run: RunCommand | None = None, qos: str | None = None,
                 nice: int | None = None) -> None:
        self.client = client
        self.nodes = list(nodes)
        self.name = name
        self.job_id = job_id
        self.own = job_id is None
        self.partition = partition
        self.reservation = reservation
        self.exclusive = exclusive
        self.tasks_per_node = tasks_per_node
        self.purpose = purpose
        self.qos = qos
        self.nice = nice
        self._run = run or (lambda argv, timeout: client.run(argv, timeout=timeout))
        self._recheck = Recheck(name, self.nodes, dict(drained)) if drained else None

    @property
    def rechecking(self) -> bool:
        return self._recheck is not None

    def open(self, *, time_limit_s: float, wait_s: float, slack_s: float) -> str | None:
        """Allocate (waiting at most ``wait_s`` for the nodes); why not, on failure.

        Call :meth:`close` afterwards in every case, failed or not.
        """
        if not self.own or not self.nodes:
            return None
        why = f"no Slurm allocation{' for ' + self.purpose if self.purpose else ''}"
        reservation = self.reservation
        if self._recheck is not None:
            failure = self._recheck.open(self._run)
            if failure:
                return f"{why}: {failure}"
            reservation = self._recheck.name
        argv = salloc_argv(self.nodes, job_name=self.name, time_limit_s=time_limit_s, immediate_s=wait_s,
                           partition=self.partition, reservation=reservation, exclusive=self.exclusive,
                           tasks_per_node=self.tasks_per_node, qos=self.qos, nice=self.nice)
        if self._recheck is not None:
            result, drained_again = self._recheck.allocate(self._run, self.client, argv, wait_s + slack_s, self.name)
        else:
            result, drained_again = self._run(argv, wait_s + slack_s), ""
        job_id = granted_job_id(result.stderr)
        if job_id is None:
            if result.timed_out:
                self._run(scancel_argv(job_name=self.name), QUICK_TIMEOUT)
            return f"{why}: {drained_again or result.describe_failure()}"
        self.job_id = job_id
        return None

    def close(self) -> None:
        """Release the allocation (only one burnin made), then drain rechecked nodes again."""
        try:
            if self.own and self.job_id is not None:
                self._run(scancel_argv(self.job_id), QUICK_TIMEOUT)
                self.job_id = None
        finally:
            if self._recheck is not None:
                self._recheck.close(self._run, self.client)
                self._recheck = None


class Leftovers:
    """Files shipped to nodes that could not be removed with their job (it ended first: preempted, cancelled,
    timed out, or Slurm refused the clean-up step), by node: the next allocation of such a node removes them
    too, and whatever no later job could remove is said at the end. Shared by every launcher of one
    :class:`SlurmJobs` (a sweep's hundreds of single-node jobs), safe across their threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: dict[str, set[str]] = {}  # node -> paths on it

    def add(self, nodes: Sequence[str], paths: Sequence[str]) -> None:
        with self._lock:
            for node in nodes:
                self._paths.setdefault(node, set()).update(paths)

    def on(self, nodes: Sequence[str]) -> list[str]:
        """Every path left on any of ``nodes``."""
        with self._lock:
            return sorted({path for node in nodes for path in self._paths.get(node, ())})

    def removed(self, nodes: Sequence[str], paths: Sequence[str]) -> None:
        with self._lock:
            for node in nodes:
                left = self._paths.get(node)
                if left is not None:
                    left.difference_update(paths)
                    if not left:
                        del self._paths[node]

    def remaining(self) -> dict[str, list[str]]:
        """node -> the paths still left on it."""
        with self._lock:
            return {node: sorted(paths) for node, paths in sorted(self._paths.items())}


@dataclass(frozen=True, slots=True)
class SlurmJobs:
    """How a run reaches its nodes through Slurm: the client, and where allocations go.

    ``job_id``: the allocation burnin runs in (no allocation is made then);
    ``recheck_drained``: nodes burnin drained are measured too (``--gate slurm``);
    ``collector``: the collector zipapp already on the nodes (None: whoever samples ships it);
    ``qos``, ``nice``: the QOS and the nice value of the allocations made (``burnin sweep``: the site's
    preemptible QOS, the lowest priority);
    ``leftovers``: files shipped to the nodes whose job ended before they could be removed.
    """

    client: SlurmRunner
    job_id: str | None = None
    partition: str | None = None
    reservation: str | None = None
    recheck_drained: bool = False
    collector: str | None = None
    qos: str | None = None
    nice: int | None = None
    leftovers: Leftovers = field(default_factory=Leftovers, compare=False, repr=False)
    """What this run shipped and could not remove yet (:class:`Leftovers`), shared by its launchers."""
