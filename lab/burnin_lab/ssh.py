"""A simulated rack behind real sshd: ``burnin sim up --ssh N`` / ``burnin sim down``.

Each simulated node (``burnin.sim.build_rack``) gets its own ``/usr/sbin/sshd -D``
on a loopback address (127.0.1.i, port 22, or a free port when 22 is taken), its
own ed25519 host key, and ``SetEnv`` giving the login the node's environment:
shim PATH, simulated NVML, sysfs root. The client side (key, known_hosts,
ssh_config) and ``inventory.yaml`` are written into the state folder, so
``burnin run --via ssh --inventory DIR/inventory.yaml`` works as is.

Logins use a dedicated account (``burnin-sim``, created if missing, password
field ``*`` so key logins work with ``UsePAM no``). ``down`` stops exactly the
sshd pids recorded in ``lab.json``.

The nodes reach each other as a real rack's do, for ``mpirun --host ...`` on a
node (:mod:`burnin_lab.mesh`): ``ssh <node>`` on any node logs in to any other by
its inventory name, with the nodes' own key and known host keys. Each sshd runs
in a UTS namespace of its own whose host name is the node's name, so a command
on the node (``hostname``, OpenMPI, nccl-tests' rank lines) names its node; and
each node has its own ``TMPDIR`` and the rack one shared folder
(``BURNIN_SIM_SHARED_DIR``, like a cluster's shared file system).

The sshd processes are children of a small supervisor process
(:mod:`burnin_lab.supervisor`), not of ``sim up``, which exits: the supervisor
reaps every sshd that stops, so no zombie is left where PID 1 does not reap.
``down`` stops the supervisor, which stops and reaps its sshd processes.

``transport_faults`` (tests and rehearsals) break the transport of one node:
``hang`` (python3 never answers), ``garbage`` (python3 prints non-JSON),
``no-python3``, ``refuse-key`` (sshd knows another client key),
``host-key-changed`` (known_hosts holds an older key), ``host-key-unknown``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from burnin.errors import UsageError
from burnin_lab import mesh, netns, supervisor

LAB_FILE = "lab.json"
LOGIN_USER = "burnin-sim"
LOGIN_HOME = "/home/burnin-sim"
NODE_PYTHON = "/usr/bin/python3"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
TRANSPORT_FAULTS = ("hang", "garbage", "no-python3", "refuse-key", "host-key-changed", "host-key-unknown")
NO_PYTHON_TOOLS = ("sh", "bash", "env", "timeout", "cat", "sleep", "ls", "uname")
UNSHARE = "/usr/bin/unshare"
HOSTNAME = "/usr/bin/hostname"
SHARED_ENV = "BURNIN_SIM_SHARED_DIR"
"""A folder every node of the rack reads and writes (the simulated tools' rendezvous: burnin.sim.fabric_model)."""
START_TIMEOUT = 60.0
"""Bound on sshd starting and listening (a failure limit: a loaded machine may take seconds)."""
STORAGE_TARGET = "storage-target"
"""The supervisor's name for a kernel-network lab's storage target (burnin_lab.netstore)."""


# ---------------------------------------------------------------- public API


def up(state_dir: Path, topology: Any, names: list[str], faults: Mapping[str, list[Any]], *,
       transport_faults: Mapping[str, str] | None = None, subnet: str = "127.0.1",
       kernel_network: bool = False) -> dict[str, Any]:
    """Build the nodes, start one sshd each, write the client files, inventory.yaml and lab.json.

    ``kernel_network``: each node in a network namespace of its own, its fabric
    netdevs real interfaces (burnin_lab.netns); its sshd listens there, on a
    management address the host reaches, instead of on ``subnet``.
    """
    from burnin.sim import build_rack, library_path
    from burnin.sim.build import render_node

    transport_faults = dict(transport_faults or {})
    _preflight(state_dir, names, transport_faults)
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o755)
    _check_reachable(state_dir)
    if kernel_network:
        netns.check_size(len(names))  # before anything is built
        why = netns.unavailable()
        if why is not None:
            raise UsageError(f"a kernel-network lab needs root, ip and ping: {why}")
    rack = build_rack(state_dir, topology, names, dict(faults))
    record: dict[str, Any] | None = None
    if kernel_network:
        for node in rack:
            netns.mark_node(node.dir)
            render_node(node.dir, node.state())
        record = netns.create(state_dir, [node.state() for node in rack])
    user = ensure_login_user()
    ssh = state_dir / "ssh"
    for sub in ("client", "sshd", "lib", "tools-nopython", "mesh"):
        (ssh / sub).mkdir(parents=True, exist_ok=True)
    _install_library(library_path(), ssh / "lib")
    _install_tools(ssh / "tools-nopython")
    client_key = ssh / "client" / "id_ed25519"
    authorized = _write_keypair(client_key, comment="burnin-sim-client")
    node_key = mesh.directory(state_dir) / mesh.KEY
    authorized += _write_keypair(node_key, comment="burnin-sim-nodes")
    mesh.give_to(node_key, user)
    _write(ssh / "authorized_keys", authorized, 0o644)
    shared = state_dir / "shared"
    shared.mkdir(exist_ok=True)
    mesh.give_to(shared, user)
    ssh_client = mesh.ssh_client()
    _write(ssh / "refused_authorized_keys", _new_key_pair()[1], 0o644)
    nodes: dict[str, dict[str, Any]] = {}
    for index, node in enumerate(rack):
        fault = transport_faults.get(node.name)
        sshd_dir = ssh / "sshd" / node.name
        (sshd_dir / "bin").mkdir(parents=True, exist_ok=True)
        host_key = _write_keypair(sshd_dir / "ssh_host_ed25519_key", comment=node.name)
        if fault == "host-key-changed":  # known_hosts gets this key; sshd serves a new one
            _write_keypair(sshd_dir / "ssh_host_ed25519_key", comment=node.name)
        _write_python_wrapper(sshd_dir / "bin", fault)
        if ssh_client is not None:
            mesh.write_wrapper(sshd_dir / "bin", mesh.directory(state_dir) / mesh.CONFIG, ssh_client)
        (sshd_dir / "tmp").mkdir(mode=0o700, exist_ok=True)
        mesh.give_to(sshd_dir / "tmp", user)
        site = {"TMPDIR": str(sshd_dir / "tmp"), SHARED_ENV: str(shared)}
        if record is not None:  # OpenMPI's own traffic (orted to mpirun) on the nodes' network, as a site sets it
            site.update(OMPI_MCA_oob_tcp_if_include=netns.MESH_IFNAME, OMPI_MCA_btl_tcp_if_include=netns.MESH_IFNAME)
        env = _node_environment({**node.environment(), **site}, node.bin_dir, sshd_dir / "bin", ssh, fault)
        nodes[node.name] = {
            "address": _address(subnet, index), "port": 22, "pid": None, "dir": str(sshd_dir),
            "host_key": host_key.strip(), "fault": fault, "env": env,
        }
        if record is not None:
            netns.write_node_tools(sshd_dir / "bin", node.bin_dir, node.state(), NODE_PYTHON)
            nodes[node.name].update(address=record["nodes"][node.name]["address"],
                                    netns=record["nodes"][node.name]["netns"],
                                    mesh=record["nodes"][node.name]["mesh"])
    lab: dict[str, Any] = {
        "kind": "ssh", "user": user, "sshd": _sshd(), "state": str(state_dir), "notes": _notes(ssh_client),
        "inventory": str(state_dir / "inventory.yaml"), "ssh_config": str(ssh / "client" / "ssh_config"),
        "known_hosts": str(ssh / "client" / "known_hosts"), "identity": str(client_key), "nodes": nodes,
    }
    if record is not None:
        lab["netns"] = record
        save_lab(state_dir, lab)  # from here on, `sim down` finds the namespaces even if the start fails
    try:
        _start_all(lab)
        _write_client_files(lab)
        _write_inventory(lab, names)
        save_lab(state_dir, lab)
    except BaseException:
        _stop_all(lab)
        _remove_namespaces(lab)
        raise
    return lab


