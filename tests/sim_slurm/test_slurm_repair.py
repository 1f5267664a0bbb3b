"""``burnin repair`` against real Slurm daemons: ``scontrol reboot`` runs the lab's RebootProgram (docs/repair.md).

With the site's GPU ladder ``reboot → vendor`` (the acceptance run as each simulated node, ``--via sim``:
under ``--via slurm`` the lab's 5 s health check drains a still-failing node again while Slurm rechecks
it, so its acceptance is only incomplete and the ladder climbs on that): sim03's transient Xid is cleared
by the reboot (the RebootProgram restarts the simulated node, which registers again as rebooted), its
acceptance passes and it is resumed; sim04's persistent corrupt InfoROM (GPU-13) survives the reboot, so it
goes to the vendor, drained with the bundle's path in its reason, never resumed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from simslurm_support import BURNIN, SlurmLab

from burnin.sim import SimNode

XID = "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"
INFOROM = "burnin: GPU-13 gpu3 Inforom Fail: A corrupt InfoROM has been detected in GPU 3."


def test_a_reboot_through_slurm_clears_a_transient_fault_and_not_a_persistent_one(
        slurm_lab: SlurmLab, tmp_path: Path) -> None:
    slurm_lab.reset()
    slurm_lab.fault("sim03", "transient:xid:79@gpu3")
    slurm_lab.fault("sim04", "dcgm-diag-fail@gpu3")
    slurm_lab.wait_probes_done(["sim03", "sim04"])  # the health check may drain them first: burnin's reason too
    slurm_lab.scontrol("update", "NodeName=sim03", "State=DRAIN", f"Reason={XID}")
    slurm_lab.scontrol("update", "NodeName=sim04", "State=DRAIN", f"Reason={INFOROM}")
    (tmp_path / "repair.yaml").write_text("ladders:\n  gpu: [reboot, vendor]\nreboot:\n  wait_s: 180\n")
    env = {**slurm_lab.env, "BURNIN_STATE_DIR": str(tmp_path / "state"),
           "BURNIN_HISTORY": str(tmp_path / "state" / "history.sqlite")}
    done = subprocess.run([*BURNIN, "repair", "sim[03-04]", "--via", "sim", "--rack", str(slurm_lab.state),
                           "--settings", str(tmp_path / "repair.yaml"), "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "sim03: re-acceptance after the reboot: pass" in output, output
    assert "sim03: passed its acceptance again; back in service" in output, output
    assert "sim04: re-acceptance after the reboot: fail (failed GPU-13" in output, output
    nodes = slurm_lab.nodes()
    assert not nodes["sim03"].drained and "DOWN" not in nodes["sim03"].flags, nodes["sim03"]
    assert SimNode.load(slurm_lab.state / "nodes" / "sim03").state().faults == []
    assert SimNode.load(slurm_lab.state / "nodes" / "sim04").state().faults == ["dcgm-diag-fail@gpu3"]
    bundle = next((tmp_path / "state" / "repair-bundles").glob("sim04-*.tar.gz"))
    assert nodes["sim04"].drained and nodes["sim04"].reason.startswith(f"burnin: GPU-13 sent to vendor: {bundle}")
    log = (slurm_lab.state / "slurm" / "log" / "reboot-sim04.log").read_text()
    assert "rebooted sim04: cleared no transient fault" in log
    journal = [json.loads(line) for line in (tmp_path / "state" / "repair.jsonl").read_text().splitlines()]
    events = [(e["node"], e["event"], e.get("outcome") or e.get("how")) for e in journal if e["event"] != "step"]
    assert events == [("sim03", "open", None), ("sim03", "attempt", "pass"), ("sim03", "close", "resumed"),
                      ("sim04", "open", None), ("sim04", "attempt", "fail"), ("sim04", "close", "vendor")], journal
    slurm_lab.reset()
