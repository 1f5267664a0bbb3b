"""How the nodes of a lab rack reach each other over SSH, as ``mpirun`` on the first node of a job does.

A rack that no scheduler knows yet is set up so that ``ssh <node>`` on any node reaches any other
node by its inventory name without prompting: a key of the login account, known host keys, an
ssh_config. ``mpirun --host a,b,...`` relies on it: it starts ``orted`` on every other node with
``ssh <node> orted ...`` (OpenMPI's ``plm_rsh_agent``, ``ssh`` by default). The lab does the same
for its ``burnin-sim`` login, in the state folder:

- ``ssh/mesh/id_ed25519``: the nodes' own key, owned by the login account (OpenSSH refuses a key
  that others can read); its public half is in every sshd's authorized keys;
- ``ssh/mesh/known_hosts``: the key each node's sshd serves, under its name and the address the
  other nodes reach it at (the known_hosts of the controller's client may differ on purpose: the
  transport faults ``host-key-changed`` and ``host-key-unknown`` concern the controller only);
- ``ssh/mesh/ssh_config``: ``Host <node>`` with that address, the key, ``StrictHostKeyChecking yes``
  and ``BatchMode yes`` (nothing prompts);
- ``ssh`` first on every node's PATH (:func:`write_wrapper`): ``exec /usr/bin/ssh -F
  ssh/mesh/ssh_config "$@"``: a node's plain ``ssh`` reads the lab's config, as OpenSSH reads
  ``~/.ssh/config`` on a real node (the login account's home is shared by every node of every lab
  on this host, so the lab writes nothing there).

The address: a loopback rack's nodes share the host's network, so the one the controller uses; a
kernel-network rack's nodes reach each other on the fabric namespace's ``mesh`` bridge
(:mod:`burnin_lab.netns`), where each node's sshd listens too.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SSH = "/usr/bin/ssh"
KEY = "id_ed25519"
CONFIG = "ssh_config"
KNOWN_HOSTS = "known_hosts"


def ssh_client() -> str | None:
    """The OpenSSH client the nodes' ``ssh`` runs (None when openssh-client is missing)."""
    for candidate in (SSH, shutil.which("ssh")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def directory(state_dir: Path) -> Path:
    return state_dir / "ssh" / "mesh"


def give_to(path: Path, user: str) -> None:
    """Make ``path`` the login account's own (its key, its temporary folder)."""
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def address_of(entry: Mapping[str, Any]) -> tuple[str, int]:
    """Where the other nodes reach this node's sshd: its mesh address (kernel network), else its own."""
    if entry.get("mesh"):
        return str(entry["mesh"]), 22
    return str(entry["address"]), int(entry["port"])


def write_wrapper(bin_dir: Path, config: Path, client: str) -> None:
    """``ssh`` first on the node's PATH: the real client with the lab's node-to-node ssh_config."""
    wrapper = bin_dir / "ssh"
    text = ("#!/bin/sh\n# a lab node's ssh: the rack's node-to-node settings (burnin_lab.mesh)\n"
            f'exec {shlex.quote(client)} -F {shlex.quote(str(config))} "$@"\n')
    tmp = bin_dir / ".ssh.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(wrapper)


def client_files(lab: Mapping[str, Any]) -> dict[str, str]:
    """``known_hosts`` and ``ssh_config`` (file name -> text) the nodes use to reach each other."""
    mesh = directory(Path(lab["state"]))
    known: list[str] = []
    config = ["# how the nodes of a simulated rack reach each other; written by burnin sim up --ssh", ""]
    for name, entry in lab["nodes"].items():
        address, port = address_of(entry)
        host = address if port == 22 else f"[{address}]:{port}"
        served = (Path(entry["dir"]) / "ssh_host_ed25519_key.pub").read_text(encoding="utf-8").split()
        known.append(f"{name},{host} {' '.join(served[:2])}")
        config += [
            f"Host {name}", f"  HostName {address}", f"  Port {port}", f"  User {lab['user']}",
            f"  IdentityFile {mesh / KEY}", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {mesh / KNOWN_HOSTS}", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  CheckHostIP no", "  BatchMode yes", "  ConnectTimeout 30",
            "  LogLevel ERROR", "",
        ]
    return {KNOWN_HOSTS: "\n".join(known) + "\n", CONFIG: "\n".join(config)}
