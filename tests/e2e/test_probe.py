"""`burnin probe` on simulated nodes: one line, exit 0/1/2, light start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology


@pytest.fixture
def sim_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


# The probe gives each source 5 s by default; on a loaded 2-core CI machine a healthy source can take
# longer and the node would come out INCOMPLETE. A generous bound here (a failure limit, not a measurement).
SOURCE_TIMEOUT = "60"


def probe(node: SimNode, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **node.environment(), **(env or {})}
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--timeout", SOURCE_TIMEOUT, *args],
                          env=full_env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_healthy_node_is_ok_in_one_line(sim_node: SimNode) -> None:
    proc = probe(sim_node)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("burnin: OK (")
    assert len(proc.stdout.strip().splitlines()) == 1


def test_fatal_xid_fails_with_the_check_id(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("xid:79@gpu2"))
    proc = probe(sim_node)
    assert proc.returncode == 1
    line = proc.stdout.strip()
    assert line.startswith("burnin: FAIL GPU-04 ") and "Xid 79" in line and "gpu2" in line
    assert len(proc.stdout.strip().splitlines()) == 1


def test_non_fatal_xid_is_ok(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("xid:63"))
    assert probe(sim_node).returncode == 0


def test_unmeasurable_is_exit_2_not_ok(sim_node: SimNode, tmp_path: Path) -> None:
    proc = probe(sim_node, env={"LD_LIBRARY_PATH": str(tmp_path)})  # NVML library not found
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.startswith("burnin: INCOMPLETE ")
    assert "nvmlInit failed" in proc.stdout


def test_json_lists_every_fast_check(sim_node: SimNode) -> None:
    import json

    proc = probe(sim_node, "--json")
    doc = json.loads(proc.stdout)
    checks = {v["check"] for v in doc["verdicts"]}
    assert {"INV-01", "GPU-04", "GPU-10", "IB-01", "TOP-08"} <= checks
    assert "TOP-04" not in checks  # needs lspci -vvv: not a fast check


def test_probe_start_up_imports_only_what_fast_checks_need(sim_node: SimNode) -> None:
    code = ("import sys\nfrom burnin.cli.main import main\nrc = main(['probe'])\n"
            "heavy = [m for m in ('pytest', 'pydantic', 'yaml', 'jinja2', 'rich', 'paramiko', 'ClusterShell')"
            " if m in sys.modules]\nprint('HEAVY', heavy)\n")
    full_env = {**os.environ, **sim_node.environment()}
    proc = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


def test_counter_baseline_judges_growth_not_history(sim_node: SimNode, tmp_path: Path) -> None:
    env = {"BURNIN_STATE_DIR": str(tmp_path / "state")}
    apply_fault(sim_node.dir, parse_fault_spec("ib-errors"))
    history = probe(sim_node, env=env)
    assert history.returncode == 1 and "IB-04" in history.stdout  # no baseline: totals since boot
    accepted = probe(sim_node, "--baseline", env=env)
    assert accepted.returncode == 0, accepted.stdout  # the operator accepted the history
    assert probe(sim_node, env=env).returncode == 0  # no growth since: stays healthy, no flapping
    apply_fault(sim_node.dir, parse_fault_spec("nvlink-errors"))
    grown = probe(sim_node, env=env)
    assert grown.returncode == 1
    assert "GPU-11" in grown.stdout and "since baseline" in grown.stdout
    assert probe(sim_node, env=env).returncode == 1  # a fixed baseline: the event keeps failing


def test_record_keeps_the_probes_verdicts_in_the_history_and_only_with_the_flag(sim_node: SimNode,
                                                                               tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    env = {"BURNIN_HISTORY": str(history)}
    assert probe(sim_node, env=env).returncode == 0
    assert not history.exists()  # without --record the probe writes nothing
    assert probe(sim_node, "--record", env=env).returncode == 0
    apply_fault(sim_node.dir, parse_fault_spec("xid:79@gpu2"))
    failed = probe(sim_node, "--record", env=env)
    assert failed.returncode == 1 and failed.stderr == "", failed.stderr
    shown = subprocess.run([sys.executable, "-m", "burnin.cli.main", "history", "sim01", "--history", str(history)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("burnin history sim01: 2 runs (1 not admitted)"), shown.stdout
    assert "admitted" in lines[1] and "rejected: failed GPU-04" in lines[2], shown.stdout
    assert any("Xid 79" in line and "gpu2" in line for line in lines[3:]), shown.stdout
    # a history that cannot be written costs the probe one line on stderr, never its verdict
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"no database\n" * 50)
    again = probe(sim_node, "--record", env={"BURNIN_HISTORY": str(garbage)})
    assert again.returncode == 1 and again.stdout.startswith("burnin: FAIL GPU-04 ")
    assert again.stderr.count("\n") == 1 and "probe not recorded" in again.stderr
