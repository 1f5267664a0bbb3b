"""What a soak runs: site settings (``--config soak.yaml``), the stages and their commands.

The soak starts with DCGM diagnostics (BRN-01) on every node, then turns
through the stress stages until the duration is up, every node at once:

====== ================================================================ =========
stage  commands (per node)                                              check
====== ================================================================ =========
gpu    ``gpu_burn -tc S`` (or burnin's portable torch stress when        BRN-02
       gpu_burn is not installed), then the SDC workload while the        GPU-14
       GPUs are hot (the collector's ``sdc`` source; ``gpu.sdc``)
nccl   ``all_reduce_perf -b 8G -e 8G -g <gpus> -n <iterations>``         BRN-03
cpu    ``stress-ng --cpu 0 --vm <2 per socket> --vm-bytes 80% --verify`` BRN-04
       then STREAM per socket under ``numactl``
disk   ``nvme smart-log DEV`` for each NVMe device (``nvme list``)       BRN-05
====== ================================================================ =========

Each stage and every tolerance can be changed, and a stage switched off, only
in the site settings file; a stage switched off is *not applicable* on every
node with the file named as the reason. Thresholds marked [U] in
check-catalog §10 are defaults to calibrate.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from burnin.errors import UsageError

DRY_RUN_REASON = "dry run: not measured (--dry-run printed the soak's commands and ran none)"
"""Why every check of ``burnin soak --dry-run`` is incomplete (:meth:`burnin.soak.scheduler.Soak.run`)."""
# disk first in each turn: it takes seconds, so a soak shorter than one turn of the long stages still reads
# the drives (BRN-05); the long stages follow in turn, each clipped to the time left
STAGES = ("disk", "gpu", "nccl", "cpu")
STAGE_CHECK = {"dcgm": "BRN-01", "gpu": "BRN-02", "nccl": "BRN-03", "cpu": "BRN-04", "disk": "BRN-05"}
SIM_SAMPLES = 60  # a simulated soak samples about this many times, whatever its length
SIM_MAX_SAMPLES = 600  # at most this many (--interval): each sample round takes real time
MIN_INTERVAL_S = 1.0  # a real soak samples at most once a second (a sample is a collector run per node)
MAX_DURATION_S = 30 * 86400.0  # burn-in norms are 24-72 h; a month is the most a soak may last
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNIT_S = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> float:
    """``24h``, ``90m``, ``30s``, ``2d``, ``45`` (seconds) → seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(f"{text!r} is not a duration (write e.g. 24h, 90m, 30s)")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise UsageError(f"{text!r}: a soak lasts at most {MAX_DURATION_S / 86400:g} days")
    if seconds <= 0:
        raise UsageError(f"{text!r}: a duration must be above 0")
    return seconds


def check_interval(interval_s: float, duration_s: float, *, simulated: bool) -> None:
    """``--interval``: on real nodes at least :data:`MIN_INTERVAL_S`; a simulated soak (whose every sample round
    takes real time while its clock jumps) samples at most :data:`SIM_MAX_SAMPLES` times. UsageError otherwise."""
    least = duration_s / SIM_MAX_SAMPLES if simulated else MIN_INTERVAL_S
    if not math.isfinite(interval_s) or (not simulated and interval_s < least):
        raise UsageError(f"--interval {interval_s:g}: a soak samples at most once every {MIN_INTERVAL_S:g} s")
    if interval_s < least:
        raise UsageError(f"--interval {interval_s:g}: a simulated soak of {hms(duration_s)} samples at most "
                         f"{SIM_MAX_SAMPLES} times (--interval {math.ceil(least):g} or more)")


def hms(seconds: float) -> str:
    """``36000`` → ``10:00:00`` (hours may exceed 24)."""
    total = round(seconds)
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DcgmStage(_Model):
    enabled: bool = True
    level: Literal[3, 4] = 3
    minutes: float = Field(default=15.0, gt=0, description="expected run time (-r 3 about 15 min, -r 4 an hour+)")


