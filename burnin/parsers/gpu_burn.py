"""``gpu_burn`` (wilicc/gpu-burn): progress lines per interval, then the verdict per GPU.

::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
    Initialized device 0 with 81079 MB of memory (80484 MB available, using 72436 MB of it), using FLOATS
    10.0%  proc'd: 3472 (31234 Gflop/s) - 3472 (31252 Gflop/s)   errors: 0 - 0   temps: 45 C - 47 C
    \tSummary at:   Thu Mar 10 19:21:17 UTC 2022
    ...
    Tested 2 GPUs:
    \tGPU 0: OK
    \tGPU 1: FAULTY

gpu_burn rewrites its progress line with a carriage return, so a captured log
may hold several progress records on one line; each is read. An errors entry
is followed by ``(WARNING!)`` when the GPU computed wrong results and
``(DIED!)`` when its worker died (gpu_burn then prints ``-1`` processed); the
process exits 0 either way, so the verdict lines and the counts are what tell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_float, parse_int, require_text

TOOL = "gpu-burn"
_DEVICE = re.compile(r"^GPU (\d{1,3}): (.{1,200}?) \(UUID: ([^)\s]{1,80})\)\s*$")
_PERCENT = re.compile(r"(\d{1,3}(?:\.\d{1,3})?)%\s+proc'd:")
_PROCESSED = re.compile(r"(-?\d{1,20}) \((\d{1,12}(?:\.\d{1,6})?) Gflop/s\)")
_ERROR = re.compile(r"(?<![\d-])(-?\d{1,20})\s{0,4}(\((?:WARNING|DIED)!\))?")
_TEMP = re.compile(r"(\d{1,4}) C|--")
_TESTED = re.compile(r"^Tested (\d{1,4}) GPUs?:")
_VERDICT = re.compile(r"^GPU (\d{1,4}): (OK|FAULTY)\b")
_BURNING = re.compile(r"Burning for (\d{1,9}) seconds")
_PRECISION = re.compile(r"using (FLOATS|DOUBLES)\b")


@dataclass(frozen=True, slots=True)
class GpuBurnDevice:
    index: int
    name: str
    uuid: str


@dataclass(frozen=True, slots=True)
class GpuBurnProgress:
    percent: float
    processed: tuple[int, ...]  # per GPU; -1 once its worker died
    gflops: tuple[float, ...]  # per GPU, the rate gpu_burn printed for this interval
    errors: tuple[int, ...]  # per GPU, compare errors so far
    faults: tuple[str | None, ...]  # per GPU: None, "WARNING" (wrong results) or "DIED"
    temps: tuple[int | None, ...]  # per GPU, degrees C (None for "--")
    line: int


@dataclass(frozen=True, slots=True)
class GpuBurnReport:
    devices: tuple[GpuBurnDevice, ...]
    progress: tuple[GpuBurnProgress, ...]
    verdicts: dict[int, str]  # GPU index -> "OK" / "FAULTY" from the closing summary
    tested: int | None  # "Tested N GPUs:"
    seconds: int | None  # "Burning for N seconds."
    precision: str | None  # "FLOATS" or "DOUBLES"
    aborted: bool  # "No clients are alive!  Aborting"

    @property
    def finished(self) -> bool:
        """The closing summary is there: gpu_burn ran to its end."""
        return self.tested is not None


def _progress(segment: str, percent: float, number: int) -> GpuBurnProgress:
    errors_at = segment.find("errors:")
    temps_at = segment.find("temps:")
    if errors_at < 0:
        fail(TOOL, f"line {number}: progress record without 'errors:'", segment[:200])
    processed_part = segment[:errors_at]
    error_part = segment[errors_at + len("errors:"): temps_at if temps_at > errors_at else len(segment)]
    temp_part = segment[temps_at + len("temps:"):] if temps_at > errors_at else ""
    pairs = _PROCESSED.findall(processed_part)
    errors = _ERROR.findall(error_part)
    if not pairs or len(errors) != len(pairs):
        fail(TOOL, f"line {number}: {len(pairs)} GPU rates but {len(errors)} error counts", segment[:200])
    temps: list[int | None] = []
    for match in _TEMP.finditer(temp_part):
        temps.append(parse_int(match.group(1)) if match.group(1) else None)
    gflops = tuple(parse_float(rate) or 0.0 for _, rate in pairs)
    return GpuBurnProgress(
        percent=percent,
        processed=tuple(int(count) for count, _ in pairs),
        gflops=gflops,
        errors=tuple(int(count) for count, _ in errors),
        faults=tuple(flag.strip("()!") if flag else None for _, flag in errors),
        temps=tuple(temps[: len(pairs)]),
        line=number,
    )


def parse_gpu_burn(text: str) -> GpuBurnReport:
    """Parse gpu_burn's output (a live log or a finished run)."""
    require_text(TOOL, text)
    devices: list[GpuBurnDevice] = []
    progress: list[GpuBurnProgress] = []
    verdicts: dict[int, str] = {}
    tested: int | None = None
    seconds: int | None = None
    precision: str | None = None
    aborted = False
    for number, raw in enumerate(iter_lines(text), start=1):
        line = raw.strip()
        if not line:
            continue
        device = _DEVICE.match(line)
        if device is not None and tested is None:
            devices.append(GpuBurnDevice(int(device.group(1)), device.group(2), device.group(3)))
            continue
        starts = list(_PERCENT.finditer(line))
        if starts:
            for k, match in enumerate(starts):
                end = starts[k + 1].start() if k + 1 < len(starts) else len(line)
                percent = parse_float(match.group(1)) or 0.0
                progress.append(_progress(line[match.end():end], percent, number))
            continue
        if (found := _TESTED.match(line)) is not None:
            tested = int(found.group(1))
        elif tested is not None and (verdict := _VERDICT.match(line)) is not None:
            verdicts[int(verdict.group(1))] = verdict.group(2)
        elif (burning := _BURNING.search(line)) is not None:
            seconds = int(burning.group(1))
        elif (used := _PRECISION.search(line)) is not None:
            precision = used.group(1)
        elif "No clients are alive" in line:
            aborted = True
    if not devices and not progress and tested is None:
        fail(TOOL, "no GPU line, progress line or summary", head_excerpt(text))
    return GpuBurnReport(tuple(devices), tuple(progress), verdicts, tested, seconds, precision, aborted)
