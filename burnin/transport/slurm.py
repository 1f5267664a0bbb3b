"""Slurm's client commands as argv lists, and running them with a timeout.

The builders are pure functions (unit-tested without daemons). ``SlurmClient``
runs them through :class:`~burnin.transport.local.LocalTransport`, so every
call is bounded: ``scontrol`` can hang while slurmd is not registered, and
``salloc`` waits for resources.

A per-node step (the collector, a phase's tool on every node; its argv is the
launch layer's, :func:`burnin.launch.slurm.srun_argv`) is one ``srun`` over all
nodes with ``--label``, split back into one result per node by
:func:`split_step`. srun cuts long output lines into labelled chunks, so the
collector's stdout is rebuilt by joining its chunks, and the node a task ran on
is taken from a marker line the task prints itself (``@burnin-node NAME@``)
rather than from Slurm's task placement. Node states, allocations and the
recheck of drained nodes are :mod:`burnin.transport.slurm_jobs`. Slurm's recorded node events
(``sacctmgr show event``, :func:`sacctmgr_events_argv`) are read for ``burnin reliability``. See docs/slurm.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from burnin.nodes import fold
from burnin.transport.base import CommandResult
from burnin.transport.local import LocalTransport

# CommandResult.node for client commands run on the controller side.
CONTROLLER = "slurm-controller"
# Seconds allowed to quick client calls (scontrol, scancel, sinfo).
QUICK_TIMEOUT = 10.0
# Client commands that still run once the run is interrupted (see SlurmClient.run).
CLEANUP_COMMANDS = ("scancel", "scontrol")

NODE_MARK = "@burnin-node "
EXIT_MARK = "@burnin-exit "
_NODE_RE = re.compile(r"@burnin-node ([^@\s]+)@")
_EXIT_RE = re.compile(r"@burnin-exit (\d+)@")
_LABEL_RE = re.compile(r"^\s*(\d+): ?(.*)$")
_GRANTED_RE = re.compile(r"Granted job allocation (\d+)")

# Runs on every node of the step: $0 collector path, $1 seconds, the rest are
# the collector's arguments. The markers frame the output (srun joins nothing,
# it only labels), and `timeout` bounds a hung interpreter on that node alone.
TASK_SCRIPT = (
    'f=$0; t=$1; shift; '
    'printf "\\n@burnin-node %s@\\n" "${SLURMD_NODENAME:-$(hostname -s)}"; '
    'timeout -k 5 "$t" python3 "$f" "$@"; rc=$?; '
    'printf "\\n@burnin-exit %s@\\n" "$rc"; exit "$rc"'
)
TIMEOUT_EXIT = 124  # coreutils `timeout` exit status when it had to kill
# One task per node of a per-node step running any command ("$@"): its output
# framed by the node's name and its exit status, like the collector's task.
PER_NODE_TASK = (
    'printf "\\n@burnin-node %s@\\n" "${SLURMD_NODENAME:-$(hostname -s)}"; '
    '"$@"; rc=$?; printf "\\n@burnin-exit %s@\\n" "$rc"; exit "$rc"'
)


def minutes(seconds: float) -> int:
    """Slurm time limits are whole minutes: round up, at least one."""
    return max(1, math.ceil(seconds / 60.0))


def salloc_argv(
    nodes: Sequence[str],
    *,
    job_name: str,
    time_limit_s: float,
    immediate_s: float,
    partition: str | None = None,
    reservation: str | None = None,
    exclusive: bool = False,
    tasks_per_node: int | None = 1,
    qos: str | None = None,
    nice: int | None = None,
) -> list[str]:
    """An allocation of exactly ``nodes`` (``tasks_per_node`` tasks each), without a shell.

    ``--immediate`` bounds the wait for resources; ``--no-kill`` keeps the
    allocation when one node fails, so the other nodes still report;
    ``exclusive``: whole nodes (the phases' measurements share them with no job);
    ``qos``, ``nice``: the site's QOS and a priority below every other job's (``burnin sweep``).
    """
    argv = ["salloc", "--no-shell", "--no-kill"]
    if exclusive:
        argv.append("--exclusive")
    argv += [f"--nodes={len(nodes)}", f"--nodelist={fold(nodes)}"]
    if tasks_per_node is not None:
        argv.append(f"--ntasks-per-node={tasks_per_node}")
    argv += [f"--job-name={job_name}", f"--time={minutes(time_limit_s)}",
             f"--immediate={max(1, math.ceil(immediate_s))}"]
    if partition:
        argv.append(f"--partition={partition}")
    if reservation:
        argv.append(f"--reservation={reservation}")
    if qos:
        argv.append(f"--qos={qos}")
    if nice is not None:
        argv.append(f"--nice={nice}")
    return argv


def sbcast_argv(job_id: str, source: str, dest: str, *, timeout_s: float) -> list[str]:
    """Copy ``source`` to ``dest`` on every node of the job (replacing it)."""
    return ["sbcast", f"--jobid={job_id}", "--force", f"--timeout={max(1, math.ceil(timeout_s))}",
            source, dest]


def collect_command(collector_path: str, collector_args: Sequence[str], timeout_s: float) -> list[str]:
    """The task of the collector step (see ``TASK_SCRIPT``)."""
    return ["sh", "-c", TASK_SCRIPT, collector_path, f"{max(1, math.ceil(timeout_s))}",
            *collector_args]


def scancel_argv(job_id: str | None = None, *, job_name: str | None = None) -> list[str]:
    if job_id:
        return ["scancel", job_id]
    if job_name:
        return ["scancel", f"--name={job_name}"]
    raise ValueError("scancel needs a job id or a job name")


def show_node_argv(nodes: str) -> list[str]:
    """``scontrol`` one line per node (a node name or a folded node set)."""
    return ["scontrol", "--oneliner", "show", "node", nodes]


def create_reservation_argv(name: str, nodes: Sequence[str], user: str) -> list[str]:
    """A maintenance reservation of ``nodes`` for ``user``, starting now, without end.

    Open-ended on purpose: if the run dies while it holds nodes, they stay
    reserved (out of the pool) until someone deletes the reservation.
    """
    return ["scontrol", "create", "reservation", f"ReservationName={name}",
            f"Nodes={fold(nodes)}", "StartTime=now", "Duration=UNLIMITED",
            f"Users={user}", "Flags=MAINT,IGNORE_JOBS"]


def delete_reservation_argv(name: str) -> list[str]:
    return ["scontrol", "delete", f"ReservationName={name}"]


def sinfo_nodes_argv(nodes: str | None = None) -> list[str]:
    """``NODE STATE`` per line (``%T`` long state, ``*`` kept for not responding)."""
    argv = ["sinfo", "--noheader", "--Node", "--format=%N %T"]
    if nodes:
        argv.append(f"--nodes={nodes}")
    return argv


def sacctmgr_events_argv(start: datetime, fields: Sequence[str]) -> list[str]:
    """Slurm's node events from ``start`` (its accounting, slurmdbd): one ``|``-separated line each, no header,
    the columns ``fields``. sacctmgr reads and prints local times: run it with ``TZ=UTC`` (``start`` is
    written in UTC)."""
    stamp = start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return ["sacctmgr", "--parsable2", "--noheader", "show", "event", "Event=Node", f"Start={stamp}",
            f"format={','.join(fields)}"]


def granted_job_id(stderr: str) -> str | None:
    """The job id from salloc's ``Granted job allocation N`` line."""
    match = _GRANTED_RE.search(stderr)
    return match.group(1) if match else None


@dataclass
class _Task:
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)


