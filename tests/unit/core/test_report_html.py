"""The HTML report groups identical failures and folds node names."""

from __future__ import annotations

import json
from pathlib import Path

from burnin.gate.decide import CheckOutcome, decide, gate_document
from burnin.report.html import check_matrix, group_failures, render


def _write_run(tmp_path: Path) -> None:
    outcomes = []
    for i in range(1, 9):
        node = f"sim{i:02d}"
        if i in (3, 4):
            outcomes.append(CheckOutcome(node, "IB-02", "fail", "IB-02 mlx5_2 200 Gb/sec (expected >= 400 Gb/s)"))
        elif i == 6:
            outcomes.append(CheckOutcome(node, "IB-02", "incomplete", "IB-02 could not be measured: <ssh> refused"))
        else:
            outcomes.append(CheckOutcome(node, "IB-02", "pass"))
    gate = gate_document(decide([f"sim{i:02d}" for i in range(1, 9)], outcomes), topology="hgx-h100-8gpu")
    (tmp_path / "gate.json").write_text(json.dumps(gate))
    verdicts = [{"node": o.node, "check": o.check, "status": o.status} for o in outcomes]
    (tmp_path / "verdicts.json").write_text(json.dumps(verdicts))


def test_identical_failures_are_grouped_and_folded(tmp_path: Path) -> None:
    _write_run(tmp_path)
    gate = json.loads((tmp_path / "gate.json").read_text())
    groups = group_failures(gate)
    assert [(g.nodes, g.count, g.failed, g.incomplete) for g in groups] == [
        ("sim[03-04]", 2, ("IB-02",), ()),
        ("sim06", 1, (), ("IB-02",)),
    ]
    rows = check_matrix(json.loads((tmp_path / "verdicts.json").read_text()))
    assert [(r.check, r.passed, r.failed, r.incomplete, r.failed_nodes) for r in rows] == [
        ("IB-02", 5, 2, 1, "sim[03-04]")]


def test_page_is_rendered_and_escaped(tmp_path: Path) -> None:
    _write_run(tmp_path)
    page = render(tmp_path).read_text()
    assert "5 admitted, 3 rejected of 8 nodes" in page
    assert "<code>sim[03-04]</code> (2)" in page
    assert "&lt;ssh&gt; refused" in page and "<ssh>" not in page
