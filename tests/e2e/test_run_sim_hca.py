"""INV-09, IB-06 and IB-09 end to end: `burnin run --sim 4 --fault sim02:<fault>` rejects exactly sim02,
for that check only, with the measured value and the expected one in the reason.

The real collector reads the simulated nodes' sysfs (fw_ver, board_id, the PCI link, the pkey tables) and
runs their ibv_devinfo shim; the node suite judges them; the gate decides.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXPECTED = "compute HCAs on firmware 28.41.1000, one PSID; storage HCAs on one firmware and PSID; each at its bus id"
CASES = [
    ("hca-fw-mismatch@mlx5_3", "INV-09", f"INV-09 mlx5_3 firmware 28.39.4082 (expected {EXPECTED}; topology "
     "hgx-h100-8gpu declares no compute PSID: consistency only)"),
    ("hca-pcie-x8@mlx5_2", "IB-06", "IB-06 mlx5_2 32 GT/s x8 (capable of 32 GT/s x16) (expected >= 32 GT/s, 16 lanes)"),
    ("ib-mtu-2048@mlx5_1", "IB-09", "IB-09 mlx5_1 active_mtu 2048 (expected active_mtu 4096 bytes, pkeys 0xffff)"),
    ("ib-pkey-limited@mlx5_1", "IB-09",
     "IB-09 mlx5_1 pkeys 0x7fff (limited) (expected active_mtu 4096 bytes, pkeys 0xffff)"),
]
# INV-11 names the swapped card's firmware too: it differs from the other nodes' HCAs
FLEET_ALSO = {"hca-fw-mismatch@mlx5_3": "INV-11 compute HCA firmware 28.39.4082 + 28.41.1000 (fleet: 28.41.1000 on 3 "
                                        "of 4 nodes) (expected as on most of the run's 4 hgx-h100-8gpu nodes)"}


@pytest.mark.parametrize(("fault", "check_id", "reason"), CASES, ids=[c[0] for c in CASES])
def test_the_fault_rejects_exactly_its_node_for_its_check(tmp_path: Path, fault: str, check_id: str,
                                                          reason: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "4", "--fault",
                           f"sim02:{fault}", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["rejected"] == "sim02" and gate["admitted"] == "sim[01,03-04]"
    also = [FLEET_ALSO[fault]] if fault in FLEET_ALSO else []
    assert gate["nodes"]["sim02"] == {"admitted": False, "failed": [check_id] + ["INV-11"] * len(also),
                                      "incomplete": [], "reasons": [reason, *also]}
    for node in ("sim01", "sim03", "sim04"):
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}
    assert f"REJECTED sim02: failed {check_id}" in proc.stdout
    passed = {v["check"]: v["status"] for v in json.loads((tmp_path / "verdicts.json").read_text())
              if v["node"] == "sim01"}
    assert {passed[c] for c in ("INV-09", "IB-06", "IB-09")} == {"pass"}
