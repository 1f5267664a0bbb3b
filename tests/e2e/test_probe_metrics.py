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


RECORDING_GATE = '''
import json, os
from pathlib import Path


class RecordingGate:
    """Writes down each drain, and whether the metrics textfile existed at that moment."""

    name = "recording"

    def drain(self, node, reason, *, dry_run=False):
        record = {"node": node, "reason": reason, "metrics_there": Path(os.environ["PROBE_METRICS"]).exists()}
        with open(os.environ["PROBE_GATE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\\n")
        return True

    def resume(self, node, *, passed=(), dry_run=False):
        return False

    def apply(self, decisions, *, dry_run, out=None, err=None):
        return True
'''

DRIVER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
from burnin.gate.registry import GATES
GATES["recording"] = "recording_gate:RecordingGate"
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_probe_drains_before_it_writes_metrics_it_cannot_write_as_read(
        tmp_path: Path, h100_topology: Topology) -> None:
    """HCA mlx5_0 listed as b"mlx5_\\xff0", mlx5_1 at "1.2.3 Gb/sec": the node is drained, then the textfile
    is written with the name escaped and the rate left out; the exit code is the verdict's."""
    node = build_rack(tmp_path / "rack", h100_topology, ["sim06"], {"sim06": [parse_fault_spec("nvlink-down")]})[0]
    ib = Path(node.environment()["BURNIN_ROOT"]) / "sys" / "class" / "infiniband"
    (ib / "mlx5_1" / "ports" / "1" / "rate").write_text("1.2.3 Gb/sec (4X NDR)\n", encoding="utf-8")
    os.rename(os.fsencode(ib / "mlx5_0"), os.fsencode(ib) + b"/mlx5_\xff0")
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "recording_gate.py").write_text(RECORDING_GATE, encoding="utf-8")
    target, log = tmp_path / "textfile" / "burnin.prom", tmp_path / "drains.jsonl"
    env = {**os.environ, **node.environment(), "PROBE_METRICS": str(target), "PROBE_GATE_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "gates"), "probe", "--timeout",
                           SOURCE_TIMEOUT, "--drain", "--gate", "recording", "--metrics", str(target)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("burnin: FAIL GPU-10") and "Traceback" not in proc.stderr, proc.stderr
    import json

    (drain,) = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert drain["node"] == "sim06" and drain["reason"].startswith("burnin: GPU-10")
    assert drain["metrics_there"] is False  # acted first, reported after
    families = _families(target.read_text(encoding="utf-8"))
    active = {s.labels["hca"] for s in families["burnin_ib_port_active"].samples}  # type: ignore[attr-defined]
    assert "mlx5_\\xff0" in active and "mlx5_1" in active
    rates = {s.labels["hca"] for s in families["burnin_ib_port_rate_bytes_per_second"].samples}  # type: ignore[attr-defined]
    assert "mlx5_1" not in rates and "mlx5_\\xff0" in rates


def test_a_metrics_failure_after_the_drain_is_one_line_and_the_verdict_stands(
        faulted_node: SimNode, tmp_path: Path) -> None:
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "recording_gate.py").write_text(RECORDING_GATE, encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    log = tmp_path / "drains.jsonl"
    env = {**os.environ, **faulted_node.environment(), "PROBE_METRICS": str(blocker / "x.prom"),
           "PROBE_GATE_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "gates"), "probe", "--timeout",
                           SOURCE_TIMEOUT, "--drain", "--gate", "recording", "--metrics", str(blocker / "x.prom")],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(log.read_text(encoding="utf-8").splitlines()) == 1
    assert proc.stderr.startswith("burnin probe: --metrics") and len(proc.stderr.splitlines()) == 1, proc.stderr
