"""STO-02 runtime evidence: NCCL's own INFO lines (real and simulated) -> each node's record -> the verdict.

The real sample is a 2-node RoCE job's NCCL 2.27.5 init log (../shared/reference-pending/nccl, see its
SOURCES.md): its host opened mlx5_8 and mlx5_11, which the hgx-h100-8gpu topology calls a storage
BlueField and no compute HCA, over RoCE where the topology's compute HCAs are InfiniBand.
"""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_sto_checks import FAIL, INCOMPLETE, PASS, expect, judge
from test_sto_parsers import one

from burnin.fabric import commands
from burnin.fabric.nccl_evidence import SECTION, nccl_host, node_records, outcome
from burnin.fabric.settings import PRODUCTION
from burnin.parsers.nccl_info import parse_nccl_info
from burnin.sim import SimNode, build_rack
from burnin.storage.nccl_runtime import quote_line
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

REAL_HOST = "tpgds-aihub0008"
REAL_IB = ("tpgds-aihub0008:207008:207008 [1] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE "
           "[2]mlx5_2:1/RoCE [3]mlx5_5:1/RoCE [4]mlx5_6:1/RoCE [5]mlx5_7:1/RoCE [6]mlx5_8:1/RoCE "
           "[7]mlx5_11:1/RoCE [RO]; OOB enp25s0np0:10.99.91.63<0>")
COMPUTE = [f"mlx5_{i}" for i in range(8)]


def real_log() -> str:
    return one("nccl", "nccl-debug-info-init")


def run_of(stdout: str, *, status: int | None = 0, error: str | None = None, timed_out: bool = False,
           node: str = "sim01") -> CommandResult:
    return CommandResult(node, ("all_reduce_perf",), status, stdout, "", 1.0, timed_out=timed_out, error=error)


# ------------------------------------------------------------------ the parser, on the real log


def test_real_log_keeps_the_line_that_named_the_devices() -> None:
    host, = parse_nccl_info(real_log()).hosts
    assert host.evidence["NET/IB"] == REAL_IB  # the first rank's line, from the host prefix on
    assert host.evidence["Bootstrap"] == ("tpgds-aihub0008:207008:207008 [1] NCCL INFO Bootstrap: Using "
                                          "enp25s0np0:10.99.91.63<0>")
    assert host.settings["NCCL_IB_HCA"] == "mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_11"
    assert host.evidence["NCCL_IB_HCA"].endswith("NCCL INFO NCCL_IB_HCA set to " + host.settings["NCCL_IB_HCA"])
    assert host.settings["NCCL_IB_DISABLE"] == "0"


