"""Checks declare what they need (issue 11 item 7) and read references through one policy (item 8).

- every registered check names its fact sources (collector sources or a phase) and the references it reads;
- a topology without a declared reference makes the check incomplete with that cause, and
  ``unjudgeable_checks`` says so when the topology is loaded;
- the probe's set is derived from the declarations;
- registered checks, suite tests and the catalog's ids match one to one (minus the ids listed as not built).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from checks_support import INCOMPLETE, PASS, TOPOLOGY, assert_status, judge

from burnin.checks import PHASE_SOURCES, load_all, probe_check_ids, unjudgeable_checks
from burnin.checks.references import CATALOG_DEFAULTS, reference
from burnin.collector.core import FAST_SOURCES, SOURCES
from burnin.evaluate.verdict import Unmeasurable
from burnin.topology.model import Reference, Topology

REPO = Path(__file__).resolve().parents[3]
CATALOG = Path(os.environ.get("BURNIN_CATALOG", REPO.parent / "shared" / "docs" / "check-catalog.md"))

NOT_IMPLEMENTED: dict[str, str] = {
    "GPU-02": "a rate over time: judged by `burnin soak` (burnin.soak.verdicts), outside pytest",
    "GPU-09": "a growth over time: judged by `burnin soak` (burnin.soak.verdicts), outside pytest",
    "IB-07": "physical layer (BER, FEC, optics via mlxlink) is not collected",
    **{f"BRN-0{n}": "judged by `burnin soak` (burnin.soak.verdicts), outside pytest" for n in range(1, 8)},
    # not node checks: computed on the controller by `burnin history` (burnin.history) from past runs' gate.json
    # and the watch's journal
    "REL-01": "the event history: `burnin history` (burnin.history.load), controller-side, outside pytest",
    "REL-02": "failures, MTTR, availability, lemons: `burnin history` (burnin.history.metrics), controller-side",
}

# What the probe ran before its set was derived (fast and cheap sources only): the derivation keeps all of it
# (a new check whose sources are all fast joins it by its declaration, docs/architecture.md "Recipe: a new check").
PROBE_SET = {
    "INV-01", "INV-02", "INV-03", "INV-04", "INV-05", "INV-06", "INV-07", "INV-08", "INV-09", "INV-10",
    "GPU-01", "GPU-03", "GPU-04", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10", "GPU-11", "GPU-12",
    "TOP-01", "TOP-02", "TOP-03", "TOP-05", "TOP-06", "TOP-07", "TOP-08", "TOP-09", "TOP-10",
    "IB-01", "IB-02", "IB-03", "IB-04", "IB-05", "IB-06",
    "STO-01", "STO-02", "STO-04", "STO-07",
}


def without(topology: Topology, *keys: str) -> Topology:
    return replace(topology, references={k: v for k, v in topology.references.items() if k not in keys})


def only(topology: Topology, keys: tuple[str, ...]) -> Topology:
    return replace(topology, references={k: v for k, v in topology.references.items() if k in keys})


CHECKS = load_all()
DECLARED = [(cid, key) for cid, spec in CHECKS.items() for key in spec.references if key not in CATALOG_DEFAULTS]


def test_every_check_names_known_fact_sources() -> None:
    known = set(SOURCES) | set(PHASE_SOURCES)
    for check_id, spec in CHECKS.items():
        assert spec.sources, check_id
        assert set(spec.sources) <= known, (check_id, spec.sources)


def test_declared_references_are_in_the_shipped_topology() -> None:
    for check_id, spec in CHECKS.items():
        assert set(spec.references) <= set(TOPOLOGY.references), check_id
    assert unjudgeable_checks(TOPOLOGY) == {}


@pytest.mark.parametrize(("check_id", "key"), DECLARED, ids=[f"{c}-{k}" for c, k in DECLARED])
def test_a_missing_declared_reference_is_unjudgeable_and_incomplete(check_id: str, key: str) -> None:
    partial = without(TOPOLOGY, key)
    reason = unjudgeable_checks(partial)[check_id]
    assert reason == f"topology {TOPOLOGY.name} defines no {key}"
    verdict = judge(check_id, {}, partial)  # before any fact is looked at
    assert_status(verdict, INCOMPLETE, reason)


def test_unjudgeable_lists_exactly_the_checks_that_read_the_reference() -> None:
    readers = {cid for cid, spec in CHECKS.items() if "nvlink_links_active" in spec.references}
    assert set(unjudgeable_checks(without(TOPOLOGY, "nvlink_links_active"))) == readers == {"GPU-10", "NVL-04"}


def test_node_checks_read_no_reference_they_do_not_declare(facts: dict[str, Any]) -> None:
    """With only its declared references, every node check still passes on a healthy node."""
    for check_id, spec in CHECKS.items():
        if set(spec.sources) & set(PHASE_SOURCES):
            continue  # a phase's checks: covered by the source scan below
        verdict = judge(check_id, facts, only(TOPOLOGY, spec.references))
        assert verdict.status is PASS, verdict.reason


def _referenced_keys(module: Any) -> set[str]:
    """Every key a module passes to ``reference(topology, KEY)`` (string or module constant)."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "reference" and len(node.args) >= 2:
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                keys.add(arg.value)
            elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
                keys.add(getattr(getattr(module, arg.value.id), arg.attr))
    return keys


def test_every_reference_a_check_module_reads_is_declared_by_one_of_its_checks() -> None:
    import importlib

    for name in ("inventory", "gpu", "host", "host_config", "pci_census", "infiniband", "hca", "storage", "fabric",
                 "fabric_gdr", "workload"):
        module = importlib.import_module(f"burnin.checks.{name}")
        ids = re.findall(r'@check\("([A-Z]+-\d+)"', inspect.getsource(module))
        declared = {key for check_id in ids for key in CHECKS[check_id].references}
        assert _referenced_keys(module) <= declared, name


