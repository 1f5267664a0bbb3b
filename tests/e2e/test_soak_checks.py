"""burnin soak judges only what it measured, and goes on only from a checkpoint its logs agree with (issue 19).

- the node suite runs first: a node that fails acceptance (ib-port-down, pcie-gen4, nvlink-down) is not
  soaked and is rejected for that check, never admitted by a soak that did not judge it (case 4);
- under ``--gate slurm`` the soak resumes a node drained by burnin only for checks it judged and passed:
  a node drained for IB-01 is resumed (the node suite passed IB-01), one drained for NCCL-01 (the fabric
  suite, which no soak runs) stays drained (case 4);
- ``--resume`` of a checkpoint edited so that a node an Xid failed reads done, of a state that is no
  checkpoint, or of a garbage sample line is one line and exit 2, never a verdict or exit 3 (cases 6, 11).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "burnin.cli.main"]
SHORT = ["--duration", "4h", "--interval", "1800"]


def burnin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, **(env or {})})


def gate(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gate.json").read_text())
    return data


def test_a_node_that_fails_acceptance_is_not_soaked_and_never_admitted(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    proc = burnin("soak", "--sim", "4", *SHORT, "--out", str(out), "--fault", "sim02:nvlink-down",
                  "--fault", "sim03:ib-port-down", "--fault", "sim04:pcie-gen4")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = gate(out)
    assert (doc["admitted"], doc["rejected"]) == ("sim01", "sim[02-04]"), doc
    nodes = doc["nodes"]
    assert [nodes[n]["failed"] for n in ("sim02", "sim03", "sim04")] == [["GPU-10"], ["IB-01"], ["GPU-08"]]
    assert "BRN-06" in nodes["sim03"]["incomplete"] and doc["acceptance"] == "acceptance/gate.json"
    assert "soak acceptance: the node suite judged 4 nodes; not soaked: sim[02-04] (3)" in proc.stderr
    assert "not judged: the node was not soaked: acceptance rejected it (failed IB-01" in proc.stdout
    samples = [json.loads(line)["node"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert set(samples) == {"sim01"}  # the others took no part
    accepted = json.loads((out / "acceptance" / "gate.json").read_text())
    assert accepted["rejected"] == "sim[02-04]" and (out / "acceptance" / "junit.xml").is_file()


SCONTROL = """#!/bin/sh
# a Slurm that knows sim01 (drained by burnin for NCCL-01, a fabric check) and sim02 (drained for IB-01)
if [ "$1" = "--oneliner" ] && [ "$2" = "show" ]; then
  echo "NodeName=sim01 State=IDLE+DRAIN Reason=burnin: NCCL-01 all_reduce 380 GB/s [root@2026-01-01T00:00:00]"
  echo "NodeName=sim02 State=IDLE+DRAIN Reason=burnin: IB-01 mlx5_2 1: DOWN [root@2026-01-01T00:00:00]"
  exit 0
fi
echo "$*" >> "$SCONTROL_LOG"
"""


def test_the_soak_gate_resumes_a_node_only_for_checks_it_judged(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(SCONTROL)
    (fake / "scontrol").chmod(0o755)
    log = tmp_path / "scontrol.log"
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "SCONTROL_LOG": str(log)}
    out = tmp_path / "soak"
    proc = burnin("soak", "--sim", "2", *SHORT, "--out", str(out), "--gate", "slurm", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert log.read_text().splitlines() == ["update NodeName=sim02 State=RESUME"]
    assert ("burnin gate: sim01: admitted, but drained for NCCL-01, which this run did not judge and pass; left "
            "drained") in proc.stdout


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished soak of two nodes in which an Xid at +01:40:00 failed sim02."""
    out = tmp_path_factory.mktemp("soak") / "out"
    proc = burnin("soak", "--sim", "2", *SHORT, "--out", str(out), "--fault", "sim02:xid-at:100:79")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert gate(out)["nodes"]["sim02"]["failed"] == ["GPU-04"]
    return out


def _copy(stopped: Path, tmp_path: Path) -> Path:
    shutil.copytree(stopped, tmp_path / "out", symlinks=True)
    return tmp_path / "out"


def _state(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "soak-state.json").read_text())
    return data


def _one_line_exit_2(out: Path, *expected: str) -> None:
    before = (out / "gate.json").read_text()
    proc = burnin("soak", "--resume", str(out))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and all(text in lines[0] for text in expected), proc.stderr
    assert (out / "gate.json").read_text() == before  # nothing judged again


def test_an_edited_checkpoint_does_not_admit_the_xid_node(stopped: Path, tmp_path: Path) -> None:
    out = _copy(stopped, tmp_path)
    state = _state(out)
    state["nodes"]["sim02"].update(status="done", events=[], end_t=None)
    (out / "soak-state.json").write_text(json.dumps(state))
    _one_line_exit_2(out, "soak-state.json does not match what the soak wrote", "node sim02")


@pytest.mark.parametrize("edit", ["list", "nodes", "nan"])
def test_a_state_that_is_no_checkpoint_is_one_line_and_exit_2(stopped: Path, tmp_path: Path, edit: str) -> None:
    out = _copy(stopped, tmp_path)
    state = _state(out)
    if edit == "list":
        text = "[]"
    else:
        state.update(nodes=[]) if edit == "nodes" else state.update(duration_s=math.nan)
        text = json.dumps(state)
    (out / "soak-state.json").write_text(text)
    _one_line_exit_2(out, "soak-state.json")


def test_a_garbage_sample_line_is_one_line_and_exit_2(stopped: Path, tmp_path: Path) -> None:
    out = _copy(stopped, tmp_path)
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "}garbage{\n"
    (out / "samples.jsonl").write_text("".join(lines))
    _one_line_exit_2(out, "samples.jsonl line 2 is not a JSON record")


def test_an_unedited_finished_soak_resumes_to_the_same_verdicts(stopped: Path, tmp_path: Path) -> None:
    out = _copy(stopped, tmp_path)
    proc = burnin("soak", "--resume", str(out))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert gate(out)["nodes"] == gate(stopped)["nodes"]
