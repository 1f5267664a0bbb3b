"""PIN-01..04 findings from a node's ``placement`` section (pure; check-catalog section 4).

The placement probe (burnin.collector.placement) ran under the launcher with the
binding options training uses; each rank reported where it runs. Against the
topology:

- PIN-01 each rank's CPUs within its GPU's NUMA node, its memory nodes holding that
  node (exactly that node with a numactl ``--membind``), one rank per GPU; a launcher
  configured without binding fails with the fix named;
- PIN-02 the memory a rank wrote landed on its GPU's NUMA node (first touch);
- PIN-03 the rank's threads ran only on its allowed CPUs;
- PIN-04 NCCL may use the HCA paired with the rank's GPU and no storage HCA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Unmeasurable, bad, ok, unknown
from burnin.megatron.judge import reference, share
from burnin.parsers._common import compress_cpu_list, expand_cpu_list
from burnin.topology.model import GpuDevice, Topology

LOCAL_MEMORY_REF = "pin_memory_local_fraction"
BINDING_FIX = ("set 'binding: slurm' (srun --cpu-bind=ldoms --gpu-bind=closest) or 'binding: numactl' "
               "(numactl --cpunodebind/--membind per local rank) in the megatron config")


def section(data: object) -> dict[str, Any]:
    """The node's placement section; Unmeasurable when the probe did not run or did not finish."""
    if not isinstance(data, dict):
        raise Unmeasurable("placement measurements not collected: the megatron phase did not run "
                           "(burnin run --suite megatron)")
    if data.get("unavailable"):
        raise Unmeasurable(str(data["unavailable"]))
    if data.get("timed_out"):
        tails = data.get("tails") or {}
        last = "; ".join(f"rank {r}: {lines[-1]}" for r, lines in sorted(tails.items()) if lines)[:400]
        raise Unmeasurable(f"the placement probe hung: stopped after {data.get('timeout_s', '?')} s; "
                           f"last lines: {last or 'no output'}")
    if data.get("error") and data.get("exit_status") is None:
        raise Unmeasurable(f"the placement probe did not start: {data['error']}")
    return data


def cpus(text: object, what: str) -> frozenset[int]:
    if not isinstance(text, str) or not text.strip():
        raise Unmeasurable(f"{what} not reported")
    try:
        return frozenset(expand_cpu_list(text))
    except ParseError:
        raise Unmeasurable(f"{what} {text[:60]!r} is not a CPU list") from None


def numa_nodes_of(cpu_set: frozenset[int], topology: Topology) -> list[int]:
    """The NUMA nodes (by the topology's cpulists) that hold any of ``cpu_set``."""
    return sorted(node for node, text in topology.numa.cpulists.items()
                  if cpu_set & frozenset(expand_cpu_list(text)))


