"""A finished launch -> a measurement (pure): parsed numbers, or why there are none.

A launch that hung, could not start, exited early or printed garbage is
``unmeasured`` with its last output lines (or an excerpt), and the checks that
read it are incomplete: an environment problem is never mistaken for slow
hardware. A measurement's ``status`` (``ok``/``unmeasured``, in fabric.json and
the facts) never uses a verdict's word, so a reader looking for incomplete
verdicts does not find measurements. ``#wrong`` values are kept even
from a run that stopped early, so corruption is reported whatever else happened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

from burnin.errors import ParseError
from burnin.transport.base import CommandResult

OK = "ok"
UNMEASURED = "unmeasured"
TIMEOUT_EXITS = (124, 137)  # coreutils timeout: TERM sent / KILL sent
TAIL_LINES = 3


@dataclass(frozen=True, slots=True)
class NcclMeasurement:
    """One nccl-tests run on a node or a group of nodes."""

    collective: str
    nodes: tuple[str, ...]
    status: str  # ok | unmeasured
    busbw_gbps: float | None = None
    """busbw at the largest size measured (the lower of out-of-place and in-place)."""
    size_bytes: int | None = None
    avg_busbw_gbps: float | None = None
    wrong: int = 0
    out_of_bounds: int = 0
    unchecked: int = 0
    """Result cells whose ``#wrong`` was not a count (``N/A``: the data check was off, or unreadable)."""
    rows: int = 0
    finished: bool = False
    """The tool ran to its end (no hang, crash or cut output), whatever the verdict on its numbers."""
    ib_hca: str | None = None
    nvls: bool | None = None
    reason: str = ""
    tail: tuple[str, ...] = ()
    duration_s: float = 0.0
    argv: str = ""
    curve: tuple[tuple[int, float], ...] = ()
    """(message size in bytes, busbw in GB/s) of every row, the lower of out-of-place and in-place: the
    busbw-vs-size curve the report draws."""

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def corrupt(self) -> bool:
        return self.wrong > 0 or self.out_of_bounds > 0

    @property
    def label(self) -> str:
        """``sim01+sim04`` for a pair, ``sim[01-08]`` for a group."""
        if len(self.nodes) <= 2:
            return "+".join(self.nodes)
        from burnin.nodes import fold  # ClusterShell: imported when a group needs folding, not with the module

        return fold(self.nodes)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = list(self.nodes)
        data["tail"] = list(self.tail)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NcclMeasurement:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["nodes"] = tuple(values.get("nodes", ()))
        values["tail"] = tuple(values.get("tail", ()))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class NvbMeasurement:
    """One nvbandwidth run on a node: each testcase's matrix (rows x columns, None = N/A)."""

    status: str
    testcases: dict[str, list[list[float | None]]] = field(default_factory=dict)
    reason: str = ""
    tail: tuple[str, ...] = ()
    duration_s: float = 0.0
    argv: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "testcases": self.testcases, "reason": self.reason,
                "tail": list(self.tail), "duration_s": self.duration_s, "argv": self.argv}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NvbMeasurement:
        return cls(str(data.get("status", UNMEASURED)), dict(data.get("testcases") or {}),
                   str(data.get("reason", "")), tuple(data.get("tail") or ()),
                   float(data.get("duration_s") or 0.0), str(data.get("argv", "")))


def last_lines(result: CommandResult, count: int = TAIL_LINES, *, prefer_stdout: bool = False) -> tuple[str, ...]:
    """The last non-empty output lines (stdout, then stderr), for 'hung here' evidence.

    ``prefer_stdout``: only stdout when it has any (the loopback task prints the client there and the
    server's lines on stderr).
    """
    text = result.stdout if prefer_stdout and result.stdout.strip() else result.stdout + "\n" + result.stderr
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return tuple(line[:200] for line in lines[-count:])


def _tool(argv: Sequence[str], default: str) -> str:
    """The tool's name inside ``[launcher...] env K=V timeout -k 5 T tool ...``."""
    for part in argv:
        name = part.rsplit("/", 1)[-1]
        if name.endswith("_perf") or name == "nvbandwidth":
            return name
    return default


def launch_problem(result: CommandResult, tool: str, timeout_s: float) -> str | None:
    """Why a launch produced no trustworthy output, or None."""
    where = f" on {result.node}" if result.node else ""
    if result.error and not result.timed_out:
        return f"{tool}{where}: {result.error}"
    if result.timed_out or result.exit_status in TIMEOUT_EXITS:
        return f"{tool} hung{where}: no result within {timeout_s:g} s"
    if result.exit_status == 127:
        return f"{tool} not found{where} (exit 127): set nccl_tests_dir / nvbandwidth in the fabric config"
    return None


def _with_tail(reason: str, tail: tuple[str, ...]) -> str:
    return f"{reason}; last output: {' | '.join(tail)}" if tail else reason


