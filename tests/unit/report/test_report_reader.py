"""What a reader of report.html trips on: every failed check shows the failing node against the others,
repeated "could not be measured" causes are one line, a lost GPU is not counted, and a check judged by
two suites says which suite each row came from."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from typing import Any

from burnin.gate.decide import CheckOutcome, decide, gate_document
from burnin.report.compare import PASS_ROWS, comparisons
from burnin.report.html import check_matrix, render
from burnin.report.node_facts import summarize
from burnin.report.reasons import condense, id_list

LOST = "NVML_ERROR_GPU_IS_LOST"


def _verdict(node: str, check: str, status: str, measured: str = "", *, suite: str = "node",
             reason: str = "", expected: str = "") -> dict[str, Any]:
    return {"node": node, "check": check, "status": status, "measured": measured, "suite": suite,
            "reason": reason or f"{check} {measured}", "expected": expected}


def test_a_failed_check_groups_its_nodes_by_what_they_measured_failing_first() -> None:
    verdicts = [_verdict(f"sim{i:02d}", "STO-04", "fail" if i == 7 else "pass",
                         "enp41s0f0np0 MTU 1500" if i == 7 else "MTU 9000 on 2 BlueField netdevs",
                         expected="MTU 9000 on every BlueField netdev") for i in range(1, 9)]
    verdicts.append(_verdict("sim01", "GPU-10", "pass", "18/18"))  # a check that failed nowhere has no table
    (cmp,) = comparisons(verdicts, {"STO-04": "BlueField netdev MTU"})
    assert (cmp.check, cmp.title, cmp.failed_nodes) == ("STO-04", "BlueField netdev MTU", "sim07")
    assert [(r.status, r.measured, r.nodes, r.count) for r in cmp.rows] == [
        ("fail", "enp41s0f0np0 MTU 1500", "sim07", 1),
        ("pass", "MTU 9000 on 2 BlueField netdevs", "sim[01-06,08]", 7)]
    assert cmp.expected == "MTU 9000 on every BlueField netdev", "said once when every row expects the same"
    assert {r.expected for r in cmp.rows} == {""}


def test_a_check_judged_by_two_suites_keeps_a_row_per_suite() -> None:
    verdicts = []
    for suite in ("node", "fabric"):
        verdicts += [_verdict(f"sim{i:02d}", "STO-02", "fail" if i == 6 else "pass",
                              "mlx5_8 selected" if i == 6 else "compute HCAs only", suite=suite) for i in range(1, 9)]
    (cmp,) = comparisons(verdicts, {})
    assert [(r.status, r.suite) for r in cmp.rows] == [("fail", "fabric"), ("fail", "node"),
                                                       ("pass", "fabric"), ("pass", "node")]
    rows = check_matrix(verdicts)
    assert [(r.check, r.passed, r.failed) for r in rows] == [("STO-02 (fabric)", 7, 1), ("STO-02 (node)", 7, 1)]


def test_passing_nodes_that_each_measured_something_else_are_counted_in_one_row() -> None:
    verdicts = [_verdict(f"sim{i:02d}", "MEG-04", "fail" if i == 2 else "pass",
                         "straggler 344 TFLOP/s" if i == 2 else f"{420 + i} TFLOP/s") for i in range(1, 65)]
    (cmp,) = comparisons(verdicts, {})
    assert cmp.rows[0].status == "fail" and cmp.rows[0].nodes == "sim02"
    passing = [r for r in cmp.rows if r.status == "pass"]
    assert len(passing) == 2, "one example, then one row for the rest"
    assert passing[-1].count == 62 and passing[-1].measured == "62 more nodes, each with another measurement"
    assert sum(r.count for r in passing) == 63


def test_passing_nodes_that_share_measurements_show_the_three_most_common() -> None:
    shared = {f"sim{i:02d}": f"{400 + i % 4} TFLOP/s" for i in range(1, 13)}  # 4 values, 3 nodes each
    shared.update({"sim13": "390 TFLOP/s", "sim14": "free text", "sim15": "403 TFLOP/s"})
    verdicts = [_verdict(n, "MEG-04", "pass", m) for n, m in shared.items()]
    verdicts.append(_verdict("sim16", "MEG-04", "fail", "straggler"))
    (cmp,) = comparisons(verdicts, {})
    passing = [(r.measured, r.count) for r in cmp.rows if r.status == "pass"]
    assert PASS_ROWS == 3
    assert passing == [("403 TFLOP/s", 4), ("400 TFLOP/s", 3), ("401 TFLOP/s", 3),
                       ("5 more nodes, each with another measurement", 5)]
    pairs = [_verdict(n, "MEG-04", "pass", m) for n, m in
             (("a1", "x"), ("a2", "x"), ("a3", "x"), ("b1", "y"), ("b2", "y"), ("c1", "z"))]
    (cmp,) = comparisons([*pairs, _verdict("f1", "MEG-04", "fail", "slow")], {})
    assert [(r.measured, r.nodes) for r in cmp.rows if r.status == "pass"] == [
        ("x", "a[1-3]"), ("y", "b[1-2]"), ("1 more node, each with another measurement", "c1")]


def test_failing_nodes_keep_a_row_each_up_to_twelve() -> None:
    def run(failing: int) -> list[tuple[str, int]]:
        verdicts = [_verdict(f"n{i:02d}", "IB-08", "fail" if i < failing else "pass",
                             f"mlx5_{i} {100 + i} Gb/s" if i < failing else "ok") for i in range(failing + 2)]
        (cmp,) = comparisons(verdicts, {})
        return [(r.status, r.count) for r in cmp.rows]

    assert run(12) == [("fail", 1)] * 12 + [("pass", 2)]
    assert run(13) == [("fail", 1)] * 13 + [("pass", 2)]
    (cmp,) = comparisons([_verdict(f"n{i:02d}", "X-1", "fail", f"{i:02d}") for i in range(13)], {})
    assert cmp.rows[-1].measured == "1 more node, each with another measurement" and cmp.rows[-1].nodes == "n12"


def test_an_incomplete_row_shows_why_it_was_not_measured() -> None:
    verdicts = [_verdict("sim01", "GPU-08", "fail", "gpu3 Gen5 x8"),
                _verdict("sim02", "GPU-08", "incomplete", "not measured",
                         reason=f"GPU-08 could not be measured: gpu3: {LOST}")]
    (cmp,) = comparisons(verdicts, {})
    assert [r.measured for r in cmp.rows] == ["gpu3 Gen5 x8", f"GPU-08 could not be measured: gpu3: {LOST}"]


def test_shared_causes_fold_into_one_line_where_the_first_stood() -> None:
    checks = ["GPU-01", "GPU-03", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10"]
    reasons = ["INV-01 gpu3 lost", *(f"{c} could not be measured: gpu3: {LOST}" for c in checks),
               "INV-11 could not be measured: GPU model: gpu3 lost"]
    assert condense(reasons) == [
        "INV-01 gpu3 lost",
        f"7 checks (GPU-01,GPU-03,GPU-05,GPU-06,GPU-07,GPU-08,... +1) could not be measured: gpu3: {LOST}",
        "INV-11 could not be measured: GPU model: gpu3 lost"]
    assert condense(["BRN-02 not judged: held", "BRN-03 not judged: held"]) == ["BRN-02,BRN-03 not judged: held"]
    # a line whose text before the marker is not one check id is a line of its own
    assert condense(["a b could not be measured: x", "c d could not be measured: x"]) == [
        "a b could not be measured: x", "c d could not be measured: x"]
    assert id_list(["A-1", "A-2"]) == "A-1,A-2"
    six = [f"A-{i}" for i in range(6)]
    assert id_list(six) == ",".join(six) and id_list([*six, "A-6"]).startswith("7 checks (A-0,")


def _lost_gpu_facts() -> dict[str, Any]:
    gpus: list[dict[str, Any]] = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "temperature_c": 35,
                                   "pcie": {"curr_gen": 5, "curr_width": 8 if i == 5 else 16}} for i in range(8)]
    gpus[3] = {"index": 3, "errors": {"handle": LOST}, "lost": True}
    return {"nvml": {"device_count": 8, "gpus": gpus}}


def test_a_node_with_a_lost_gpu_shows_the_gpus_it_can_use() -> None:
    facts = summarize("sim03", _lost_gpu_facts())
    assert facts.readings["gpu.count"] == 7
    summary = dict(facts.summary)
    assert summary["GPUs"] == "7 x NVIDIA H100 80GB HBM3"
    assert summary["lost GPUs"] == "gpu3"


def test_the_narrowest_gpu_pcie_link_is_a_reading_and_names_its_gpu() -> None:
    facts = summarize("sim05", _lost_gpu_facts())
    assert (facts.readings["gpu.pcie_width_min"], facts.readings["gpu.pcie_gen_min"]) == (8, 5)
    assert dict(facts.summary)["PCIe"] == "gpu5 Gen5 x8; Gen5 x16 on 6 GPUs"


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_page_folds_causes_and_shows_each_failed_check_and_each_rows_suite(tmp_path: Path) -> None:
    names = [f"sim{i:02d}" for i in range(1, 5)]
    outcomes = [CheckOutcome("sim02", "INV-01", "fail", "INV-01 gpu3 lost", "gpu3 lost", "8 GPUs")]
    outcomes += [CheckOutcome("sim02", c, "incomplete", f"{c} could not be measured: gpu3: {LOST}", "not measured")
                 for c in ("GPU-01", "GPU-06", "GPU-08")]
    outcomes += [CheckOutcome(n, "INV-01", "pass", "", "8 GPUs", "8 GPUs") for n in names if n != "sim02"]
    outcomes += [CheckOutcome(n, c, "pass", "", "ok", "ok") for n in names if n != "sim02"
                 for c in ("GPU-01", "GPU-06", "GPU-08")]
    verdicts = [{**dataclasses.asdict(o), "suite": "node"} for o in outcomes]
    verdicts += [_verdict(n, "STO-02", "fail" if n == "sim04" else "pass", "storage HCA opened" if n == "sim04"
                          else "compute HCAs only", suite=suite) for n in names for suite in ("node", "fabric")]
    outcomes += [CheckOutcome("sim04", "STO-02", "fail", "STO-02 storage HCA opened")]
    gate = gate_document(decide(names, outcomes), topology="hgx-h100-8gpu", created="2026-12-01T01:00:42Z")
    (tmp_path / "gate.json").write_text(json.dumps(gate))
    (tmp_path / "verdicts.json").write_text(json.dumps(verdicts))
    page = render(tmp_path).read_text()
    text = _text(page)
    folded = f"GPU-01,GPU-06,GPU-08 could not be measured: gpu3: {LOST}"
    assert text.count(folded) == 3, "the rejected group, the node table and the node's section: one line each"
    for section in ("rejected", "nodes"):
        start = page.index(f'<section id="{section}"')
        part = _text(page[start:page.index("</section>", start)])
        assert part.count(f"could not be measured: gpu3: {LOST}") == 1, section
    section = _text(page[page.index('id="failed-checks"'):page.index('id="checks"')])
    assert "INV-01 GPU count, model and memory failed on sim02" in section
    assert "expected: 8 GPUs verdict suite measured nodes fail node gpu3 lost sim02 pass node 8 GPUs " \
           "sim[01,03-04] (3)" in section
    assert "fail fabric storage HCA opened" in section and "fail node storage HCA opened" in section
    per_node = _text(page[page.index('id="node-sim04"'):])
    assert "fail STO-02 fabric storage HCA opened" in per_node and "fail STO-02 node storage HCA opened" in per_node