def _records(data: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Probe records by local rank (global rank on a single-node probe)."""
    out: dict[int, dict[str, Any]] = {}
    for rec in data.get("ranks") or []:
        if not isinstance(rec, dict):
            continue
        key = rec.get("local_rank") if isinstance(rec.get("local_rank"), int) else rec.get("rank")
        if isinstance(key, int) and key not in out:
            out[key] = rec
    return out


def _gpu(rec: dict[str, Any], topology: Topology) -> GpuDevice:
    bus = rec.get("gpu_bus_id")
    if not isinstance(bus, str):
        raise Unmeasurable(str(rec.get("gpu_error") or "no GPU reported"))
    device = next((d for d in topology.gpus.devices if d.bus_id == bus.lower()), None)
    if device is None:
        raise Unmeasurable(f"drives GPU {bus}, which is not a GPU of topology {topology.name}")
    return device


def per_rank(data: dict[str, Any], topology: Topology,
             judge_rank: Callable[[str, dict[str, Any], GpuDevice], Finding]) -> list[Finding]:
    """One finding per expected local rank (one per GPU); a rank that printed no record is not measured."""
    records = _records(data)
    findings: list[Finding] = []
    for rank in range(topology.gpus.count):
        subject = f"rank {rank}"
        rec = records.get(rank)
        if rec is None:
            findings.append(unknown(subject, "printed no placement record"))
            continue
        try:
            findings.append(judge_rank(subject, rec, _gpu(rec, topology)))
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason))
    extra = sorted(r for r in records if not 0 <= r < topology.gpus.count)
    if extra:
        findings.append(bad("ranks", f"local ranks {extra} beyond the node's {topology.gpus.count} GPUs",
                            f"{topology.gpus.count} ranks, one per GPU"))
    return findings


def _expected_cpus(topology: Topology, numa: int) -> frozenset[int]:
    return frozenset(expand_cpu_list(topology.numa.cpulists.get(numa, "")))


def _rank_cpus(rec: dict[str, Any]) -> frozenset[int]:
    return cpus(rec.get("cpus") or rec.get("cpus_allowed_list"), "allowed CPUs")


def pin01(data: dict[str, Any], topology: Topology) -> list[Finding]:
    binding = data.get("binding")
    expected = "each rank's CPUs and memory nodes within its GPU's NUMA node, one rank per GPU"
    findings: list[Finding] = []
    if binding == "none":
        findings.append(bad("launcher", f"binds no CPUs (binding: none, {data.get('form')}): {BINDING_FIX}",
                            "ranks pinned by the launcher"))

    def judge_rank(subject: str, rec: dict[str, Any], gpu: GpuDevice) -> Finding:
        allowed = _rank_cpus(rec)
        local = _expected_cpus(topology, gpu.numa_node)
        where = f"gpu{gpu.index} on NUMA {gpu.numa_node} ({topology.numa.cpulists.get(gpu.numa_node, '?')})"
        if not allowed <= local:
            nodes = ",".join(map(str, numa_nodes_of(allowed, topology))) or "?"
            return bad(subject, f"CPUs {compress_cpu_list(allowed)} (NUMA {nodes}) but its {where}", expected)
        mems = cpus(rec.get("mems"), "allowed memory nodes")
        if gpu.numa_node not in mems or (binding == "numactl" and mems != {gpu.numa_node}):
            return bad(subject, f"memory nodes {compress_cpu_list(mems)} but its {where}", expected)
        return ok(subject, f"CPUs {compress_cpu_list(allowed)}, memory {compress_cpu_list(mems)} for gpu{gpu.index}",
                  expected)

    findings += per_rank(data, topology, judge_rank)
    driven: dict[int, list[int]] = {}
    resolved = 0
    for rank, rec in _records(data).items():
        try:
            driven.setdefault(_gpu(rec, topology).index, []).append(rank)
            resolved += 1
        except Unmeasurable:
            continue
    for gpu, ranks in sorted(driven.items()):
        if len(ranks) > 1:
            findings.append(bad(f"gpu{gpu}", f"driven by ranks {','.join(map(str, sorted(ranks)))}", expected))
    idle = [d.index for d in topology.gpus.devices if d.index not in driven]
    if idle and resolved >= topology.gpus.count:  # every rank named its GPU, and some GPU has none
        findings.append(bad("gpus", f"gpu{','.join(map(str, idle))} driven by no rank", expected))
    return findings


def pin02(data: dict[str, Any], topology: Topology) -> list[Finding]:
    floor = reference(topology, LOCAL_MEMORY_REF)
    expected = f"share of a rank's written memory on its GPU's NUMA node {share(floor)}"

    def judge_rank(subject: str, rec: dict[str, Any], gpu: GpuDevice) -> Finding:
        memory = rec.get("memory")
        pages = memory.get("pages_by_node") if isinstance(memory, dict) else None
        if not isinstance(pages, dict):
            raise Unmeasurable(str(rec.get("memory_error") or "no page placement reported"))
        counts = {str(k): v for k, v in pages.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
        total = sum(counts.values())
        if total == 0 or len(counts) != len(pages):
            raise Unmeasurable(f"page placement {pages!r} is not a count per node")
        share = counts.get(str(gpu.numa_node), 0) / total
        spread = ", ".join(f"NUMA {k}: {v / total:.0%}" for k, v in sorted(counts.items()))
        measured = f"{share:.0%} on NUMA {gpu.numa_node} of gpu{gpu.index} ({spread})"
        return (ok if floor.admits(share) else bad)(subject, measured, expected)

    return per_rank(data, topology, judge_rank)


def pin03(data: dict[str, Any], topology: Topology) -> list[Finding]:
    expected = "every thread sample on one of the rank's allowed CPUs"

    def judge_rank(subject: str, rec: dict[str, Any], gpu: GpuDevice) -> Finding:
        allowed = _rank_cpus(rec)
        if rec.get("threads_error"):
            raise Unmeasurable(str(rec["threads_error"]))
        ran = cpus(rec.get("thread_cpus"), "thread CPUs")
        outside = ran - allowed
        if outside:
            return bad(subject, f"threads ran on CPUs {compress_cpu_list(outside)} outside its allowed "
                                f"{compress_cpu_list(allowed)}", expected)
        return ok(subject, f"threads on CPUs {compress_cpu_list(ran)}", expected)

    return per_rank(data, topology, judge_rank)


def nccl_hcas(spec: str | None, topology: Topology) -> set[str]:
    """The topology's HCAs an ``NCCL_IB_HCA`` value lets NCCL use (unset: all of them).

    ``=a:1,b`` names exact devices, ``^a,b`` excludes, a bare list matches by prefix (NCCL's rules).
    """
    names = {h.name for h in topology.hcas}
    if spec is None or not spec.strip():
        return names
    text = spec.strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    wanted = [item.split(":", 1)[0].strip() for item in text.lstrip("=").split(",") if item.strip()]

    def listed(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return {n for n in names if listed(n) != exclude}


def pin04(data: dict[str, Any], topology: Topology) -> list[Finding]:
    storage = {h.name for h in topology.storage_hcas}
    expected = "NCCL may use the HCA paired with the rank's GPU and no storage HCA"

    def judge_rank(subject: str, rec: dict[str, Any], gpu: GpuDevice) -> Finding:
        spec = rec.get("nccl_ib_hca")
        if spec is not None and not isinstance(spec, str):
            raise Unmeasurable(f"NCCL_IB_HCA {spec!r} is not text")
        usable = nccl_hcas(spec, topology)
        shown = f"NCCL_IB_HCA={spec}" if spec else "NCCL_IB_HCA unset"
        leaked = sorted(usable & storage)
        if leaked:
            return bad(subject, f"{shown} lets NCCL use storage HCA {','.join(leaked)}", expected)
        if gpu.hca is None:
            return ok(subject, f"{shown}; gpu{gpu.index} has no paired HCA in the topology", expected)
        if gpu.hca not in usable:
            return bad(subject, f"{shown} leaves out {gpu.hca}, paired with gpu{gpu.index}", expected)
        return ok(subject, f"{shown} includes {gpu.hca} of gpu{gpu.index}", expected)

    return per_rank(data, topology, judge_rank)