def test_settings_and_lines_are_kept_per_host_and_no_device_is_evidence() -> None:
    text = ("0: a1:1:1 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_0:1\n"
            "1: b1:2:2 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_0:1,mlx5_8:1\n"
            "1: b1:2:2 [0] NCCL INFO NET/IB : No device found.\n"
            "1: b1:2:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n")
    report = parse_nccl_info(text)
    a1, b1 = report.hosts
    assert a1.settings == {"NCCL_IB_HCA": "=mlx5_0:1"} and b1.settings["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_8:1"
    assert report.settings["NCCL_IB_HCA"] == "=mlx5_0:1"  # the report keeps the first value seen
    assert b1.evidence["NET/IB"] == "b1:2:2 [0] NCCL INFO NET/IB : No device found."
    assert "IB" not in b1.net_devices and [d.name for d in b1.net_devices["Socket"]] == ["eth0"]


# ------------------------------------------------------------------ records per node


def test_real_log_record_is_charged_to_the_node_whose_host_printed_it() -> None:
    records = node_records(commands.GROUP_EVIDENCE, run_of(real_log()), ["gpu08", "gpu09"],
                           {"gpu08": REAL_HOST}, ib_hca="=mlx5_0:1")
    mine, other = records["gpu08"], records["gpu09"]
    assert mine["status"] == "read" and mine["host"] == REAL_HOST and mine["outcome"] == "exit 0"
    assert [d["name"] for d in mine["devices"]["IB"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "mlx5_6",
                                                          "mlx5_7", "mlx5_8", "mlx5_11"]
    assert {d["transport"] for d in mine["devices"]["IB"]} == {"RoCE"}
    assert sorted(mine["used"]["IB"]) == sorted(d["name"] for d in mine["devices"]["IB"])
    assert mine["lines"]["NET/IB"] == REAL_IB and mine["ib_hca"] == "=mlx5_0:1" and mine["job"] == "gpu08+gpu09"
    assert other["status"] == "unreadable"
    assert other["reason"] == ("no NCCL INFO line from host gpu09 in the group run (exit 0; lines from 1 other "
                               "hosts)")


@pytest.mark.parametrize(("run", "needle"), [
    (run_of("", status=None, error="ConnectionError: refused"), "did not start: ConnectionError: refused"),
    (run_of("# nThread 1 nGpus 8\nNCCL WARN oops\n", status=1), "no 'NCCL INFO' line in the output of the "
                                                                 "node-config run (exit 1)"),
    (run_of("n1:1:1 [0] NCCL INFO NCCL version 2.21.5\n", status=124, timed_out=True), "name no network device"),
])
def test_a_run_without_readable_lines_is_unreadable_for_its_nodes(run: CommandResult, needle: str) -> None:
    records = node_records(commands.NODE_CONFIG_EVIDENCE, run, ["n1"], {}, ib_hca=None)
    assert records["n1"]["status"] == "unreadable" and needle in records["n1"]["reason"] + records["n1"]["outcome"]


def test_nccl_host_names_and_outcomes() -> None:
    assert nccl_host("gpu001.cluster") == "gpu001"
    assert nccl_host("alias", "gpu001.example.org") == "gpu001" and nccl_host("n1", "  ") == "n1"
    assert outcome(run_of("", status=137)) == "timed out" and outcome(run_of("", status=2)) == "exit 2"


def test_lines_are_bounded_and_printable() -> None:
    long = "n1:1:1 [0] NCCL INFO NET/IB : Using " + " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(200)) + "\x1b\n"
    record = node_records(commands.GROUP_EVIDENCE, run_of(long), ["n1"], {}, ib_hca=None)["n1"]
    assert len(record["devices"]["IB"]) == 64 and len(record["lines"]["NET/IB"]) <= 400
    assert "\x1b" not in record["lines"]["NET/IB"]


# ------------------------------------------------------------------ the verdict


def with_runtime(facts: dict[str, Any], *runs: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(facts)
    data[SECTION] = {"runs": list(runs)}
    return data


def read_run(*devices: tuple[str, str], name: str = "node-config", sockets: Sequence[str] = (),
             used: Sequence[str] = ()) -> dict[str, Any]:
    listing = " ".join(f"[{i}]{d}:1/{t}" for i, (d, t) in enumerate(devices))
    return {"run": name, "status": "read", "host": "sim01",
            "devices": {"IB": [{"index": i, "name": d, "port": 1, "transport": t} for i, (d, t) in enumerate(devices)],
                        **({"Socket": [{"index": i, "name": s} for i, s in enumerate(sockets)]} if sockets else {})},
            "used": {"IB": list(used)},
            "lines": {"NET/IB": f"sim01:1:1 [0] NCCL INFO NET/IB : Using {listing} [RO]; OOB ibp24s0:192.168.0.3<0>",
                      "NET/Socket": "sim01:1:1 [0] NCCL INFO NET/Socket : Using " + " ".join(sockets)}}


def test_without_runtime_section_the_static_verdict_is_unchanged(facts: dict[str, Any],
                                                                  sto_topology: Topology) -> None:
    verdict = judge("STO-02", facts, sto_topology)
    expect(verdict, PASS)
    assert verdict.measured == "NCCL_IB_HCA selects exactly 8 compute HCAs"
    assert verdict.expected == ("NCCL_IB_HCA selecting exactly mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,"
                                "mlx5_7; no storage netdev in NCCL_SOCKET_IFNAME")


def test_compute_hcas_only_passes(facts: dict[str, Any], sto_topology: Topology) -> None:
    ib = [(d, "IB") for d in COMPUTE]
    verdict = judge("STO-02", with_runtime(facts, read_run(*ib, name="group"), read_run(*ib)), sto_topology)
    expect(verdict, PASS, "NCCL opened compute HCAs only in 2 runs")
    assert "NCCL_DEBUG=INFO" in verdict.expected
    assert {f.measured for f in verdict.findings if f.subject.startswith("NCCL ")} == {"opened 8 compute HCAs"}


def test_a_storage_device_nccl_opened_fails_quoting_its_line(facts: dict[str, Any], sto_topology: Topology) -> None:
    run = read_run(*[(d, "IB") for d in COMPUTE], ("mlx5_8", "RoCE"))
    expect(judge("STO-02", with_runtime(facts, run), sto_topology), FAIL,
           "NCCL with the node's own configuration opened storage device mlx5_8 (enp41s0f0np0): ",
           '"sim01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB', "[8]mlx5_8:1/RoCE [RO]")
    carried = read_run(("mlx5_0", "IB"), ("mlx5_9", "RoCE"), name="group", used=["mlx5_9"])
    expect(judge("STO-02", with_runtime(facts, carried), sto_topology), FAIL,
           "NCCL in the multi-node all_reduce opened storage device mlx5_9 (enp177s0f0np0, which carried channels)")


def test_the_real_log_fails_on_the_hgx_topology(facts: dict[str, Any], sto_topology: Topology) -> None:
    record = node_records(commands.GROUP_EVIDENCE, run_of(real_log()), ["sim01"], {"sim01": REAL_HOST},
                          ib_hca=None)["sim01"]
    verdict = judge("STO-02", with_runtime(facts, record), sto_topology)
    expect(verdict, FAIL, "mlx5_0 over /RoCE (topology: InfiniBand)", "storage device mlx5_8 (enp41s0f0np0, "
           "which carried channels)", "non-compute device mlx5_11", REAL_IB)


def test_a_storage_netdev_for_sockets_fails(facts: dict[str, Any], sto_topology: Topology) -> None:
    run = read_run(sockets=["enp41s0f0np0"])
    expect(judge("STO-02", with_runtime(facts, run), sto_topology), FAIL,
           "opened storage netdev enp41s0f0np0 for its sockets", "NET/Socket : Using enp41s0f0np0")
    ok_sockets = read_run(sockets=["ibp24s0"])
    expect(judge("STO-02", with_runtime(facts, ok_sockets), sto_topology), PASS)


@pytest.mark.parametrize(("runs", "needle"), [
    ([{"run": "group", "status": "unreadable", "reason": "no NCCL INFO line from host sim01 in the group run"}],
     "NCCL in the multi-node all_reduce: no NCCL INFO line from host sim01"),
    ([{"run": "group", "status": "read", "devices": {}}], "no network device in NCCL's lines"),
    ([{"run": "group", "status": "read", "devices": {"IB": [{"port": 1}]}}], "a IB device without a name"),
    ([{"run": "group", "status": "read", "devices": {"IB": "mlx5_0"}}], "IB devices unreadable"),
    (["garbage"], "a run record unreadable"),
    ([], "nccl_runtime facts unreadable (no runs)"),
])
def test_unreadable_runtime_evidence_is_incomplete(facts: dict[str, Any], sto_topology: Topology,
                                                   runs: list[Any], needle: str) -> None:
    data = copy.deepcopy(facts)
    data[SECTION] = {"runs": runs}
    expect(judge("STO-02", data, sto_topology), INCOMPLETE, needle)


def test_static_failure_and_runtime_pass_still_fail(facts: dict[str, Any], sto_topology: Topology) -> None:
    facts["storage"]["nccl"]["environment"] = {"NCCL_IB_HCA": "mlx5_8"}
    expect(judge("STO-02", with_runtime(facts, read_run(*[(d, "IB") for d in COMPUTE])), sto_topology), FAIL,
           "environment NCCL_IB_HCA=mlx5_8 selects storage device mlx5_8")


def test_long_lines_are_quoted_around_the_device() -> None:
    line = "h:1:1 [0] NCCL INFO NET/IB : Using " + " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(40))
    quoted = quote_line(line, "mlx5_33")
    assert quoted == "h:1:1 [0] NCCL INFO NET/IB : Using ... [33]mlx5_33:1/IB ..."
    assert quote_line(line, "absent").endswith("...") and len(quote_line(line, "absent")) == 320
    assert quote_line("short", "x") == "short"


# ------------------------------------------------------------------ the launch environment


def test_evidence_runs_log_at_info_and_the_node_config_run_leaves_nccl_ib_hca_alone(
        sto_topology: Topology) -> None:
    site = PRODUCTION.replace(extra_env={"NCCL_DEBUG_FILE": "/tmp/nccl.%h.log", "NCCL_IB_HCA": "=mlx5_0"})
    group = commands.nccl_env(sto_topology, site, evidence=commands.GROUP_EVIDENCE)
    assert group["NCCL_DEBUG"] == "INFO" and group["NCCL_DEBUG_SUBSYS"] == "INIT,NET,ENV"
    assert group["NCCL_IB_HCA"] == "=mlx5_0" and "NCCL_DEBUG_FILE" not in group
    node = commands.nccl_env(sto_topology, site, evidence=commands.NODE_CONFIG_EVIDENCE)
    assert "NCCL_IB_HCA" not in node and node["NCCL_DEBUG"] == "INFO"
    assert commands.nccl_env(sto_topology, site)["NCCL_DEBUG"] == "WARN"
    from burnin.launch.ssh import TransportLauncher
    from burnin.transport.local import LocalTransport

    mpirun = TransportLauncher(LocalTransport(), name="ssh")
    argv = mpirun.job_argv(commands.group_job(["n1", "n2"], sto_topology, PRODUCTION, "all_reduce",
                                              evidence=commands.NODE_CONFIG_EVIDENCE, timeout_s=180))
    assert argv[:4] == ["timeout", "-k", "5", "180"] and "-x" in argv
    assert not any(a.startswith("NCCL_IB_HCA=") for a in argv) and "NCCL_DEBUG=INFO" in argv
    assert argv[-14:] == ["all_reduce_perf", "-b", "8", "-e", "8M", "-f", "2", "-g", "1", "-n", "1", "-w", "1",
                          "-c", "1"][-14:]
    group_run = commands.group_job(["n1", "n2"], sto_topology, PRODUCTION, "all_reduce",
                                   evidence=commands.GROUP_EVIDENCE)
    assert group_run.env["NCCL_DEBUG"] == "INFO" and "8G" in group_run.program  # the group run keeps its sizes


# ------------------------------------------------------------------ the simulated NCCL


@pytest.fixture(scope="module")
def rack(sim_base: Path, sto_topology: Topology) -> dict[str, SimNode]:
    nodes = build_rack(sim_base / "nccl-runtime", sto_topology, ["sim01", "sim02", "sim03"],
                       {"sim02": ["nccl-hca-leak"]})
    return {node.name: node for node in nodes}


def perf(node: SimNode, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "PMI", "SLURM_", "BURNIN_SIM_JOB"))}
    full.update(node.environment())
    full.update(env)
    return subprocess.run(["all_reduce_perf", "-b", "8", "-e", "1M", "-g", "8", "-n", "1", "-w", "1"], env=full,
                          capture_output=True, text=True, timeout=60, check=False)


JOB = {"BURNIN_SIM_JOB_NODES": "sim01,sim02,sim03", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}


def opened(stdout: str) -> dict[str, list[str]]:
    return {h.host: [f"{d.name}/{d.transport}" for d in h.net_devices["IB"]] for h in parse_nccl_info(stdout).hosts}


@pytest.mark.rack
def test_simulated_nccl_opens_what_each_nodes_configuration_selects(rack: dict[str, SimNode]) -> None:
    own = perf(rack["sim01"], JOB)
    assert own.returncode == 0, own.stderr
    devices = opened(own.stdout)
    assert devices["sim01"] == devices["sim03"] == [f"{d}/IB" for d in COMPUTE]
    assert devices["sim02"] == [*(f"{d}/IB" for d in COMPUTE), "mlx5_8/RoCE"]  # its nccl.conf leaks mlx5_8
    sim02 = parse_nccl_info(own.stdout).host("sim02")
    assert sim02 is not None and sim02.settings["NCCL_IB_HCA"].endswith(",mlx5_8:1")
    assert [d.name for d in sim02.used_devices()] == COMPUTE  # no GPU next to the BlueField: no channel
    burnins = perf(rack["sim01"], {**JOB, "NCCL_IB_HCA": commands.single_hca("mlx5_3")})
    assert set(map(tuple, opened(burnins.stdout).values())) == {("mlx5_3/IB",)}  # the environment wins


@pytest.mark.rack
def test_simulated_nccl_is_quiet_below_info_and_honours_the_subsystems(rack: dict[str, SimNode]) -> None:
    warn = perf(rack["sim01"], {**JOB, "NCCL_DEBUG": "WARN"})
    assert warn.returncode == 0 and "NCCL INFO" not in warn.stdout
    no_net = perf(rack["sim01"], {**JOB, "NCCL_DEBUG_SUBSYS": "^INIT,NET"})
    assert "NET/IB : Using" not in no_net.stdout and "NCCL_SOCKET_IFNAME set by environment" in no_net.stdout


@pytest.mark.rack
def test_an_mpi_rank_prints_its_own_hosts_lines(rack: dict[str, SimNode]) -> None:
    env = {"PMI_RANK": "1", "SLURM_STEP_NODELIST": "sim[01-03]", "NCCL_DEBUG": "INFO"}
    rank1 = perf(rack["sim02"], env)
    assert rank1.returncode == 0 and "# nThread" not in rank1.stdout
    assert [h.host for h in parse_nccl_info(rank1.stdout).hosts] == ["sim02"]
    assert "[8]mlx5_8:1/RoCE" in rank1.stdout


# ------------------------------------------------------------------ edges (bench/mutants)


def test_a_device_without_a_name_is_incomplete(facts: dict[str, Any], sto_topology: Topology) -> None:
    run = {"run": "group", "status": "read", "devices": {"IB": [{"name": "", "port": 1}]}}
    expect(judge("STO-02", with_runtime(facts, run), sto_topology), INCOMPLETE, "a IB device without a name")


def test_a_long_line_is_quoted_at_the_storage_device(facts: dict[str, Any], sto_topology: Topology) -> None:
    spare = [(f"mlx5_{i}", "IB") for i in range(8)] * 3  # a long list: the line is cut around mlx5_8
    run = read_run(*spare, ("mlx5_8", "RoCE"))
    verdict = judge("STO-02", with_runtime(facts, run), sto_topology)
    expect(verdict, FAIL, '"sim01:1:1 [0] NCCL INFO NET/IB : Using ... [24]mlx5_8:1/RoCE ..."')


def test_the_ib_line_is_quoted_when_sockets_leak_too(facts: dict[str, Any], sto_topology: Topology) -> None:
    run = read_run(("mlx5_0", "IB"), ("mlx5_8", "RoCE"), sockets=["enp41s0f0np0"])
    verdict = judge("STO-02", with_runtime(facts, run), sto_topology)
    expect(verdict, FAIL, "storage device mlx5_8 (enp41s0f0np0); storage netdev enp41s0f0np0 for its sockets: "
                          '"sim01:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_8:1/RoCE')


def test_a_line_of_exactly_the_quote_length_is_kept_whole() -> None:
    prefix = "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB "
    exact = prefix + "x" * (320 - len(prefix))
    assert quote_line(exact, "mlx5_0") == exact
    longer = exact + "y"
    assert quote_line(longer, "mlx5_0") == "h:1:1 [0] NCCL INFO NET/IB : Using ... [0]mlx5_0:1/IB ..."
    assert quote_line("z" * 400, "mlx5_0") == "z" * 317 + "..."  # no Using list: cut
