"""Prometheus textfile: parsed by prometheus_client's own parser, named by convention,
and every query of the shipped Grafana dashboard names a metric that a real run writes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from burnin.report.metrics import CHECK_STATES, METRICS, exposition, write_textfile

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "burnin-fleet.json"
BASE_UNITS = ("_seconds", "_celsius", "_watts", "_bytes_per_second", "_bytes", "_ratio")


@pytest.fixture(scope="module")
def faulted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("metrics-run")
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--suite", "node", "--suite", "fabric",
         "--fault", "sim02:ib-port-down", "--fault", "sim03:thermal", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    outcomes = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    facts = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "facts").glob("*.json")
             if not p.name.startswith("_")}
    text = exposition(gate, outcomes, facts, timestamp=time.time(), duration_s=2.5)
    return {"out": out, "gate": gate, "outcomes": outcomes, "text": text}


def _families(text: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return {family.name: family for family in text_string_to_metric_families(text)}


def test_textfile_parses_with_prometheus_client(faulted_run: dict[str, Any]) -> None:
    families = _families(faulted_run["text"])
    assert "burnin_node_admitted" in families
    admitted = {s.labels["node"]: s.value for s in families["burnin_node_admitted"].samples}
    assert admitted == {"sim01": 1.0, "sim02": 0.0, "sim03": 0.0}


def test_check_state_is_one_sample_per_check_naming_its_verdict(faulted_run: dict[str, Any]) -> None:
    samples = _families(faulted_run["text"])["burnin_check_state"].samples
    current = {(s.labels["node"], s.labels["check"]): s.labels["state"] for s in samples if s.value == 1}
    expected = {(o["node"], o["check"]): o["status"] for o in faulted_run["outcomes"]}
    assert current == expected
    assert current[("sim02", "IB-01")] == "fail"
    assert len(samples) == len(expected)  # one sample per check and node, no zeros for the other states
    assert {s.labels["state"] for s in samples} <= set(CHECK_STATES)


def test_measurements_carry_the_node_values(faulted_run: dict[str, Any]) -> None:
    families = _families(faulted_run["text"])
    temps = {(s.labels["node"], s.labels["gpu"]): s.value for s in families["burnin_gpu_temperature_celsius"].samples}
    assert len(temps) == 3 * 8
    assert max(v for (n, _), v in temps.items() if n == "sim03") > max(v for (n, _), v in temps.items() if n == "sim01")
    ports = {(s.labels["node"], s.labels["hca"]): s.value for s in families["burnin_ib_port_active"].samples}
    assert [k for k, v in ports.items() if v == 0] == [("sim02", "mlx5_2")]
    busbw = [s for s in families["burnin_nccl_busbw_bytes_per_second"].samples
             if s.labels["collective"] == "all_reduce"]
    assert {s.labels["node"] for s in busbw} == {"sim01", "sim02", "sim03"}
    assert all(300e9 < s.value < 600e9 for s in busbw)


def test_names_follow_prometheus_conventions() -> None:
    for name, (kind, help_text) in METRICS.items():
        assert re.fullmatch(r"burnin_[a-z][a-z0-9_]*", name), name
        assert kind == "gauge" and not name.endswith("_total"), name
        assert help_text.endswith("."), name
        assert not re.search(r"_(gbps|mw|mib|ms|percent)\b", name), f"{name}: use base units"
    unit_like = [n for n in METRICS if any(n.endswith(u) for u in BASE_UNITS)]
    assert "burnin_gpu_temperature_celsius" in unit_like


def test_label_names_are_snake_case(faulted_run: dict[str, Any]) -> None:
    for family in _families(faulted_run["text"]).values():
        for sample in family.samples:
            for label in sample.labels:
                assert re.fullmatch(r"[a-z][a-z0-9_]*", label), (family.name, label)


def test_non_finite_and_text_values_are_not_exported() -> None:
    facts = {"n1": {"nvml": {"gpus": [{"index": 0, "temperature_c": float("nan"),
                                       "power": {"enforced_limit_mw": "700000"}}]}}}
    text = exposition({"nodes": {}}, [], facts)
    assert "nan" not in text.lower()
    assert "burnin_gpu_power_limit_watts" not in text


def test_label_values_are_escaped() -> None:
    gate = {"nodes": {'we"ird\\node\n': {"admitted": False}}}
    families = _families(exposition(gate, [], {}))
    (sample,) = families["burnin_node_admitted"].samples
    assert sample.labels["node"] == 'we"ird\\node\n'


@pytest.fixture(scope="module")
def megatron_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("metrics-megatron")
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "3", "--suite", "megatron",
         "--fault", "sim03:train-slow", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gate = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    outcomes = json.loads((out / "verdicts.json").read_text(encoding="utf-8"))
    facts = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "facts").glob("*.json")
             if not p.name.startswith("_")}
    return {"text": exposition(gate, outcomes, facts, timestamp=time.time(), duration_s=2.5), "facts": facts}


def test_megatron_runs_give_tflops_and_mfu_per_node(megatron_run: dict[str, Any]) -> None:
    families = _families(megatron_run["text"])
    tflops = {(s.labels["node"], s.labels["run"]): s.value
              for s in families["burnin_megatron_tflops_per_gpu"].samples}
    mfu = {(s.labels["node"], s.labels["run"]): s.value for s in families["burnin_megatron_mfu_ratio"].samples}
    # the slow sim03 fails alone and stays out of the multi-node run of the two that passed
    assert set(tflops) == set(mfu) == {(n, "single") for n in ("sim01", "sim02", "sim03")} | {
        (n, "multi") for n in ("sim01", "sim02")}
    assert tflops[("sim01", "multi")] == tflops[("sim02", "multi")]  # one multi-node run, seen from each node
    peak = megatron_run["facts"]["sim01"]["megatron"]["settings"]["peak_tflops_per_gpu"]
    assert peak == 989
    for key, value in tflops.items():
        assert abs(mfu[key] - value / peak) < 1e-9
    assert tflops[("sim03", "single")] < 0.9 * tflops[("sim01", "single")]  # the slow node shows on the panel


def test_dashboard_queries_name_written_metrics(faulted_run: dict[str, Any], megatron_run: dict[str, Any]) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    written = set(_families(faulted_run["text"])) | set(_families(megatron_run["text"]))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    for expr in exprs:
        names = set(re.findall(r"\bburnin_[a-z0-9_]+", expr))
        assert names, expr
        assert names <= written, f"{expr}: {names - written} not written by a run"
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in ("matrix", "rejected", "bandwidth", "mfu"):
        assert topic in titles


def test_textfile_is_written_atomically(tmp_path: Path) -> None:
    target = tmp_path / "textfile" / "burnin.prom"
    write_textfile(target, "burnin_run_partial 0\n")
    write_textfile(target, "burnin_run_partial 1\n")
    assert target.read_text(encoding="utf-8") == "burnin_run_partial 1\n"
    assert [p.name for p in target.parent.iterdir()] == ["burnin.prom"]


def test_a_check_in_two_suites_is_one_sample_with_the_worse_state() -> None:
    gate = {"nodes": {"n1": {"admitted": False}}}
    outcomes = [{"node": "n1", "check": "STO-02", "status": "pass"},
                {"node": "n1", "check": "STO-02", "status": "fail"},
                {"node": "n1", "check": "STO-04", "status": "incomplete"},
                {"node": "n1", "check": "STO-04", "status": "pass"}]
    samples = _families(exposition(gate, outcomes, {}, timestamp=0.0, duration_s=1.0))["burnin_check_state"].samples
    current = {s.labels["check"]: s.labels["state"] for s in samples if s.value == 1}
    assert current == {"STO-02": "fail", "STO-04": "incomplete"}
    assert len(samples) == 2 and {s.value for s in samples} == {1.0}
