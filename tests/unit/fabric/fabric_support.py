"""Helpers for the fabric unit tests: measurements, fabric facts, fake launchers."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from burnin.evaluate.verdict import Verdict
from burnin.fabric.measure import GdrMeasurement, NcclMeasurement, NvbMeasurement
from burnin.fabric.nvlink_after import snapshot
from burnin.fabric.p2p import P2pMeasurement, p2p_measurement
from burnin.facts import Facts
from burnin.launch.base import Hold, JobSpec, NodeCommand, PlanItem, SrunOptions
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

GIB8 = 8 << 30


def nccl(nodes: Sequence[str], busbw: float | None = 480.0, *, status: str = "ok", wrong: int = 0,
         reason: str = "", nvls: bool = True, ib_hca: str | None = None) -> NcclMeasurement:
    return NcclMeasurement("all_reduce", tuple(nodes), status, busbw_gbps=busbw, size_bytes=GIB8,
                           avg_busbw_gbps=busbw, wrong=wrong, out_of_bounds=wrong, rows=31 if status == "ok" else 5,
                           finished=status == "ok",
                           ib_hca=ib_hca, nvls=nvls, reason=reason)


def matrix(n: int, value: float, *, diagonal: bool = True, low: dict[tuple[int, int], float] | None = None
           ) -> list[list[float | None]]:
    rows: list[list[float | None]] = []
    for r in range(n):
        row: list[float | None] = []
        for c in range(n):
            row.append(None if diagonal and r == c else (low or {}).get((r, c), value))
        rows.append(row)
    return rows


def nvb(d2d: float = 392.0, h2d: float = 55.3, d2h: float = 55.1, *,
        low: dict[tuple[int, int], float] | None = None) -> NvbMeasurement:
    return NvbMeasurement("ok", {
        "device_to_device_memcpy_read_ce": matrix(8, d2d, low=low),
        "host_to_device_memcpy_ce": [[h2d] * 8],
        "device_to_host_memcpy_ce": [[d2h] * 8],
    })


def fleet(single: float = 480.0, d2d: float = 392.0, h2d: float = 55.3, d2h: float = 55.1,
          count: int = 8) -> dict[str, dict[str, float]]:
    return {"single.all_reduce": {"median": single, "count": count},
            "nvl.d2d_read_min": {"median": d2d, "count": count},
            "nvl.h2d_min": {"median": h2d, "count": count}, "nvl.d2h_min": {"median": d2h, "count": count}}


def section(node: str = "sim01", *, single: NcclMeasurement | None = None, nvbw: NvbMeasurement | None = None,
            multi: dict[str, Any] | None = None, fleet_stats: dict[str, Any] | None = None,
            p2p: P2pMeasurement | None = None, after: dict[str, Any] | None = None) -> dict[str, Any]:
    """A node's ``fabric`` facts section, healthy unless told otherwise."""
    return {
        "settings": {"nvls": True}, "fleet": fleet_stats if fleet_stats is not None else fleet(), "run_nodes": 8,
        "single": {"all_reduce": (single or nccl([node])).to_json()},
        "nvbandwidth": (nvbw or nvb()).to_json(),
        "p2p": (p2p or p2p_run()).to_json(),
        "nvlink_after": after if after is not None else nvlink_after(),
        "ib_write_bw": gdr_section(),
        "multi": multi if multi is not None else {"applicable": True, "group": nccl(["sim01", "sim02"], 360).to_json(),
                                                  "group_passed": True, "floor_gbps": 300.0},
    }


def result(node: str, stdout: str = "", *, status: int | None = 0, stderr: str = "", timed_out: bool = False,
           error: str | None = None, argv: Sequence[str] = ("all_reduce_perf",)) -> CommandResult:
    return CommandResult(node, tuple(argv), status, stdout, stderr, 0.5, timed_out=timed_out, error=error)