def test_checks_read_references_only_through_the_policy() -> None:
    """No check module looks a reference up itself (``topology.ref``, ``references.get``) or falls back."""
    for path in sorted((REPO / "burnin" / "checks").glob("*.py")):
        if path.name == "references.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\.ref\(|references\.get\(|references\[", text), path.name


def test_the_catalog_defaults_are_the_fabric_judges_defaults() -> None:
    from burnin.fabric import judge as fabric_judge

    assert CATALOG_DEFAULTS["fabric_straggler_tolerance"].value == fabric_judge.DEFAULT_TOLERANCE
    assert CATALOG_DEFAULTS["ib_write_bw_spread"].value == fabric_judge.DEFAULT_GDR_SPREAD


def test_reference_prefers_the_topology_then_the_catalog_then_says_why() -> None:
    custom = replace(TOPOLOGY, references={**TOPOLOGY.references, "numa_balancing": Reference(1, "site", upper=1)})
    assert reference(custom, "numa_balancing").upper == 1
    assert reference(without(TOPOLOGY, "numa_balancing"), "numa_balancing") is CATALOG_DEFAULTS["numa_balancing"]
    with pytest.raises(Unmeasurable, match=f"^topology {TOPOLOGY.name} defines no power_limit_w$"):
        reference(without(TOPOLOGY, "power_limit_w"), "power_limit_w")
    floorless = replace(TOPOLOGY, references={**TOPOLOGY.references, "power_limit_w": Reference(700, "x")})
    with pytest.raises(Unmeasurable, match="defines no power_limit_w with a lower bound"):
        reference(floorless, "power_limit_w", lower_bound=True)


def test_the_probe_set_is_derived_from_the_declarations() -> None:
    from burnin.probe import fast_check_ids

    derived = probe_check_ids(FAST_SOURCES)
    assert set(derived) >= PROBE_SET
    assert derived == fast_check_ids()
    for check_id in derived:
        assert set(CHECKS[check_id].sources) <= set(FAST_SOURCES), check_id
    # a fast check with a slow source is left out: TOP-04 reads lspci, STO-06 mlxconfig
    assert "TOP-04" not in derived and "STO-06" not in derived
    assert probe_check_ids((*FAST_SOURCES, "lspci")) == derived  # TOP-04 is not fast either


# ---------------------------------------------------------------- one to one


# Checks with a fast part in the node suite and a measured part in another suite's phase (catalog mode FAST/SLOW):
# STO-04 judges the interface MTU in the node suite, and the don't-fragment ping to every target in the storage suite;
# STO-02 the NCCL configuration in the node suite, and the devices NCCL opened in the fabric suite's runs.
TWO_SUITES: dict[str, tuple[str, str]] = {"STO-04": ("node", "storage"), "STO-02": ("node", "fabric")}


def _marked() -> list[tuple[str, str]]:
    """(suite, check id) of every marked suite test."""
    found: list[tuple[str, str]] = []
    for path in sorted((REPO / "suites").glob("*/test_*.py")):
        found += [(path.parent.name, check_id) for check_id in
                  re.findall(r"""mark\.check\(\s*["']([A-Z]+-\d+)["']""", path.read_text(encoding="utf-8"))]
    return found


def _suite_ids() -> list[str]:
    """Check ids of the suite tests, a TWO_SUITES check counted in its first suite only."""
    return [check_id for suite, check_id in _marked()
            if check_id not in TWO_SUITES or suite == TWO_SUITES[check_id][0]]


def test_two_suite_checks_are_marked_once_in_each_of_their_suites() -> None:
    for check_id, suites in TWO_SUITES.items():
        assert sorted(suite for suite, marked in _marked() if marked == check_id) == sorted(suites), check_id


def _catalog_ids() -> list[str]:
    if not CATALOG.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"check catalog not found at {CATALOG} (CI must have ../shared)")
        pytest.skip(f"check catalog not found at {CATALOG}")
    return re.findall(r"^###\s+([A-Z]+-\d+)\b", CATALOG.read_text(encoding="utf-8"), flags=re.MULTILINE)


def test_each_registered_check_has_exactly_one_suite_test() -> None:
    ids = _suite_ids()
    assert sorted(ids) == sorted(set(ids)), "a check id is marked on two suite tests"
    assert set(ids) == set(CHECKS)


# Checks burnin added after the shared catalog was written, each documented in the repository instead
# (docs/checks.md, generated from the registry, and its own page). One that the catalog comes to list must
# leave this list.
BEYOND_CATALOG = {
    "GPU-14": "silent data corruption (issue 25): docs/sdc.md",
}


def test_registered_checks_and_the_catalog_match_one_to_one() -> None:
    catalog = _catalog_ids()
    assert len(catalog) == len(set(catalog)), "the catalog lists an id twice"
    assert not set(BEYOND_CATALOG) & set(catalog), "listed as beyond the catalog, but the catalog has it now"
    assert set(BEYOND_CATALOG) <= set(CHECKS), "listed as beyond the catalog, but not registered"
    catalog += list(BEYOND_CATALOG)
    assert not set(CHECKS) - set(catalog), "registered checks the catalog does not know"
    assert not set(NOT_IMPLEMENTED) & set(CHECKS), "listed as not built, but registered"
    assert not set(NOT_IMPLEMENTED) - set(catalog), "listed as not built, but not in the catalog"
    assert set(catalog) == set(CHECKS) | set(NOT_IMPLEMENTED), "catalog ids neither built nor listed as not built"
