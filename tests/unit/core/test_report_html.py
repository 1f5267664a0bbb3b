"""The HTML report: grouped failures, plots, tables, run metadata, per-node facts, escaping."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from burnin.cli.main import main
from burnin.gate.decide import CheckOutcome, decide, gate_document
from burnin.report import html
from burnin.report.html import ReportError, check_matrix, group_failures, node_order, render
from burnin.report.node_facts import number, read_node, summarize
from burnin.report.plots import Curve, curve_plot, nice_ticks, strip_plot
from burnin.report.runinfo import write_run_json
from burnin.report.series import MEASURES, Line, Point, build_series, outliers
from burnin.topology.load import find_topology

HOSTILE = "<script>window.__pwned=1</script>\x1b[31m"


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


def facts_document(node: str, *, links_active: int = 18, temperature: float = 35, busbw: float = 478.0,
                   gpu_name: str = "NVIDIA H100 80GB HBM3", ib_rate: int = 400) -> dict[str, Any]:
    """A node's facts as the collector writes them, cut to what the report reads."""
    gpus = [{"index": i, "name": gpu_name, "vbios": "96.00.74.00.01", "temperature_c": temperature - i % 2,
             "temperature_thresholds": {"gpu_max": 85, "slowdown": 87},
             "power": {"enforced_limit_mw": 700000}, "ecc_errors": {"volatile_uncorrected": 0},
             "nvlink": [{"link": k, "active": k < (links_active if i == 3 else 18), "replay": 0, "crc_flit": 0}
                        for k in range(18)]} for i in range(8)]
    port = {"state": "4: ACTIVE", "rate": f"{ib_rate} Gb/sec (4X NDR)", "link_layer": "InfiniBand",
            "counters": {"symbol_error": 0}}
    return {
        "hostname": node, "collected_at": "2026-12-01T01:00:00Z",
        "sources": {"nvml": {"ok": True}, "dmesg": {"ok": False, "error": "dmesg: read kernel buffer failed"}},
        "nvml": {"driver_version": "535.183.01", "cuda_driver_version": 12020, "device_count": 8, "gpus": gpus},
        "infiniband": {"hcas": {f"mlx5_{h}": {"hca_type": "MT4129", "fw_ver": "28.39.2048", "ports": {"1": port}}
                                for h in range(8)}},
        "kernel": {"numa_balancing": 0, "cmdline": "BOOT_IMAGE=/boot/vmlinuz-5.15.0-112-generic iommu=pt"},
        "fabric": {"settings": {"nvls": True}, "fleet": {"single.all_reduce": {"median": 478.5, "count": 8}},
                   "single": {"all_reduce": {"busbw_gbps": busbw, "status": "ok"}}},
    }


def _write_fleet(tmp_path: Path, count: int = 8, hostile_node: str = "") -> Path:
    """A run of ``count`` nodes with facts: sim03 has a link down (GPU-10 fail), sim06 is slow (NCCL-01)."""
    names = [f"sim{i:02d}" for i in range(1, count + 1)]
    (tmp_path / "facts").mkdir()
    outcomes = []
    for name in names:
        kwargs: dict[str, Any] = {"temperature": 30 + int(name[3:]) % 5}
        if name == "sim03":
            kwargs["links_active"] = 17
        if name == "sim06":
            kwargs["busbw"] = 300.0
        if name == hostile_node:
            kwargs["gpu_name"] = HOSTILE
        (tmp_path / "facts" / f"{name}.json").write_text(json.dumps(facts_document(name, **kwargs)))
        links = "fail" if name == "sim03" else "pass"
        outcomes.append(CheckOutcome(name, "GPU-10", links, "GPU-10 gpu3 17/18 NVLink links active (expected 18)"
                                     if links == "fail" else "", "17/18" if links == "fail" else "18/18", "18"))
        nccl = "fail" if name == "sim06" else "pass"
        reason = f"NCCL-01 all_reduce 300 GB/s (expected >= 440 GB/s) {HOSTILE}" if name == hostile_node else \
            "NCCL-01 all_reduce 300 GB/s (expected >= 440 GB/s)"
        outcomes.append(CheckOutcome(name, "NCCL-01", nccl, reason if nccl == "fail" else "", "", ">= 440 GB/s"))
    gate = gate_document(decide(names, outcomes), topology="hgx-h100-8gpu", created="2026-12-01T01:00:42Z")
    (tmp_path / "gate.json").write_text(json.dumps(gate))
    verdicts = [{"node": o.node, "check": o.check, "status": o.status, "reason": o.reason,
                 "measured": o.measured, "expected": o.expected} for o in outcomes]
    (tmp_path / "verdicts.json").write_text(json.dumps(verdicts))
    return tmp_path


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


