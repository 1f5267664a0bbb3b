"""A real Slurm cluster of simulated nodes: ``burnin sim up --slurm N`` / ``burnin sim down``.

munged, slurmctld and one slurmd per simulated node run on this machine, all
configured under the state folder (``SLURM_CONF=DIR/slurm.conf``, munge's
socket and key in ``DIR/munge``); nothing in /etc is read or written. Each
slurmd runs in its own UTS namespace with the node's hostname and its own
port (ports are picked free at up-time, so clusters can run side by side).

How a process on a node becomes that simulated node (shim PATH, NVML library,
sysfs root, from ``SimNode.environment()``):

- job tasks: Slurm's ``TaskProlog`` (``DIR/slurm/bin/task-prolog``) prints
  ``export`` lines from ``DIR/slurm/env/<node>.task``, so ``srun`` runs the
  unmodified production command line (``python3 <collector> --sources all``);
- health check: ``HealthCheckProgram`` is ``DIR/slurm/bin/healthcheck``, which
  sources ``DIR/slurm/env/<node>.sh`` and execs ``burnin probe --drain``
  (this venv's console script); its output goes to ``DIR/slurm/log/probe-<node>.log``;
- with ``watch`` (``sim up --watch``): ``burnin watch`` as every node, started and
  stopped (first) by the supervisor, journal in ``DIR/slurm/watch/<node>``.
- reboot: ``RebootProgram`` is ``DIR/slurm/bin/reboot`` (``scontrol reboot``, the repair ladder,
  docs/repair.md): the simulated node's transient faults are cleared (``python -m burnin.sim.reset
  reboot``), its slurmd is stopped, and the supervisor starts it again in a fresh time namespace whose
  boot time is now, so it registers as a node that rebooted.

The daemons run in the foreground (``-D``/``-F``) as children of a small
supervisor process (``python -m burnin_lab.slurm supervise DIR``) that is also
their child subreaper, so exited slurmstepd/daemons are reaped even without an
init. ``down`` stops exactly the pids recorded in ``DIR/lab.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnin.errors import BurninError, UsageError
from burnin.nodes import fold
from burnin_lab import slurmdbd
from burnin_lab.supervisor import _become_subreaper, _log, stop_adopted

LAB_FILE = "lab.json"
CLUSTER_NAME = "burnin"
CONTROLLER_HOST = "burninctl"
PARTITION = "batch"
SWEEP_PARTITION = "sweep"
"""With ``preemption``: a partition over the same nodes at the lowest priority tier, whose jobs a job of
:data:`PARTITION` cancels (``burnin sweep``'s; docs/sweep.md)."""
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "unshare", "flock")
CLIENTS = ("salloc", "srun", "sbcast", "scancel", "scontrol", "sinfo")
# Failure limits, never measurements: on a loaded 2-core machine a daemon may take many seconds.
READY_TIMEOUT = 180.0
"""Every node up in sinfo within this."""
STOP_TIMEOUT = 60.0
"""``down`` waits this long for the supervisor, whose own stop takes up to ~50 s (see :func:`_stop_all`)."""
DAEMON_START_TIMEOUT = 60.0
"""munged's socket, slurmctld's port: each within this of its start."""
PROBE_SOURCE_TIMEOUT = 30
"""The health check's ``probe --timeout``: a source may take seconds on a loaded machine (a bound)."""
REBOOT_TIMEOUT = 120
"""slurm.conf ResumeTimeout: a node asked to reboot must register again within this (a failure limit)."""
REBOOT_S = 3.0
"""How long a simulated reboot keeps the node's slurmd down. slurmctld ends a reboot when the node registers
with a boot time after the request, and slurmd's uptime comes from sysinfo(), whole seconds rounded up: a
slurmd started again within a second or two of the request reports a boot before it (the node then waits
for ResumeTimeout, as the lab showed)."""


class LabError(BurninError):
    """The simulated Slurm cluster could not be started."""


# ---------------------------------------------------------------- layout and configuration


