"""STREAM (McCalpin) memory bandwidth and ``stress-ng --metrics-brief`` outputs.

STREAM prints one row per kernel under ``Function    Best Rate MB/s  Avg time
Min time  Max time`` (``Copy:``, ``Scale:``, ``Add:``, ``Triad:``), then
``Solution Validates`` or ``Failed Validation``. Rates are MB/s (10^6 bytes).

stress-ng prefixes every line ``stress-ng: <level>: [<pid>] ``; ``fail`` and
``error`` lines are what went wrong (a ``--verify`` mismatch is a ``fail``),
``successful run completed`` / ``unsuccessful run completed`` the outcome of
older versions, ``passed: N`` / ``failed: N`` of newer ones, and the metrics
table (``info`` or, since 0.14, ``metrc``) one row per stressor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_float, parse_int, require_text

STREAM_TOOL = "stream"
STRESS_NG_TOOL = "stress-ng"

_KERNEL_ROW = re.compile(r"^(Copy|Scale|Add|Triad):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
_THREADS = re.compile(r"^Number of Threads (?:counted|requested) = (\d{1,6})")
_ARRAY = re.compile(r"^Array size = (\d{1,15})")
_VERSION = re.compile(r"^STREAM version \$Revision: ([\d.]{1,10}) \$")


@dataclass(frozen=True, slots=True)
class StreamKernel:
    name: str  # "Copy", "Scale", "Add", "Triad"
    best_rate_mbs: float
    avg_s: float | None
    min_s: float | None
    max_s: float | None


@dataclass(frozen=True, slots=True)
class StreamReport:
    version: str | None
    array_elements: int | None
    threads: int | None
    kernels: dict[str, StreamKernel]
    validates: bool | None  # None: no validation line (output cut short)

    @property
    def triad_gbs(self) -> float | None:
        triad = self.kernels.get("Triad")
        return None if triad is None else triad.best_rate_mbs / 1000.0


def parse_stream(text: str) -> StreamReport:
    require_text(STREAM_TOOL, text)
    version: str | None = None
    elements: int | None = None
    threads: int | None = None
    kernels: dict[str, StreamKernel] = {}
    validates: bool | None = None
    for number, raw in enumerate(iter_lines(text), start=1):
        line = raw.strip()
        if (match := _KERNEL_ROW.match(line)) is not None:
            rate = parse_float(match.group(2))
            if rate is None or rate < 0:
                fail(STREAM_TOOL, f"line {number}: {match.group(1)} rate {match.group(2)!r} is not a rate", line)
            kernels[match.group(1)] = StreamKernel(match.group(1), rate, parse_float(match.group(3)),
                                                   parse_float(match.group(4)), parse_float(match.group(5)))
        elif (match := _THREADS.match(line)) is not None:
            threads = int(match.group(1))
        elif (match := _ARRAY.match(line)) is not None:
            elements = int(match.group(1))
        elif (match := _VERSION.match(line)) is not None:
            version = match.group(1)
        elif line.startswith("Solution Validates"):
            validates = True
        elif line.startswith("Failed Validation") or "Validation failed" in line:
            validates = False
    if not kernels:
        fail(STREAM_TOOL, "no Copy/Scale/Add/Triad rows", head_excerpt(text))
    return StreamReport(version, elements, threads, kernels, validates)


_STRESS_LINE = re.compile(r"^stress-ng: ([a-z]{2,8}):\s*\[(\d{1,10})\] ?(.*)$")
_COUNT = re.compile(r"^(passed|failed|skipped|metrics untrustworthy): (\d{1,9})")
_METRIC = re.compile(r"^([a-z][a-z0-9_-]{0,40})\s+(\d{1,20})\s+([\d.]{1,20})\s+([\d.]{1,20})\s+([\d.]{1,20})"
                     r"\s+([\d.]{1,20})\s+([\d.]{1,20})")


@dataclass(frozen=True, slots=True)
class StressNgMetric:
    stressor: str
    bogo_ops: int
    real_s: float | None
    ops_per_s: float | None  # bogo ops/s over real time


@dataclass(frozen=True, slots=True)
class StressNgReport:
    outcome: str | None  # "successful" / "unsuccessful" (older versions), None when not printed
    counts: dict[str, int]  # "passed", "failed", "skipped", "metrics untrustworthy" (newer versions)
    failures: tuple[str, ...]  # text of "fail:" and "error:" lines
    metrics: tuple[StressNgMetric, ...]

    @property
    def ok(self) -> bool | None:
        """True: it ran and nothing failed; False: something failed; None: no outcome printed."""
        if self.failures or self.outcome == "unsuccessful" or self.counts.get("failed", 0) > 0:
            return False
        if self.outcome == "successful" or "passed" in self.counts:
            return True
        return None


def parse_stress_ng(text: str) -> StressNgReport:
    require_text(STRESS_NG_TOOL, text)
    outcome: str | None = None
    counts: dict[str, int] = {}
    failures: list[str] = []
    metrics: list[StressNgMetric] = []
    seen = False
    for raw in iter_lines(text):
        match = _STRESS_LINE.match(raw.strip())
        if match is None:
            continue
        seen = True
        level, body = match.group(1), match.group(3).strip()
        if level in ("fail", "error"):
            failures.append(body)
        elif "unsuccessful run completed" in body:
            outcome = "unsuccessful"
        elif "successful run completed" in body:
            outcome = "successful"
        elif (count := _COUNT.match(body)) is not None:
            counts[count.group(1)] = int(count.group(2))
        elif (row := _METRIC.match(body)) is not None:
            metrics.append(StressNgMetric(row.group(1), parse_int(row.group(2)) or 0, parse_float(row.group(3)),
                                          parse_float(row.group(6))))
    if not seen:
        fail(STRESS_NG_TOOL, "no 'stress-ng: <level>: [pid]' line", head_excerpt(text))
    return StressNgReport(outcome, counts, tuple(failures), tuple(metrics))
