"""The simulator's torchrun, pretrain_gpt.py and placement probe, run through burnin.transport.local and judged.

A rack of 8 simulated H100 nodes: sim02 trains 20% slow, sim04 hangs, sim05 diverges to NaN, sim06's collective
times out, sim07's rank 3 is bound to the wrong NUMA node. burnin.megatron.measure runs the probe, the single-node
runs and the multi-node run of the nodes that passed alone, exactly as a phase would, and the checks judge.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.launch.local import LocalLauncher
from burnin.megatron.alone import passed_alone
from burnin.megatron.commands import probe_launch, training_launch
from burnin.megatron.config import SIMULATED
from burnin.megatron.measure import Measurement, launcher_runner, measure
from burnin.parsers.megatron import parse_megatron_log
from burnin.sim import SimNode, build_rack
from burnin.topology.model import Topology
from burnin.transport.local import LocalTransport

pytestmark = pytest.mark.rack

FAULTS = {"sim02": ["train-slow"], "sim04": ["train-hang"], "sim05": ["train-loss-nan"], "sim06": ["nccl-timeout"],
          "sim07": ["cpu-bind-wrong-numa"]}
HEALTHY = ("sim01", "sim03", "sim08")
CHECKS = ("MEG-01", "MEG-02", "MEG-03", "MEG-04", "PIN-01", "PIN-02", "PIN-03", "PIN-04")
CLEAN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
         "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "BURNIN_SIM_JOB_NODES",
         "BURNIN_SIM_BIND", "NCCL_IB_HCA", "CUDA_VISIBLE_DEVICES")


@pytest.fixture(scope="module")
def rack(h100_topology: Topology) -> Iterator[dict[str, SimNode]]:
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="burnin-megatron-tests-", dir=shm if os.access(shm, os.W_OK) else None))
    try:
        names = [f"sim{i:02d}" for i in range(1, 9)]
        yield {node.name: node for node in build_rack(base, h100_topology, names, FAULTS)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _transport(rack: dict[str, SimNode]) -> LocalTransport:
    def env(node: str) -> dict[str, str]:
        clean = {k: "" for k in CLEAN if k in os.environ}  # the test runner's own variables do not leak in
        return {**clean, **rack[node].environment()}

    return LocalTransport(node_env=env)


@pytest.fixture(scope="module")
def measured(rack: dict[str, SimNode], h100_topology: Topology) -> Measurement:
    settings = SIMULATED.model_copy(update={"timeout_s": 2.0})  # the hung run costs 2 s + 5 s slack
    launcher = LocalLauncher(_transport(rack), lambda nodes: {"BURNIN_SIM_JOB_NODES": ",".join(nodes)})
    return measure(settings, h100_topology, sorted(rack), launcher_runner(launcher), form="torchrun",
                   passed_alone=passed_alone)


@pytest.fixture(scope="module")
def verdicts(measured: Measurement, h100_topology: Topology) -> dict[str, dict[str, Verdict]]:
    checks = load_all()
    return {node: {c: checks[c].func(Facts(node, measured.facts_for(node)), h100_topology) for c in CHECKS}
            for node in measured.sections}


def _not_passed(verdicts: dict[str, Verdict]) -> dict[str, Status]:
    return {c: v.status for c, v in verdicts.items() if v.status is not Status.PASS}


@pytest.mark.parametrize("node", HEALTHY)
def test_healthy_nodes_pass_everything_including_the_multi_node_run(verdicts: dict[str, dict[str, Verdict]],
                                                                    measured: Measurement, node: str) -> None:
    assert _not_passed(verdicts[node]) == {}, {c: v.reason for c, v in verdicts[node].items()}
    multi = measured.sections[node]["megatron"]["multi"]
    assert multi["group"] == ["sim01", "sim03", "sim07", "sim08"] and multi["run"]["exit_status"] == 0
    assert "multi-node: 417" in verdicts[node]["MEG-04"].measured  # 97% of 430 TFLOP/s/GPU across nodes


def test_train_slow_is_a_straggler_against_the_median(verdicts: dict[str, dict[str, Verdict]]) -> None:
    assert _not_passed(verdicts["sim02"]) == {"MEG-04": Status.FAIL}
    reason = verdicts["sim02"]["MEG-04"].reason
    assert "straggler: 344" in reason and "20% below the run's median 430" in reason, reason


def test_train_loss_nan_names_the_first_nan_iteration(verdicts: dict[str, dict[str, Verdict]]) -> None:
    assert _not_passed(verdicts["sim05"]) == {"MEG-04": Status.FAIL}
    assert "lm loss NAN at iteration 17" in verdicts["sim05"]["MEG-04"].reason


def test_cpu_bind_wrong_numa_names_rank_cpus_and_gpu_numa(verdicts: dict[str, dict[str, Verdict]]) -> None:
    assert _not_passed(verdicts["sim07"]) == {"PIN-01": Status.FAIL, "PIN-02": Status.FAIL}
    reason = verdicts["sim07"]["PIN-01"].reason
    assert "rank 3 CPUs 56-111,168-223 (NUMA 1) but its gpu3 on NUMA 0" in reason, reason


def test_train_hang_is_incomplete_with_each_ranks_tail(verdicts: dict[str, dict[str, Verdict]],
                                                       measured: Measurement) -> None:
    assert _not_passed(verdicts["sim04"]) == dict.fromkeys(("MEG-01", "MEG-02", "MEG-03", "MEG-04"),
                                                           Status.INCOMPLETE)
    reason = verdicts["sim04"]["MEG-01"].reason
    assert "hung: stopped after 2.0 s" in reason and "rank 0: training ..." in reason
    assert "rank 7:  [" in reason and "iteration        3/      50" in reason
    single = measured.sections["sim04"]["megatron"]["single"]
    assert single["timed_out"] and single["duration_s"] < 30


def test_nccl_timeout_names_the_rank_and_the_watchdog_line(verdicts: dict[str, dict[str, Verdict]]) -> None:
    assert _not_passed(verdicts["sim06"]) == dict.fromkeys(("MEG-01", "MEG-02", "MEG-04"), Status.FAIL)
    reason = verdicts["sim06"]["MEG-04"].reason
    assert "rank 3: [rank3]:[E" in reason and "Watchdog caught collective operation timeout" in reason


def test_failed_nodes_were_left_out_of_the_multi_node_run(measured: Measurement) -> None:
    for node in ("sim02", "sim04", "sim05", "sim06"):
        multi = measured.sections[node]["megatron"]["multi"]
        assert multi["run"] is None and multi["excluded"].startswith("failed on its own: MEG-0"), multi


def test_every_rank_log_is_kept(measured: Measurement) -> None:
    assert "megatron/single/sim01/rank-7.log" in measured.logs
    assert "megatron/multi/sim01+sim03+sim07+sim08/rank-31.log" in measured.logs
    assert "BURNIN-PLACEMENT" in measured.logs["megatron/probe/sim07/rank-3.log"]
    facts = json.dumps(measured.facts_for("sim05"), allow_nan=False)  # facts JSON, no NaN constant
    assert '"NAN"' in facts


def test_the_stand_in_prints_megatrons_format(rack: dict[str, SimNode], h100_topology: Topology,
                                              reference_dir: Path) -> None:
    launch = training_launch(SIMULATED, h100_topology, ["sim01"], form="torchrun")
    result = _transport(rack).run("sim01", launch.argv_by_node["sim01"], timeout=30)
    assert result.exit_status == 0, result.stderr
    lines = [line.removeprefix("[default7]:") for line in result.stdout.splitlines() if line.startswith("[default7]:")]
    real = (reference_dir / "megatron" / "mixtral-8x7b-16xh100-iterations-43-45-issue756.txt").read_text()
    ours_keys = [part.split(":")[0].strip() for part in lines[0].split("|")[1:-1]]
    real_keys = [part.split(":")[0].strip() for part in real.splitlines()[0].split("|")[1:-1]]
    assert ours_keys == [k for k in real_keys if k not in ("load_balancing_loss", "num zeros")]
    assert lines[0].index("iteration") == real.splitlines()[0].index("iteration")
    log = parse_megatron_log("\n".join(lines))
    assert [it.iteration for it in log.iterations] == list(range(1, 51)) and not log.truncated


def test_the_probe_stand_in_reports_what_the_real_probe_reports(rack: dict[str, SimNode],
                                                                  h100_topology: Topology) -> None:
    import subprocess

    launch = probe_launch(SIMULATED, h100_topology, "sim01", form="torchrun")
    result = _transport(rack).run("sim01", launch.argv_by_node["sim01"], timeout=30)
    records = [json.loads(line.split("BURNIN-PLACEMENT ", 1)[1]) for line in result.stdout.splitlines()]
    assert [r["local_rank"] for r in records] == list(range(8)) and records[5]["cpus"] == "56-111,168-223"
    probe = Path(__file__).resolve().parents[3] / "burnin" / "collector" / "placement.py"
    real = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, check=True, timeout=60)
    keys = set(json.loads(real.stdout.split("BURNIN-PLACEMENT ", 1)[1]))
    wanted = {k for k in keys if not k.endswith("_error")} - {"gpu_bus_ids", "gpu_bus_id"}  # no GPU here
    assert wanted <= set(records[0])


@pytest.mark.parametrize(("env", "cpus"), [
    ({"SLURM_LOCALID": "5", "SLURM_PROCID": "5", "SLURM_CPU_BIND_TYPE": "mask_ldom:"}, "56-111,168-223"),
    ({"SLURM_LOCALID": "5", "SLURM_PROCID": "5", "SLURM_CPU_BIND_TYPE": "none"}, "0-223"),
    ({"LOCAL_RANK": "2"}, "0-223"),  # no launcher binding reported: unbound
])
def test_one_rank_probe_under_srun(rack: dict[str, SimNode], env: dict[str, str], cpus: str) -> None:
    result = _transport(rack).run("sim01", ["burnin-placement-probe"], timeout=30, env=env)
    record: dict[str, Any] = json.loads(result.stdout.split("BURNIN-PLACEMENT ", 1)[1])
    assert record["cpus"] == cpus


def test_one_rank_training_under_srun(rack: dict[str, SimNode], h100_topology: Topology) -> None:
    args = training_launch(SIMULATED, h100_topology, ["sim01"], form="srun").argv_by_node["sim01"]
    payload = list(args[args.index("pretrain_gpt.py"):])
    last = _transport(rack).run("sim01", payload, timeout=30,
                                env={"RANK": "7", "LOCAL_RANK": "7", "WORLD_SIZE": "8", "MASTER_ADDR": "sim01"})
    first = _transport(rack).run("sim01", payload, timeout=30,
                                 env={"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "MASTER_ADDR": "sim01"})
    assert last.exit_status == first.exit_status == 0
    assert len(parse_megatron_log(last.stdout).iterations) == 50 and "iteration " not in first.stdout
    assert first.stdout.startswith("using world size: 8")


def test_the_megatron_suite_gates_exactly_the_faulted_nodes(measured: Measurement, tmp_path: Path) -> None:
    """suites/megatron under the burnin pytest plugin, on the measured facts: the gate a phase would get."""
    import subprocess

    facts_dir, out = tmp_path / "facts", tmp_path / "out"
    facts_dir.mkdir()
    out.mkdir()
    for node in measured.sections:
        (facts_dir / f"{node}.json").write_text(json.dumps({"schema": 1, **measured.facts_for(node)},
                                                           allow_nan=False))
    suites = Path(__file__).resolve().parents[3] / "suites"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(suites / "megatron"), "--rootdir", str(suites),
                           "-c", str(suites / "pytest.ini"), "--burnin-facts", str(facts_dir),
                           "--burnin-out", str(out), "-p", "no:cacheprovider", "-q"],
                          capture_output=True, text=True, check=False, timeout=300)
    gate = json.loads((out / "gate.json").read_text())
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert gate["admitted"] == "sim[01,03,08]" and gate["rejected"] == "sim[02,04-07]", gate
    verdicts = {node: (sorted(d["failed"]), sorted(d["incomplete"])) for node, d in gate["nodes"].items()}
    assert verdicts["sim02"] == (["MEG-04"], [])
    assert verdicts["sim04"] == ([], ["MEG-01", "MEG-02", "MEG-03", "MEG-04"])
    assert verdicts["sim05"] == (["MEG-04"], [])
    assert verdicts["sim06"] == (["MEG-01", "MEG-02", "MEG-04"], [])
    assert verdicts["sim07"] == (["PIN-01", "PIN-02"], [])
    reasons = " ".join(gate["nodes"]["sim07"]["reasons"])
    assert "rank 3 CPUs 56-111,168-223 (NUMA 1) but its gpu3 on NUMA 0" in reasons
