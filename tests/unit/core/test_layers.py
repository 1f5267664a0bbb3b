"""The layer order of docs/architecture.md, read from every module's ``import`` statements.

Every module of ``burnin`` belongs to a unit (a subpackage, or a top-level module) and every unit to a layer.
An import may point to its own layer or one below, never above; units import each other in one direction
only (no cycle between packages); modules import each other in one direction only, except through imports
under ``if TYPE_CHECKING:``, which are types only and ignored. Imports inside functions count: they run too.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3] / "burnin"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("burnin", "burnin.errors", "burnin.text", "burnin.reasons", "burnin.atomic", "burnin.resources",
              "burnin.outdir", "burnin.runfiles", "burnin.argtypes", "burnin.nodes", "burnin.evaluate", "burnin.facts",
              "burnin.suite",
              "burnin.parsers", "burnin.topology", "burnin.inventory", "burnin.collector", "burnin.counters",
              "burnin.history", "burnin.waits")),
    ("transport", ("burnin.transport",)),
    ("launch", ("burnin.launch", "burnin.breaker", "burnin.gate")),
    ("workloads", ("burnin.fabric", "burnin.megatron", "burnin.storage")),
    ("checks", ("burnin.checks",)),
    ("check users", ("burnin.sim", "burnin.soak", "burnin.outcomes", "burnin.golden")),
    ("reports", ("burnin.report",)),
    ("runs", ("burnin.probe", "burnin.plugin", "burnin.plugin_lean", "burnin.plugin_judge", "burnin.dispatch",
              "burnin.phases")),
    ("run path", ("burnin.watch", "burnin.session", "burnin.sweep", "burnin.repair")),
    ("command line", ("burnin.cli",)),
)
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def unit_of(module: str) -> str:
    """``burnin.launch.slurm`` -> ``burnin.launch``; ``burnin.probe`` -> ``burnin.probe``."""
    return ".".join(module.split(".")[:2])


def _type_only(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            skipped.update(id(sub) for child in node.body for sub in ast.walk(child))
    return skipped


def imports(module: str) -> Iterator[tuple[str, int]]:
    """Every burnin module ``module`` imports when it runs (with the line), type-only imports left out.

    ``from package import name`` names the submodule when ``name`` is one, else the package itself.
    """
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_only(tree)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            if target in MODULES and target != module:
                yield target, node.lineno


@functools.cache
def import_edges() -> dict[str, list[tuple[str, int]]]:
    """Every module's burnin imports, parsed when a test first asks (not while the suite is collected: 3.6 s in
    every pytest worker)."""
    return {module: sorted(set(imports(module))) for module in MODULES}


def test_every_unit_has_a_layer() -> None:
    assert sorted({unit_of(m) for m in MODULES} - set(RANK)) == []


def test_no_import_points_to_a_higher_layer() -> None:
    upward = [f"{MODULES[module].relative_to(ROOT.parent)}:{line} imports {target} "
              f"({LAYERS[RANK[unit_of(module)]][0]} -> {LAYERS[RANK[unit_of(target)]][0]})"
              for module, targets in import_edges().items() for target, line in targets
              if RANK[unit_of(target)] > RANK[unit_of(module)]]
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for module, targets in import_edges().items():
        for target, _ in targets:
            if unit_of(target) != unit_of(module):
                graph.setdefault(unit_of(module), set()).add(unit_of(target))
    assert _cycles(graph) == []


def test_no_cycle_between_modules() -> None:
    graph = {module: {target for target, _ in targets} for module, targets in import_edges().items()}
    assert _cycles(graph) == []


@pytest.mark.parametrize(("source", "edges"), [
    ("import burnin.dispatch.sim\n", ["burnin.dispatch.sim"]),
    ("from burnin.checks import xid, load_all\n", ["burnin.checks", "burnin.checks.xid"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from burnin.cli import main\n", []),
    ("def f():\n    from burnin.session import execute\n", ["burnin.session"]),
    ("from . import judge\nfrom .commands import plan\n", ["burnin.fabric.commands", "burnin.fabric.judge"]),
], ids=["import", "from", "type-only", "inside-a-function", "relative"])
def test_the_reader_sees_what_runs(source: str, edges: list[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = ROOT / "fabric" / "_layer_probe.py"  # read from a string: a module of burnin.fabric, never written
    monkeypatch.setitem(MODULES, "burnin.fabric._layer_probe", path)
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source if self == path else "")
    assert sorted({target for target, _ in imports("burnin.fabric._layer_probe")}) == edges