def test_check_matrix_counts_not_applicable_and_carries_titles() -> None:
    verdicts = [{"node": "a1", "check": "SF-01", "status": "not-applicable"},
                {"node": "a2", "check": "SF-01", "status": "pass"}]
    (row,) = check_matrix(verdicts, {"SF-01": "storage isolation"})
    assert (row.passed, row.not_applicable, row.title) == (1, 1, "storage isolation")


def test_plots_mark_the_failing_node_and_draw_the_topology_bound(tmp_path: Path) -> None:
    page = render(_write_fleet(tmp_path)).read_text()
    card = page[page.index('id="plot-gpu.nvlink_active_min"'):]
    card = card[:card.index("</figure>")]
    assert "<svg" in card and "NVLink links active" in card
    assert re.search(r'class="point-label">sim03</text>', card), "the failing node is named on the plot"
    assert 'class="ref bound"' in card and "= 18" in card, "the topology's 18 links are drawn"
    assert "failed: sim03" in card
    busbw = page[page.index('id="plot-nccl.single.all_reduce.nvls"'):]
    busbw = busbw[:busbw.index("</figure>")]
    assert "&gt;= 440" in busbw and "median -10%" in busbw, "absolute bound and straggler line"
    assert "median 478.5" in busbw, "the median the check judged against (fabric.fleet), not the plotted one"
    assert 'class="point-label">sim06</text>' in busbw
    # the plots that need attention come first
    order = [m.group(1) for m in re.finditer(r'<figure class="plot-card[^"]*" id="([^"]+)"', page)]
    assert set(order[:2]) == {"plot-gpu.nvlink_active_min", "plot-nccl.single.all_reduce.nvls"}


def test_tables_are_sortable_and_filterable_and_titles_come_from_the_registry(tmp_path: Path) -> None:
    page = render(_write_fleet(tmp_path)).read_text()
    assert '<table id="node-table" class="sortable">' in page and '<table id="check-table" class="sortable">' in page
    assert 'data-filter="node-table"' in page and 'data-filter="check-table"' in page
    assert "NVLink links active on every GPU" in page, "GPU-10's title from burnin.checks"
    assert page.count('<tr data-state="rejected">') == 2


def test_per_node_section_shows_facts_and_reasons(tmp_path: Path) -> None:
    page = render(_write_fleet(tmp_path)).read_text()
    section = page[page.index('<details class="node" id="node-sim03" open>'):]
    section = section[:section.index("</details>")]
    assert "8 x NVIDIA H100 80GB HBM3" in section and "535.183.01, CUDA 12.2" in section
    assert "gpu3 17/18" in section and "GPU-10 gpu3 17/18 NVLink links active (expected 18)" in section
    assert "dmesg: dmesg: read kernel buffer failed" in section, "a source the collector could not read"
    assert '<details class="node" id="node-sim01">' in page, "admitted nodes start closed"


