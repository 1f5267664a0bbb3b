"""The storage suite end to end (issue 12 item 3): `burnin run --sim N --suite storage` runs STO-03's phase.

The real phase writes and reads each storage mount with the simulated nodes'
write tools (fio by default, dd by the site settings) while reading the fabric
byte counters in their sysfs trees; the fault storage-traffic-on-ib sends the
bytes over compute HCA mlx5_2 on its node only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GIB = 1 << 30


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env)


def run(out: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = burnin("run", *args, "--out", str(out))
    gate = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    return proc, gate


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("sto03-fault")
    proc, gate = run(out, "--sim", "4", "--suite", "storage", "--fault", "sim03:storage-traffic-on-ib")
    return proc, gate, out


def test_done_when_rejects_exactly_sim03_for_sto03(faulted: Any) -> None:
    proc, gate, _ = faulted
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim03" and gate["admitted"] == "sim[01-02,04]"
    assert {n: (d["failed"], d["incomplete"]) for n, d in gate["nodes"].items() if not d["admitted"]} == {
        "sim03": (["STO-03"], [])}
    reason, = gate["nodes"]["sim03"]["reasons"]
    # fio writes and reads 1 GiB on each of the two mounts: 2 GiB each way, all of it on mlx5_2
    assert reason.startswith(f"STO-03 mlx5_2 compute HCA moved {4 * GIB} bytes (xmit {2 * GIB}, rcv {2 * GIB}) "
                             f"while {2 * GIB} bytes written"), reason
    assert "/mnt/home, /mnt/pfs" in reason and "mlx5_0" not in reason


def test_faulted_facts_keep_the_measurement(faulted: Any) -> None:
    _, _, out = faulted
    traffic = json.loads((out / "facts" / "sim03.json").read_text())["storage_traffic"]
    assert traffic["tool"] == "fio" and traffic["bytes_written"] == 2 * GIB
    assert traffic["storage"] == {"enp41s0f0np0": {"tx": 0, "rx": 0}, "enp177s0f0np0": {"tx": 0, "rx": 0}}
    healthy = json.loads((out / "facts" / "sim01.json").read_text())["storage_traffic"]
    assert healthy["storage"] == {"enp41s0f0np0": {"tx": GIB, "rx": GIB}, "enp177s0f0np0": {"tx": GIB, "rx": GIB}}
    assert all(c == {"xmit": 0, "rcv": 0, "ipoib_tx": 0, "ipoib_rx": 0} for c in healthy["compute"].values())


def test_healthy_rack_admits_all_with_dd_from_the_site_settings(tmp_path: Path) -> None:
    config = tmp_path / "storage.yaml"
    config.write_text("tool: dd\nsize_mib: 64\n")
    proc, gate = run(tmp_path / "out", "--sim", "4", "--suite", "storage", "--storage-config", str(config))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gate["admitted"] == "sim[01-04]" and not gate["rejected"]
    traffic = json.loads((tmp_path / "out" / "facts" / "sim02.json").read_text())["storage_traffic"]
    assert traffic["tool"] == "dd" and traffic["bytes_written"] == 2 * 64 << 20


def test_storage_config_without_the_suite_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "storage.yaml"
    config.write_text("tool: dd\n")
    proc = burnin("run", "--sim", "2", "--storage-config", str(config), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "add --suite storage" in proc.stderr and "Traceback" not in proc.stderr


def test_dry_run_prints_the_commands_and_writes_nothing(tmp_path: Path) -> None:
    proc, gate = run(tmp_path / "out", "--sim", "2", "--suite", "storage", "--dry-run")
    assert "[sim[01-02]] fio --name=burnin-sto03 --filename=/mnt/home/.burnin-sto03-NODE --rw=write" in proc.stdout
    assert "[sim[01-02]] dd if=/dev/zero of=/mnt/pfs/.burnin-sto03-NODE bs=1M count=1024" in proc.stdout
    assert "[sim[01-02]] rm -f /mnt/pfs/.burnin-sto03-NODE" in proc.stdout
    assert all(sorted(d["incomplete"]) == ["RUN", "STO-03", "STO-04"]  # STO-04: nothing pinged either
               and any("STO-03 could not be measured: storage traffic not measured: dry run: not measured" in r
                       for r in d["reasons"])
               for d in gate["nodes"].values()), gate["nodes"]
    assert gate["dry_run"] is True and gate["admitted"] == ""  # a dry run admits nobody
