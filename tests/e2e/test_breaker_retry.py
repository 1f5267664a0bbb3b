"""``burnin breaker retry``: a fatal event's drain that the breaker held is asked again once the budget frees up
(issue 23 item 1); a run's holds are not (the next run judges those nodes again), nor a node an operator holds.

Behind breaker_support's fake ``scontrol``: two nodes burnin drained a moment ago spend the default budget (2);
the held log has the watch's hold of sim03, a gate's hold of sim04 and the watch's hold of sim05, which an
operator has drained since.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from breaker_support import drained, fake_slurm

NAMES = [f"sim{n:02d}" for n in range(1, 6)]
XID = "burnin: GPU-04 gpu1 Xid 79 (GPU has fallen off the bus)"


def _burnin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


def test_a_held_fatal_event_is_drained_once_the_budget_frees_up(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path, NAMES)
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    nodes = json.loads((tmp_path / "slurm-nodes.json").read_text())
    for name in ("sim01", "sim02"):
        nodes[name] = {"state": "IDLE+DRAIN", "reason": "burnin: IB-03 mlx5_2 port down", "at": now}
    nodes["sim05"] = {"state": "IDLE+DRAIN", "reason": "rack power work, bob", "at": now}
    (tmp_path / "slurm-nodes.json").write_text(json.dumps(nodes))
    state = Path(env["BURNIN_STATE_DIR"])
    state.mkdir()
    at = time.time()
    held = [{"at": at, "node": "sim03", "by": "watch", "cause": "2 of 2", "mode": "held", "reason": XID},
            {"at": at, "node": "sim04", "by": "gate", "cause": "2 of 2", "mode": "held", "reason": XID},
            {"at": at, "node": "sim05", "by": "watch", "cause": "2 of 2", "mode": "held", "reason": XID}]
    (state / "breaker-held.jsonl").write_text("".join(json.dumps(h) + "\n" for h in held))

    still = _burnin(env, "breaker", "retry")
    assert still.returncode == 1, still.stdout + still.stderr
    assert "sim03: held at" in still.stdout and "not drained" in still.stdout and "held by the breaker" in still.stdout
    assert sorted(drained(tmp_path)) == ["sim01", "sim02", "sim05"]

    assert _burnin(env, "breaker", "allow", "1").returncode == 0
    done = _burnin(env, "breaker", "retry")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sim03: held at" in done.stdout and f"now drained ({XID})" in done.stdout
    assert "sim05: held at" in done.stdout and "left as it is" in done.stdout
    assert "sim04" not in done.stdout  # a run's hold: the next run judges it again
    assert drained(tmp_path) == {"sim01": "burnin: IB-03 mlx5_2 port down", "sim02": "burnin: IB-03 mlx5_2 port down",
                                 "sim03": XID, "sim05": "rack power work, bob"}


def test_the_watchs_latest_hold_per_node_is_asked_again() -> None:
    from burnin.breaker.retry import Pending, pending

    assert pending([]) == []
    entries = [{"at": 1, "node": "a", "by": "watch", "reason": "burnin: GPU-04 x"},
               {"at": 3, "node": "a", "by": "watch", "reason": "burnin: GPU-01 y"},
               {"at": 2, "node": "b", "by": "watch", "mode": "record", "reason": "burnin: GPU-04 x"},
               {"at": 2, "node": "c", "by": "watch", "reason": ""},
               {"at": "x", "node": "d", "by": "watch", "reason": "burnin: GPU-04 x"}]
    assert pending(entries) == [Pending("a", "burnin: GPU-01 y", 3.0)]
