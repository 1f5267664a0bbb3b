"""`burnin probe --metrics FILE`: the node_exporter textfile, parsed by prometheus_client; no cost without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import SimNode, build_rack, parse_fault_spec
from burnin.topology.model import Topology

# The probe gives each source 5 s by default; on a loaded 2-core CI machine a healthy source can take
# longer (GPU-10 would be INCOMPLETE, not FAIL). A generous bound here: a failure limit, not a measurement.
SOURCE_TIMEOUT = "60"


@pytest.fixture
def faulted_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim04"], {"sim04": [parse_fault_spec("nvlink-down")]})[0]


def _families(text: str) -> dict[str, object]:
    from prometheus_client.parser import text_string_to_metric_families

    return {family.name: family for family in text_string_to_metric_families(text)}


def test_probe_writes_the_textfile_with_verdicts_and_measurements(faulted_node: SimNode, tmp_path: Path) -> None:
    target = tmp_path / "textfile" / "burnin.prom"
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--timeout", SOURCE_TIMEOUT,
                           "--metrics", str(target)],
                          env={**os.environ, **faulted_node.environment()}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("burnin: FAIL GPU-10") and len(proc.stdout.splitlines()) == 1
    families = _families(target.read_text(encoding="utf-8"))
    admitted = families["burnin_node_admitted"].samples  # type: ignore[attr-defined]
    assert [(s.labels["node"], s.value) for s in admitted] == [("sim04", 0.0)]
    states = {s.labels["check"]: s.labels["state"] for s in families["burnin_check_state"].samples  # type: ignore[attr-defined]
              if s.value == 1}
    assert states["GPU-10"] == "fail" and states["GPU-04"] == "pass"
    temps = families["burnin_gpu_temperature_celsius"].samples  # type: ignore[attr-defined]
    assert len(temps) == 8 and all(20 < s.value < 100 for s in temps)
    assert "burnin_run_duration_seconds" in families


def test_probe_without_metrics_does_not_load_the_exporter(faulted_node: SimNode) -> None:
    code = ("import sys\nfrom burnin.cli.main import main\nmain(['probe'])\n"
            "print('LOADED', 'burnin.report.metrics' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, **faulted_node.environment()},
                          capture_output=True, text=True, timeout=300, check=False)
    assert "LOADED False" in proc.stdout, proc.stdout + proc.stderr


def test_an_unwritable_textfile_is_reported_and_the_verdict_stands(faulted_node: SimNode, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--timeout", SOURCE_TIMEOUT,
                           "--metrics", str(blocker / "x.prom")],
                          env={**os.environ, **faulted_node.environment()}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 1 and proc.stdout.startswith("burnin: FAIL GPU-10")
    assert "burnin probe: --metrics" in proc.stderr and "Traceback" not in proc.stderr
