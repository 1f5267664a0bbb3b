"""``burnin run --gate slurm`` asks the breaker before draining (issue 23 item 1, docs/breaker.md).

Ten simulated nodes, six of them faulted, behind a fake ``scontrol`` that remembers what it drained
(tests/e2e/breaker_support.py): the default budget (the larger of 2 nodes and 5% per 10 minutes) lets
the gate drain two; the other four stay in service, each named in one "held by the breaker" line, and
every one of the six is still rejected in gate.json and the summary. ``burnin breaker status`` shows what
counts and what was held; ``burnin breaker allow 10`` lets the next run drain the four.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from breaker_support import drained, fake_slurm

NAMES = [f"sim{n:02d}" for n in range(1, 11)]
FAULTED = NAMES[1:7]  # sim02..sim07


def _burnin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=600, check=False, env=env)


def _run(env: dict[str, str], out: Path) -> subprocess.CompletedProcess[str]:
    faults = [arg for name in FAULTED for arg in ("--fault", f"{name}:nvlink-down")]
    return _burnin(env, "run", "--sim", "10", "--gate", "slurm", "--out", str(out), *faults)


def test_the_gate_drains_only_the_budget_and_allow_lets_the_next_run_drain_the_rest(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path, NAMES)
    first = _run(env, tmp_path / "run1")
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-2000:]
    assert sorted(drained(tmp_path)) == ["sim02", "sim03"], first.stdout[-3000:]
    held = [line for line in first.stdout.splitlines() if "held by the breaker" in line]
    assert [line.split(":")[1].strip() for line in held[:4]] == ["sim04", "sim05", "sim06", "sim07"], held
    assert "2 of 2 nodes taken out by burnin in the last 10 min" in held[0]
    assert "the breaker held 4 of 6 drain(s) (sim[04-07])" in first.stdout
    assert "rejected: sim[02-07] (6)" in first.stdout  # the verdicts stand: only the drain was withheld
    gate = json.loads((tmp_path / "run1" / "gate.json").read_text())
    assert sorted(n for n, d in gate["nodes"].items() if not d["admitted"]) == FAULTED

    status = _burnin(env, "breaker", "status", "--json")
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert (document["limit"], document["room"]) == (2, 0)
    assert [c["node"] for c in document["counted"]] == ["sim02", "sim03"]
    assert sorted(h["node"] for h in document["held"]) == ["sim04", "sim05", "sim06", "sim07"]
    assert all(h["by"] == "gate" and h["reason"].startswith("burnin: GPU-10") for h in document["held"])

    allow = _burnin(env, "breaker", "allow", "10")
    assert allow.returncode == 0, allow.stderr
    second = _run(env, tmp_path / "run2")
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-2000:]
    assert sorted(drained(tmp_path)) == FAULTED, second.stdout[-3000:]
    assert "held by the breaker" not in second.stdout
    updates = (tmp_path / "scontrol.log").read_text().splitlines()
    assert [u.split()[1] for u in updates] == ["NodeName=sim[02-03]", "NodeName=sim[04-07]"], updates