class Layout:
    """Every path of a simulated Slurm cluster, below its state folder."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.conf = state / "slurm.conf"
        self.slurm = state / "slurm"
        self.ctld = self.slurm / "ctld"
        self.spool = self.slurm / "spool"
        self.run = self.slurm / "run"
        self.log = self.slurm / "log"
        self.env = self.slurm / "env"
        self.bin = self.slurm / "bin"
        self.plan = self.slurm / "daemons.json"
        self.pids = self.run / "pids.json"
        self.munge = state / "munge"
        self.munge_socket = self.munge / "munge.socket"
        self.munge_key = self.munge / "munge.key"
        self.shared = self.slurm / "shared"

    def lab_file(self) -> Path:
        return self.state / LAB_FILE


def missing_commands() -> list[str]:
    """Slurm and munge programs this lab needs that are not installed."""
    search = os.pathsep.join([os.environ.get("PATH", ""), SYSTEM_PATH])
    return [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name, path=search) is None]


def client_env(state: Path) -> dict[str, str]:
    """Environment for Slurm client commands against the cluster in ``state``."""
    return {"SLURM_CONF": str(Layout(state.resolve()).conf)}


def slurm_conf(layout: Layout, names: Sequence[str], *, ctld_port: int, node_ports: Mapping[str, int],
               health_interval: int, cpus: int, memory_mb: int, preemption: bool = False,
               accounting: Sequence[str] = ()) -> str:
    """slurm.conf text for the cluster (pure; see docs/slurm.md for each choice).

    ``accounting``: the lines that replace ``AccountingStorageType=accounting_storage/none``
    (:func:`burnin_lab.slurmdbd.slurm_conf_lines`).

    ``preemption``: a job of :data:`PARTITION` cancels jobs of :data:`SWEEP_PARTITION` on its nodes at once
    (``preempt/partition_prio``, ``PreemptMode=CANCEL``, no grace time), as docs/sweep.md tells a site."""
    lines = [
        "# written by burnin sim up --slurm; every path is below the state folder",
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={CONTROLLER_HOST}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        "CredType=cred/munge",
        f"SlurmctldPort={ctld_port}",
        f"StateSaveLocation={layout.ctld}",
        f"SlurmctldPidFile={layout.run}/slurmctld.pid",
        f"SlurmctldLogFile={layout.log}/slurmctld.log",
        f"SlurmdSpoolDir={layout.spool}/%n",
        f"SlurmdPidFile={layout.run}/slurmd-%n.pid",
        f"SlurmdLogFile={layout.log}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        *(accounting or ["AccountingStorageType=accounting_storage/none"]),
        "JobCompType=jobcomp/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MessageTimeout=10",
        "InactiveLimit=0",
        "KillWait=5",
        f"TaskProlog={layout.bin}/task-prolog",
        f"HealthCheckProgram={layout.bin}/healthcheck",
        f"HealthCheckInterval={health_interval}",
        "HealthCheckNodeState=ANY",
        f"RebootProgram={layout.bin}/reboot",
        f"ResumeTimeout={REBOOT_TIMEOUT}",
    ]
    if preemption:
        lines += ["PreemptType=preempt/partition_prio", "PreemptMode=CANCEL"]
    for name in names:
        lines.append(f"NodeName={name} NodeHostname={name} NodeAddr=127.0.0.1 Port={node_ports[name]} "
                     f"CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes={fold(names)} Default=YES MaxTime=INFINITE "
                 "State=UP OverSubscribe=FORCE:4" + (" PriorityTier=10" if preemption else ""))
    if preemption:
        lines.append(f"PartitionName={SWEEP_PARTITION} Nodes={fold(names)} MaxTime=INFINITE State=UP "
                     "PriorityTier=1 PreemptMode=CANCEL GraceTime=0")
    return "\n".join(lines) + "\n"


def task_prolog(layout: Layout) -> str:
    return (
        "#!/bin/sh\n"
        "# Slurm TaskProlog: a task runs as the simulated node it landed on.\n"
        'node=${SLURMD_NODENAME:-$(hostname)}\n'
        f'exec cat {shlex.quote(str(layout.env))}/"$node".task\n'
    )


def probe_lock(state: Path, node: str) -> Path:
    """The file a node's health check holds locked (``flock``) while its probe runs."""
    return Layout(state.resolve()).run / f"probe-{node}.lock"