def _split_labelled(text: str, tasks: dict[int, _Task], stream: str) -> list[str]:
    """Sort labelled lines into ``tasks``; return the unlabelled lines (srun's own)."""
    other: list[str] = []
    for line in text.splitlines():
        match = _LABEL_RE.match(line)
        if match is None:
            if line.strip():
                other.append(line)
            continue
        task = tasks.setdefault(int(match.group(1)), _Task())
        (task.out if stream == "out" else task.err).append(match.group(2))
    return other


def split_step(result: CommandResult, nodes: Sequence[str], *, node_timeout_s: float | None = None,
               node_argv: Sequence[str] = (), chunked: bool = True) -> dict[str, CommandResult]:
    """One :class:`CommandResult` per node from a labelled per-node step (one task per node).

    Each task frames its output with ``@burnin-node NAME@`` and ``@burnin-exit N@``
    (``TASK_SCRIPT``, ``PER_NODE_TASK``). ``chunked``: the output is one long line
    (the collector's JSON), which srun relays cut into labelled chunks, so a task's
    chunks are joined as they are; otherwise its lines are kept as lines (a tool's
    text output). ``node_argv`` is what ran on each node (for messages; default: the
    srun argv). With ``node_timeout_s`` an exit status 124 means the node's own
    ``timeout`` stopped the command. A node whose task never printed its marker gets
    ``error`` with srun's lines that name it; one whose task printed no exit marker
    was cut off.
    """
    argv = tuple(node_argv) or result.argv
    tasks: dict[int, _Task] = {}
    _split_labelled(result.stdout, tasks, "out")
    srun_lines = _split_labelled(result.stderr, tasks, "err")
    per_node: dict[str, CommandResult] = {}
    for task in tasks.values():
        joined = ("" if chunked else "\n").join(task.out)
        head = _NODE_RE.search(joined)
        if head is None or head.group(1) not in nodes:
            continue
        node = head.group(1)
        exits = list(_EXIT_RE.finditer(joined))
        body_end = exits[-1].start() if exits else len(joined)
        stdout = joined[head.end():body_end].strip("\n")
        if stdout and not chunked:
            stdout += "\n"
        stderr = "\n".join([*_lines_naming(srun_lines, node), *task.err])
        status = int(exits[-1].group(1)) if exits else None
        error = None
        timed_out = False
        if status == TIMEOUT_EXIT and node_timeout_s is not None:
            timed_out = True
            error = f"collector timed out on {node} after {node_timeout_s:g} s"
        elif status is None:
            timed_out = result.timed_out
            why = "srun timed out" if result.timed_out else "the task ended without an exit status"
            error = f"no complete result from {node}: {why}" + _tail(stderr)
        per_node[node] = CommandResult(node, argv, status, stdout, stderr, result.duration_s,
                                       timed_out=timed_out, error=error)
    for node in nodes:
        if node in per_node:
            continue
        named = _lines_naming(srun_lines, node) or srun_lines[-3:]
        if result.timed_out:
            why = f"srun timed out after {result.duration_s:.0f} s before {node} reported"
        elif result.error:
            why = result.error
        else:
            why = f"srun ran no task on {node}"
        per_node[node] = CommandResult(node, argv, None, "", "\n".join(named), result.duration_s,
                                       timed_out=result.timed_out, error=why + _tail("\n".join(named)))
    return {node: per_node[node] for node in nodes}


