"""A real run's metrics.prom passes `promtool check metrics`, writes every series the dashboard needs
(the run's duration among them), keeps the InfiniBand error counters bounded, and the Grafana
dashboard's per-node panel is per node and counts not applicable as neither failed nor incomplete."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.report.metrics import IB_ERROR_COUNTERS, METRICS

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "burnin-fleet.json"
# Units promtool's lint refuses in a name (it wants the base unit) and their base units.
NOT_BASE_UNITS = {"bits": "bytes", "milliseconds": "seconds", "ms": "seconds", "microseconds": "seconds",
                  "minutes": "seconds", "hours": "seconds", "kilobytes": "bytes", "megabytes": "bytes",
                  "gigabytes": "bytes", "mib": "bytes", "gib": "bytes", "gbps": "bytes_per_second",
                  "percent": "ratio", "milliwatts": "watts", "mw": "watts", "fahrenheit": "celsius"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("metrics-lint") / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--fault", "sim02:ib-errors",
         "--out", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return out


def _families(text: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return {family.name: family for family in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool not found: CI installs Debian's prometheus package (.ci/run)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return found


def test_promtool_passes_a_real_runs_textfile(promtool: str, run_dir: Path) -> None:
    text = (run_dir / "metrics.prom").read_text(encoding="utf-8")
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_promtool_is_heard_when_a_name_breaks_its_rules(promtool: str) -> None:
    """The check above can fail: promtool refuses what burnin wrote before (a rate in bits)."""
    bad = ("# HELP burnin_ib_port_rate_bits_per_second Rate.\n# TYPE burnin_ib_port_rate_bits_per_second gauge\n"
           'burnin_ib_port_rate_bits_per_second{node="n1"} 4e+11\n')
    proc = subprocess.run([promtool, "check", "metrics"], input=bad, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode != 0 and 'base unit "bytes"' in proc.stdout + proc.stderr


def test_every_declared_metric_names_its_base_unit() -> None:
    for name in METRICS:
        words = name.split("_")
        for word, base in NOT_BASE_UNITS.items():
            assert word not in words, f"{name}: use {base}, not {word}"
        assert not name.endswith(("_total", "_count", "_sum", "_bucket")), f"{name}: a gauge, no counter suffix"


def test_the_run_writes_its_duration(run_dir: Path) -> None:
    families = _families((run_dir / "metrics.prom").read_text(encoding="utf-8"))
    (sample,) = families["burnin_run_duration_seconds"].samples
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert 0 < sample.value <= run["duration_s"] + 1


def test_every_declared_metric_is_written_by_a_run_or_the_probe(run_dir: Path) -> None:
    written = set(_families((run_dir / "metrics.prom").read_text(encoding="utf-8")))
    by_other_suites = {"burnin_nccl_busbw_bytes_per_second", "burnin_nvbandwidth_min_bytes_per_second",
                       "burnin_megatron_tflops_per_gpu", "burnin_megatron_mfu_ratio"}  # fabric, megatron: test_metrics
    assert set(METRICS) - by_other_suites <= written


def test_the_ib_error_counters_are_those_ib04_judges_on_compute_ports(run_dir: Path) -> None:
    families = _families((run_dir / "metrics.prom").read_text(encoding="utf-8"))
    samples = families["burnin_ib_port_errors"].samples
    facts = json.loads((run_dir / "facts" / "sim01.json").read_text(encoding="utf-8"))
    hcas = facts["infiniband"]["hcas"]
    compute = {name for name, hca in hcas.items() if hca["ports"]["1"].get("link_layer") == "InfiniBand"}
    assert len(compute) == 8 and len(hcas) > len(compute), "the simulated node has storage (Ethernet) ports too"
    exposed = max(len(hca["ports"]["1"]["counters"]) for hca in hcas.values())
    assert exposed > len(IB_ERROR_COUNTERS), "the driver exposes more counters than are exported"
    per_node = [s for s in samples if s.labels["node"] == "sim01"]
    assert {s.labels["hca"] for s in per_node} == compute
    assert {s.labels["counter"] for s in per_node} == set(IB_ERROR_COUNTERS)
    assert len(samples) == 3 * len(compute) * len(IB_ERROR_COUNTERS)
    faulted = {s.labels["counter"] for s in samples if s.labels["node"] == "sim02" and s.value > 0}
    assert faulted, "the faulted port's errors are still exported"


def _selectors(expr: str, metric: str) -> list[str]:
    return re.findall(rf"{metric}(?:\{{([^}}]*)\}})?", expr)


def test_the_dashboards_per_node_panels_are_per_node_and_not_applicable_is_no_failure() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            if "per node" in panel["title"].lower():
                for labels in re.findall(r"\bby\s*\(([^)]*)\)", expr):
                    assert "node" in [w.strip() for w in labels.split(",")], f"{expr} sums the nodes together"
                assert "without" not in expr, expr
                assert "{{node}}" in target.get("legendFormat", ""), f"{panel['title']}: each line names its node"
            for metric in ("burnin_node_checks", "burnin_check_state"):
                for selector in _selectors(expr, metric):
                    if "state" in selector:
                        assert re.search(r'state\s*=~?\s*"(fail|incomplete|fail\|incomplete)"', selector), (
                            f"{panel['title']}: {expr} selects states by exclusion (not-applicable would count)")
