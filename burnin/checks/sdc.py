"""GPU-14 silent data corruption: every GPU's results bit for bit those of the run's other GPUs.

A GPU can compute a wrong result without an Xid or an ECC error. The collector's ``sdc`` source runs
burnin's deterministic workload on every GPU of the node (:mod:`burnin.collector.sdc_workload`: fixed
seeds and shapes, deterministic kernels, matmuls in BF16/FP16/FP32, elementwise kernels and
reductions) and records each result's digest. Healthy GPUs of one model, on one driver, CUDA and torch,
return the same bits; so the run compares them, as INV-11 compares inventories:

- the node suite's phase (:mod:`burnin.phases.fleet`) counts, over the run's reachable nodes of one
  *group* (GPU model, driver, CUDA, the workload's torch and its CUDA, the size), how many GPUs returned
  each digest of each kernel (:func:`sdc_sections`), into every node's facts (:data:`SECTION`);
- the check judges each GPU of the node, kernel by kernel, against those counts:

  - a digest that changed between the workload's repeats on the GPU: fail (the GPU is not even
    consistent with itself);
  - every GPU of the group agrees: pass;
  - a digest returned by a strict majority of at least :data:`MIN_GPUS` GPUs is the fleet's: a GPU with
    another digest fails, naming GPU, kernel and dtype, its digest and the fleet's, and the counts on its
    node and in the run;
  - no strict majority (two GPUs, two answers; two nodes that disagree GPU for GPU): nobody can say which
    GPU is wrong, so the kernel is incomplete on every GPU of the group, with the split;
- a GPU the workload did not test (lost, absent, torch missing, no CUDA, a timeout) is incomplete.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from burnin.checks.base import check, iter_gpus, unlisted_gpus
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, bad, ok, roll_up, unknown
from burnin.facts import Facts
from burnin.text import printable
from burnin.topology.model import Topology

SOURCE = "sdc"
SECTION = "sdc_fleet"
"""The facts key the node suite's phase records the run's digest counts under."""
MIN_GPUS = 3
"""Fewer GPUs than this that differ have no majority: two answers cannot say which is wrong."""
SHOWN = 8
"""Hex digits of a digest shown in a reason."""
EXPECTED = "the digest of most of the run's GPUs of its model, driver, CUDA and torch"
_HEX = re.compile(r"^[0-9a-f]{8,128}$")


@dataclass(frozen=True, slots=True)
class GpuDigests:
    bus_id: str
    digests: dict[str, str]
    unstable: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SdcRun:
    """What the workload printed on one node."""

    group: str
    size: int
    repeat: int
    gpus: tuple[GpuDigests, ...]


def _excerpt(text: str) -> str:
    return printable(text.strip()[-160:], limit=160) or "no output"


def read_run(facts: Facts) -> SdcRun:
    """The node's workload output; Unmeasurable with the cause when it did not run or printed garbage."""
    record = facts.require(SOURCE)
    if record.get("error"):
        raise Unmeasurable(f"SDC workload: {printable(str(record['error']), limit=200)}")
    stdout = str(record.get("stdout") or "")
    start = stdout.find("{")
    try:
        import json

        doc = json.loads(stdout[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise Unmeasurable(f"SDC workload output is not JSON (exit {record.get('exit_status')}): "
                           f"{_excerpt(stdout or str(record.get('stderr') or ''))}")
    if doc.get("error"):
        raise Unmeasurable(f"SDC workload: {printable(str(doc['error']), limit=200)}")
    gpus = doc.get("gpus")
    size, repeat = doc.get("size"), doc.get("repeat")
    if not isinstance(gpus, list) or not gpus or not isinstance(size, int) or not isinstance(repeat, int):
        raise Unmeasurable(f"SDC workload output has no GPU results: {_excerpt(stdout)}")
    parsed = []
    for gpu in gpus:
        digests = gpu.get("digests") if isinstance(gpu, dict) else None
        if not isinstance(digests, dict) or not digests or not isinstance(gpu.get("bus_id"), str) or not all(
                isinstance(k, str) and isinstance(v, str) and _HEX.match(v) for k, v in digests.items()):
            raise Unmeasurable(f"SDC workload output unreadable: {printable(repr(gpu), limit=120)}")
        unstable = gpu.get("unstable") or []
        parsed.append(GpuDigests(str(gpu["bus_id"]).lower(), dict(digests), tuple(str(k) for k in unstable)))
    group = (f"torch {printable(str(doc.get('torch')), limit=40)} CUDA {printable(str(doc.get('cuda')), limit=20)}, "
             f"size {size}, {repeat} repeats")
    return SdcRun(group, size, repeat, tuple(parsed))


def _inventory(facts: Facts) -> str:
    """GPU model(s), driver and CUDA driver version as NVML reports them (the group's hardware half)."""
    nvml = facts.nvml()
    models = sorted({str(g.get("name")) for g in nvml.get("gpus", []) if isinstance(g, dict) and g.get("name")})
    return (f"{' + '.join(models) or 'unknown GPU'}, driver {nvml.get('driver_version')}, "
            f"CUDA driver {nvml.get('cuda_driver_version')}")


def group_of(facts: Facts, run: SdcRun) -> str:
    try:
        inventory = _inventory(facts)
    except Unmeasurable as exc:
        inventory = f"inventory not read ({exc.reason})"
    return f"{inventory}; {run.group}"


def sdc_sections(facts: Mapping[str, Facts]) -> dict[str, dict[str, Any]]:
    """Node -> its SDC section: the run's digest counts per kernel over the GPUs of the node's group.

    Nodes whose workload did not run count for nobody and get no section (GPU-14 says why from their facts).
    """
    runs: dict[str, tuple[str, SdcRun]] = {}
    for node, node_facts in facts.items():
        try:
            run = read_run(node_facts)
        except Unmeasurable:
            continue
        runs[node] = (group_of(node_facts, run), run)
    sections: dict[str, dict[str, Any]] = {}
    for group in sorted({g for g, _ in runs.values()}):
        members = [(node, run) for node, (g, run) in runs.items() if g == group]
        counts: dict[str, Counter[str]] = {}
        for _, run in members:
            for gpu in run.gpus:
                for kernel, digest in gpu.digests.items():
                    counts.setdefault(kernel, Counter())[digest] += 1
        section = {"group": group, "nodes": len(members), "gpus": sum(len(run.gpus) for _, run in members),
                   "digests": {kernel: dict(counter) for kernel, counter in sorted(counts.items())}}
        for node, _ in members:
            sections[node] = section
    return sections


def _section(facts: Facts, group: str) -> dict[str, Any]:
    doc = facts.data.get(SECTION)
    if doc is None:
        raise Unmeasurable("digests not compared: the node suite's phase did not run (burnin run --suite node)")
    if not isinstance(doc, dict) or not isinstance(doc.get("digests"), dict):
        raise Unmeasurable(f"SDC fleet section unreadable: {printable(repr(doc), limit=60)}")
    if doc.get("group") != group:
        raise Unmeasurable(f"SDC fleet section counts another group ({printable(str(doc.get('group')), limit=80)})")
    return doc


def judge_kernel(node: str, kernel: str, digest: str, tally: Mapping[str, int], on_node: Mapping[str, int],
                 node_gpus: int) -> tuple[str, str]:
    """(status, text) of one GPU's kernel against the run's counts: ``pass``, ``fail`` or ``incomplete``."""
    total = sum(tally.values())
    if digest not in tally:
        return "incomplete", f"{kernel} digest {digest[:SHOWN]} is not among the run's counts"
    if len(tally) == 1:
        return "pass", ""
    top, top_count = sorted(tally.items(), key=lambda item: (-item[1], item[0]))[0]
    if total >= MIN_GPUS and 2 * top_count > total:
        if digest == top:
            return "pass", ""
        return "fail", (f"{kernel} digest {digest[:SHOWN]} differs from the fleet's {top[:SHOWN]} "
                        f"({on_node.get(top, 0)} of {node_gpus} GPUs of {node}, {top_count} of {total} in the run)")
    split = ", ".join(f"{count} x {value[:SHOWN]}" for value, count in sorted(tally.items(), key=lambda i: -i[1]))
    return "incomplete", (f"{kernel} digest {digest[:SHOWN]}: no digest on most of the run's {total} GPUs "
                          f"({split}): which GPU is wrong cannot be said")


@check("GPU-14", "No silent data corruption: each GPU's results bit for bit the run's other GPUs'",
       sources=(SOURCE, SECTION, "nvml"), fast=False)
def silent_data_corruption(facts: Facts, topology: Topology) -> Verdict:
    run = read_run(facts)
    group = group_of(facts, run)
    section = _section(facts, group)
    tallies: Mapping[str, Mapping[str, int]] = section["digests"]
    by_bus = {gpu.bus_id: gpu for gpu in run.gpus}
    on_node: dict[str, Counter[str]] = {}
    for gpu in run.gpus:
        for kernel, digest in gpu.digests.items():
            on_node.setdefault(kernel, Counter())[digest] += 1
    findings: list[Finding] = []
    for subject, gpu_facts, why in iter_gpus(facts, topology):
        if gpu_facts is None:
            findings.append(unknown(subject, why, EXPECTED))
            continue
        tested = by_bus.get(str(gpu_facts.bus_id or "").lower())
        if tested is None:
            findings.append(unknown(subject, f"not tested by the SDC workload ({gpu_facts.bus_id})", EXPECTED))
            continue
        fails = [f"{kernel} digest changed between the workload's {run.repeat} repeats" for kernel in tested.unstable]
        unknowns = []
        for kernel, digest in sorted(tested.digests.items()):
            tally = tallies.get(kernel)
            if not isinstance(tally, dict):
                unknowns.append(f"{kernel}: no counts in the run")
                continue
            status, text = judge_kernel(facts.node, kernel, digest, tally, on_node[kernel], len(run.gpus))
            if status == "fail":
                fails.append(text)
            elif status == "incomplete":
                unknowns.append(text)
        if fails:
            findings.append(bad(subject, "; ".join(fails), EXPECTED))
        elif unknowns:
            findings.append(unknown(subject, "; ".join(unknowns), EXPECTED))
        else:
            findings.append(ok(subject, f"{len(tested.digests)} kernels", EXPECTED))
    findings += unlisted_gpus(facts, topology)
    gpus, nodes = section.get("gpus"), section.get("nodes")
    healthy = (f"{len(run.gpus)} GPUs x {len(tallies)} kernels as the run's {gpus} GPUs on {nodes} nodes "
               f"(size {run.size}, {run.repeat} repeats)")
    return roll_up("GPU-14", facts.node, findings, expected=EXPECTED, healthy=healthy)