def healthcheck(layout: Layout, burnin_argv: Sequence[str]) -> str:
    """The HealthCheckProgram script.

    slurmd starts it every interval whether the last one ended or not, and on a loaded machine
    a probe can outlast the interval: probes of one node would pile up and run side by side. So
    the probe holds the node's lock (:func:`probe_lock`, inherited by ``exec``) and a round that
    finds it held is skipped; the log then has one line per probe, begun and ended in turn.
    """
    command = " ".join(shlex.quote(part) for part in burnin_argv)
    log_dir = shlex.quote(str(layout.log))
    return (
        "#!/bin/sh\n"
        "# Slurm HealthCheckProgram: `burnin probe --drain` as the simulated node.\n"
        'node=${SLURMD_NODENAME:-$(hostname)}\n'
        f'. {shlex.quote(str(layout.env))}/"$node".sh || exit 1\n'
        f'log={log_dir}/probe-"$node".log\n'
        f'exec 9>>{shlex.quote(str(layout.run))}/probe-"$node".lock\n'
        "flock -n 9 || exit 0  # this node's last probe still runs\n"
        'printf "%s " "$(date +%H:%M:%S.%N)" >>"$log"\n'
        f'exec {command} probe --drain --timeout {PROBE_SOURCE_TIMEOUT} >>"$log" 2>&1\n'
    )


def reboot_marker(layout: Layout, node: str) -> Path:
    """The file the RebootProgram leaves for the supervisor: start this node's slurmd again, freshly booted."""
    return layout.run / f"reboot-{node}"


def reboot_program(layout: Layout, python: str) -> str:
    """The RebootProgram script: clear the node's transient faults, then stop its slurmd for the supervisor
    to start again (:func:`rebooted_argv`)."""
    run = shlex.quote(str(layout.run))
    return (
        "#!/bin/sh\n"
        "# Slurm RebootProgram: the simulated node reboots (transient faults cleared, slurmd started again).\n"
        "node=$(hostname)\n"
        f'. {shlex.quote(str(layout.env))}/"$node".sh || exit 1\n'
        f'{shlex.quote(python)} -m burnin.sim.reset reboot {shlex.quote(str(layout.state))}/nodes/"$node" '
        f'>>{shlex.quote(str(layout.log))}/reboot-"$node".log 2>&1 || exit 1\n'
        f'touch {run}/reboot-"$node"\n'
        f'exec kill "$(cat {run}/slurmd-"$node".pid)"\n'
    )


def rebooted_argv(argv: Sequence[str], uptime_s: float) -> list[str]:
    """A slurmd's argv (``unshare --uts ...``) in a new time namespace whose boot time is now: its uptime starts
    below a second, so slurmctld sees it booted after the reboot request (:data:`REBOOT_S` after it)."""
    offset = max(0, int(uptime_s))
    return [argv[0], "--time", f"--boottime=-{offset}", *argv[1:]]


def node_environment(sim_env: Mapping[str, str], bin_dir: str, conf: Path) -> dict[str, str]:
    """A node's variables: the simulator's, with a node-like PATH (shims, then the system's)."""
    env = dict(sim_env)
    env["PATH"] = f"{bin_dir}{os.pathsep}{SYSTEM_PATH}"
    env["SLURM_CONF"] = str(conf)
    return env


def task_exports(env: Mapping[str, str]) -> str:
    """TaskProlog output: ``export NAME=value`` lines (the value runs to the line end)."""
    for key, value in env.items():
        if "\n" in value or "\n" in key:
            raise UsageError(f"simulated node variable {key} holds a newline")
    return "".join(f"export {key}={value}\n" for key, value in env.items())


def shell_exports(env: Mapping[str, str]) -> str:
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items())


def burnin_command() -> list[str]:
    """This venv's ``burnin`` console script (or the module, when it is not installed)."""
    script = Path(sys.executable).parent / "burnin"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "burnin.cli.main"]


