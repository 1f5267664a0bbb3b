"""`burnin topologies --from-facts`: a golden node's facts become a topology that judges the fleet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from burnin.topology.load import find_topology, load_topology


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_drafted_topology_matches_the_node_and_judges_a_rack(tmp_path: Path) -> None:
    golden_run = tmp_path / "golden"
    assert burnin("run", "--sim", "1", "--out", str(golden_run)).returncode == 0
    drafted = burnin("topologies", "--from-facts", str(golden_run / "facts" / "sim01.json"), "--name", "site-h100")
    assert drafted.returncode == 0, drafted.stderr
    path = tmp_path / "site-h100.yaml"
    path.write_text(drafted.stdout)
    topo = load_topology(path)  # validates like any shipped topology
    shipped = find_topology("hgx-h100-8gpu")
    assert topo.gpus.devices == shipped.gpus.devices  # bus ids, NUMA nodes and PIX pairs all found
    assert [(h.name, h.bus_id, h.role) for h in topo.hcas] == [(h.name, h.bus_id, h.role) for h in shipped.hcas]
    assert topo.numa == shipped.numa and topo.host.driver_version == shipped.host.driver_version
    assert "golden node sim01" in topo.references["power_limit_w"].source

    out = tmp_path / "fleet"
    proc = burnin("run", "--sim", "4", "--topology", str(path), "--fault", "sim03:pcie-x8", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text())
    assert gate["rejected"] == "sim03" and gate["nodes"]["sim03"]["failed"] == ["GPU-08"]


def test_an_unhealthy_node_cannot_be_golden(tmp_path: Path) -> None:
    run = tmp_path / "run"
    burnin("run", "--sim", "1", "--fault", "sim01:gpu-lost", "--out", str(run))
    proc = burnin("topologies", "--from-facts", str(run / "facts" / "sim01.json"))
    assert proc.returncode == 2
    assert "gpu3 did not answer NVML" in proc.stderr and "Traceback" not in proc.stderr