class GpuStage(_Model):
    enabled: bool = True
    minutes: float = Field(default=60.0, gt=0)
    tool: Literal["auto", "gpu_burn", "builtin"] = "auto"
    gpu_burn_args: tuple[str, ...] = ("-tc",)
    sdc: bool = Field(default=True, description="GPU-14: the SDC workload on every GPU after each GPU stage, its "
                                                "digests compared across the soak's GPUs (a GPU wrong once hot)")
    reference_gflops: float | None = Field(
        default=None, gt=0, description="BRN-02: the Gflop/s per GPU a good node reaches with this tool and these "
                                        "arguments; the fleet median is held to it, so a slow majority is no norm")


class NcclStage(_Model):
    enabled: bool = True
    minutes: float = Field(default=20.0, gt=0)
    binary: str = "all_reduce_perf"
    size: str = "8G"
    iterations_per_second: float = Field(default=30.0, gt=0, description="8 GiB all_reduce on 8 H100 ~ 31 ms")


class CpuStage(_Model):
    enabled: bool = True
    minutes: float = Field(default=20.0, gt=0)
    vm_per_socket: int = Field(default=2, ge=1)
    stream_binary: str = "stream"


class DiskStage(_Model):
    enabled: bool = True
    devices: tuple[str, ...] | None = None  # None: what `nvme list` finds


class Tolerances(_Model):
    throughput_drift: float = Field(default=0.05, ge=0, lt=1, description="BRN-06: > 5% perf drift fails [U]")
    nccl_drift: float = Field(default=0.03, ge=0, lt=1, description="BRN-03: > 3% busbw drift fails [U]")
    straggler: float = Field(default=0.05, ge=0, lt=1, description="BRN-02: GPU vs node, node vs fleet median [U]")
    stream_socket_spread: float = Field(default=0.05, ge=0, lt=1, description="BRN-04: both sockets within 5% [U]")
    temperature_creep_c: float = Field(default=5.0, ge=0, description="rise first -> last hour under load [U]")
    ecc_corrected_per_hour: int = Field(default=100, ge=0, description="GPU-02 corrected ECC growth [U]")
    pcie_replay_per_hour: int = Field(default=100, ge=0, description="GPU-09: FAIL if it grows by > 100 [U]")
    edac_ce_per_hour: int = Field(default=10, ge=0, description="BRN-04: EDAC ce_count stable [U]")
    warmup_minutes: float = Field(default=10.0, ge=0, description="temperatures settle before creep is judged")
    max_gap_intervals: float = Field(default=3.0, ge=1, description="unmonitored longer: the node's clock restarts")


class SoakSettings(_Model):
    interval_s: float = Field(default=30.0, ge=MIN_INTERVAL_S, le=3600, description="BRN-07: sample every 10-30 s")
    dcgm: DcgmStage = DcgmStage()
    gpu: GpuStage = GpuStage()
    nccl: NcclStage = NcclStage()
    cpu: CpuStage = CpuStage()
    disk: DiskStage = DiskStage()
    tolerances: Tolerances = Tolerances()

    def enabled(self, stage: str) -> bool:
        return bool(getattr(self, stage).enabled)


def load_settings(path: Path | None) -> SoakSettings:
    """The defaults, or the site file's settings (a mistake names the file, key and line)."""
    if path is None:
        return SoakSettings()
    from burnin.topology.load import load_yaml_document, validation_to_config_error

    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    data, lines = load_yaml_document(path)
    try:
        return SoakSettings.model_validate(data or {})
    except ValidationError as exc:
        raise validation_to_config_error(path, exc, lines) from None


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a stage, run on every node."""

    name: str  # "gpu_burn", "stress-ng", "stream0", "smart-log /dev/nvme0n1", ...
    argv: tuple[str, ...]
    timeout_s: float
    stdin: bytes | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One turn of a stage on every node: its steps one after the other, lasting ``seconds``."""

    stage: str
    seconds: float
    steps: tuple[Step, ...]


