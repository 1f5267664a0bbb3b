"""STO-04's path MTU end to end (issue 12 item 3): `burnin run --sim N --suite storage` pings every storage
target from every node with don't-fragment packets of the storage MTU, through the simulated nodes' ping.

storage-mtu-1500 sets the first BlueField netdev's MTU to 1500, which carries the first target (10.20.0.10):
its ping is refused with ``local error: message too long, mtu=1500``; the other target rides the second
BlueField netdev and answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FAULTED_REASON = ("STO-04 enp41s0f0np0 MTU 1500; path to 10.20.0.10 MTU 1500 (8972-byte DF ping: local error, "
                  "mtu=1500) (expected MTU 9000 on every BlueField netdev; 8972-byte don't-fragment pings (MTU 9000) "
                  "answered by every storage target)")


def burnin_run(out: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    return proc, gate


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("sto04-fault")
    proc, gate = burnin_run(out, "--sim", "4", "--suite", "storage", "--fault", "sim03:storage-mtu-1500",
                            "--storage-config", str(_small_writes(out)))
    return proc, gate, out


def _small_writes(folder: Path) -> Path:
    config = folder / "storage.yaml"
    config.write_text("tool: dd\nsize_mib: 16\n")
    return config


def test_storage_mtu_1500_rejects_exactly_sim03_for_sto04_naming_target_and_mtu(faulted: Any) -> None:
    proc, gate, _ = faulted
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim03" and gate["admitted"] == "sim[01-02,04]"
    assert {n: (d["failed"], d["incomplete"]) for n, d in gate["nodes"].items() if not d["admitted"]} == {
        "sim03": (["STO-04"], [])}
    assert gate["nodes"]["sim03"]["reasons"] == [FAULTED_REASON]


def test_the_facts_keep_what_ping_printed(faulted: Any) -> None:
    _, _, out = faulted
    section = json.loads((out / "facts" / "sim03.json").read_text())["storage_pathmtu"]
    near, far = section["targets"]["10.20.0.10"], section["targets"]["10.20.8.11"]
    assert near["argv"] == ["ping", "-n", "-M", "do", "-s", "8972", "-c", "3", "-i", "0.2", "-W", "1", "10.20.0.10"]
    assert near["exit_status"] == 1 and near["parsed"]["local_mtus"] == [1500, 1500, 1500]
    assert "ping: local error: message too long, mtu=1500" in near["stderr"]
    assert far["exit_status"] == 0 and far["parsed"]["statistics"]["received"] == 3
    healthy = json.loads((out / "facts" / "sim01.json").read_text())["storage_pathmtu"]
    assert all(t["exit_status"] == 0 and "small" not in t for t in healthy["targets"].values())


def test_healthy_storage_rack_passes_sto03_and_sto04_with_no_incomplete(tmp_path: Path) -> None:
    proc, gate = burnin_run(tmp_path / "out", "--sim", "4", "--suite", "storage",
                            "--storage-config", str(_small_writes(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gate["admitted"] == "sim[01-04]" and not gate["rejected"]
    assert all(not d["failed"] and not d["incomplete"] for d in gate["nodes"].values()), gate["nodes"]
    verdicts = json.loads((tmp_path / "out" / "verdicts.json").read_text())
    sto04 = [v for v in verdicts if v["check"] == "STO-04"]
    assert [(v["suite"], v["status"]) for v in sto04] == [("storage", "pass")] * 4, sto04
    assert all("2 storage targets answer don't-fragment pings of MTU 9000" in v["reason"] for v in sto04)


def test_storage_route_via_ib_is_seen_by_the_path_mtu(tmp_path: Path) -> None:
    """The route through IPoIB (MTU 4092) shows in the storage suite too: the 9000-byte ping is refused."""
    proc, gate = burnin_run(tmp_path / "out", "--sim", "2", "--suite", "storage", "--fault",
                            "sim02:storage-route-via-ib", "--storage-config", str(_small_writes(tmp_path)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim02" and gate["nodes"]["sim02"]["failed"] == ["STO-04"]
    assert gate["nodes"]["sim02"]["reasons"][0].startswith(
        "STO-04 path to 10.20.0.10 MTU 4092 (8972-byte DF ping: local error, mtu=4092)")


def test_dry_run_prints_the_pings_and_pings_nothing(tmp_path: Path) -> None:
    proc, gate = burnin_run(tmp_path / "out", "--sim", "2", "--suite", "storage", "--dry-run")
    assert "[sim[01-02]] ping -n -M do -s 8972 -c 3 -i 0.2 -W 1 10.20.0.10" in proc.stdout.splitlines()
    for decision in gate["nodes"].values():
        assert "STO-04" in decision["incomplete"]
        assert any(r.startswith("STO-04 could not be measured: storage targets: path MTU not measured: dry run: "
                                "not measured")
                   for r in decision["reasons"]), decision["reasons"]
