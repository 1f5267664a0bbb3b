"""`burnin run --suite megatron` on simulated nodes: the phase through the phase seam (issue 13's done-when)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

MEG = {"MEG-01", "MEG-02", "MEG-03", "MEG-04"}


def burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          timeout=600, check=False)


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def faulted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("megatron") / "run"
    proc = burnin("run", "--sim", "8", "--suite", "megatron", "--fault", "sim02:train-slow",
                  "--fault", "sim05:train-loss-nan", "--fault", "sim07:cpu-bind-wrong-numa", "--out", str(out))
    return {"proc": proc, "out": out, "gate": load(out / "gate.json") if (out / "gate.json").exists() else None}


def test_done_when_rejects_exactly_the_faulted_nodes(faulted_run: dict[str, Any]) -> None:
    proc, gate = faulted_run["proc"], faulted_run["gate"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert gate["rejected"] == "sim[02,05,07]", gate
    nodes = gate["nodes"]
    assert nodes["sim02"]["failed"] == ["MEG-04"] and nodes["sim05"]["failed"] == ["MEG-04"]
    assert "PIN-01" in nodes["sim07"]["failed"] and not MEG & set(nodes["sim07"]["failed"])
    assert all(not nodes[n]["incomplete"] for n in ("sim02", "sim05", "sim07"))
    straggler = next(r for r in nodes["sim02"]["reasons"] if r.startswith("MEG-04"))
    assert "TFLOP/s/GPU" in straggler and "median" in straggler
    nan = next(r for r in nodes["sim05"]["reasons"] if r.startswith("MEG-04"))
    assert "iteration 17" in nan
    pin = next(r for r in nodes["sim07"]["reasons"] if r.startswith("PIN-01"))
    assert "rank 3" in pin and "CPUs" in pin and "NUMA 0" in pin


def test_every_rank_log_and_command_is_kept(faulted_run: dict[str, Any]) -> None:
    out: Path = faulted_run["out"]
    facts = load(out / "facts" / "sim03.json")
    assert set(facts) >= {"megatron", "placement"}
    single = facts["megatron"]["single"]
    logs = out / single["log_dir"]
    assert single["form"] == "torchrun" and logs.is_dir()
    assert {p.name for p in logs.iterdir()} >= {"launcher.log", "rank-0.log", "rank-7.log"}  # the ranks that printed
    assert "iteration" in (logs / "rank-7.log").read_text(encoding="utf-8")
    assert (out / "megatron" / "probe" / "sim03").is_dir()
    assert "torchrun" in (out / "megatron-commands.log").read_text(encoding="utf-8")
    assert load(out / "run.json")["suites"] == ["megatron"]


def test_a_hung_run_ends_on_its_timeout_and_the_others_are_judged(tmp_path: Path) -> None:
    config = tmp_path / "megatron.yaml"
    config.write_text("timeout_s: 15\n", encoding="utf-8")
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "3", "--suite", "megatron", "--megatron-config", str(config),
                  "--fault", "sim02:train-hang", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = load(out / "gate.json")
    hung = gate["nodes"]["sim02"]
    assert not hung["admitted"] and not hung["failed"] and set(hung["incomplete"]) >= MEG, hung
    assert gate["admitted"] == "sim[01,03]", gate
    single = load(out / "facts" / "sim02.json")["megatron"]["single"]
    assert single["timed_out"] and single["timeout_s"] == 15
    assert single["duration_s"] < 15 + 30  # stopped by its own limit plus the launch's slack, not left hanging


def test_dry_run_prints_every_launch_and_launches_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "2", "--suite", "megatron", "--dry-run", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # nothing measured: nobody admitted
    lines = proc.stdout.splitlines()
    assert "# placement probe on sim01" in lines and "# multi-node run on sim01,sim02" in lines
    assert any(line.startswith("[sim02] ") and "torchrun" in line and "pretrain_gpt.py" in line for line in lines)
    assert not (out / "megatron").exists()
    facts = load(out / "facts" / "sim01.json")
    assert "--dry-run" in facts["megatron"]["unavailable"]
    assert set(load(out / "gate.json")["nodes"]["sim01"]["incomplete"]) >= MEG | {"PIN-01"}


@pytest.mark.parametrize(("args", "message"), [
    (["--fault", "sim02:train-slow"], "--fault sim02:train-slow acts only in the megatron suite"),
    (["--fault", "sim02:slow-hca", "--suite", "megatron"], "acts only in the fabric suite"),
    (["--fault", "sim02:ecc-growth", "--suite", "megatron"], "run it with burnin soak"),
    (["--megatron-config", "megatron.yaml"], "--megatron-config applies to the megatron suite only"),
    (["--suite", "megatron", "--megatron-config", "/nonexistent.yaml"], "no such file"),
])
def test_usage_errors_before_any_node_is_touched(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "run"
    proc = burnin("run", "--sim", "2", *args, "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_wrong_megatron_config_names_file_key_and_line(tmp_path: Path) -> None:
    config = tmp_path / "megatron.yaml"
    config.write_text("train_iters: 50\nmodel:\n  hidden_size: -4\n", encoding="utf-8")
    proc = burnin("run", "--sim", "2", "--suite", "megatron", "--megatron-config", str(config),
                  "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "megatron.yaml:3" in proc.stderr and "hidden_size" in proc.stderr
