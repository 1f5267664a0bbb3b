"""``--dry-run`` means nothing runs (issue 19 case 9), seen from the simulated nodes' side.

Every shim of a simulated node appends its invocation to ``$BURNIN_SIM_TRACE`` (burnin.sim.build), so
the trace is what ran on the nodes. For each suite a dry run must leave none of the suite's tools in it,
print the commands, and admit nobody; the same run without ``--dry-run`` shows those tools in the same
trace, so the silence of a dry run is not the trace's. A simulated Megatron run in a docker container runs
the node's own docker stand-in, never the host's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.phases import DRY_RUN_REASON
from burnin.sim.build import TRACE_ENV
from burnin.soak.plan import DRY_RUN_REASON as SOAK_DRY_RUN_REASON

CLI = [sys.executable, "-m", "burnin.cli.main"]

# suite -> (the phase's tools as the trace names them, the suite's checks, what its dry run prints)
SUITES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "fabric": (("all_reduce_perf", "nvbandwidth", "p2pBandwidthLatencyTest", "ib_write_bw"),
               ("NCCL-01", "NCCL-03", "NVL-01", "NVL-03", "NVL-04", "IB-08"),
               ("all_reduce_perf -b 8 -e 8G", "nvbandwidth -i", "p2pBandwidthLatencyTest", "ib_write_bw -d mlx5_0")),
    "megatron": (("torchrun",), ("MEG-01", "MEG-04", "PIN-01"),
                 ("# placement probe on sim01", "# multi-node run on sim01,sim02", "torchrun --nproc_per_node=8")),
    "storage": (("ping", "fio", "dd"), ("STO-03", "STO-04"),
                ("ping -n -M do -s 8972", "fio --name=burnin-sto03", "rm -f /mnt/home/.burnin-sto03-NODE")),
}
SOAK_TOOLS = ("dcgmi diag -r 3", "gpu_burn", "all_reduce_perf", "stress-ng", "stream", "nvme")


def burnin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, **(env or {})})


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def traced(trace: Path) -> list[str]:
    """What ran on the nodes: ``tool arguments`` per invocation (the node's name dropped)."""
    lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
    return [line.split(" ", 1)[1] for line in lines]


def ran(commands: list[str], tools: tuple[str, ...]) -> list[str]:
    return [c for c in commands if any(c == tool or c.startswith(f"{tool} ") for tool in tools)]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "live"])
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_a_dry_run_starts_no_tool_of_its_suite_prints_them_and_admits_nobody(tmp_path: Path, suite: str,
                                                                              dry_run: bool) -> None:
    tools, checks, shown = SUITES[suite]
    trace, out = tmp_path / "trace.log", tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--suite", suite, *(["--dry-run"] if dry_run else []), "--out", str(out),
                  env={TRACE_ENV: str(trace)})
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    commands = traced(trace)
    if not dry_run:  # the observation sees the suite's tools when they run
        assert ran(commands, tools), commands
        return
    assert ran(commands, tools) == []
    assert ran(commands, ("nvidia-smi", "ibstat")), commands  # facts were gathered, read-only, through the trace
    assert all(line in proc.stdout for line in shown), proc.stdout
    gate = load(out / "gate.json")
    assert proc.returncode == 1 and gate["dry_run"] is True and gate["admitted"] == ""
    verdicts = {(v["node"], v["check"]): v for v in json.loads((out / "verdicts.json").read_text(encoding="utf-8"))}
    for node in ("sim01", "sim02"):
        assert not gate["nodes"][node]["admitted"] and "RUN" in gate["nodes"][node]["incomplete"]
        for check in checks:
            assert verdicts[(node, check)]["status"] == "incomplete", verdicts[(node, check)]
            assert DRY_RUN_REASON in verdicts[(node, check)]["reason"]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "live"])
def test_a_soak_dry_run_stresses_nothing_prints_the_stages_and_admits_nobody(tmp_path: Path, dry_run: bool) -> None:
    trace, out = tmp_path / "trace.log", tmp_path / "soak"
    proc = burnin("soak", "--sim", "2", "--duration", "2h", *(["--dry-run"] if dry_run else []), "--out", str(out),
                  env={TRACE_ENV: str(trace)})
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    commands = traced(trace)
    if not dry_run:
        assert ran(commands, SOAK_TOOLS), commands
        return
    assert commands == []  # no stage and no monitoring sample
    for line in ("[sim[01-02]] dcgmi diag -r 3 -j", "all_reduce_perf -b 8G -e 8G", "stress-ng --cpu 0",
                 "nvme smart-log DEVICE"):
        assert line in proc.stdout, proc.stdout
    gate = load(out / "gate.json")
    assert proc.returncode == 1 and gate["dry_run"] is True and gate["admitted"] == ""
    assert all(f"not judged: {SOAK_DRY_RUN_REASON}" in " ".join(d["reasons"]) for d in gate["nodes"].values())
    assert not (out / "soak-state.json").exists()


def test_a_node_suite_dry_run_judges_what_it_gathered_and_still_admits_nobody(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--fault", "sim02:nvlink-down", "--dry-run", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = load(out / "gate.json")
    assert gate["dry_run"] is True and gate["admitted"] == "" and not gate["partial"]
    assert gate["nodes"]["sim01"]["failed"] == [] and gate["nodes"]["sim01"]["incomplete"] == ["RUN"]
    assert gate["nodes"]["sim02"]["failed"] == ["GPU-10"]  # the gathered facts were judged
    verdicts = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    assert {v["status"] for v in verdicts if v["node"] == "sim01"} <= {"pass", "not-applicable"}
    assert "admitted: - (0)" in proc.stdout


def test_a_simulated_megatron_run_in_docker_never_starts_the_hosts_docker(tmp_path: Path) -> None:
    host_bin, host_log = tmp_path / "hostbin", tmp_path / "host-docker.log"
    host_bin.mkdir()
    (host_bin / "docker").write_text(f'#!/bin/sh\necho "$*" >> "{host_log}"\nexit 1\n', encoding="utf-8")
    (host_bin / "docker").chmod(0o755)
    config = tmp_path / "megatron.yaml"
    config.write_text("container: {image: nvcr.io/nvidia/pytorch:24.07-py3, runner: docker, "
                      "mounts: [/opt/megatron-lm], workdir: /opt/megatron-lm}\n", encoding="utf-8")
    trace, out = tmp_path / "trace.log", tmp_path / "out"
    proc = burnin("run", "--sim", "2", "--suite", "megatron", "--megatron-config", str(config), "--out", str(out),
                  env={TRACE_ENV: str(trace), "PATH": f"{host_bin}{os.pathsep}{os.environ['PATH']}"})
    assert not host_log.exists(), host_log.read_text(encoding="utf-8")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the container path ran, on the nodes' stand-in
    docker = ran(traced(trace), ("docker",))
    assert docker and all(" nvcr.io/nvidia/pytorch:24.07-py3 timeout " in c for c in docker)
    assert load(out / "gate.json")["admitted"] == "sim[01-02]"


def test_a_pyxis_container_without_srun_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "megatron.yaml"
    config.write_text("container: {image: nvcr.io/nvidia/pytorch:24.07-py3, runner: pyxis}\n", encoding="utf-8")
    proc = burnin("run", "--sim", "1", "--suite", "megatron", "--megatron-config", str(config),
                  "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "container.runner: pyxis" in proc.stderr
