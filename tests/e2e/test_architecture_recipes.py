"""docs/architecture.md's four recipes, run as written: a toy check, phase, dispatcher and gate.

Each ``# file:`` block of the page is written out as is; the driver below adds
each toy with the one registration line the recipe names, then runs the real
command line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
BLOCK = re.compile(r"```python\n# file: (\S+)\n(.*?)```", re.S)

DRIVER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
from burnin.phases import PHASES
from burnin.dispatch.registry import DISPATCHERS
from burnin.gate.registry import GATES
PHASES["toy"] = "toy_phase"                  # the phase recipe's registration line
DISPATCHERS["toy"] = "toy_dispatcher"        # the dispatcher recipe's
GATES["tickets"] = "toy_gate:TicketGate"     # the gate recipe's
import toy_check                             # the check recipe's (its module among the check modules)
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toys")
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert {name for name, _ in blocks} == {"toy_check.py", "toy_checks/test_toy_check.py", "toy_phase.py",
                                            "toy/test_toy_phase.py", "toy_dispatcher.py", "toy_gate.py"}
    for name, body in blocks:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return folder


def burnin(toys: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", DRIVER, str(toys), *args], capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, **(env or {})})


def gate(out: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    return document


def verdicts(out: Path, check: str) -> dict[str, str]:
    rows = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    return {row["node"]: row["status"] for row in rows if row["check"] == check}


def test_check_and_phase_recipes_judge_simulated_nodes(toys: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin(toys, "run", "--sim", "2", "--suite", str(toys / "toy_checks"), "--suite", str(toys / "toy"),
                  "--toy-word", "hello", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verdicts(out, "TOY-02") == {"sim01": "pass", "sim02": "pass"}  # the check, on the collector's facts
    assert verdicts(out, "TOY-01") == {"sim01": "pass", "sim02": "pass"}  # the phase's measurement, judged
    facts = json.loads((out / "facts" / "sim02.json").read_text(encoding="utf-8"))
    assert facts["toy"] == {"said": "hello", "ok": True, "word": "hello"}


def test_a_phase_option_without_its_suite_is_a_usage_error(toys: Path, tmp_path: Path) -> None:
    proc = burnin(toys, "run", "--sim", "2", "--toy-word", "hello", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == "burnin run: --toy-word applies to the toy suite only: add --suite toy"


def test_dispatcher_recipe_gathers_and_launches_through_its_own_transport(toys: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin(toys, "run", "--via", "toy", "--toy-nodes", "3", "--suite", str(toys / "toy"), "--timeout", "30",
                  "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gate(out)["admitted"] == "local[1-3]"
    assert verdicts(out, "TOY-01") == {"local1": "pass", "local2": "pass", "local3": "pass"}
    facts = json.loads((out / "facts" / "local3.json").read_text(encoding="utf-8"))
    assert facts["toy"]["said"] == "ready" and "kernel" in facts["sources"]  # gathered by the toy, then measured


def test_gate_recipe_acts_on_a_run_and_on_the_probe(toys: Path, tmp_path: Path) -> None:
    tickets = tmp_path / "tickets.json"
    env = {"TOY_TICKETS": str(tickets)}
    out = tmp_path / "run"
    dry = burnin(toys, "run", "--sim", "3", "--fault", "sim02:nvlink-down", "--gate", "tickets", "--dry-run",
                 "--out", str(out), env=env)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert not tickets.exists() and '"sim02": "burnin: GPU-10' in dry.stdout
    proc = burnin(toys, "run", "--sim", "3", "--fault", "sim02:nvlink-down", "--gate", "tickets",
                  "--out", str(out), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert list(json.loads(tickets.read_text())) == ["sim02"]

    from burnin.sim import build_rack, parse_fault_spec
    from burnin.topology import find_topology

    node = build_rack(tmp_path / "rack", find_topology("hgx-h100-8gpu"), ["sim05"],
                      {"sim05": [parse_fault_spec("nvlink-down")]})[0]
    probe = burnin(toys, "probe", "--gate", "tickets", "--drain", env={**env, **node.environment()})
    assert probe.returncode == 1, probe.stdout + probe.stderr
    opened = json.loads(tickets.read_text())
    assert sorted(opened) == ["sim02", "sim05"] and opened["sim05"].startswith("burnin: GPU-10")
