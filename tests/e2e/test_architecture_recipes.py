"""docs/architecture.md's recipes, run as written: a new check, fault, phase, dispatcher and gate.

A ``# file: NAME`` block of the page is a toy: it is written out as is and the
driver below adds it with the one registration line its recipe names, then runs
the real command line. A ``# file: PATH (append)`` or ``(in NAME)`` block is an
addition to the repository's own file: the check and fault recipes are applied
to a copy of the repository, whose changed files are counted, whose registry
tests must still pass, and whose simulated rack must catch the new fault with
the new check on the faulted node alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
BLOCK = re.compile(r"```python\n# file: (\S+)\n(.*?)```", re.S)
ADDITION = re.compile(r"```(?:python|markdown)\n(?:# |<!-- )file: (\S+) \((append|in [A-Z_]+)\)(?: -->)?\n(.*?)```",
                      re.S)
CATALOG = "check-catalog.md"
"""The design's catalog of check ids, in the reference set beside the checkout (BURNIN_CATALOG elsewhere)."""

DRIVER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
from burnin.phases import PHASES
from burnin.dispatch.registry import DISPATCHERS
from burnin.gate.registry import GATES
PHASES["toy"] = "toy_phase"                  # the phase recipe's registration line
DISPATCHERS["toy"] = "toy_dispatcher"        # the dispatcher recipe's
GATES["tickets"] = "toy_gate:TicketGate"     # the gate recipe's
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toys")
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert {name for name, _ in blocks} == {"toy_phase.py", "toy/test_toy_phase.py", "toy_dispatcher.py",
                                            "toy_gate.py"}
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


