"""Prometheus exposition of a run's (or a probe's) verdicts and key measurements.

The text is meant for node_exporter's textfile collector (``*.prom`` in its
directory, written atomically) or a Pushgateway. Pure: documents in, text out;
:func:`write_textfile` is the only function that touches the disk.

Metric and label names follow Prometheus conventions (``promtool check
metrics`` passes them): ``burnin_`` prefix, base units in the name
(``_celsius``, ``_watts``, ``_bytes_per_second``; bytes, never bits),
snake_case labels, gauges for since-boot counters read once.

The InfiniBand error counters are bounded: per compute (InfiniBand) port,
only the counters IB-04 judges (:data:`IB_ERROR_COUNTERS`), whatever else the
driver exposes. Every counter of every port was 42% of a run's series; the
rest stay in the node's facts.

A check's verdict is one sample per node and check, ``state`` naming the
verdict, value 1. The OpenMetrics state set would add a 0 sample for each
state the check is not in: four series per check where one says the same,
which at 1,024 nodes x 60 checks was 13 of 37 MB. A verdict
that changes ends its old series (Prometheus marks it stale at the next
scrape), so ``burnin_check_state{state="fail"}`` lists exactly the failing
checks now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnin.atomic import write_text_atomic
from burnin.checks.infiniband import ERROR_COUNTERS, FATAL_COUNTERS
from burnin.facts import Facts
from burnin.facts.gpu import (
    ECC_AGGREGATE_UNCORRECTED,
    ECC_VOLATILE_UNCORRECTED,
    NVLINK_COUNTERS,
    PCIE_GEN,
    PCIE_WIDTH_NOW,
    POWER_LIMIT,
    REMAPPED_CORRECTABLE,
    REMAPPED_UNCORRECTABLE,
    TEMPERATURE,
)
from burnin.facts.values import items, mapping, number

CHECK_STATES = ("pass", "fail", "incomplete", "not-applicable")
_SEVERITY = {"pass": 0, "not-applicable": 1, "incomplete": 2, "fail": 3}

# name -> (type, help). Every metric burnin writes is declared here; the
# Grafana dashboard test checks its queries against this table.
METRICS: dict[str, tuple[str, str]] = {
    "burnin_run_timestamp_seconds": ("gauge", "When the run (or probe) judged its nodes, Unix time."),
    "burnin_run_duration_seconds": ("gauge", "Wall time of the run."),
    "burnin_run_partial": ("gauge", "1 when the run did not judge every check of its suites (admits nobody)."),
    "burnin_run_nodes": ("gauge", "Nodes judged by the run, by gate decision."),
    "burnin_node_admitted": ("gauge", "1 when the node was admitted into the pool, 0 when held back."),
    "burnin_node_checks": ("gauge", "Checks of the node by verdict."),
    "burnin_check_state": ("gauge", "Verdict of one check on one node: the state label names it (value 1)."),
    "burnin_gpu_temperature_celsius": ("gauge", "GPU temperature read by NVML."),
    "burnin_gpu_power_limit_watts": ("gauge", "Enforced GPU power limit."),
    "burnin_gpu_ecc_uncorrected_errors": ("gauge", "Uncorrected ECC errors, volatile or aggregate."),
    "burnin_gpu_remapped_rows": ("gauge", "HBM rows remapped, by cause."),
    "burnin_gpu_pcie_link_width": ("gauge", "Current PCIe link width of the GPU (lanes)."),
    "burnin_gpu_pcie_link_generation": ("gauge", "Current PCIe link generation of the GPU."),
    "burnin_gpu_nvlink_links_active": ("gauge", "NVLink links up on the GPU."),
    "burnin_gpu_nvlink_errors": ("gauge", "NVLink error counters summed over the GPU's links, by counter."),
    "burnin_ib_port_rate_bytes_per_second": ("gauge", "InfiniBand port rate as ibstat reports it (400 Gb/s is "
                                             "50e9 bytes per second)."),
    "burnin_ib_port_active": ("gauge", "1 when the InfiniBand port state is ACTIVE."),
    "burnin_ib_port_errors": ("gauge", "InfiniBand port error counters since boot (or the probe's baseline) that "
                              "IB-04 judges, by counter."),
    "burnin_nccl_busbw_bytes_per_second": ("gauge", "Peak nccl-tests bus bandwidth of the node's single-node run."),
    "burnin_nvbandwidth_min_bytes_per_second": ("gauge", "Lowest nvbandwidth value of a test case on the node."),
    "burnin_megatron_tflops_per_gpu": ("gauge", "Megatron run's median TFLOP/s per GPU after warm-up, computed by "
                                       "burnin from the model's FLOPs and the iteration time (run: single|multi)."),
    "burnin_megatron_mfu_ratio": ("gauge", "Model FLOPs utilisation of the Megatron run: TFLOP/s per GPU over the "
                                  "GPU's dense BF16 peak (run: single|multi)."),
}

IB_ERROR_COUNTERS = (*FATAL_COUNTERS, *ERROR_COUNTERS)
"""The port counters exported: those IB-04 judges (7 per port, where the driver has about 20)."""
# Lone surrogates: the bytes of a name that was not UTF-8 (os.listdir's surrogateescape), never writable as UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")
GB = 1e9
BITS_PER_BYTE = 8


@dataclass
class Exposition:
    """Samples grouped by metric, rendered in declaration order."""

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)

    def add(self, name: str, value: float | int | bool | None, **labels: object) -> None:
        if name not in METRICS:
            raise KeyError(f"metric {name} is not declared")
        sample = float(value) if isinstance(value, bool) else number(value)
        if sample is None:
            return  # a value that cannot be true is not exported (the check says incomplete)
        self.samples.setdefault(name, []).append(({k: label_text(v) for k, v in labels.items()}, sample))

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text) in METRICS.items():
            rows = self.samples.get(name)
            if not rows:
                continue
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in rows:
                lines.append(f"{name}{_labels(labels)} {_number(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def _surrogate_text(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code - 0xDC00:02x}" if code >= 0xDC80 else f"\\u{code:04x}"


def label_text(value: object) -> str:
    """A label value as UTF-8 can carry it: a byte that was not UTF-8 (``mlx5_\\xff0``) is written ``\\xff``."""
    return _SURROGATE.sub(_surrogate_text, str(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def verdict_metrics(exp: Exposition, gate: Mapping[str, Any], outcomes: Iterable[Mapping[str, Any]]) -> None:
    """Run-level, node-level and per-check series from gate.json and verdicts.json."""
    nodes: Mapping[str, Any] = gate.get("nodes", {})
    partial = bool(gate.get("partial"))
    exp.add("burnin_run_partial", partial)
    admitted = sum(1 for d in nodes.values() if d.get("admitted"))
    exp.add("burnin_run_nodes", admitted, decision="admitted")
    exp.add("burnin_run_nodes", len(nodes) - admitted, decision="rejected")
    for node, decision in nodes.items():
        exp.add("burnin_node_admitted", bool(decision.get("admitted")), node=node)
    counts: dict[str, dict[str, int]] = {node: dict.fromkeys(CHECK_STATES, 0) for node in nodes}
    # A check judged in two suites of one run (STO-02 in node and fabric) is one sample: the worse state.
    states: dict[tuple[str, str], str] = {}
    for outcome in outcomes:
        key, state = (str(outcome["node"]), str(outcome["check"])), str(outcome["status"])
        if key not in states or _SEVERITY.get(state, 0) > _SEVERITY.get(states[key], 0):
            states[key] = state
    for (node, check), state in states.items():
        counts.setdefault(node, dict.fromkeys(CHECK_STATES, 0))
        counts[node][state] = counts[node].get(state, 0) + 1
        exp.add("burnin_check_state", 1, node=node, check=check, state=state)
    for node, by_state in counts.items():
        for state, count in by_state.items():
            exp.add("burnin_node_checks", count, node=node, state=state)


def gpu_metrics(exp: Exposition, node: str, facts: Facts) -> None:
    for gpu in facts.gpus_reported():
        if gpu.lost:
            continue
        index = str(gpu.get("index"))
        exp.add("burnin_gpu_temperature_celsius", gpu.read(TEMPERATURE), node=node, gpu=index)
        limit_mw = gpu.read(POWER_LIMIT)
        exp.add("burnin_gpu_power_limit_watts", None if limit_mw is None else limit_mw / 1000, node=node, gpu=index)
        for scope, ecc in (("volatile", ECC_VOLATILE_UNCORRECTED), ("aggregate", ECC_AGGREGATE_UNCORRECTED)):
            exp.add("burnin_gpu_ecc_uncorrected_errors", gpu.read(ecc), node=node, gpu=index, scope=scope)
        for cause, rows in (("correctable", REMAPPED_CORRECTABLE), ("uncorrectable", REMAPPED_UNCORRECTABLE)):
            exp.add("burnin_gpu_remapped_rows", gpu.read(rows), node=node, gpu=index, cause=cause)
        exp.add("burnin_gpu_pcie_link_width", gpu.read(PCIE_WIDTH_NOW), node=node, gpu=index)
        exp.add("burnin_gpu_pcie_link_generation", gpu.read(PCIE_GEN), node=node, gpu=index)
        active = gpu.nvlink_active()
        if active is not None:
            exp.add("burnin_gpu_nvlink_links_active", active, node=node, gpu=index)
            for counter in NVLINK_COUNTERS:
                exp.add("burnin_gpu_nvlink_errors", gpu.nvlink_total(counter), node=node, gpu=index, counter=counter)


def ib_metrics(exp: Exposition, node: str, facts: Facts) -> None:
    for hca in sorted(facts.hcas_reported(), key=lambda h: h.name):
        for port in sorted(hca.ports(), key=lambda p: p.number):
            labels = {"node": node, "hca": hca.name, "port": port.number}
            rate = port.rate_gbps
            if rate is not None:
                exp.add("burnin_ib_port_rate_bytes_per_second", rate * GB / BITS_PER_BYTE, **labels)
            if port.state:
                exp.add("burnin_ib_port_active", port.active, **labels)
            if port.counters is None or (port.get("link_layer") or "InfiniBand") != "InfiniBand":
                continue  # a storage (Ethernet) port: IB-04 does not judge it
            for counter in IB_ERROR_COUNTERS:
                exp.add("burnin_ib_port_errors", port.counter(counter), **labels, counter=counter)


def fabric_metrics(exp: Exposition, node: str, facts: Facts) -> None:
    fabric = facts.section("fabric")
    if not isinstance(fabric, dict):
        return
    for collective, run in sorted(mapping(fabric.get("single")).items()):
        if isinstance(run, dict) and run.get("status") == "ok":
            busbw = number(run.get("busbw_gbps"))
            exp.add("burnin_nccl_busbw_bytes_per_second", None if busbw is None else busbw * GB,
                    node=node, collective=collective, scope="single-node")
    nvb = fabric.get("nvbandwidth")
    if isinstance(nvb, dict) and nvb.get("status") == "ok":
        for testcase, matrix in sorted(mapping(nvb.get("testcases")).items()):
            finite = [v for row in items(matrix) for cell in items(row) if (v := number(cell)) is not None]
            if finite:
                exp.add("burnin_nvbandwidth_min_bytes_per_second", min(finite) * GB, node=node, testcase=testcase)


def megatron_metrics(exp: Exposition, node: str, facts: Facts) -> None:
    """TFLOP/s/GPU and MFU of the node's single-node run and of the multi-node run it took part in."""
    from burnin.evaluate.verdict import Unmeasurable
    from burnin.megatron.judge import throughput

    section = facts.section("megatron")
    if not isinstance(section, dict):
        return
    peak = number(mapping(section.get("settings")).get("peak_tflops_per_gpu"))
    multi = section.get("multi")
    records = {"single": section.get("single"), "multi": multi.get("run") if isinstance(multi, dict) else None}
    for run, record in records.items():
        if not isinstance(record, dict) or record.get("timed_out"):
            continue
        try:
            tflops = throughput(record).computed
        except Unmeasurable:
            continue  # no steady iteration: MEG-03/04 say why; nothing to plot
        exp.add("burnin_megatron_tflops_per_gpu", tflops, node=node, run=run)
        if peak is not None and peak > 0:
            exp.add("burnin_megatron_mfu_ratio", tflops / peak, node=node, run=run)


def exposition(gate: Mapping[str, Any], outcomes: Iterable[Mapping[str, Any]],
               facts: Mapping[str, Mapping[str, Any]], *, timestamp: float | None = None,
               duration_s: float | None = None) -> str:
    """The whole textfile for one run or probe."""
    exp = Exposition()
    exp.add("burnin_run_timestamp_seconds", timestamp)
    exp.add("burnin_run_duration_seconds", duration_s)
    verdict_metrics(exp, gate, outcomes)
    for node in sorted(facts):
        node_facts = Facts.of(node, facts[node])
        gpu_metrics(exp, node, node_facts)
        ib_metrics(exp, node, node_facts)
        fabric_metrics(exp, node, node_facts)
        megatron_metrics(exp, node, node_facts)
    return exp.render()


def write_textfile(path: Path, text: str) -> Path:
    """Write atomically (node_exporter must never read half a file)."""
    write_text_atomic(path, text)
    return path
