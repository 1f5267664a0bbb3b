"""``burnin repair`` on a simulated rack behind a fake ``scontrol`` that reboots simulated nodes (issue 23 items 3, 4).

- a transient Xid: the GPU is reset, the node suite passes again, the node is resumed, no operator;
- a persistent Xid: reset, then a reboot through Slurm, then the vendor bundle (its contents checked); the
  node is never resumed while it fails, and its drain reason names the bundle;
- an operator's drain is never touched; a dry run prints the step and changes nothing;
- every decision is in the journal and the history.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import tarfile
from pathlib import Path

from repair_support import fake_slurm_rack, scontrol_log, slurm_nodes

from burnin.sim import SimNode, build_rack
from burnin.topology.load import find_topology

XID_REASON = "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus) (expected no fatal Xid since boot)"
OPERATOR = "memory swap by alice"


def _rack(tmp_path: Path, fault: str) -> tuple[Path, dict[str, str]]:
    rack = tmp_path / "rack"
    build_rack(rack, find_topology("hgx-h100-8gpu"), ["sim01", "sim02"], {"sim01": [fault], "sim02": [fault]})
    env = fake_slurm_rack(tmp_path, rack, {"sim01": {"state": "IDLE+DRAIN", "reason": XID_REASON},
                                           "sim02": {"state": "IDLE+DRAIN", "reason": OPERATOR}})
    return rack, env


def _repair(tmp_path: Path, env: dict[str, str], rack: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", "repair", "sim[01-02]", "--via", "sim",
                           "--rack", str(rack), "--out", str(tmp_path / "out"), *extra],
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def _journal(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "state" / "repair.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _history_actions(tmp_path: Path) -> list[str]:
    import sqlite3

    db = sqlite3.connect(tmp_path / "state" / "history.sqlite")
    try:
        return [row[0] for row in db.execute("SELECT action FROM actions WHERE source = 'repair' ORDER BY id")]
    finally:
        db.close()


def test_a_transient_xid_is_reset_passes_again_and_returns_to_service(tmp_path: Path) -> None:
    rack, env = _rack(tmp_path, "transient:xid:79@gpu3")
    done = _repair(tmp_path, env, rack)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "sim01: reset (the gpu ladder reset -> reboot -> vendor, step 1 of 3" in output
    assert "sim01: re-acceptance after the reset: pass" in output
    assert "sim01: passed its acceptance again; back in service" in output
    nodes = slurm_nodes(tmp_path)
    assert nodes["sim01"]["state"] == "IDLE"
    assert nodes["sim02"] == {"state": "IDLE+DRAIN", "reason": OPERATOR, "at": "2026-12-01T18:00:00"}
    assert "never touched by burnin" in output
    assert scontrol_log(tmp_path) == ["update NodeName=sim01 State=RESUME"]  # no reboot, nothing on sim02
    assert SimNode.load(rack / "nodes" / "sim01").state().faults == []
    assert SimNode.load(rack / "nodes" / "sim02").state().faults == ["transient:xid:79@gpu3"]  # the operator's
    events = [(e["event"], e.get("step"), e.get("outcome"), e.get("how")) for e in _journal(tmp_path)
              if e["node"] == "sim01"]
    assert events == [("open", None, None, None), ("step", "reset", None, None),
                      ("attempt", "reset", "pass", None), ("close", None, None, "resumed")]
    assert _history_actions(tmp_path) == ["repair-open", "repair-step", "repair-attempt", "repair-close",
                                          "repair-left"]


def test_a_persistent_xid_climbs_reset_reboot_vendor_and_is_never_resumed(tmp_path: Path) -> None:
    rack, env = _rack(tmp_path, "xid:79@gpu3")
    done = _repair(tmp_path, env, rack)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "re-acceptance after the reset: fail (failed GPU-04" in output
    assert "sim01: reboot (the gpu ladder reset -> reboot -> vendor, step 2 of 3: the node failed again after " \
           "the reset)" in output
    assert "re-acceptance after the reboot: fail (failed GPU-04" in output
    assert "still out: sim01 (vendor)" in output
    log = scontrol_log(tmp_path)
    assert not any("State=RESUME" in line for line in log), log
    reboot_reason = "burnin: GPU-04 repair: reboot (gpu ladder), then acceptance"
    assert log[:4] == [  # rebooted in a reservation, drained again before the reservation goes
        "create reservation ReservationName=burnin-repair-sim01 Nodes=sim01 StartTime=now Duration=UNLIMITED "
        f"Users={pwd.getpwuid(os.getuid()).pw_name} Flags=MAINT,IGNORE_JOBS",
        f"reboot ASAP nextstate=RESUME reason={reboot_reason} sim01",
        f"update NodeName=sim01 State=DRAIN Reason={reboot_reason}",
        "delete ReservationName=burnin-repair-sim01"], log
    bundles = list((tmp_path / "state" / "repair-bundles").glob("sim01-*.tar.gz"))
    assert len(bundles) == 1
    node = slurm_nodes(tmp_path)["sim01"]
    assert "DRAIN" in node["state"] and node["reason"] == f"burnin: GPU-04 sent to vendor: {bundles[0]}"
    with tarfile.open(bundles[0]) as tar:
        files = {Path(m.name).name: tar.extractfile(m).read().decode() for m in tar.getmembers()  # type: ignore[union-attr]
                 if m.isfile()}
    assert sorted(files) == ["facts.json", "failing-checks.json", "incident-history.json", "kernel-log.txt",
                             "nvidia-bug-report.missing", "summary.json"]
    failing = json.loads(files["failing-checks.json"])
    assert [(v["check"], v["status"], v["measured"]) for v in failing] == [
        ("GPU-04", "fail", "gpu3 Xid 79 (GPU has fallen off the bus)")]
    assert json.loads(files["facts.json"])["hostname"] == "sim01"
    assert "NVRM: Xid (PCI:" in files["kernel-log.txt"] and "): 79," in files["kernel-log.txt"]
    assert "nvidia-bug-report.sh not found on the node" in files["nvidia-bug-report.missing"]
    summary = json.loads(files["summary.json"])
    assert (summary["node"], summary["class"], summary["checks"], summary["steps"]) == (
        "sim01", "gpu", ["GPU-04"], ["reset", "reboot", "vendor"])
    history = json.loads(files["incident-history.json"])
    assert [e["event"] for e in history["journal"]] == ["open", "step", "attempt", "step", "attempt", "step"]
    assert [a["action"] for a in history["history"]["actions"]][:2] == ["repair-open", "repair-step"]
    closing = _journal(tmp_path)[-2]
    assert (closing["event"], closing["how"], closing["bundle"]) == ("close", "vendor", str(bundles[0]))

    again = _repair(tmp_path, env, rack)  # a node sent to the vendor waits for an operator
    assert again.returncode == 0, again.stdout + again.stderr
    assert "sim01: sent to the vendor" in again.stdout and "an operator returns it" in again.stdout
    assert not any("State=RESUME" in line for line in scontrol_log(tmp_path))


def test_a_dry_run_prints_the_step_and_changes_nothing(tmp_path: Path) -> None:
    rack, env = _rack(tmp_path, "transient:xid:79@gpu3")
    done = _repair(tmp_path, env, rack, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sim01: would reset (the gpu ladder" in done.stdout
    assert "# on sim01: nvidia-smi -r -i 3" in done.stdout
    assert scontrol_log(tmp_path) == []
    assert not (tmp_path / "state" / "repair.jsonl").exists()
    assert SimNode.load(rack / "nodes" / "sim01").state().faults == ["transient:xid:79@gpu3"]