def test_phase_recipe_judges_simulated_nodes(toys: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = burnin(toys, "run", "--sim", "2", "--suite", str(toys / "toy"), "--toy-word", "hello", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
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


# ------------------------------------------------------------------ the check and fault recipes, in a copy

# What each recipe's section of the page adds to the repository, and the pages regenerated after it.
RECIPES = {"## Recipe: a new check": (["checks", "--markdown"],),
           "## Recipe: a new fault": (["faults", "--markdown", "--update", "docs/faults.md"], ["checks", "--markdown"])}
GENERATED = {"docs/checks.md", "docs/faults.md"}
REGISTRY_TESTS = (
    "tests/unit/sim/test_sim_faults.py",
    "tests/unit/report/test_check_catalog.py",
    "tests/unit/checks/test_check_declarations.py",
    "tests/unit/checks/test_checks_unmeasured.py::test_every_node_check_has_an_unreadable_input_row",
    "tests/e2e/test_run_sim.py::test_every_node_fault_has_an_expected_outcome",
    "tests/e2e/test_fault_property.py::test_the_draw_covers_every_suite_and_the_fault_lists_are_the_registry",
    "tests/unit/checks/test_checks_unmeasured.py::test_every_node_check_passes_on_the_healthy_node[GPU-99]",
    "tests/unit/checks/test_checks_unmeasured.py::"
    "test_unreadable_or_impossible_input_is_incomplete[GPU-99-clock event reasons as text]",
    "tests/unit/core/test_layers.py",
)


def _section(page: str, title: str) -> str:
    start = page.index(title + "\n")
    end = page.find("\n## ", start + len(title))
    return page[start:end if end >= 0 else len(page)]


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}


def _add(path: Path, how: str, body: str) -> None:
    """Make one addition of a recipe: at the file's end, or as the first entries of its NAME = {...} / [...]."""
    text = path.read_text(encoding="utf-8")
    if how == "append":
        text = text.rstrip("\n") + "\n\n\n" + body
    else:
        name = how.removeprefix("in ")
        opening = re.search(rf"^{name}\b[^\n]*[\[{{]\n", text, re.M)
        assert opening is not None, f"{path.name} has no {name} = [ or {{ to add to"
        text = text[:opening.end()] + body + text[opening.end():]
    path.write_text(text, encoding="utf-8")


def _catalog() -> Path:
    return Path(os.environ.get("BURNIN_CATALOG", REPO.parent / "shared" / "docs" / CATALOG))


def _in_copy(repo: Path, *args: str, stdout: Path | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    if _catalog().is_file():  # else the catalog's own tests are skipped (CI has it)
        env["BURNIN_CATALOG"] = str(repo.parent / CATALOG)
    proc = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if stdout is not None and proc.returncode == 0:
        stdout.write_text(proc.stdout, encoding="utf-8")
    return proc


@pytest.fixture(scope="module")
def recipe_copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, set[str]]]:
    """A copy of the repository (and of the catalog, beside it) with the check recipe, then the fault recipe,
    applied as the page writes them; and per recipe the files that changed (the catalog as ``check-catalog.md``)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the recipes are applied to a copy of its files")
    root = tmp_path_factory.mktemp("recipes")
    repo = root / "repo"
    for name in listed.stdout.decode().split("\0"):
        if name and (REPO / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, repo / name)
    (root / CATALOG).write_text(_catalog().read_text(encoding="utf-8") if _catalog().is_file() else "",
                                encoding="utf-8")
    page = DOC.read_text(encoding="utf-8")
    changed: dict[str, set[str]] = {}
    for title, regenerate in RECIPES.items():
        before = _tree(root)
        additions = ADDITION.findall(_section(page, title))
        assert additions, f"{title}: no (append) or (in NAME) block"
        for name, how, body in additions:
            _add(root / CATALOG if name == CATALOG else repo / name, how, body)
        for args in regenerate:
            target = None if "--update" in args else repo / "docs" / "checks.md"
            proc = _in_copy(repo, "-m", "burnin.cli.main", *args, stdout=target)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        changed[title] = {path.removeprefix("repo/") for path in _changed(before, _tree(root))}
    return repo, changed


def test_the_check_recipe_touches_four_files_and_the_fault_recipe_two_by_hand(
        recipe_copy: tuple[Path, dict[str, set[str]]]) -> None:
    _, changed = recipe_copy
    check = changed["## Recipe: a new check"]
    assert check - GENERATED == {"burnin/checks/gpu.py", "suites/node/test_gpu.py",
                                 "tests/unit/checks/test_checks_unmeasured.py", CATALOG}, check
    assert check & GENERATED == {"docs/checks.md"}
    fault = changed["## Recipe: a new fault"]
    assert fault - GENERATED == {"burnin/sim/inject.py", "tests/e2e/test_run_sim.py"}, fault
    assert fault & GENERATED == GENERATED  # the table of faults, and what GPU-99 catches
    assert len(check - GENERATED) <= 4 and len(fault - GENERATED) <= 2


def test_with_both_recipes_the_registry_tests_still_pass(recipe_copy: tuple[Path, dict[str, set[str]]]) -> None:
    """Nothing beyond the recipes' files wants an entry: the registries' own tests pass in the copy."""
    repo, _ = recipe_copy
    proc = _in_copy(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", *REGISTRY_TESTS, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", proc.stdout), proc.stdout[-2000:]


def test_the_new_fault_is_caught_by_the_new_check_on_its_node_alone(recipe_copy: tuple[Path, dict[str, set[str]]],
                                                                     tmp_path: Path) -> None:
    repo, _ = recipe_copy
    out = tmp_path / "run"
    proc = _in_copy(repo, "-m", "burnin.cli.main", "run", "--sim", "3", "--fault", "sim02:sw-thermal-slowdown",
                    "--out", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = gate(out)["nodes"]
    assert (nodes["sim02"]["failed"], nodes["sim02"]["incomplete"]) == (["GPU-99"], [])
    assert "gpu3 clock event reasons 0x21" in nodes["sim02"]["reasons"][0], nodes["sim02"]
    for healthy in ("sim01", "sim03"):
        assert nodes[healthy] == {"admitted": True, "failed": [], "incomplete": [], "reasons": []}, healthy
    assert verdicts(out, "GPU-99") == {"sim01": "pass", "sim02": "fail", "sim03": "pass"}