def down(state_dir: Path) -> None:
    """Stop every sshd recorded in ``lab.json`` (by pid, after checking it is ours); delete its namespaces."""
    lab = read_lab(state_dir)
    _stop_all(lab)
    _remove_namespaces(lab)
    save_lab(state_dir, lab)


def _remove_namespaces(lab: dict[str, Any]) -> None:
    record = lab.get("netns")
    if not record:
        return
    left = netns.destroy(record)
    if left:
        raise UsageError(f"could not remove the lab's network namespaces: {left[0]}")
    lab["netns"] = None


def refresh_kernel_network(state_dir: Path, node: str) -> None:
    """After a fault or a clear on ``node``: its namespace's routes, MTUs and sysctls follow the new state."""
    from burnin.sim import SimNode

    path = state_dir / LAB_FILE
    if not path.is_file():
        return
    lab = json.loads(path.read_text(encoding="utf-8"))
    record = lab.get("netns") if isinstance(lab, dict) else None
    if record:
        netns.reconfigure(record, SimNode.load(state_dir / "nodes" / node).state())


def stop_node(state_dir: Path, node: str) -> None:
    """Stop one node's sshd: the node becomes unreachable (connection refused)."""
    lab = read_lab(state_dir)
    _stop(_node(lab, node))
    save_lab(state_dir, lab)