def free_ports(count: int) -> list[int]:
    """Ports free right now on every address (held together, so they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# ---------------------------------------------------------------- up / down


def up(state: Path, topology: Any, names: list[str], faults: Mapping[str, list[Any]], *,
       health_interval: int = 30, ready_timeout: float = READY_TIMEOUT,
       watch: Sequence[str] | None = None, preemption: bool = False, accounting: bool = False) -> dict[str, Any]:
    """Build the simulated nodes, start the cluster, wait until every node answers.

    ``watch``: also run ``burnin watch ARGS`` as every node (None: no watch daemons);
    ``preemption``: a preemptible :data:`SWEEP_PARTITION` beside the default one (:func:`slurm_conf`);
    ``accounting``: a private MariaDB and slurmdbd, slurmctld recording to it (:mod:`burnin_lab.slurmdbd`).
    """
    from burnin.sim import build_rack

    missing = missing_commands()
    if missing:
        raise UsageError(f"missing {', '.join(missing)}: install Slurm and munge "
                         "(Debian: apt-get install slurm-wlm munge)")
    search = os.pathsep.join([os.environ.get("PATH", ""), SYSTEM_PATH])
    missing = slurmdbd.missing_commands(search) if accounting else []
    if missing:
        raise UsageError(f"missing {', '.join(missing)}: install the accounting "
                         "(Debian: apt-get install mariadb-server slurmdbd)")
    if os.geteuid() != 0:
        raise UsageError("burnin sim up --slurm needs root (slurmd, unshare --uts)")
    if health_interval < 1:
        raise UsageError("--health-interval must be at least 1 second")
    state = state.resolve()
    if any(ch.isspace() for ch in str(state)):
        raise UsageError(f"{state}: slurm.conf cannot hold paths with spaces; pick another --state")
    layout = Layout(state)
    if len(str(layout.munge_socket)) > 100:
        raise UsageError(f"{state}: path too long for munge's socket; pick a shorter --state")
    if _running(layout):
        raise UsageError(f"{state} already holds a running cluster; `burnin sim down --state {state}` first")
    rack = build_rack(state, topology, names, dict(faults))
    _prepare_dirs(layout, names)
    _make_munge_key(layout)
    ports = free_ports(len(names) + 3)
    node_ports = dict(zip(names, ports[1:len(names) + 1], strict=True))
    cpus = max(1, os.cpu_count() or 1)
    records = slurmdbd.Accounting(state, db_port=ports[-2], dbd_port=ports[-1]) if accounting else None
    if records is not None:
        try:
            slurmdbd.prepare(records, layout.munge_socket)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            raise LabError(f"the accounting's database could not be made: {exc}") from exc
    recording = slurmdbd.slurm_conf_lines(records, layout.munge_socket) if records else []
    layout.conf.write_text(slurm_conf(layout, names, ctld_port=ports[0], node_ports=node_ports,
                                      health_interval=health_interval, cpus=cpus,
                                      memory_mb=min(1000, _memory_mb()), preemption=preemption,
                                      accounting=recording),
                           encoding="utf-8")
    topology_name = _topology_name(topology)
    for node in rack:
        env = node_environment(node.environment(), str(node.bin_dir), layout.conf)
        # this cluster's own "shared file system" for the simulator's rendezvous (another lab's jobs on this
        # machine may carry the same job ids and ports)
        env["BURNIN_SIM_SHARED_DIR"] = str(layout.shared)
        if topology_name:
            env["BURNIN_TOPOLOGY"] = topology_name
        (layout.env / f"{node.name}.task").write_text(task_exports(env), encoding="utf-8")
        if os.environ.get("PYTHONPATH"):  # the probe imports the burnin this lab runs
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        (layout.env / f"{node.name}.sh").write_text(shell_exports(env), encoding="utf-8")
    _write_script(layout.bin / "task-prolog", task_prolog(layout))
    _write_script(layout.bin / "healthcheck", healthcheck(layout, burnin_command()))
    _write_script(layout.bin / "reboot", reboot_program(layout, sys.executable))
    daemon_env = {**os.environ, "SLURM_CONF": str(layout.conf)}
    plan = _daemon_plan(layout, names, ports[0])
    if records is not None:  # after munged (slurmdbd authenticates with it), before slurmctld (which records to it)
        plan[1:1] = slurmdbd.daemon_plan(records, layout.log, CLUSTER_NAME)
    if watch is not None:
        plan += _watch_plan(layout, names, burnin_command(), watch)
    layout.plan.write_text(json.dumps({"daemons": plan}, indent=1),
                           encoding="utf-8")
    # No signal between starting the supervisor and recording it: `down` must find it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    try:
        with (layout.log / "supervisor.log").open("ab") as log:
            supervisor = subprocess.Popen(
                [sys.executable, "-m", "burnin_lab.slurm", "supervise", str(state)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=daemon_env, start_new_session=True,
            )
        lab: dict[str, Any] = {
            "kind": "slurm", "running": True, "state": str(state), "nodes": names,
            "supervisor": supervisor.pid, "pids": {}, "slurm_conf": str(layout.conf),
            "env": client_env(state), "ports": {"slurmctld": ports[0], **node_ports},
            "health_interval": health_interval, "started_at": time.time(), "watch": watch is not None,
            "accounting": accounting,
        }
        _write_lab(layout, lab)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    try:
        lab["pids"] = _wait_ready(layout, supervisor, names, ready_timeout)
    except BaseException:  # not ready, or interrupted while waiting: stop what was started
        down(state)
        raise
    _write_lab(layout, lab)
    return lab


def down(state: Path) -> None:
    """Stop exactly the processes recorded in ``lab.json`` and reap the ones that are ours."""
    layout = Layout(state.resolve())
    lab_file = layout.lab_file()
    if not lab_file.exists():
        raise UsageError(f"{state} holds no simulated cluster (no {LAB_FILE})")
    lab = json.loads(lab_file.read_text(encoding="utf-8"))
    if not lab.get("running"):
        return
    conf = str(layout.conf)
    pids: dict[str, int] = dict(lab.get("pids") or {})
    with contextlib.suppress(OSError, ValueError):
        pids.update(json.loads(layout.pids.read_text(encoding="utf-8")))
    supervisor = int(lab.get("supervisor") or 0)
    if supervisor and _is_ours(supervisor, conf):
        _signal(supervisor, signal.SIGTERM)
        _wait_gone([supervisor], STOP_TIMEOUT)
    # The supervisor stops its daemons; anything left (the supervisor was killed) goes here,
    # slurmd first, then slurmctld, the accounting's daemons, munged last.
    last = ("slurmctld", "slurmdbd", "mariadbd", "munged")
    order = sorted(pids.items(), key=lambda item: last.index(item[0]) + 1 if item[0] in last else 0)
    for _, pid in order:
        if pid != supervisor and _is_ours(pid, conf):
            _signal(pid, signal.SIGTERM)
            if not _wait_gone([pid], 5.0):
                _signal(pid, signal.SIGKILL)
                _wait_gone([pid], 5.0)
    lab["running"] = False
    lab["stopped_at"] = time.time()
    _write_lab(layout, lab)


# ---------------------------------------------------------------- helpers for up/down


def _prepare_dirs(layout: Layout, names: Sequence[str]) -> None:
    for stale in (layout.ctld, layout.spool, layout.run):
        shutil.rmtree(stale, ignore_errors=True)  # a fresh cluster: no drains from last time
    for directory in (layout.ctld, layout.run, layout.log, layout.env, layout.bin, layout.munge, layout.shared,
                      *(layout.spool / name for name in names)):
        directory.mkdir(parents=True, exist_ok=True)
    layout.munge.chmod(0o755)  # munged wants its socket directory reachable by all


def _make_munge_key(layout: Layout) -> None:
    if layout.munge_key.exists():
        return
    result = subprocess.run(["mungekey", "--create", f"--keyfile={layout.munge_key}"],
                            capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise LabError(f"mungekey failed: {result.stderr.strip()}")
    layout.munge_key.chmod(0o600)


def _daemon_plan(layout: Layout, names: Sequence[str], ctld_port: int) -> list[dict[str, Any]]:
    munge = layout.munge
    # --force: munged refuses a socket below a directory others cannot enter (pytest's 0700
    # temp dirs); every client here runs as root, so the socket is reachable anyway.
    plan: list[dict[str, Any]] = [
        {"name": "munged", "log": str(layout.log / "munged.out"), "ready": {"path": str(layout.munge_socket)},
         "argv": ["munged", "--foreground", "--force", f"--socket={layout.munge_socket}",
                  f"--key-file={layout.munge_key}", f"--pid-file={munge}/munged.pid",
                  f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"]},
        {"name": "slurmctld", "log": str(layout.log / "slurmctld.out"), "ready": {"port": ctld_port},
         "argv": ["unshare", "--uts", "sh", "-c", f"hostname {CONTROLLER_HOST} && exec slurmctld -D"]},
    ]
    for name in names:
        plan.append({"name": f"slurmd:{name}", "log": str(layout.log / f"slurmd-{name}.out"), "ready": {},
                     "argv": ["unshare", "--uts", "sh", "-c", f"hostname {name} && exec slurmd -D -N {name}"]})
    return plan


def _watch_plan(layout: Layout, names: Sequence[str], burnin_argv: Sequence[str],
                args: Sequence[str]) -> list[dict[str, Any]]:
    """``burnin watch`` as every node (its environment file first), journal in ``slurm/watch/<node>``."""
    plan: list[dict[str, Any]] = []
    for name in names:
        argv = [*burnin_argv, "watch", "--state-dir", str(layout.slurm / "watch" / name), *args]
        script = (f". {shlex.quote(str(layout.env / f'{name}.sh'))} && "
                  f"exec {' '.join(shlex.quote(part) for part in argv)}")
        plan.append({"name": f"watch:{name}", "log": str(layout.log / f"watch-{name}.log"), "ready": {},
                     "argv": ["sh", "-c", script]})
    return plan


def _wait_ready(layout: Layout, supervisor: subprocess.Popen[bytes], names: Sequence[str],
                timeout: float) -> dict[str, int]:
    """Wait for the supervisor's pid file, then until every node is up in sinfo."""
    from burnin.transport.slurm import SlurmClient, sinfo_nodes_argv

    deadline = time.monotonic() + timeout
    client = SlurmClient(client_env(layout.state))
    pids: dict[str, int] = {}
    last = ""
    while time.monotonic() < deadline:
        if supervisor.poll() is not None:
            raise LabError(f"the Slurm lab supervisor exited ({supervisor.returncode}): "
                           f"{_log_tail(layout)}")
        if not pids:
            with contextlib.suppress(OSError, ValueError):
                pids = json.loads(layout.pids.read_text(encoding="utf-8"))
        if pids:
            result = client.run(sinfo_nodes_argv(), timeout=5.0)
            states = dict(line.split(None, 1) for line in result.stdout.splitlines() if " " in line)
            last = result.stdout.strip() or result.describe_failure()
            if all(_node_up(states.get(name, "")) for name in names):
                return pids
        time.sleep(0.2)
    raise LabError(f"nodes not up after {timeout:g} s: {last!r}; {_log_tail(layout)}")


