"""What every launcher offers (the :class:`Launcher` protocol), what it is asked to start, and its limits.

A launcher runs work on a dispatcher's nodes. It is asked for four kinds of work:

- :meth:`Launcher.per_node`: each node its own command (:class:`NodeCommand`), each on its own;
- :meth:`Launcher.everywhere`: the same command on every node, started together;
- :meth:`Launcher.job`: one multi-node job (:class:`JobSpec`: nodes, ranks per node, the program, its
  environment), started the launcher's way (``srun``, ``mpirun`` from the first node, or one process
  that models the group on a simulated rack);
- :meth:`Launcher.collect`: burnin's collector on every node (gathering facts).

Before any of it a caller holds its nodes (:meth:`Launcher.hold`: a Slurm allocation; nothing over
SSH), declaring what it will start (``plan``): a dry-run launcher prints that plan and holds nothing,
so every caller runs the same code in a dry run and records why nothing was measured.

Nothing here starts a process. :func:`run_guarded` is the one place where a failure to launch on one
node becomes that node's :class:`~burnin.transport.base.CommandResult` instead of an exception, and
:func:`not_started` the one shape of a command that never started.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from burnin.transport.base import CommandResult
from burnin.waits import completed

# ---------------------------------------------------------------- limits (the one set)

SLACK_S = 30.0
"""How long a launch may take beyond its command's own time: start-up (srun, mpirun, ssh) and output transfer."""
KILL_AFTER_S = 5
"""``timeout -k``: SIGKILL this long after the SIGTERM a time limit sends."""
ALLOC_WAIT_S = 60.0
"""How long a phase waits for its nodes (a Slurm allocation) before it records why it has none."""
HOLD_WAIT_S = 300.0
"""How long a caller that holds its nodes for long (the soak, the storage suite) waits for them."""
SHIP_TIMEOUT_S = 60.0
"""How long shipping a payload to every node (sbcast) may take."""
CLEANUP_TIMEOUT_S = 30.0
"""How long removing what was shipped may take."""
NOT_FOUND_EXIT = 127
NOT_EXECUTABLE_EXIT = 126
"""What a shell, ``env``, ``timeout`` or a container runner exits with when the program it was to start is
missing (127) or cannot be executed (126)."""
FAN_OUT_MAX = 256
"""Commands in flight at once, whatever the caller asks."""
FAN_OUT_THREADS = "burnin-fan-out"
"""The name of :func:`fan_out`'s threads (in a stack dump, py-spy's view of a hung run)."""
WORKERS_START_WAIT_S = 30.0
"""How long :func:`fan_out` waits for its threads to start before the first item goes out (they go on starting
on their own after that)."""


def slack(timeout_s: float) -> float:
    """The slack of a launch whose own time is ``timeout_s``: 10% of it, 5 s at least, :data:`SLACK_S` at most."""
    return min(SLACK_S, max(5.0, 0.1 * timeout_s))


# ---------------------------------------------------------------- what is launched

JobForm = Literal["srun", "mpirun", "local"]
"""How a launcher starts a multi-node job: ``srun`` steps from where burnin runs; ``mpirun`` from the job's
first node; ``local``: one process on the first node that models the group (simulated racks), or mpirun."""

Preset = Literal["simulated", "production"]
"""Which built-in settings a phase starts from: the real tools, or the simulated nodes' stand-ins."""


@dataclass(frozen=True, slots=True)
class NodeCommand:
    """One command on one node: its argv, how long the launcher waits for it, its input and extra environment."""

    node: str
    argv: tuple[str, ...]
    timeout_s: float
    stdin: bytes | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Container:
    """A container the ranks run in, started by Slurm (pyxis: ``--container-image``)."""

    image: str
    mounts: tuple[str, ...] = ()
    workdir: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SrunOptions:
    """What Slurm is told about a step beyond its nodes and tasks (MPI, GPUs, binding, a container)."""

    mpi: str | None = None
    gpus_per_node: int | None = None
    gpus_per_task: int | None = None
    gpu_bind: str | None = None
    cpu_bind: str | None = None
    distribution: str | None = None
    container: Container | None = None
    extra: tuple[str, ...] = ()
    """The site's own srun arguments, last."""


