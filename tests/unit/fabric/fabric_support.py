"""Helpers for the fabric unit tests: measurements, fabric facts, fake launchers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from burnin.fabric.commands import NcclEvidence
from burnin.fabric.measure import GdrMeasurement, NcclMeasurement, NvbMeasurement
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
            multi: dict[str, Any] | None = None, fleet_stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """A node's ``fabric`` facts section, healthy unless told otherwise."""
    return {
        "settings": {"nvls": True}, "fleet": fleet_stats if fleet_stats is not None else fleet(), "run_nodes": 8,
        "single": {"all_reduce": (single or nccl([node])).to_json()},
        "nvbandwidth": (nvbw or nvb()).to_json(),
        "ib_write_bw": gdr_section(),
        "multi": multi if multi is not None else {"applicable": True, "group": nccl(["sim01", "sim02"], 360).to_json(),
                                                  "group_passed": True, "floor_gbps": 300.0},
    }


def result(node: str, stdout: str = "", *, status: int | None = 0, stderr: str = "", timed_out: bool = False,
           error: str | None = None, argv: Sequence[str] = ("all_reduce_perf",)) -> CommandResult:
    return CommandResult(node, tuple(argv), status, stdout, stderr, 0.5, timed_out=timed_out, error=error)


class FakeLauncher:
    """A launcher whose per-node and job results come from functions of the nodes."""

    name = "fake"

    def __init__(self, per_node: Callable[[str, Sequence[str]], CommandResult],
                 job: Callable[[Sequence[str], str | None], CommandResult], unavailable: str | None = None) -> None:
        self._per_node = per_node
        self._job = job
        self._unavailable = unavailable
        self.jobs: list[tuple[tuple[str, ...], str | None]] = []
        self.evidence_jobs: list[tuple[tuple[str, ...], str]] = []
        self.closed = False

    def open(self, nodes: Sequence[str]) -> str | None:
        return self._unavailable

    def per_node(self, nodes: Sequence[str], command: Sequence[str], *, timeout: float) -> dict[str, CommandResult]:
        return {node: self._per_node(node, command) for node in nodes}

    def job(self, nodes: Sequence[str], collective: str, *, ib_hca: str | None, timeout: float,
            evidence: NcclEvidence | None = None) -> CommandResult:
        if evidence is not None and evidence.node_config:  # STO-02 evidence only: no measurement
            self.evidence_jobs.append((tuple(nodes), evidence.name))
        else:
            self.jobs.append((tuple(nodes), ib_hca))
        return self._job(nodes, ib_hca)

    def close(self) -> None:
        self.closed = True


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