def _node_up(state: str) -> bool:
    state = state.strip()
    return bool(state) and "*" not in state and state not in ("unknown", "down", "future")


def _log_tail(layout: Layout) -> str:
    parts = []
    for name in ("supervisor.log", "slurmctld.log", "munged.out"):
        path = layout.log / name
        with contextlib.suppress(OSError):
            lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            if lines:
                parts.append(f"{path}: {' | '.join(lines[-3:])}")
    return "; ".join(parts) or f"see {layout.log}"


def _topology_name(topology: Any) -> str | None:
    """The name the probe can find the topology by, if it is a bundled one."""
    from burnin.topology.catalog import resolve

    name = getattr(topology, "name", None)
    if not isinstance(name, str):
        return None
    try:
        resolve(name)
    except BurninError:
        return None
    return name


def _memory_mb() -> int:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return max(1, pages // (1024 * 1024))
    except (ValueError, OSError):
        return 1000


def _write_script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def _write_lab(layout: Layout, lab: Mapping[str, Any]) -> None:
    tmp = layout.lab_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(lab, indent=1), encoding="utf-8")
    tmp.replace(layout.lab_file())


def _running(layout: Layout) -> bool:
    with contextlib.suppress(OSError, ValueError):
        lab = json.loads(layout.lab_file().read_text(encoding="utf-8"))
        pid = int(lab.get("supervisor") or 0)
        return bool(lab.get("running")) and pid > 0 and _is_ours(pid, str(layout.conf))
    return False


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone); reaps it when it is our child."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _is_ours(pid: int, conf: str) -> bool:
    """``pid`` is alive and was started for this cluster (its environment names our slurm.conf)."""
    if pid <= 0 or not _alive(pid):
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"SLURM_CONF={conf}".encode() in environ


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(pids: Sequence[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return not any(_alive(pid) for pid in pids)


# ---------------------------------------------------------------- the supervisor process


class _Stop(Exception):
    """SIGTERM/SIGINT reached the supervisor."""


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signum)


def supervise(state: Path) -> int:
    """Start the daemons in order, reap whatever exits, stop them all on SIGTERM."""
    layout = Layout(state)
    plan = json.loads(layout.plan.read_text(encoding="utf-8"))
    env = dict(os.environ)  # up() started us with SLURM_CONF set
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    # up() blocks these while it records our pid, and a signal mask is inherited.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    _become_subreaper()
    children: dict[str, int] = {}
    code = 0
    try:
        for daemon in plan["daemons"]:
            if daemon.get("once"):
                _run_once(daemon, env, children)
                continue
            with open(daemon["log"], "ab") as log:
                proc = subprocess.Popen(daemon["argv"], env=env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT)
            children[daemon["name"]] = proc.pid
            _log(f"started {daemon['name']} pid {proc.pid}")
            _await_daemon(daemon, proc.pid, children)
        _save_pids(layout, children)
        while True:
            _reap(children)
            _restart_rebooted(layout, plan["daemons"], env, children)
            time.sleep(0.2)
    except _Stop:
        _log("stopping")
    except LabError as exc:
        _log(f"error: {exc}")
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _stop_all(children)
    return code


def _restart_rebooted(layout: Layout, daemons: Sequence[Mapping[str, Any]], env: Mapping[str, str],
                      children: dict[str, int]) -> None:
    """Start again each node's slurmd that its RebootProgram stopped (its marker file), freshly booted."""
    for daemon in daemons:
        node = str(daemon["name"]).removeprefix("slurmd:")
        marker = reboot_marker(layout, node)
        if not daemon["name"].startswith("slurmd:") or daemon["name"] in children or not marker.exists():
            continue
        if time.time() - marker.stat().st_mtime < REBOOT_S:
            continue  # still 'rebooting'
        marker.unlink()
        uptime = float(Path("/proc/uptime").read_text(encoding="utf-8").split()[0])
        with open(daemon["log"], "ab") as log:
            proc = subprocess.Popen(rebooted_argv(daemon["argv"], uptime), env=dict(env),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        children[daemon["name"]] = proc.pid
        _save_pids(layout, children)  # `down` finds the new slurmd even when the supervisor is gone
        _log(f"rebooted {daemon['name']}: pid {proc.pid}")


def _save_pids(layout: Layout, children: Mapping[str, int]) -> None:
    tmp = layout.pids.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(children)), encoding="utf-8")
    tmp.replace(layout.pids)