def _curve(rows: Sequence[Any]) -> tuple[tuple[int, float], ...]:
    """busbw against size, one point per row whose bandwidths are real numbers (for the report's plot)."""
    points = []
    for row in sorted(rows, key=lambda r: r.size_bytes):
        values = [v for v in (row.out_of_place.busbw_gbps, row.in_place.busbw_gbps) if v is not None]
        if values and all(bandwidth_ok(v) for v in values):
            points.append((int(row.size_bytes), float(min(values))))
    return tuple(points)


def nccl_measurement(result: CommandResult, collective: str, nodes: Sequence[str], *, timeout_s: float,
                     judge_min_bytes: int, ib_hca: str | None = None, nvls: bool | None = None) -> NcclMeasurement:
    """Read one nccl-tests launch."""
    from burnin.parsers.nccl_tests import parse_nccl_tests

    tool = _tool(result.argv, f"{collective}_perf")
    tail = last_lines(result)
    base: dict[str, Any] = {"collective": collective, "nodes": tuple(nodes), "ib_hca": ib_hca, "nvls": nvls,
                            "tail": tail, "duration_s": round(result.duration_s, 3),
                            "argv": " ".join(result.argv)}
    problem = launch_problem(result, tool, timeout_s)
    try:
        run = parse_nccl_tests(result.stdout, collective) if result.stdout.strip() else None
    except ParseError as exc:
        run = None
        if problem is None:
            problem = f"{tool} output is not nccl-tests output: {exc.excerpt[:160]!r}"
    wrong, rows, oob, unchecked = 0, 0, 0, 0
    busbw = size = avg = None
    insane: str | None = None
    if run is not None:
        rows = len(run.rows)
        cells = [m.wrong for r in run.rows for m in (r.out_of_place, r.in_place)]
        wrong = sum(_wrong_count(value) for value in cells)
        unchecked = sum(1 for value in cells if not _is_count(value))
        oob = max(0, run.out_of_bounds or 0)
        avg = _finite(run.avg_busbw_gbps)
        if run.rows:
            last = max(run.rows, key=lambda r: r.size_bytes)
            values = [v for v in (last.out_of_place.busbw_gbps, last.in_place.busbw_gbps) if v is not None]
            size = last.size_bytes
            insane = next((f"busbw {v!r} GB/s at {size} B is not a bandwidth" for v in values
                           if not bandwidth_ok(v)), None)
            busbw = min(values) if values and insane is None else None
    finished = problem is None and run is not None and bool(run.rows) and not run.truncated
    measured: dict[str, Any] = {"busbw_gbps": busbw, "size_bytes": size, "avg_busbw_gbps": avg, "wrong": wrong,
                                "out_of_bounds": oob, "unchecked": unchecked, "rows": rows, "finished": finished,
                                "curve": _curve(run.rows) if run is not None else ()}
    if problem is None and run is not None:
        if not run.rows:
            problem = f"{tool} printed no result rows"
        elif run.truncated:
            problem = f"{tool} stopped after {rows} rows (exit {result.exit_status})"
        elif result.exit_status not in (0, None) and not (wrong or oob):
            problem = f"{tool} exited {result.exit_status}"
        elif size is not None and size < judge_min_bytes:
            problem = f"{tool} reached only {size} B; busbw is judged at >= {judge_min_bytes} B"
        elif insane is not None:
            problem = f"{tool} printed {insane}"
        elif busbw is None:
            problem = f"{tool} printed no busbw at {size} B"
    elif problem is None:
        problem = f"{tool} printed nothing (exit {result.exit_status})"
    if problem is not None:
        return NcclMeasurement(status=UNMEASURED, reason=_with_tail(problem, tail), **base, **measured)
    return NcclMeasurement(status=OK, **base, **measured)


def _wrong_count(value: int | float | None) -> int:
    """Wrong values a cell reports (a positive max error of old versions counts as one)."""
    if value is None or not _is_count(value):
        return 0
    if isinstance(value, float):
        return 1 if value > 0 else 0  # old versions print the max error instead of a count
    return value


def _is_count(value: int | float | None) -> bool:
    """A ``#wrong`` cell that says something: a count, or a finite max error, never negative."""
    return value is not None and math.isfinite(value) and value >= 0


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


MAX_GBPS = 100_000.0
"""No link or bus of a node moves more than this (GB/s or Gb/s); a larger number is a misread."""


