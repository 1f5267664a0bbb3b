"""`burnin run --sim` with GPU firmware (INV-02): a GPU on another VBIOS rejects its node alone.

The real collector reads the simulated NVML through pynvml; the node suite judges INV-02 against the
shipped topology's qualified versions, or, with a topology that names none, for consistency only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REASON = ("INV-02 gpu3 VBIOS 96.00.74.00.0D (expected VBIOS 96.00.74.00.01 as on gpu0-2,4-7 "
          "and per topology hgx-h100-8gpu)")
FLEET_REASON = ("INV-11 VBIOS 96.00.74.00.01 + 96.00.74.00.0D (fleet: 96.00.74.00.01 on 3 of 4 nodes) "
                "(expected as on most of the run's 4 hgx-h100-8gpu nodes)")
REPO = Path(__file__).resolve().parents[2]


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def _results(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    gate: dict[str, Any] = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    verdicts: list[dict[str, Any]] = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    return gate, [v for v in verdicts if v["check"] == "INV-02"]


def test_a_gpu_on_another_vbios_rejects_exactly_its_node(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "4", "--fault", "sim02:vbios-mismatch@gpu3", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    gate, inv02 = _results(out)
    assert gate["rejected"] == "sim02"
    assert gate["nodes"]["sim02"] == {"admitted": False, "failed": ["INV-02", "INV-11"], "incomplete": [],
                                      "reasons": [REASON, FLEET_REASON]}
    for node in ("sim01", "sim03", "sim04"):
        assert gate["nodes"][node] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}, node
    assert sorted((v["node"], v["status"]) for v in inv02) == [
        ("sim01", "pass"), ("sim02", "fail"), ("sim03", "pass"), ("sim04", "pass")]
    assert REASON in proc.stdout


def test_a_healthy_rack_passes_whole_and_says_which_firmware(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gate, inv02 = _results(out)
    assert all(d["admitted"] and not d["failed"] and not d["incomplete"] for d in gate["nodes"].values())
    assert [v["status"] for v in inv02] == ["pass", "pass"]
    assert inv02[0]["reason"] == (
        "INV-02 ok: VBIOS 96.00.74.00.01, InfoROM G520.0200.00.05 (objects OEM 2.1, ECC 7.16, power N/A) "
        "on all 8 GPUs, as topology hgx-h100-8gpu names")


def test_without_expected_firmware_the_odd_gpu_is_still_caught(tmp_path: Path) -> None:
    doc = yaml.safe_load((REPO / "topologies" / "hgx-h100-8gpu.yaml").read_text(encoding="utf-8"))
    del doc["gpus"]["firmware"]
    doc["name"] = "h100-any-firmware"
    topology = tmp_path / "h100-any-firmware.yaml"
    topology.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "3", "--topology", str(topology), "--fault", "sim03:vbios-mismatch@gpu5",
                  "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate, inv02 = _results(out)
    assert gate["rejected"] == "sim03" and gate["nodes"]["sim03"]["failed"] == ["INV-02", "INV-11"]
    assert gate["nodes"]["sim03"]["reasons"][:1] == [
        "INV-02 gpu5 VBIOS 96.00.74.00.0D (expected VBIOS 96.00.74.00.01 as on gpu0-4,6-7; "
        "topology h100-any-firmware names no VBIOS)"]
    healthy = next(v for v in inv02 if v["node"] == "sim01")
    assert healthy["reason"].endswith("names no expected versions: consistency only"), healthy["reason"]