def _run_once(step: Mapping[str, Any], env: Mapping[str, str], children: dict[str, int]) -> None:
    """A start-up step run to its end (the accounting's database user, its cluster): tried again until it
    exits 0, while the daemon it talks to finishes starting, within :data:`DAEMON_START_TIMEOUT`."""
    deadline = time.monotonic() + DAEMON_START_TIMEOUT
    while True:
        with open(step["log"], "ab") as log:
            try:
                code = subprocess.run(step["argv"], env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, timeout=DAEMON_START_TIMEOUT, check=False).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise LabError(f"{step['name']}: {exc}; see {step['log']}") from exc
        _reap(children)
        if code == 0:
            _log(f"{step['name']} done")
            return
        if time.monotonic() > deadline:
            raise LabError(f"{step['name']} exited {code}; see {step['log']}")
        time.sleep(0.5)


def _await_daemon(daemon: Mapping[str, Any], pid: int, children: dict[str, int]) -> None:
    ready = daemon.get("ready") or {}
    deadline = time.monotonic() + DAEMON_START_TIMEOUT
    while time.monotonic() < deadline:
        _reap(children)
        if pid not in children.values():
            raise LabError(f"{daemon['name']} exited at start; see {daemon['log']}")
        if "path" in ready and Path(ready["path"]).exists():
            return
        if "port" in ready:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", ready["port"]), 0.5):
                return
        if not ready:
            return
        time.sleep(0.05)
    raise LabError(f"{daemon['name']} not ready after {DAEMON_START_TIMEOUT:g} s; see {daemon['log']}")


