"""Two processes that read the breaker's budget at the same moment on one host do not overshoot it.

Each process drains two nodes through the Slurm gate (``apply_gate``) with a budget of two. The fake
``scontrol`` (tests/e2e/breaker_support.py) makes every read of the whole fleet wait until both processes
have read it (or a few seconds have passed): without the claim file's lock both would read an empty budget
and drain four nodes; with it the second reads after the first has drained, and holds both of its nodes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from breaker_support import drained, fake_slurm

SCRIPT = """
import sys
from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import apply_gate
nodes = sys.argv[1:]
decisions = {n: NodeDecision(n, admitted=False, failed=("GPU-10",), reasons=("GPU-10 nvlink down",)) for n in nodes}
apply_gate(decisions, dry_run=False)
"""


def test_two_processes_deciding_at_once_drain_no_more_than_the_budget(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path, [f"sim{n:02d}" for n in range(1, 11)])
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env.update(SCONTROL_BARRIER=str(barrier), SCONTROL_BARRIER_COUNT="2", SCONTROL_BARRIER_WAIT="3")
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, *nodes], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for nodes in (["sim01", "sim02"], ["sim03", "sim04"])]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    assert len(drained(tmp_path)) == 2, (drained(tmp_path), outputs)
    held = [line for out, _ in outputs for line in out.splitlines() if "held by the breaker (" in line]
    assert len(held) == 2, outputs
