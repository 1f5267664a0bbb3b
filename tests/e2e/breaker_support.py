"""A fake ``scontrol`` with memory: a JSON file of nodes it drains and resumes, and a log of its updates.

``scontrol --oneliner show node [SET]`` prints the nodes (Reason with slurmctld's ``[user@time]`` stamp);
``scontrol update NodeName=SET State=DRAIN Reason=...`` drains them now, ``State=RESUME`` resumes them.
With ``$SCONTROL_BARRIER`` set to a folder, a read of every node (the breaker's) waits until
``$SCONTROL_BARRIER_COUNT`` reads have arrived, or ``$SCONTROL_BARRIER_WAIT`` seconds: so processes that
read the budget unlocked all read it before any of them drains (the race the claim file prevents).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SHIM = r'''#!@PYTHON@
import fcntl, json, os, sys, time
from ClusterShell.NodeSet import NodeSet

state_path = os.environ["SCONTROL_STATE"]
args = sys.argv[1:]
with open(state_path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    with open(state_path) as handle:
        nodes = json.load(handle)
    if args[:3] == ["--oneliner", "show", "node"]:
        wanted = list(NodeSet(args[3])) if len(args) > 3 else sorted(nodes)
        fleet_read = len(args) == 3
        fcntl.flock(lock, fcntl.LOCK_UN)
        barrier = os.environ.get("SCONTROL_BARRIER")
        if barrier and fleet_read:
            open(os.path.join(barrier, str(os.getpid())), "w").close()
            waited = 0.0
            while len(os.listdir(barrier)) < int(os.environ["SCONTROL_BARRIER_COUNT"]) and \
                    waited < float(os.environ["SCONTROL_BARRIER_WAIT"]):
                time.sleep(0.05)
                waited += 0.05
        for name in wanted:
            if name not in nodes:
                print(f"Node {name} not found", file=sys.stderr)
                continue
            node = nodes[name]
            reason = f" Reason={node['reason']} [root@{node['at']}]" if node.get("reason") else ""
            print(f"NodeName={name} Arch=x86_64 State={node['state']}{reason}")
        sys.exit(0)
    if args[:1] == ["update"]:
        fields = dict(arg.split("=", 1) for arg in args[1:])
        for name in NodeSet(fields["NodeName"]):
            if fields.get("State") == "DRAIN":
                nodes[name] = {"state": "IDLE+DRAIN", "reason": fields["Reason"],
                               "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            elif fields.get("State") == "RESUME":
                nodes[name] = {"state": "IDLE"}
        with open(state_path + ".tmp", "w") as handle:
            json.dump(nodes, handle)
        os.replace(state_path + ".tmp", state_path)
        with open(os.environ["SCONTROL_LOG"], "a") as log:
            log.write(" ".join(args) + "\n")
        sys.exit(0)
    print(f"scontrol: unexpected {args}", file=sys.stderr)
    sys.exit(1)
'''


def fake_slurm(tmp_path: Path, names: list[str]) -> dict[str, str]:
    """Install the shim for ``names`` (all idle); the environment to run burnin in (its own state folder)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(SHIM.replace("@PYTHON@", sys.executable))
    (fake / "scontrol").chmod(0o755)
    nodes = tmp_path / "slurm-nodes.json"
    nodes.write_text(json.dumps({name: {"state": "IDLE"} for name in names}))
    (tmp_path / "scontrol.log").touch()
    return {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
            "SCONTROL_STATE": str(nodes), "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
            "BURNIN_STATE_DIR": str(tmp_path / "state")}


def drained(tmp_path: Path) -> dict[str, str]:
    """The nodes the shim holds drained, with their reasons."""
    nodes = json.loads((tmp_path / "slurm-nodes.json").read_text())
    return {name: node["reason"] for name, node in nodes.items() if "DRAIN" in node["state"]}
