"""The simulator's dcgmi (burnin.sim.dcgm, soak_tools): the real formats, driven by the node's state."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.parsers.dcgmi import command_errors, parse_dcgmi_diag
from burnin.parsers.dcgmi_health import parse_dcgmi_health
from burnin.sim import SimNode, build_rack
from burnin.sim.build import render_node
from burnin.topology import Topology
from burnin.topology.model import DcgmSpec

pytestmark = pytest.mark.rack

DEPLOYMENT = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
              "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]


def run_tool(node: SimNode, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command on the node's PATH (its shims), as the collector runs it."""
    return subprocess.run(list(argv), env={**os.environ, **node.environment(), "LC_ALL": "C"}, capture_output=True,
                          text=True, timeout=60, check=False)


def _node(sim_dir: Callable[[str], Path], topology: Topology, *faults: str) -> SimNode:
    node, = build_rack(sim_dir("dcgm"), topology, ["sim01"], {"sim01": list(faults)})
    return node


def test_healthy_node_answers_health_and_level_one(healthy_node: SimNode) -> None:
    proc = run_tool(healthy_node, "dcgmi", "health", "-c")
    assert proc.returncode == 0 and proc.stderr == ""
    assert parse_dcgmi_health(proc.stdout).overall == "Healthy"
    proc = run_tool(healthy_node, "dcgmi", "diag", "-r", "1")
    assert proc.returncode == 0, proc.stderr
    diag = parse_dcgmi_diag(proc.stdout)
    assert [t.name for t in diag.tests] == DEPLOYMENT and set(diag.results.values()) == {"Pass"}
    assert diag.truncated is False and diag.metadata["DCGM Version"] == "3.3.5"
    assert diag.metadata["GPU Device IDs Detected"] == ",".join(["2330"] * 8)


def test_health_answers_only_check(healthy_node: SimNode) -> None:
    proc = run_tool(healthy_node, "dcgmi", "health", "-s", "a")
    assert proc.returncode == 255 and "only -c" in proc.stderr


def test_faults_reach_dcgms_reports(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology, "dcgm-diag-fail@gpu5", "dcgm-health-warn@gpu2", "dcgm-health-fail@gpu2",
                 "row-remap-pending@gpu1")
    health = parse_dcgmi_health(run_tool(node, "dcgmi", "health", "-c").stdout)
    assert health.overall == "Failure" and health.entities == {"GPU 2": "Failure"}
    assert [(i.system, i.health) for i in health.incidents] == [("PCIe system", "Warning"),
                                                               ("Memory system", "Failure")]
    proc = run_tool(node, "dcgmi", "diag", "-r", "1")
    assert proc.returncode == 1
    diag = parse_dcgmi_diag(proc.stdout)
    assert {n: r for n, r in diag.results.items() if r != "Pass"} == {"Page Retirement/Row Remap": "Fail",
                                                                      "Inforom": "Fail"}
    assert diag.errors == ("GPU 1 had memory errors and row remappings are pending",
                           "A corrupt InfoROM has been detected in GPU 5.")


def test_dcgm_numbers_gpus_as_nvml_does(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology, "gpu-missing@gpu1", "dcgm-diag-fail@gpu5", "dcgm-health-warn@gpu6",
                 "dcgm-health-fail@gpu1")
    diag = parse_dcgmi_diag(run_tool(node, "dcgmi", "diag", "-r", "1").stdout)
    assert diag.errors == ("A corrupt InfoROM has been detected in GPU 4.",)  # slot 5 is NVML's fifth GPU
    health = parse_dcgmi_health(run_tool(node, "dcgmi", "health", "-c").stdout)
    assert health.entities == {"GPU 5": "Warning"}  # the missing GPU's incident is not reported
    assert health.incidents[0].message == "Detected more than 8 PCIe replays per minute for GPU 5 : 13"