def test_node_text_is_escaped_everywhere_and_only_the_pages_own_script_may_run(tmp_path: Path) -> None:
    page = render(_write_fleet(tmp_path, hostile_node="sim06")).read_text()
    assert "window.__pwned" in page
    assert "<script>window" not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;\\x1b[31m" in page
    assert "\x1b" not in page
    assert page.count("<script") == 1
    script = page[page.index("<script>") + len("<script>"):page.index("</script>")]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert f"script-src &#39;sha256-{digest}&#39;" in policy.group(1)
    assert "default-src &#39;none&#39;" in policy.group(1)


def test_run_metadata_from_run_json_and_links_to_files_present(tmp_path: Path) -> None:
    _write_fleet(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({
        "argv": ["burnin", "run", "--sim", "8", "--fault", "sim03:nvlink-down"], "suites": ["node", "fabric"],
        "started": "2026-12-01T01:00:00Z", "duration_s": 42.5, "version": "0.1.0"}))
    (tmp_path / "junit.xml").write_text("<testsuites/>")
    page = render(tmp_path).read_text()
    text = re.sub(r"<[^>]+>", "", page)
    assert "burnin run --sim 8 --fault sim03:nvlink-down" in text
    assert "node, fabric" in page and "42.5 s" in page
    assert '<a href="gate.json">' in page and '<a href="junit.xml">' in page
    assert '<a href="fabric.json">' not in page, "no link to a file the run did not write"


def test_the_run_command_writes_run_json_with_what_the_report_shows(tmp_path: Path) -> None:
    _write_fleet(tmp_path)
    write_run_json(tmp_path, argv=["burnin", "run", "--sim", "8", "--suite", "node"], suites=["node"],
                   started=1_764_550_800.0, duration_s=3725.0)
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["started"] == "2025-12-01T01:00:00Z" and meta["duration_s"] == 3725.0
    page = render(tmp_path).read_text()
    assert "<span>burnin</span> <span>run</span> <span>--sim</span> <span>8</span>" in page and "1 h 02 min" in page
    assert "run.json not written" not in page


def test_without_run_json_the_duration_is_estimated_and_said_so(tmp_path: Path) -> None:
    page = render(_write_fleet(tmp_path)).read_text()
    assert "about 42.0 s (first facts to gate)" in page
    assert "run.json not written" in page


def test_partial_run_is_announced(tmp_path: Path) -> None:
    _write_fleet(tmp_path)
    gate = json.loads((tmp_path / "gate.json").read_text())
    gate.update(partial=True, partial_reasons=["-k 'nvlink' selected 8 of 16 tests"])
    (tmp_path / "gate.json").write_text(json.dumps(gate))
    page = render(tmp_path).read_text()
    assert "Partial run: it did not judge every check and admits nobody (-k &#39;nvlink&#39; selected" in page


def test_large_runs_list_only_what_did_not_pass_per_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html, "ALL_CHECKS_LIMIT", 4)
    page = render(_write_fleet(tmp_path)).read_text()
    section = page[page.index('id="node-sim01"'):]
    section = section[:section.index("</details>")]
    assert "2 other checks passed." in section and "<table class=\"verdicts\">" not in section


def test_missing_or_broken_facts_do_not_stop_the_report(tmp_path: Path) -> None:
    _write_fleet(tmp_path)
    (tmp_path / "facts" / "sim02.json").unlink()
    (tmp_path / "facts" / "sim04.json").write_text("{not json")
    page = render(tmp_path).read_text()
    assert "no facts file" in page and "facts unreadable: JSONDecodeError" in page
    assert "no value from 2: sim[02,04]" in page