def _reap(children: dict[str, int]) -> None:
    """Collect every exited child and orphan (we are their subreaper)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for name, child in list(children.items()):
            if child == pid:
                del children[name]
                _log(f"{name} (pid {pid}) exited with status {os.waitstatus_to_exitcode(status)}")


def _stop_all(children: dict[str, int]) -> None:
    """slurmd first, then slurmctld, then munged; TERM, then KILL after a grace period."""
    stages = [[n for n in children if n.startswith(prefix)] for prefix in ("watch:", "slurmd:")]
    stages += [["slurmctld"], *slurmdbd.stop_order(list(children)), ["munged"]]
    for stage in stages:
        pids = [children[name] for name in stage if name in children]
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline and any(p in children.values() for p in pids):
            _reap(children)
            time.sleep(0.05)
        for pid in pids:
            if pid in children.values():
                _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while children and time.monotonic() < deadline:
        _reap(children)
        time.sleep(0.05)
    _reap(children)
    # What the daemons left behind and we adopted: a running job's slurmstepd, its script, its srun.
    stop_adopted(lambda: _reap(children), grace=2.0, limit=10.0)


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "supervise":
        return supervise(Path(argv[1]))
    sys.stderr.write("usage: python -m burnin_lab.slurm supervise STATE_DIR\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