def _lines_naming(lines: Sequence[str], node: str) -> list[str]:
    pattern = re.compile(rf"(?<![A-Za-z0-9._-]){re.escape(node)}(?![A-Za-z0-9._-])")
    return [line for line in lines if pattern.search(line)]


def _tail(text: str) -> str:
    last = [line.strip() for line in text.strip().splitlines() if line.strip()][-1:]
    return f" ({last[0][:200]})" if last else ""


class SlurmRunner(Protocol):
    """What runs a Slurm client command: :class:`SlurmClient`, or a test double."""

    def run(self, argv: Sequence[str], *, timeout: float = ...) -> CommandResult: ...


class SlurmClient:
    """Runs Slurm client commands on this host, each with a timeout.

    ``env`` is merged over ``os.environ`` for every command (e.g. ``SLURM_CONF``
    of a simulated cluster).
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env or {})
        self._transport = LocalTransport()

    def run(self, argv: Sequence[str], *, timeout: float = QUICK_TIMEOUT) -> CommandResult:
        # scancel and scontrol release or restore what a run holds (its job, a reservation, a
        # node's drain): they still run after an interrupt; salloc, srun and sbcast do not.
        cleanup = bool(argv) and argv[0] in CLEANUP_COMMANDS
        return self._transport.run(CONTROLLER, argv, timeout=timeout, env=self.env, cleanup=cleanup)

    def close(self) -> None:
        self._transport.close()