STEP_GRACE_S = 120.0
"""Beyond a stress step's own length: the tool's start-up and tear-down (starting the step is the launcher's
slack, burnin.launch.base.SLACK_S)."""


def _with_slack(seconds: float) -> float:
    return seconds * 1.25 + STEP_GRACE_S


def dcgm_chunk(settings: SoakSettings) -> Chunk:
    seconds = settings.dcgm.minutes * 60
    argv = ("dcgmi", "diag", "-r", str(settings.dcgm.level), "-j")
    return Chunk("dcgm", seconds, (Step("dcgmi", argv, _with_slack(2 * seconds)),))


def gpu_chunk(settings: SoakSettings, seconds: float, gpus: int) -> Chunk:
    whole = max(1, round(seconds))
    burn = ("gpu_burn", *settings.gpu.gpu_burn_args, str(whole))
    if settings.gpu.tool == "gpu_burn":
        return Chunk("gpu", seconds, (Step("gpu_burn", burn, _with_slack(seconds)),))
    from burnin.soak.gpustress import script_bytes

    builtin = ("python3", "-", str(whole))
    if settings.gpu.tool == "builtin":
        return Chunk("gpu", seconds, (Step("builtin", builtin, _with_slack(seconds), script_bytes()),))
    # auto: gpu_burn where the node has it, burnin's torch stress (sent on stdin) otherwise
    line = (f"if command -v gpu_burn >/dev/null 2>&1; then exec {shlex.join(burn)}; "
            f"else exec {shlex.join(builtin)}; fi")
    return Chunk("gpu", seconds, (Step("gpu_burn", ("sh", "-c", line), _with_slack(seconds), script_bytes()),))


def nccl_chunk(settings: SoakSettings, seconds: float, gpus: int) -> Chunk:
    iterations = max(20, int(seconds * settings.nccl.iterations_per_second))
    size = settings.nccl.size
    argv = (settings.nccl.binary, "-b", size, "-e", size, "-f", "2", "-g", str(gpus), "-n", str(iterations))
    return Chunk("nccl", seconds, (Step("all_reduce_perf", argv, _with_slack(seconds)),))


def cpu_chunk(settings: SoakSettings, seconds: float, sockets: dict[int, int]) -> Chunk:
    """stress-ng for ``seconds``, then STREAM on each socket alone (OMP threads = that socket's cores)."""
    workers = settings.cpu.vm_per_socket * max(1, len(sockets))
    stress = ("stress-ng", "--cpu", "0", "--vm", str(workers), "--vm-bytes", "80%", "--verify", "--metrics-brief",
              "--timeout", f"{max(1, round(seconds))}s")
    steps = [Step("stress-ng", stress, _with_slack(seconds))]
    for socket, cores in sorted(sockets.items()):
        argv = ("env", f"OMP_NUM_THREADS={cores}", "numactl", f"--cpunodebind={socket}", f"--membind={socket}",
                settings.cpu.stream_binary)
        steps.append(Step(f"stream{socket}", argv, STEP_GRACE_S + 300))
    return Chunk("cpu", seconds, tuple(steps))


def disk_list_step() -> Step:
    return Step("nvme-list", ("nvme", "list", "--output-format=json"), 60.0)


def disk_chunk(devices: tuple[str, ...]) -> Chunk:
    steps = tuple(Step(f"smart-log {d}", ("nvme", "smart-log", d, "--output-format=json"), 60.0) for d in devices)
    return Chunk("disk", 60.0, steps)


def stage_minutes(settings: SoakSettings, stage: str) -> float:
    return float(getattr(settings, stage).minutes) if stage != "disk" else 1.0


def default_interval(duration_s: float, simulated: bool, settings: SoakSettings) -> float:
    """Real nodes: the settings' interval. Simulated: about SIM_SAMPLES samples per soak (at least 30 s)."""
    if not simulated:
        return settings.interval_s
    return float(max(30, round(duration_s / SIM_SAMPLES)))
