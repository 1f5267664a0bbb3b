"""The check catalog is read from the code (registry, faults, suites, topologies), so docs/checks.md cannot
drift: a test regenerates it and compares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnin.checks import load_all
from burnin.cli.main import main
from burnin.probe import fast_check_ids
from burnin.report import catalog
from burnin.sim import FAULTS
from burnin.topology.load import find_topology

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "checks.md"
REFRESH = "burnin checks --markdown > docs/checks.md"


@pytest.fixture(scope="module")
def entries() -> list[catalog.CheckEntry]:
    return catalog.build(catalog.shipped_topologies())


def test_docs_checks_md_is_what_burnin_checks_writes(entries: list[catalog.CheckEntry]) -> None:
    expected = catalog.markdown(entries, [t.name for t in catalog.shipped_topologies()])
    assert DOC.read_text(encoding="utf-8") == expected, f"docs/checks.md is stale: refresh it with `{REFRESH}`"


def test_every_registered_check_fault_and_soak_check_is_in_the_catalog(entries: list[catalog.CheckEntry]) -> None:
    ids = [e.check for e in entries]
    assert len(ids) == len(set(ids))
    assert set(load_all()) <= set(ids)
    assert {spec.check_id for spec in FAULTS.values()} <= set(ids), "every fault's check is catalogued"
    assert set(catalog.soak_checks()) <= set(ids)
    assert set(catalog.SOAK_TITLES) == set(catalog.soak_checks()) - set(load_all()), "each soak-only check has a title"
    assert ids.index("INV-01") < ids.index("GPU-01") < ids.index("IB-01") < ids.index("STO-01") < ids.index("BRN-01")


def test_an_entry_says_what_it_catches_its_data_thresholds_suites_and_probe(entries: list[catalog.CheckEntry]) -> None:
    by_id = {e.check: e for e in entries}
    gpu08 = by_id["GPU-08"]
    assert gpu08.sources == ("nvml",) and gpu08.probe and gpu08.suites == ("node",)
    assert any(c.startswith("pcie-x8: ") for c in gpu08.catches)
    width = {t.key: t for t in gpu08.thresholds["hgx-h100-8gpu"]}["gpu_pcie_width"]
    reference = find_topology("hgx-h100-8gpu").references["gpu_pcie_width"]
    assert (width.bound, width.source) == (reference.describe(), reference.source) == ("16 lanes", reference.source)
    assert by_id["STO-02"].suites == ("fabric", "node"), "STO-02 is judged by two suites"
    assert {e.check for e in entries if e.probe} == set(fast_check_ids())
    assert by_id["NCCL-01"].catches == ("nccl-hang (incomplete): nccl-tests runs with the node hang",)
    assert by_id["BRN-06"].suites == ("soak",) and not by_id["BRN-06"].probe


def test_a_reference_the_topology_lacks_is_named_as_making_the_check_incomplete(tmp_path: Path) -> None:
    source = (REPO / "topologies" / "hgx-h100-8gpu.yaml").read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == "gpu_pcie_width:")
    site = tmp_path / "site-h100.yaml"
    site.write_text("".join(lines[:start] + lines[start + 2:]).replace("name: hgx-h100-8gpu", "name: site-h100"),
                    encoding="utf-8")
    (entry,) = [e for e in catalog.build([find_topology(str(site))]) if e.check == "GPU-08"]
    assert entry.missing == {"site-h100": ("gpu_pcie_width",)}
    assert "gpu_pcie_width: not defined (incomplete)" in catalog.text([entry], "site-h100")


def test_burnin_checks_prints_the_catalog_json_and_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks"]) == 0
    listing = capsys.readouterr().out
    assert any(line.startswith("GPU-08") and "probe" in line for line in listing.splitlines())
    assert main(["checks", "--topology", "hgx-h100-8gpu"]) == 0
    assert "gpu_pcie_width 16 lanes" in capsys.readouterr().out
    assert main(["checks", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {row["check"] for row in document} >= set(load_all())
    assert main(["checks", "--topology", "no-such-node-type"]) == 2
    assert "no-such-node-type" in capsys.readouterr().err
