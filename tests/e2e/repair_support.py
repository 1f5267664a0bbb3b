"""A fake ``scontrol`` for the repair ladder: breaker_support's shim, plus ``scontrol reboot`` on a simulated rack.

``scontrol reboot ASAP nextstate=DOWN|RESUME reason=R NODE`` does what the lab's RebootProgram does: the
simulated node reboots (``python -m burnin.sim.reset reboot``: its transient faults cleared, persistent ones
kept) and comes back DOWN with reason R (nextstate=DOWN) or IDLE (RESUME), at once. Every update, reboot and
reservation is logged in ``scontrol.log``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from breaker_support import SHIM

REBOOT = r'''    if args[:1] == ["reboot"]:
        fields = dict(arg.split("=", 1) for arg in args[1:] if "=" in arg)
        target = [arg for arg in args[1:] if "=" not in arg and arg != "ASAP"][-1]
        import subprocess
        for name in NodeSet(target):
            subprocess.run([sys.executable, "-m", "burnin.sim.reset", "reboot",
                            os.path.join(os.environ["SCONTROL_RACK"], "nodes", name)], check=True,
                           stdout=subprocess.DEVNULL)
            if fields.get("nextstate", "RESUME").upper() == "DOWN":
                nodes[name] = {"state": "DOWN", "reason": fields.get("reason", ""),
                               "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            else:
                nodes[name] = {"state": "IDLE"}
        with open(state_path + ".tmp", "w") as handle:
            json.dump(nodes, handle)
        os.replace(state_path + ".tmp", state_path)
        with open(os.environ["SCONTROL_LOG"], "a") as log:
            log.write(" ".join(args) + "\n")
        sys.exit(0)
'''

RESERVATIONS = r'''    if args[:1] in (["create"], ["delete"]):
        with open(os.environ["SCONTROL_LOG"], "a") as log:
            log.write(" ".join(args) + "\n")
        sys.exit(0)
'''

MARK = '    if args[:1] == ["update"]:\n'


def fake_slurm_rack(tmp_path: Path, rack: Path, nodes: dict[str, dict[str, str]]) -> dict[str, str]:
    """Install the shim over ``nodes`` (name -> {"state", "reason"}); the environment to run burnin in."""
    fake = tmp_path / "bin"
    fake.mkdir()
    assert MARK in SHIM
    (fake / "scontrol").write_text(SHIM.replace("@PYTHON@", sys.executable).replace(MARK, REBOOT + RESERVATIONS + MARK))
    (fake / "scontrol").chmod(0o755)
    state = tmp_path / "slurm-nodes.json"
    state.write_text(json.dumps({name: {**node, "at": "2026-12-01T18:00:00"} for name, node in nodes.items()}))
    (tmp_path / "scontrol.log").touch()
    return {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
            "SCONTROL_STATE": str(state), "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
            "SCONTROL_RACK": str(rack), "BURNIN_STATE_DIR": str(tmp_path / "state"),
            "BURNIN_HISTORY": str(tmp_path / "state" / "history.sqlite")}


def slurm_nodes(tmp_path: Path) -> dict[str, dict[str, str]]:
    return dict(json.loads((tmp_path / "slurm-nodes.json").read_text()))


def scontrol_log(tmp_path: Path) -> list[str]:
    return (tmp_path / "scontrol.log").read_text().splitlines()