@dataclass(frozen=True, slots=True)
class MpirunOptions:
    """The ``mpirun`` a job starts from its first node, and the site's arguments to it."""

    program: str = "mpirun"
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One multi-node job: ``ranks_per_node`` ranks of ``program`` on each of ``nodes``.

    ``env`` reaches every rank (``-x`` under mpirun, ``env K=V`` otherwise). With ``time_limit`` the
    launcher bounds the job with ``timeout -k KILL T`` (T = ``timeout_s``) where its form puts it (around
    mpirun, inside each srun task); without, the program carries its own. The launcher waits
    ``timeout_s + slack_s`` for it. ``launcher``: ``auto`` is the launcher's own form; ``mpirun`` asks a
    launcher over a transport for mpirun even where it could model the job.
    """

    nodes: tuple[str, ...]
    program: tuple[str, ...]
    timeout_s: float
    ranks_per_node: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    time_limit: bool = True
    slack_s: float = SLACK_S
    label: bool = False
    """srun ``--label``: each output line says its task."""
    launcher: Literal["auto", "mpirun"] = "auto"
    srun: SrunOptions = field(default_factory=SrunOptions)
    mpirun: MpirunOptions = field(default_factory=MpirunOptions)


@dataclass(frozen=True, slots=True)
class Hold:
    """How a caller holds its nodes: the allocation's name (``burnin-<label>-<token>``), what for (said when it
    fails: ``no Slurm allocation for <purpose>``; empty: said without), for how long, how long to wait for it,
    and whether it takes whole nodes."""

    label: str
    purpose: str
    time_limit_s: float
    wait_s: float = ALLOC_WAIT_S
    exclusive: bool = True
    tasks_per_node: int | None = None
    collects: bool = False
    """The caller runs the collector in what it holds: what the collector needs on the nodes goes there now,
    so a failure to put it there is the hold's."""
    measures: tuple[str, ...] = ()
    """The facts sections that what runs in this hold fills (the fabric phase's ``fabric``): when the hold ends
    under its steps (a scancel, a preemption), the checks that read them are what went unmeasured on its nodes."""


@dataclass(frozen=True, slots=True)
class Note:
    """A line of a plan that is no command: what follows, and why."""

    text: str


@dataclass(frozen=True, slots=True)
class Each:
    """In a plan: ``argv`` on each of ``nodes``, as :meth:`Launcher.everywhere` starts it."""

    nodes: tuple[str, ...]
    argv: tuple[str, ...]
    timeout_s: float
    note: str = ""
    srun: SrunOptions | None = None


PlanItem = Note | Each | NodeCommand | JobSpec
"""What a caller declares it will start, in order, when it holds its nodes (a dry run prints it)."""

Shown = tuple[str, list[str]]
"""Where a command starts (``[node,...]``: on those nodes; ``""``: where burnin runs) and its argv."""


class Launcher(Protocol):
    """Runs work on a dispatcher's nodes (see the module docstring). Implementations: local, ssh, slurm, dry run."""

    name: str
    form: JobForm
    preset: Preset

    def hold(self, nodes: Sequence[str], how: Hold, plan: Sequence[PlanItem] = ()) -> str | None:
        """Take ``nodes`` for the work of ``plan`` (a Slurm allocation); why not, when they cannot be held.
        A node that cannot be held while others can gets :func:`not_started` results saying why."""

    def release(self) -> None:
        """Give back what :meth:`hold` took (what was shipped is removed first); holding again is allowed."""

    def ended(self) -> str | None:
        """Why the hold ended while it was still wanted (a Slurm allocation cancelled, preempted, timed out:
        no step can run there any more); None while it holds, and where nothing is held (SSH, local)."""

    def per_node(self, commands: Sequence[NodeCommand], *, job: bool = False) -> dict[str, CommandResult]:
        """Each command on its node, each on its own, at once; one result per node (never raises). ``job``: the
        commands are one job's (a launcher on each node, as torchrun): all start together."""

    def everywhere(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                   srun: SrunOptions | None = None) -> dict[str, CommandResult]:
        """``argv`` on every node, started together (one srun step); one result per node (never raises)."""

    def job(self, spec: JobSpec) -> CommandResult:
        """One multi-node job; its output (the first rank's node's, or srun's). Never raises."""

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        """burnin's collector with ``args`` on every node (its facts JSON on stdout); ``on_done`` as each ends."""

    def describe(self, item: PlanItem) -> list[Shown]:
        """What this launcher would start for a plan item (a dry run prints it)."""

    def describe_hold(self, nodes: Sequence[str], how: Hold) -> str | None:
        """What :meth:`hold` would take, in words (None: nothing is held)."""

    def note(self, text: str) -> None:
        """A line for the command log (what happened between commands)."""

    def close(self) -> None:
        """Release everything; the transport belongs to the dispatcher, which closes it."""


# ---------------------------------------------------------------- results


def not_started(node: str, argv: Sequence[str], reason: str) -> CommandResult:
    """A command that never started, and why."""
    return CommandResult(node, tuple(argv), None, "", "", 0.0, error=reason)


