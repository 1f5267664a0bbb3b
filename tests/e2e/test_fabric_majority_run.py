"""`burnin run --suite fabric` with most nodes slow: the slow ones are held, the healthy one admitted (issue 19)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("fault", "check_id"), [("slow-hca", "IB-08"), ("slow-nvlink", "NVL-01")])
def test_a_slow_majority_is_held_and_the_healthy_node_admitted(tmp_path: Path, fault: str, check_id: str) -> None:
    out = tmp_path / "run"
    # 3 slow of 5: the slow nodes are the majority, and the 2 healthy ones are each other's partner (a lone
    # healthy node would be held incomplete, no partner: docs/fabric.md "Small racks")
    faults = [arg for node in ("sim01", "sim02", "sim03") for arg in ("--fault", f"{node}:{fault}")]
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "5", "--suite", "fabric",
                           *faults, "--out", str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    assert gate["admitted"] == "sim[04-05]" and gate["rejected"] == "sim[01-03]", gate
    for node in ("sim01", "sim02", "sim03"):
        assert check_id in gate["nodes"][node]["failed"], gate["nodes"][node]
    for node in ("sim04", "sim05"):
        healthy = gate["nodes"][node]
        assert healthy["admitted"] and not healthy["failed"] and not healthy["incomplete"], healthy