def bandwidth_ok(value: object) -> TypeGuard[float]:
    """A bandwidth a tool can really have printed: a finite number, 0 <= value <= MAX_GBPS."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and 0 <= value <= MAX_GBPS)


def nvb_measurement(result: CommandResult, testcases: Sequence[str], *, timeout_s: float) -> NvbMeasurement:
    """Read one nvbandwidth launch; every requested testcase must have a matrix."""
    from burnin.parsers.nvbandwidth import parse_nvbandwidth

    tail = last_lines(result)
    base: dict[str, Any] = {"tail": tail, "duration_s": round(result.duration_s, 3), "argv": " ".join(result.argv)}
    problem = launch_problem(result, "nvbandwidth", timeout_s)
    found: dict[str, list[list[float | None]]] = {}
    if result.stdout.strip():
        try:
            report = parse_nvbandwidth(result.stdout)
        except ParseError as exc:
            problem = problem or f"nvbandwidth output is not readable: {exc.excerpt[:160]!r}"
        else:
            found = {case.name: [list(row) for row in case.matrix]
                     for case in report.testcases if case.name and case.matrix}
    missing = [name for name in testcases if name not in found]
    if problem is None and missing:
        problem = f"nvbandwidth printed no matrix for {', '.join(missing)} (exit {result.exit_status})"
    if problem is None and result.exit_status not in (0, None):
        problem = f"nvbandwidth exited {result.exit_status}"
    if problem is not None:
        return NvbMeasurement(UNMEASURED, found, _with_tail(problem, tail), **base)
    return NvbMeasurement(OK, found, **base)


# ---------------------------------------------------------------- IB-08: ib_write_bw loopback


@dataclass(frozen=True, slots=True)
class GdrMeasurement:
    """One ``ib_write_bw`` loopback through one HCA, from GPU memory (``gpu`` set) or host memory."""

    hca: str
    gpu: int | None
    status: str
    bw_average_gbps: float | None = None
    bw_peak_gbps: float | None = None
    size_bytes: int | None = None
    iterations: int | None = None
    qps: int | None = None
    cuda_device: int | None = None
    """The GPU perftest said it picked (``Picking device No. N``)."""
    reason: str = ""
    tail: tuple[str, ...] = ()
    duration_s: float = 0.0
    argv: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def memory(self) -> str:
        return f"gpu{self.gpu} memory" if self.gpu is not None else "host memory"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tail"] = list(self.tail)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GdrMeasurement:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["tail"] = tuple(values.get("tail") or ())
        return cls(**values)


def gdr_measurement(result: CommandResult, hca: str, gpu: int | None, *, timeout_s: float) -> GdrMeasurement:
    """Read one ``ib_write_bw`` loopback: the client's report for ``hca``, at its largest message size."""
    from burnin.parsers.perftest import parse_perftest

    tail = last_lines(result, prefer_stdout=True)
    base: dict[str, Any] = {"hca": hca, "gpu": gpu, "tail": tail, "duration_s": round(result.duration_s, 3),
                            "argv": " ".join(result.argv)}
    problem = launch_problem(result, "ib_write_bw", timeout_s)
    if problem is not None and result.exit_status == 127:
        problem = (f"ib_write_bw not found on {result.node} (exit 127): install perftest or set ib_write_bw "
                   "in the fabric config")
    measured: dict[str, Any] = {}
    try:
        output = parse_perftest(result.stdout) if result.stdout.strip() else None
    except ParseError as exc:
        output = None
        if problem is None and result.exit_status not in (0, None):
            problem = f"ib_write_bw exited {result.exit_status}"
        problem = problem or f"ib_write_bw output is not perftest output: {exc.excerpt[:160]!r}"
    client = next((r for r in reversed(output.reports) if r.rows), None) if output else None
    if client is not None:
        last = max(client.rows, key=lambda r: r.size_bytes)
        average, peak = client.average_gbps(last), client.peak_gbps(last)
        qps = client.setting("Number of qps")
        measured = {"bw_average_gbps": average if bandwidth_ok(average) else None,
                    "bw_peak_gbps": peak if bandwidth_ok(peak) else None,
                    "size_bytes": last.size_bytes, "iterations": last.iterations,
                    "qps": int(qps) if qps and qps.isdigit() else None, "cuda_device": client.cuda_device}
        if problem is None:
            problem = _gdr_problem(result, client.device, client.complete, hca, gpu, client.cuda_device, average)
    elif problem is None:
        problem = (f"ib_write_bw printed no result rows (exit {result.exit_status})" if output
                   else f"ib_write_bw printed nothing (exit {result.exit_status})")
    if problem is not None:
        return GdrMeasurement(status=UNMEASURED, reason=_with_tail(problem, tail), **base, **measured)
    return GdrMeasurement(status=OK, **base, **measured)


def _gdr_problem(result: CommandResult, device: str | None, complete: bool, hca: str, gpu: int | None,
                 cuda_device: int | None, average: float | None) -> str | None:
    if result.exit_status not in (0, None):
        return f"ib_write_bw exited {result.exit_status}"
    if not complete:
        return "ib_write_bw stopped inside its result table"
    if device != hca:
        return f"ib_write_bw reported device {device!r}, not {hca}"
    if gpu is not None and cuda_device != gpu:
        said = f"picked GPU {cuda_device}" if cuda_device is not None else "printed no 'Picking device No. N'"
        return f"ib_write_bw --use_cuda={gpu} {said}: GPU memory not confirmed"
    if gpu is None and cuda_device is not None:
        return f"ib_write_bw picked GPU {cuda_device} on a host-memory run"
    if not bandwidth_ok(average):
        return f"ib_write_bw BW average {average!r} Gb/s is not a bandwidth"
    return None
