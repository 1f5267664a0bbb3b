"""A simulated node's own container runtimes and its invocation trace: a simulated run never starts the host's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from burnin.sim import SimNode
from burnin.sim.build import TRACE_ENV
from burnin.sim.megatron import CONTAINER_RUNTIMES

pytestmark = pytest.mark.rack

HOST_RUNTIME = '#!/bin/sh\necho "host $0 $*" >> "{log}"\nexit 0\n'


@pytest.fixture
def host_runtimes(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of fake host container runtimes that record every call, and their log."""
    bin_dir, log = tmp_path / "hostbin", tmp_path / "host-calls.log"
    bin_dir.mkdir()
    for name in CONTAINER_RUNTIMES:
        (bin_dir / name).write_text(HOST_RUNTIME.format(log=log), encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    return bin_dir, log


def run_as(node: SimNode, host_bin: Path, *argv: str, trace: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` as a process of the simulated node, with the host runtimes first on the host's PATH."""
    env = {**os.environ, "PATH": f"{host_bin}{os.pathsep}{os.environ['PATH']}"}
    env = {**env, **node.environment()}  # the node's PATH: its bin/ before the host's
    env.pop(TRACE_ENV, None)
    if trace is not None:
        env[TRACE_ENV] = str(trace)
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("argv", [
    ["docker", "run", "--rm", "--gpus", "all", "--network", "host", "--ulimit", "memlock=-1", "-v", "/opt/m:/opt/m",
     "-w", "/opt/m", "-e", "GREETING=hello", "--env=OTHER=there", "nvcr.io/nvidia/pytorch:24.07-py3"],
    ["podman", "run", "--rm", "-e", "GREETING=hello", "--env", "OTHER=there", "image:tag"],
    ["apptainer", "exec", "--nv", "--bind", "/opt/m", "--pwd", "/opt/m", "--env", "GREETING=hello",
     "--env=OTHER=there", "/images/megatron.sif"],
    ["singularity", "exec", "--env", "GREETING=hello", "--env", "OTHER=there", "-B", "/x", "image.sif"],
], ids=["docker", "podman", "apptainer", "singularity"])
def test_a_container_runs_its_command_on_the_simulated_node_not_the_hosts_runtime(
        healthy_node: SimNode, host_runtimes: tuple[Path, Path], argv: list[str]) -> None:
    host_bin, host_log = host_runtimes
    done = run_as(healthy_node, host_bin, *argv, "sh", "-c", 'echo "$GREETING $OTHER from $BURNIN_SIM_NODE"')
    assert (done.returncode, done.stdout) == (0, "hello there from sim01\n"), done.stderr
    assert not host_log.exists()
    # without the node's environment the same command reaches the fake host runtime: the test can see a call
    env = {**os.environ, "PATH": f"{host_bin}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([argv[0], "--version"], env=env, capture_output=True, timeout=30, check=False)
    assert host_log.read_text(encoding="utf-8").startswith(f"host {host_bin / argv[0]}")


@pytest.mark.parametrize("argv", [["docker", "build", "."], ["docker", "run", "image-only"],
                                  ["apptainer", "run", "x.sif"], ["enroot", "start", "image", "true"]])
def test_what_is_not_simulated_is_refused_and_never_reaches_the_host(
        healthy_node: SimNode, host_runtimes: tuple[Path, Path], argv: list[str]) -> None:
    host_bin, host_log = host_runtimes
    done = run_as(healthy_node, host_bin, *argv)
    assert done.returncode != 0 and "burnin simulator" in done.stderr
    assert not host_log.exists()


def test_every_shim_appends_its_invocation_to_the_trace_when_asked(healthy_node: SimNode, tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    host_bin = tmp_path / "empty"
    host_bin.mkdir()
    run_as(healthy_node, host_bin, "nvidia-smi", "-L", trace=trace)
    run_as(healthy_node, host_bin, "docker", "run", "img", "ibstat", "-l", trace=trace)
    assert trace.read_text(encoding="utf-8").splitlines() == [
        "sim01 nvidia-smi -L", "sim01 docker run img ibstat -l", "sim01 ibstat -l"]
    untraced = run_as(healthy_node, host_bin, "nvidia-smi", "-L")
    assert untraced.returncode == 0 and len(trace.read_text(encoding="utf-8").splitlines()) == 3
