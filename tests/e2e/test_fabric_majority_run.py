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
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--suite", "fabric",
                           "--fault", f"sim01:{fault}", "--fault", f"sim02:{fault}", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    assert gate["admitted"] == "sim03" and gate["rejected"] == "sim[01-02]", gate
    for node in ("sim01", "sim02"):
        assert check_id in gate["nodes"][node]["failed"], gate["nodes"][node]
    healthy = gate["nodes"]["sim03"]
    assert healthy["admitted"] and not healthy["failed"] and not healthy["incomplete"], healthy
