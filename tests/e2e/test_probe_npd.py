"""`burnin probe --format npd`: node-problem-detector's custom plugin protocol on simulated nodes.

NPD reads the exit status (0 OK, 1 a problem, anything else unknown) and stdout cut to max_output_length
bytes (../shared/reference-pending/node-problem-detector/exit-code-protocol-NOTES.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology

SOURCE_TIMEOUT = "60"  # a failure limit for the sources on a loaded machine, not a measurement


@pytest.fixture
def sim_node(tmp_path: Path, h100_topology: Topology) -> SimNode:
    return build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]


def npd(node: SimNode, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--timeout", SOURCE_TIMEOUT,
                           "--format", "npd", *args], env={**os.environ, **node.environment(), **(env or {})},
                          capture_output=True, timeout=300, check=False)


def test_a_faulted_node_is_exit_1_with_the_cause_in_one_line_within_80_bytes(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("xid:79@gpu2"))
    proc = npd(sim_node)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.endswith(b"\n") and proc.stdout.count(b"\n") == 1
    line = proc.stdout.decode("ascii").strip()
    assert len(line.encode()) <= 80
    assert line.startswith("burnin: FAIL GPU-04 ") and "Xid 79" in line


def test_a_narrower_cut_is_kept(sim_node: SimNode) -> None:
    apply_fault(sim_node.dir, parse_fault_spec("xid:79@gpu2"))
    proc = npd(sim_node, "--max-output-length", "24")
    assert proc.returncode == 1
    line = proc.stdout.strip()
    assert len(line) == 24 and line.startswith(b"burnin: FAIL GPU-04 g") and line.endswith(b"...")


def test_healthy_is_0_and_unmeasurable_is_unknown_never_ok(sim_node: SimNode, tmp_path: Path) -> None:
    healthy = npd(sim_node)
    assert healthy.returncode == 0 and healthy.stdout.startswith(b"burnin: OK (")
    unknown = npd(sim_node, env={"LD_LIBRARY_PATH": str(tmp_path)})  # NVML library not found
    assert unknown.returncode == 2 and unknown.stdout.startswith(b"burnin: INCOMPLETE ")
    assert len(unknown.stdout.strip()) <= 80


def test_a_cut_below_eight_bytes_is_a_usage_error(sim_node: SimNode) -> None:
    proc = npd(sim_node, "--max-output-length", "3")
    assert proc.returncode == 2 and b"at least 8" in proc.stderr and b"Traceback" not in proc.stderr
