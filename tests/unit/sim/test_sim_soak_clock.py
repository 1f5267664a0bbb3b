"""A simulated node's gpu_burn under a soak's world: at once on a simulated clock, its seconds on the wall clock."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.sim import SimNode, build_rack
from burnin.sim.soak import SoakWorld
from burnin.topology import Topology

pytestmark = pytest.mark.rack


def _node(sim_dir: Callable[[str], Path], topology: Topology, *, wall_clock: bool) -> SimNode:
    node, = build_rack(sim_dir("soak-clock"), topology, ["sim01"], {})
    SoakWorld({"sim01": node}, {}, duration_s=3600.0, wall_clock=wall_clock).advance(600.0)
    return node


def _gpu_burn(node: SimNode, seconds: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["gpu_burn", "-tc", str(seconds)], env={**os.environ, **node.environment()},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_on_a_simulated_clock_gpu_burn_reports_its_whole_run_at_once(sim_dir: Callable[[str], Path],
                                                                      sim_topology: Topology) -> None:
    proc = _gpu_burn(_node(sim_dir, sim_topology, wall_clock=False), 3600)  # an hour, reported at once
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.startswith(b"Burning for 3600 seconds.") and out.count(b"proc'd:") == 10
    assert out.rstrip().endswith(b"\tGPU 7: OK")


def test_on_the_wall_clock_gpu_burn_takes_its_seconds_printing_as_it_goes(sim_dir: Callable[[str], Path],
                                                                         sim_topology: Topology) -> None:
    proc = _gpu_burn(_node(sim_dir, sim_topology, wall_clock=True), 3600)  # a tenth of it between progress lines
    try:
        assert proc.stdout is not None
        said = b""
        while b"Results are " not in said:  # the header is flushed before the first wait
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"gpu_burn ended: {said!r}"
            said += chunk
        assert said.startswith(b"Burning for 3600 seconds.\n") and said.count(b"Initialized device") == 8
        assert b"proc'd:" not in said, "gpu_burn printed its progress without taking its time"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.communicate()