def run_guarded(node: str, argv: Sequence[str], call: Callable[[], CommandResult]) -> CommandResult:
    """``call()``, or a failure to launch on ``node`` as that node's result: one node's transport failure
    never stops the others."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the one place a launch failure becomes a node's result
        return not_started(node, argv, f"{type(exc).__name__}: {exc}")


T = TypeVar("T")
R = TypeVar("R")


def fan_out(items: Sequence[T], call: Callable[[T], R], *, workers: int,
            on_done: Callable[[T, R], None] | None = None) -> list[R]:
    """``call`` on every item, at most ``workers`` at a time; the results in the items' order.

    Interrupted (KeyboardInterrupt, a signal's exception): nothing more starts and nothing in flight is
    waited for, so a hung node does not hold up the stop (closing the transport ends them).
    """
    if not items:
        return []
    threads = max(1, min(workers, len(items), FAN_OUT_MAX))
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=FAN_OUT_THREADS)
    try:
        start_threads(pool, threads)
        futures = {pool.submit(call, item): index for index, item in enumerate(items)}
        results: dict[int, R] = {}
        for future in completed(futures):
            index = futures[future]
            results[index] = future.result()
            if on_done is not None:
                on_done(items[index], results[index])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [results[index] for index in range(len(items))]


def start_threads(pool: ThreadPoolExecutor, count: int) -> None:
    """Start ``pool``'s ``count`` threads now, before any item goes out.

    A pool starts a thread at each submit and waits for it to run; once the first items are at work (an SSH
    handshake, its packets: Python holding the interpreter lock), each later start waits its turn for the lock
    behind them: on a loaded 2-core controller the 64th of 64 connections began up to 4.5 s after the first
    (bench/fanout). Started while nothing runs, they all take their items at once, as clush's processes do.
    """
    if count < 2:
        return
    ready = threading.Barrier(count + 1)

    def wait_for_the_others() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(WORKERS_START_WAIT_S)

    try:
        for _ in range(count):
            pool.submit(wait_for_the_others)
        ready.wait(WORKERS_START_WAIT_S)
    except threading.BrokenBarrierError:
        pass  # a thread still starting takes its items late
    except BaseException:  # an interrupt, a thread the system would not start: no thread is left waiting
        ready.abort()
        raise


# ---------------------------------------------------------------- argv pieces


def with_env(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``env K=V ... argv`` (``argv`` alone without variables): the environment travels inside the command."""
    return ["env", *(f"{key}={value}" for key, value in env.items()), *argv] if env else list(argv)


def with_timeout(argv: Sequence[str], seconds: float, *, kill_after_s: int = KILL_AFTER_S) -> list[str]:
    """``timeout -k K T argv``: the limit travels inside the command, so it holds on the node itself."""
    return ["timeout", "-k", str(kill_after_s), str(max(1, math.ceil(seconds))), *argv]


# ---------------------------------------------------------------- a launcher that is not there

_MISSING = re.compile(r"([^\s'\"`:\u2018\u2019]+)['\"`\u2019]?:?\s+(?:No such file or directory|"
                      r"(?:command |executable file )?not found|Permission denied)")
"""The program an error line says is missing, just before the words: ``env: '/x/torchrun': No such file or
directory`` (GNU quotes with U+2018/U+2019), ``sh: 1: timeout: not found``, ``bash: docker: command not found``,
docker's ``exec: "torchrun": executable file not found``; 126 is ``Permission denied``."""


def missing_program(exit_status: int | None, lines: Iterable[str], chain: Iterable[str], node: str) -> str | None:
    """``mpirun not found: mpirun on n1's PATH`` when a command on ``node`` exited 127 (126: not executable) and
    its output ``lines`` name one of ``chain`` (the launcher and the wrappers before it) as the program it could
    not start; None otherwise: a program that started and failed is that program's failure, not this."""
    if exit_status not in (NOT_FOUND_EXIT, NOT_EXECUTABLE_EXIT):
        return None
    said = {m.group(1) for line in lines for m in _MISSING.finditer(line)}
    program = next((p for p in chain if p in said), None)
    if program is None:
        return None
    name = program.rstrip("/").rsplit("/", 1)[-1] or program
    what = "not found" if exit_status == NOT_FOUND_EXIT else "not executable"
    where = program if "/" in program else f"{program} on {node}'s PATH"
    return f"{name} {what}: {where}"


def missing_launcher(result: CommandResult, argv: Sequence[str]) -> str | None:
    """:func:`missing_program` for a command whose launch chain is ``argv``'s (:func:`launch_chain`)."""
    lines = (result.stdout + "\n" + result.stderr).splitlines()
    return missing_program(result.exit_status, lines, launch_chain(argv), result.node)


def launch_chain(argv: Sequence[str]) -> list[str]:
    """The programs before the launched program's options: ``timeout -k 5 60 mpirun -np ...`` -> timeout,
    mpirun (the numbers and options of the wrappers are no programs)."""
    chain: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "-k":
            skip = True
            continue
        if arg.startswith("-"):
            break
        if "=" in arg or arg.replace(".", "", 1).isdigit():
            continue
        chain.append(arg)
        if arg not in ("timeout", "env"):
            break
    return chain