def test_a_folder_without_gate_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ReportError, match=r"holds no gate\.json"):
        render(tmp_path)
    assert main(["report", str(tmp_path)]) == 2
    assert main(["report", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("burnin report: ") for line in err)


def test_report_command_renders_the_run_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_fleet(tmp_path)
    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    assert capsys.readouterr().out.strip() == f"report: {tmp_path / 'report.html'}"


def test_facts_values_that_are_no_numbers_are_no_readings() -> None:
    assert [number(v) for v in (1, 2.5, True, float("nan"), float("inf"), "3", None, 10**400)] == \
        [1.0, 2.5, None, None, None, None, None, None]
    document = facts_document("n1")
    document["nvml"]["gpus"][0]["temperature_c"] = float("nan")
    document["nvml"]["gpus"][1]["temperature_c"] = "hot"
    document["nvml"]["gpus"][2]["nvlink"][0]["replay"] = float("nan")
    document["nvml"]["gpus"][2]["nvlink"][1]["replay"] = 7
    summary = summarize("n1", document)
    assert summary.readings["gpu.temperature_max"] == 35
    assert summary.readings["gpu.nvlink_errors_max"] == 7
    assert summarize("n1", {"nvml": "not a dict", "infiniband": [], "fabric": None}).readings == {}


def test_read_node_reports_a_file_that_is_no_object(tmp_path: Path) -> None:
    (tmp_path / "n1.json").write_text("[1, 2]")
    assert read_node("n1", tmp_path / "n1.json").problem == "facts unreadable: a JSON list, not an object"


def test_outliers_stand_out_from_a_tight_fleet_only() -> None:
    assert outliers([18, 18, 18, 17, 18]) == [False, False, False, True, False]
    assert not any(outliers([478, 483, 474, 480, 476, 479]))
    assert outliers([478, 483, 474, 346, 476, 479]) == [False, False, False, True, False, False]


def test_series_bounds_come_from_the_topology() -> None:
    facts = {n: summarize(n, facts_document(n, links_active=17 if n == "b" else 18)) for n in "abc"}
    status = {("b", "GPU-10"): "fail"}
    series = {s.measure.reading: s for s in build_series(list("abc"), facts, status, find_topology("hgx-h100-8gpu"))}
    links = series["gpu.nvlink_active_min"]
    assert [(p.label, p.value, p.status) for p in links.points] == [("a", 18, ""), ("b", 17, "fail"), ("c", 18, "")]
    assert [(line.kind, line.value) for line in links.lines] == [("bound", 18), ("median", 18)]
    temperature = series["gpu.temperature_max"]
    assert ("bound", 80) in [(line.kind, line.value) for line in temperature.lines], "GPU max 85 C - 5 C margin"
    assert {m.check for m in MEASURES} >= {"GPU-06", "GPU-10", "IB-02", "NCCL-01", "NVL-01"}


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(17, 18, integral=True) == [17, 18]
    assert nice_ticks(342.5, 489.1) == [350, 400, 450]


def test_svg_text_is_escaped_and_large_fleets_stay_compact() -> None:
    points = [Point(HOSTILE if i == 3 else f"gpu{i:04d}", 400.0 - (100 if i == 3 else 0), "fail" if i == 3 else "pass")
              for i in range(1024)]
    svg = str(strip_plot("busbw", points, [Line(">= 440", 440, "bound")], "GB/s"))
    assert "<script>" not in svg and "&lt;script&gt;window.__pwned=1&lt;/script&gt;\\x1b[31m" in svg
    assert svg.count("<circle") == 1, "passing points of a large fleet are one path, marked ones circles"
    assert len(svg) < 40_000


def test_curves_fold_into_a_band_beyond_a_few_dozen_nodes() -> None:
    sizes = [2.0 ** k for k in range(3, 34)]
    curves = [Curve(f"n{i}", "fail" if i == 5 else "pass", tuple((s, min(480.0, s / 2**24)) for s in sizes), i == 5)
              for i in range(100)]
    svg = str(curve_plot("busbw vs size", curves, "GB/s", x_unit="message size", log2_x=True))
    assert svg.count("<polyline") == 2 and svg.count("<polygon") == 1, "median, band and the marked node"
    assert ">n5</text>" in svg and "8 GiB" in svg


def test_busbw_curves_and_soak_series_are_drawn_when_the_run_kept_them(tmp_path: Path) -> None:
    _write_fleet(tmp_path)
    for name in ("sim01", "sim06"):
        path = tmp_path / "facts" / f"{name}.json"
        document = json.loads(path.read_text())
        document["fabric"]["single"]["all_reduce"]["curve"] = [[2**k, min(480, 2**k / 2**24)] for k in range(3, 34)]
        path.write_text(json.dumps(document))
    (tmp_path / "soak.json").write_text(json.dumps({"series": [
        {"check": "GPU-06", "label": "hottest GPU", "unit": "C", "upper": 80,
         "nodes": {"sim01": [[0, 35], [3600, 36]], "sim03": [[0, 35], [3600, 71]]}}]}))
    page = render(tmp_path).read_text()
    assert 'id="curve-nccl.single.all_reduce.nvls"' in page and "against message size" in page
    assert 'id="soak-0"' in page and "hottest GPU (C) over time" in page


def test_node_order_is_natural() -> None:
    assert sorted(["n10", "n9", "m1", "n1"], key=node_order) == ["m1", "n1", "n9", "n10"]