def test_a_silent_host_engine(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology)
    state = node.state()
    state.host.dcgm.hostengine = False
    render_node(node.dir, state)
    for argv in (("dcgmi", "health", "-c"), ("dcgmi", "diag", "-r", "1")):
        proc = run_tool(node, *argv)
        assert proc.returncode == 235, argv
        assert command_errors(proc.stdout)[-1] == ("Unable to connect to host engine. Host engine connection "
                                                   "invalid/disconnected.")


def test_a_node_type_without_dcgm_has_no_dcgmi(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    topology = dataclasses.replace(sim_topology, dcgm=DcgmSpec(required=False))
    node, = build_rack(sim_dir("nodcgm"), topology, ["sim01"])
    assert not (node.bin_dir / "dcgmi").exists() and (node.bin_dir / "nvidia-smi").exists()
    assert node.state().host.dcgm.installed is False


@pytest.mark.parametrize(("level", "categories"), [
    ("1", ["Deployment"]),
    ("2", ["Deployment", "Integration", "Hardware"]),
    ("3", ["Deployment", "Integration", "Hardware", "Stress"]),
])
def test_the_soaks_json_by_level(sim_dir: Callable[[str], Path], sim_topology: Topology, level: str,
                                 categories: list[str]) -> None:
    node = _node(sim_dir, sim_topology, "row-remap-pending@gpu3")
    proc = run_tool(node, "dcgmi", "diag", "-r", level, "-j")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)["DCGM GPU Diagnostic"]
    assert [c["category"] for c in doc["test_categories"]] == categories
    diag = parse_dcgmi_diag(proc.stdout)
    failing = {t.name: t.gpu_results.get("Fail") for t in diag.tests if t.result == "Fail"}
    expected = {"Page Retirement/Row Remap": (3,)}
    if level != "1":  # the memory test sees the pending remap too (as BRN-01 did before level 1 was split off)
        expected["GPU Memory"] = (3,)
    assert failing == expected


def test_text_table_of_per_gpu_categories(sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology, "row-remap-pending@gpu3")
    diag = parse_dcgmi_diag(run_tool(node, "dcgmi", "diag", "-r", "2").stdout)
    memory = next(t for t in diag.tests if t.name == "GPU Memory")
    assert memory.result == "Fail" and memory.gpu_results == {"Pass": (0, 1, 2, 4, 5, 6, 7), "Fail": (3,)}
    assert memory.details[0].kind == "Warning" and "row remappings are pending" in memory.details[0].text
    assert diag.results["PCIe"] == "Pass" and diag.truncated is False


@pytest.mark.parametrize(("argv", "message"), [
    (("dcgmi", "diag"), "Usage: dcgmi diag"),
    (("dcgmi", "diag", "-r", "9"), "Invalid run level '9'"),
])
def test_bad_diag_arguments(healthy_node: SimNode, argv: tuple[str, ...], message: str) -> None:
    proc = run_tool(healthy_node, *argv)
    assert proc.returncode == 255 and message in proc.stderr


@pytest.mark.parametrize("hostengine", [True, False])
def test_level_one_rendered_ahead_is_what_the_python_tool_prints(sim_dir: Callable[[str], Path],
                                                                sim_topology: Topology, hostengine: bool) -> None:
    """`dcgmi diag -r 1` (every node suite runs it) prints out/dcgmi/diag-r1.txt, rendered with the node; the
    other levels run out/soak/tools.py. Both come from one function, and say the same for the same node."""
    import sys

    node = _node(sim_dir, sim_topology, "dcgm-diag-fail@gpu5", "row-remap-pending@gpu1")
    state = node.state()
    state.host.dcgm.hostengine = hostengine
    render_node(node.dir, state)
    shim = run_tool(node, "dcgmi", "diag", "-r", "1")
    tool = subprocess.run([sys.executable, "-S", str(node.dir / "out" / "soak" / "tools.py"), "dcgmi", "diag", "-r",
                           "1"], env={**os.environ, **node.environment()}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert (shim.stdout, shim.returncode) == (tool.stdout, tool.returncode)
    assert shim.returncode == (1 if hostengine else 235) and shim.stderr == ""
    assert (node.dir / "out" / "dcgmi" / "diag-r1.txt").read_text() == shim.stdout