class FakeLauncher:
    """A launcher whose per-node and job results come from functions of the nodes.

    p2pBandwidthLatencyTest answers healthy (every pair at 376 GB/s) unless ``p2p`` says otherwise. ``job`` gets
    the job's nodes and the one rail it is pinned to (``NCCL_IB_HCA`` naming a single HCA; None: every compute
    HCA). ``gather`` answers the collector (NVL-04's second look): facts per node, healthy by default.
    """

    name = "fake"
    form = "local"
    preset = "simulated"

    def __init__(self, per_node: Callable[[str, Sequence[str]], CommandResult],
                 job: Callable[[Sequence[str], str | None], CommandResult], unavailable: str | None = None,
                 p2p: Callable[[str, Sequence[str]], CommandResult] | None = None,
                 gather: Callable[[Sequence[str]], Mapping[str, Facts]] | None = None) -> None:
        self._per_node = per_node
        self._job = job
        self._unavailable = unavailable
        self._p2p = p2p or (lambda node, command: result(node, p2p_output(), argv=command))
        self._gather = gather or recollect_healthy
        self.jobs: list[tuple[tuple[str, ...], str | None]] = []
        self.evidence_jobs: list[tuple[tuple[str, ...], str]] = []
        self.steps: list[str] = []
        self.notes: list[str] = []
        self.plan: list[PlanItem] = []
        self.collected: list[tuple[tuple[str, ...], float]] = []
        self.closed = False

    def hold(self, nodes: Sequence[str], how: Hold, plan: Sequence[PlanItem] = ()) -> str | None:
        self.plan = list(plan)
        return self._unavailable

    def release(self) -> None:
        self.steps.append("release")

    def everywhere(self, nodes: Sequence[str], argv: Sequence[str], *, timeout_s: float,
                   srun: SrunOptions | None = None) -> dict[str, CommandResult]:
        if any(part.endswith("p2pBandwidthLatencyTest") for part in argv):
            self.steps.append("p2p")
            return {node: self._p2p(node, argv) for node in nodes}
        return {node: self._per_node(node, argv) for node in nodes}

    def per_node(self, commands: Sequence[NodeCommand], *, job: bool = False) -> dict[str, CommandResult]:
        return {c.node: self._per_node(c.node, c.argv) for c in commands}

    def job(self, spec: JobSpec) -> CommandResult:
        hca = spec.env.get("NCCL_IB_HCA")
        rail = hca if hca is not None and "," not in hca else None
        if spec.env.get("NCCL_DEBUG") == "INFO" and hca is None:  # STO-02's node-config evidence: no measurement
            self.evidence_jobs.append((spec.nodes, "node-config"))
        else:
            self.jobs.append((spec.nodes, rail))
        return self._job(spec.nodes, rail)

    def collect(self, nodes: Sequence[str], args: Sequence[str], *, timeout_s: float,
                on_done: Callable[[str, CommandResult], None] | None = None) -> dict[str, CommandResult]:
        self.steps.append("collect")
        self.collected.append((tuple(args), timeout_s))
        gathered = self._gather(nodes)
        out = {}
        for node in nodes:
            facts = gathered.get(node)
            if facts is None:
                out[node] = result(node, "", status=None, error=f"{node} was not gathered again")
            elif facts.unreachable:
                out[node] = result(node, "", status=None, error=facts.unreachable)
            else:
                out[node] = result(node, json.dumps(facts.data), argv=("collector",))
        return out

    def describe(self, item: PlanItem) -> list[tuple[str, list[str]]]:
        return []

    def describe_hold(self, nodes: Sequence[str], how: Hold) -> str | None:
        return None

    def note(self, text: str) -> None:
        self.notes.append(text)

    def close(self) -> None:
        self.closed = True


def alone(facts: Facts, topology: Topology) -> list[Verdict]:
    """The fabric phase's "passed alone": the checks' own judgement (burnin.checks.fabric)."""
    from burnin.checks.fabric import failed_alone

    return failed_alone(facts, topology)