def start_node(state_dir: Path, node: str) -> None:
    """Start one node's sshd again (same address, port, keys)."""
    lab = read_lab(state_dir)
    entry = _node(lab, node)
    if not _is_our_sshd(entry):
        if not supervisor.is_supervisor(lab.get("supervisor"), _plan_path(lab)):
            raise UsageError(f"the supervisor of {state_dir} is gone; `burnin sim down` and `sim up` again")
        _configure(lab, entry, retry_port=False)
        _request_start(lab)
        _wait_listening([entry], START_TIMEOUT)
    save_lab(state_dir, lab)


def read_lab(state_dir: Path) -> dict[str, Any]:
    path = state_dir / LAB_FILE
    if not path.is_file():
        raise UsageError(f"{state_dir} holds no simulated rack (no {LAB_FILE})")
    lab: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if lab.get("kind") != "ssh":
        raise UsageError(f"{path}: not an SSH rack (kind {lab.get('kind')!r})")
    return lab


def save_lab(state_dir: Path, lab: Mapping[str, Any]) -> None:
    tmp = state_dir / f".{LAB_FILE}.tmp"
    tmp.write_text(json.dumps(lab, indent=1), encoding="utf-8")
    tmp.replace(state_dir / LAB_FILE)


def sshd_available() -> str | None:
    """Path of sshd, or None when openssh-server is not installed."""
    for candidate in ("/usr/sbin/sshd", shutil.which("sshd")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def ensure_login_user(name: str = LOGIN_USER) -> str:
    """Create the login account if missing; make a locked (``!``) password field ``*``."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--home-dir", LOGIN_HOME, "--shell", "/bin/bash",
                        "--comment", "burnin simulated SSH rack", name],
                       check=True, capture_output=True, timeout=30)
    status = subprocess.run(["passwd", "--status", name], capture_output=True, text=True, timeout=30,
                            check=False).stdout.split()
    if len(status) < 2 or status[1] in ("L", "LK", "NP"):
        subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True, timeout=30)
    return name


# ------------------------------------------------------------------ building


def _preflight(state_dir: Path, names: Sequence[str], transport_faults: Mapping[str, str]) -> None:
    if os.geteuid() != 0:
        raise UsageError("burnin sim up --ssh must run as root (it starts sshd on port 22 and "
                         f"creates the {LOGIN_USER} login account)")
    if sshd_available() is None:
        raise UsageError("sshd not found: install openssh-server (apt-get install openssh-server)")
    if not Path(NODE_PYTHON).is_file():
        raise UsageError(f"simulated nodes run the collector with {NODE_PYTHON}, which is missing")
    if any(c.isspace() or c in "\"'\\%" for c in str(state_dir.resolve())):
        raise UsageError(f"--state {state_dir}: use a path without spaces, quotes, '\\' or '%'")
    if len(names) > 254 * 200:
        raise UsageError("too many simulated nodes")
    for node, fault in transport_faults.items():
        if node not in names:
            raise UsageError(f"transport fault for unknown node {node!r}")
        if fault not in TRANSPORT_FAULTS:
            raise UsageError(f"unknown transport fault {fault!r} (known: {', '.join(TRANSPORT_FAULTS)})")
    lab_file = state_dir / LAB_FILE
    if lab_file.is_file():
        old = json.loads(lab_file.read_text(encoding="utf-8"))
        if any(_is_our_sshd(entry) for entry in old.get("nodes", {}).values()) or \
                supervisor.is_supervisor(old.get("supervisor"), _plan_path(old)):
            raise UsageError(f"{state_dir} already has a running rack; `burnin sim down --state {state_dir}`")


def _check_reachable(state_dir: Path) -> None:
    """The login account must be able to traverse to the state folder."""
    for parent in [state_dir, *state_dir.parents]:
        if not parent.stat().st_mode & 0o001:
            raise UsageError(f"{parent} is not reachable by the {LOGIN_USER} login (mode "
                             f"{parent.stat().st_mode & 0o777:o}); choose another --state or chmod o+x")


def _address(subnet: str, index: int) -> str:
    octets = subnet.split(".")
    if len(octets) != 3 or octets[0] != "127" or not all(o.isdigit() for o in octets):
        raise UsageError(f"subnet {subnet!r}: use a loopback /24 such as 127.0.1")
    third = int(octets[2]) + index // 254
    if third > 255:
        raise UsageError(f"too many nodes for subnet {subnet}")
    return f"127.{octets[1]}.{third}.{index % 254 + 1}"


def _new_key_pair(comment: str = "") -> tuple[bytes, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, f"{public} {comment}".strip() + "\n"


def _write_keypair(path: Path, comment: str) -> str:
    private, public = _new_key_pair(comment)
    _write(path, private, 0o600)
    _write(path.with_name(path.name + ".pub"), public, 0o644)
    return public


def _write(path: Path, data: str | bytes, mode: int) -> None:
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _install_library(library: Path, lib_dir: Path) -> None:
    """A world-readable copy of the simulated libnvidia-ml (the build cache may be private)."""
    target = lib_dir / "libnvidia-ml.so.1"
    shutil.copyfile(library, lib_dir / ".lib.tmp")
    (lib_dir / ".lib.tmp").chmod(0o755)
    (lib_dir / ".lib.tmp").replace(target)


def _install_tools(tools: Path) -> None:
    """A PATH directory with basic tools but no python3 (the ``no-python3`` fault)."""
    for tool in NO_PYTHON_TOOLS:
        found = shutil.which(tool, path=SYSTEM_PATH)
        link = tools / tool
        if found and not link.is_symlink():
            link.symlink_to(found)


def _write_python_wrapper(bin_dir: Path, fault: str | None) -> None:
    wrapper = bin_dir / "python3"
    if fault == "hang":
        _write(wrapper, "#!/bin/sh\n# transport fault 'hang': never answers\nexec sleep 600\n", 0o755)
    elif fault == "garbage":
        _write(wrapper, "#!/bin/sh\n# transport fault 'garbage'\ncat >/dev/null\n"
                        "echo 'GARBAGE: this is not the collector <<<%%%>>>'\n", 0o755)
    elif wrapper.exists():
        wrapper.unlink()


def _node_environment(sim_env: Mapping[str, str], sim_bin: Path, fault_bin: Path, ssh: Path,
                      fault: str | None) -> dict[str, str]:
    """The node's environment as sshd's SetEnv gives it to every login."""
    system = str(ssh / "tools-nopython") if fault == "no-python3" else SYSTEM_PATH
    env = {k: v for k, v in sim_env.items() if k not in ("PATH", "LD_LIBRARY_PATH")}
    env["PATH"] = f"{fault_bin}:{sim_bin}:{system}"
    env["LD_LIBRARY_PATH"] = str(ssh / "lib")
    for key, value in env.items():
        if any(c.isspace() or c in "\"'\\" for c in key + value):
            raise UsageError(f"cannot pass {key}={value!r} through sshd SetEnv")
    return env


def _sshd_config(lab: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    ssh = Path(lab["state"]) / "ssh"
    directory = Path(entry["dir"])
    authorized = ssh / ("refused_authorized_keys" if entry["fault"] == "refuse-key" else "authorized_keys")
    setenv = " ".join(f"{k}={v}" for k, v in entry["env"].items())
    mesh_listen = [f"ListenAddress {entry['mesh']}:22"] if entry.get("mesh") else []
    return "\n".join([
        f"# sshd of simulated node {directory.name}; written by burnin sim up --ssh",
        f"ListenAddress {entry['address']}:{entry['port']}", *mesh_listen,
        f"HostKey {directory / 'ssh_host_ed25519_key'}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}",
        f"AllowUsers {lab['user']}",
        "StrictModes no", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin no", "UsePAM no", "UseDNS no",
        "PrintMotd no", "PrintLastLog no", "X11Forwarding no", "AllowAgentForwarding no",
        "AllowTcpForwarding yes", "PermitUserEnvironment no", "MaxStartups 200:30:400",
        "MaxSessions 64", "LogLevel ERROR",
        f"SetEnv {setenv}", "",
    ])


# ----------------------------------------------------------- start and stop


def _sshd() -> str:
    path = sshd_available()
    if path is None:
        raise UsageError("sshd not found: install openssh-server")
    return path


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


def _plan_path(lab: Mapping[str, Any]) -> Path:
    return Path(str(lab.get("state", "."))) / "ssh" / "supervisor.json"


def _configure(lab: Mapping[str, Any], entry: dict[str, Any], *, retry_port: bool) -> None:
    """Write the node's sshd_config (on a free port when its own is taken and ``retry_port``)."""
    if retry_port and not entry.get("netns") and not _port_free(entry["address"], entry["port"]):
        entry["port"] = _free_port(entry["address"])
    directory = Path(entry["dir"])
    config = directory / "sshd_config"
    _write(config, _sshd_config(lab, entry), 0o644)
    entry["config"] = str(config)


def _write_plan(lab: Mapping[str, Any]) -> Path:
    plan = _plan_path(lab)
    daemons: list[dict[str, Any]] = []
    for name, entry in lab["nodes"].items():
        argv = _named(name, [lab["sshd"], "-D", "-f", entry["config"], "-E", str(Path(entry["dir"]) / "sshd.log")])
        daemons.append({"name": name, "argv": netns.sshd_argv(entry["netns"], argv) if entry.get("netns") else argv})
    if lab.get("netns"):
        daemons.append({"name": STORAGE_TARGET, "argv": netns.target_argv(lab["netns"], NODE_PYTHON),
                        "log": str(plan.parent / f"{STORAGE_TARGET}.log")})
    supervisor.write_json(plan, {"daemons": daemons})
    return plan


def _notes(ssh_client: str | None) -> list[str]:
    """What this host lacks for multi-node jobs on the rack (``sim up`` prints it; the rack works without)."""
    notes = []
    if ssh_client is None:
        notes.append("no ssh client on this host (apt-get install openssh-client): the nodes cannot reach each "
                     "other, so mpirun cannot start multi-node jobs")
    if shutil.which("mpirun", path=SYSTEM_PATH) is None or shutil.which("orted", path=SYSTEM_PATH) is None:
        notes.append("no OpenMPI on this host (apt-get install openmpi-bin): the fabric suite's multi-node "
                     "runs (mpirun from the first node) cannot start")
    if not (os.access(UNSHARE, os.X_OK) and os.access(HOSTNAME, os.X_OK)):
        notes.append(f"no {UNSHARE} or {HOSTNAME}: the nodes keep this host's name")
    return notes


def _named(node: str, argv: list[str]) -> list[str]:
    """``argv`` in a UTS namespace of its own whose host name is ``node`` (unchanged without unshare)."""
    if not (os.access(UNSHARE, os.X_OK) and os.access(HOSTNAME, os.X_OK)):
        return argv
    return [UNSHARE, "--uts", "--", "/bin/sh", "-c", f'{HOSTNAME} "$0" && exec "$@"', node, *argv]


def _start_supervisor(lab: dict[str, Any]) -> None:
    """Start the supervisor, which starts one sshd per node as its children."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
    plan = _write_plan(lab)
    supervisor.pids_path(plan).unlink(missing_ok=True)
    # No signal between starting the supervisor and recording it: the cleanup must find it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    try:
        with (plan.parent / "supervisor.log").open("ab") as log:
            proc = subprocess.Popen(supervisor.command(plan), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        lab["supervisor"] = proc.pid
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    _await_pids(lab, after_generation=0)


def _request_start(lab: dict[str, Any]) -> None:
    """Ask the supervisor to start every sshd of the plan that is not running; record the pids."""
    plan = _plan_path(lab)
    generation = int(supervisor.read_pids(plan).get("generation") or 0)
    os.kill(int(lab["supervisor"]), signal.SIGUSR1)
    _await_pids(lab, after_generation=generation)


def _await_pids(lab: dict[str, Any], *, after_generation: int) -> None:
    plan = _plan_path(lab)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        pids = supervisor.read_pids(plan)
        if int(pids.get("generation") or 0) > after_generation:
            break
        if not pid_alive(lab["supervisor"]):
            _reap_pid(lab["supervisor"])
            log = plan.parent / "supervisor.log"
            tail = log.read_text(encoding="utf-8", errors="replace").strip()[-400:] if log.exists() else ""
            raise UsageError(f"the sshd supervisor exited at start: {tail}")
        if time.monotonic() > deadline:
            raise UsageError(f"the sshd supervisor did not start the nodes within {START_TIMEOUT:g} s")
        time.sleep(0.02)
    for name, entry in lab["nodes"].items():
        entry["pid"] = pids.get("pids", {}).get(name)


def _start_all(lab: dict[str, Any]) -> None:
    entries = list(lab["nodes"].values())
    for entry in entries:
        _configure(lab, entry, retry_port=True)
    _start_supervisor(lab)
    failed = _wait_listening(entries, START_TIMEOUT)
    if failed:  # lost a race for the port: once more on a free one
        for entry in failed:
            _stop(entry)
            entry["port"] = _free_port(entry["address"])
            _configure(lab, entry, retry_port=False)
        _request_start(lab)
        failed = _wait_listening(failed, START_TIMEOUT)
    if failed:
        log = Path(failed[0]["dir"]) / "sshd.log"
        detail = log.read_text(encoding="utf-8", errors="replace").strip()[-400:] if log.exists() else ""
        raise UsageError(f"sshd did not start for {len(failed)} node(s) ({failed[0]['address']}): {detail}")


def _wait_listening(entries: Sequence[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Wait until each sshd accepts connections; return the ones that exited or never listened."""
    pending = list(entries)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        still = []
        for entry in pending:
            if not pid_alive(entry["pid"]):
                continue  # exited: reported below
            try:
                with socket.create_connection((entry["address"], entry["port"]), timeout=1.0):
                    pass
            except OSError:
                still.append(entry)
        if len(still) == len(pending) and still:
            time.sleep(0.02)
        pending = still
    return [e for e in entries if not pid_alive(e["pid"])] + pending


def _stop_all(lab: dict[str, Any]) -> None:
    """Stop the supervisor (it stops and reaps every sshd), then any sshd it left (it was killed)."""
    pid = int(lab.get("supervisor") or 0)
    if supervisor.is_supervisor(pid, _plan_path(lab)):
        os.kill(pid, signal.SIGTERM)
        # its own stop takes at most two grace periods; the rest is slack for a loaded machine
        deadline = time.monotonic() + supervisor.STOP_GRACE_S * 2 + 50.0
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    if pid:
        _reap_pid(pid)  # our own child when up() ran in this process
    lab["supervisor"] = None
    entries = list(lab.get("nodes", {}).values())
    for entry in entries:
        if _is_our_sshd(entry):
            os.kill(entry["pid"], signal.SIGTERM)
    for entry in entries:
        _stop(entry)


def _stop(entry: dict[str, Any]) -> None:
    pid = entry.get("pid")
    if pid and _is_our_sshd(entry):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    if pid:
        _reap_pid(pid)
    entry["pid"] = None


def _reap_pid(pid: int) -> None:
    """Collect the exit status when ``pid`` is our own child (no zombie left)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pid_alive(pid: int | None) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _is_our_sshd(entry: Mapping[str, Any]) -> bool:
    """The recorded pid is still the sshd we started (not a recycled pid)."""
    pid, config = entry.get("pid"), entry.get("config")
    if not pid or not config or not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()  # sshd rewrites its title: one string, not NUL-separated words
    except OSError:
        return False
    return b"sshd" in cmdline and f" -f {config} ".encode() in cmdline.replace(b"\0", b" ")


def _node(lab: Mapping[str, Any], node: str) -> dict[str, Any]:
    entry: dict[str, Any] | None = lab["nodes"].get(node)
    if entry is None:
        raise UsageError(f"no simulated node {node!r} in this rack")
    return entry


# --------------------------------------------------------------- client side


def _write_client_files(lab: Mapping[str, Any]) -> None:
    known_hosts: list[str] = []
    config = ["# ssh_config of a simulated rack; written by burnin sim up --ssh", ""]
    for name, entry in lab["nodes"].items():
        address, port = entry["address"], entry["port"]
        host = address if port == 22 else f"[{address}]:{port}"
        if entry["fault"] != "host-key-unknown":
            known_hosts.append(f"{name},{host} {' '.join(entry['host_key'].split()[:2])}")
        config += [
            f"Host {name}", f"  HostName {address}", f"  Port {port}", f"  User {lab['user']}",
            f"  IdentityFile {lab['identity']}", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {lab['known_hosts']}", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  CheckHostIP no", "  BatchMode yes", "  ConnectTimeout 30",
            "  LogLevel ERROR", "",
        ]
    _write(Path(lab["known_hosts"]), "\n".join(known_hosts) + "\n", 0o644)
    _write(Path(lab["ssh_config"]), "\n".join(config), 0o644)
    for name, text in mesh.client_files(lab).items():
        _write(mesh.directory(Path(lab["state"])) / name, text, 0o644)


def _write_inventory(lab: Mapping[str, Any], names: Sequence[str]) -> None:
    from burnin.nodes import fold

    state = Path(lab["state"])
    ssh_config = Path(lab["ssh_config"]).relative_to(state)
    lines = [
        "# A simulated SSH rack, written by `burnin sim up --ssh`. Use it with",
        f"#   burnin run --via ssh --inventory {state / 'inventory.yaml'}",
        f"ssh_config: {ssh_config}",
        "nodes:",
        *(f"  {name}: {{}}" for name in names),
        "groups:",
        f"  rack: {fold(names)}",
        "",
    ]
    _write(state / "inventory.yaml", "\n".join(lines), 0o644)