def perf_output(busbw: float, *, wrong: int = 0, rows: int = 4, complete: bool = True, ranks: int = 8) -> str:
    """nccl-tests all_reduce text with ``rows`` sizes from 1 GiB up, each at ``busbw``."""
    factor = 2 * (ranks - 1) / ranks
    lines = ["# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid  {1000 + r} on sim01 device {r:2d} [0000:1b:00] NVIDIA H100 80GB HBM3"
              for r in range(ranks)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
              "   algbw   busbw #wrong"]
    size = 1 << 30
    total = 0
    for _ in range(rows):
        algbw = busbw / factor
        t = size / (algbw * 1e3)
        cell = f"  {t:7.0f}  {algbw:6.2f}  {busbw:6.2f}  {wrong:5d}"
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}{cell}{cell}")
        total += 2 * wrong
        size *= 2
    if complete:
        lines += [f"# Out of bounds values : {total} {'FAILED' if total else 'OK'}",
                  f"# Avg bus bandwidth    : {busbw:g}", "#"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- IB-08 (ib_write_bw) and 8-GPU nvbandwidth


def gdr(hca: str, gpu: int | None, bw: float | None = 392.0, *, status: str = "ok",
        reason: str = "") -> GdrMeasurement:
    return GdrMeasurement(hca, gpu, status, bw_average_gbps=bw, bw_peak_gbps=bw, size_bytes=1 << 20,
                          iterations=5000, qps=4, cuda_device=gpu, reason=reason)


def gdr_section(slow: dict[tuple[str, str], float] | None = None) -> dict[str, dict[str, Any]]:
    """A node's ``ib_write_bw`` facts: every compute HCA at 388 (GPU) / 392 (host) Gb/s unless ``slow``."""
    doc: dict[str, dict[str, Any]] = {}
    for i in range(8):
        hca = f"mlx5_{i}"
        doc[hca] = {"cuda": gdr(hca, i, (slow or {}).get((hca, "cuda"), 388.0)).to_json(),
                    "host": gdr(hca, None, (slow or {}).get((hca, "host"), 392.0)).to_json()}
    return doc


def nvbandwidth_output(gpus: int = 8, d2d: float = 392.0, h2d: float = 55.3) -> str:
    """nvbandwidth v0.8 text of the four default testcases over ``gpus`` GPUs."""
    header = "  " + "".join(f"{c:10d}" for c in range(gpus))
    text = "nvbandwidth Version: v0.8\n\n"
    for name, kind in (("device_to_device_memcpy_read_ce", "GPU(row) -> GPU(column)"),
                       ("device_to_device_memcpy_write_ce", "GPU(row) <- GPU(column)"),
                       ("host_to_device_memcpy_ce", "CPU(row) -> GPU(column)"),
                       ("device_to_host_memcpy_ce", "CPU(row) <- GPU(column)")):
        host = name.startswith(("host", "device_to_host"))
        rows = [[None]] if host else [[r] for r in range(gpus)]
        lines = []
        for n, row in enumerate(rows):
            cells = "".join(f"{'N/A':>10}" if not host and row[0] == c else f"{(h2d if host else d2d):10.2f}"
                            for c in range(gpus))
            lines.append(f"{n:2d}{cells}")
        text += f"Running {name}.\nmemcpy CE {kind} bandwidth (GB/s)\n{header}\n" + "\n".join(lines)
        text += f"\n\nSUM {name} 1.00\n\n"
    return text


def ib_write_bw_output(command: Sequence[str], gbps: float = 392.0) -> str:
    """What the loopback client of an ``ib_write_bw`` command prints (the simulator's format)."""
    from burnin.sim.formats import perftest

    hca = command[command.index("-d") + 1]
    cuda = next((int(a.split("=", 1)[1]) for a in command if a.startswith("--use_cuda=")), None)
    text = perftest.cuda_setup(cuda, [f"0000:{b}:00" for b in ("1b", "43", "52", "61", "9d", "c3", "d1", "df")],
                               "NVIDIA H100 80GB HBM3", 4242, 1 << 21) if cuda is not None else ""
    return text + perftest.client_report(hca, qps=4, size=1 << 20, iterations=5000, peak_gbps=gbps + 0.3,
                                         average_gbps=gbps, lid=1, qpn=0x4a, psn=0xbe352e, vaddr=0x7E6F4ED11000)


# ---------------------------------------------------------------- NVL-03 (p2pBandwidthLatencyTest) and NVL-04


def p2p_output(gpus: int = 8, bw: float = 376.0, *, refused: Collection[int] = (), latency: float = 2.5,
               low: Mapping[tuple[int, int], float] | None = None) -> str:
    """p2pBandwidthLatencyTest's whole text (the simulator's format): ``refused`` GPUs have no peer access."""
    from burnin.sim.formats import p2p

    def can(a: int, b: int) -> bool:
        return a != b and a not in refused and b not in refused

    def values(p2p_on: bool, base: float, host: float, self_value: float,
               pairs: Mapping[tuple[int, int], float] | None = None) -> list[list[float]]:
        return [[self_value if a == b else (pairs or {}).get((a, b), base) if p2p_on and can(a, b) else host
                 for b in range(gpus)] for a in range(gpus)]

    text = p2p.BANNER + "\n" + p2p.devices([("NVIDIA H100 80GB HBM3", 0x1B + a, 0, 0) for a in range(gpus)])
    text += p2p.access([[can(a, b) for b in range(gpus)] for a in range(gpus)])
    for title, p2p_on, base in zip(p2p.BANDWIDTH_TITLES, (False, True, False, True), (38.0, bw, 56.0, 2 * bw),
                                   strict=True):
        text += p2p.bandwidth(title, values(p2p_on, base, 38.0, 2520.0, low if base == bw else None))
    for title, p2p_on in zip(p2p.LATENCY_TITLES, (False, True), strict=True):
        text += p2p.latency(title, values(p2p_on, latency, 14.5, 2.1), values(p2p_on, 2.2, 12.0, 2.0))
    return text + p2p.CLOSING_NOTE


def p2p_run(gpus: int = 8, bw: float = 376.0, **kwargs: Any) -> P2pMeasurement:
    """A measured p2pBandwidthLatencyTest run (through the real reader of the launch)."""
    argv = ("timeout", "-k", "5", "60", "p2pBandwidthLatencyTest")
    return p2p_measurement(result("sim01", p2p_output(gpus, bw, **kwargs), argv=argv), timeout_s=60.0)


def nvml_gpus(gpus: int = 8, links: int = 18, *, down: Mapping[int, Collection[int]] | None = None,
              counters: Mapping[tuple[int, int], Mapping[str, int]] | None = None) -> list[dict[str, Any]]:
    """The collector's NVML GPU entries: ``down`` gpu -> inactive links, ``counters`` (gpu, link) -> values."""
    out = []
    for index in range(gpus):
        nvlink = []
        for link in range(links):
            entry: dict[str, Any] = {"link": link, "active": link not in (down or {}).get(index, ()),
                                     "replay": 0, "recovery": 0, "crc_flit": 0}
            entry.update((counters or {}).get((index, link), {}))
            nvlink.append(entry)
        out.append({"index": index, "bus_id": None, "lost": False, "errors": {}, "nvlink": nvlink})
    return out


def nvml_facts(node: str = "sim01", gpus: list[dict[str, Any]] | None = None) -> Facts:
    """A node's facts as gathered: the ``nvml`` source with its GPUs (healthy by default)."""
    return Facts(node, {"sources": {"nvml": {"ok": True, "error": None, "duration_s": 0.1}},
                        "nvml": {"driver_version": "535.183.01", "gpus": gpus if gpus is not None else nvml_gpus()}})


AFTER = ["all_reduce_perf", "nvbandwidth", "p2pBandwidthLatencyTest", "ib_write_bw"]


def nvlink_after(gpus: list[dict[str, Any]] | None = None, node: str = "sim01") -> dict[str, Any]:
    """The ``fabric.nvlink_after`` snapshot the phase records (healthy by default)."""
    return snapshot(nvml_facts(node, gpus), AFTER)


def fabric_facts(node: str = "sim01", before: list[dict[str, Any]] | None = None, **kwargs: Any) -> Facts:
    """A node's facts after the fabric phase: NVML gathered before it, and the ``fabric`` section."""
    facts = nvml_facts(node, before)
    facts.data["fabric"] = section(node, **kwargs)
    return facts


def before(nodes: Sequence[str]) -> dict[str, Facts]:
    """Healthy facts gathered before the phase, for :class:`burnin.fabric.phase.Phase`."""
    return {node: nvml_facts(node) for node in nodes}


def recollect_healthy(nodes: Sequence[str]) -> dict[str, Facts]:
    """NVL-04's second gather on a healthy rack."""
    return {node: nvml_facts(node) for node in nodes}
