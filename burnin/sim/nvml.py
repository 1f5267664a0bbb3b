"""The simulated NVML: compile ``nvml_sim.c`` once per source version, render its state file.

The shared library is built with the system C compiler into a cache directory
(``$XDG_CACHE_HOME/burnin/nvml`` or ``~/.cache/burnin/nvml``), keyed by a hash of the
source and flags; it is compiled under a temporary name and renamed into place,
so parallel test processes never see a half-written file. Each node's
``lib/libnvidia-ml.so.1`` is a symlink to it; pynvml finds it through
``LD_LIBRARY_PATH`` like the real library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from burnin import resources as burnin_resources
from burnin.errors import BurninError
from burnin.sim.state import ECC_KEYS, NVLINK_COUNTERS, GpuState, NodeState

LIBRARY_NAME = "libnvidia-ml.so.1"
CFLAGS = ("-shared", "-fPIC", "-O2", "-pthread")
_SOURCE = "nvml_sim.c"


class NvmlBuildError(BurninError):
    """The simulated NVML library could not be compiled."""


def source_text() -> str:
    return resources.files("burnin.sim").joinpath(_SOURCE).read_text(encoding="utf-8")


def cache_dir() -> Path:
    return burnin_resources.cache_dir("nvml")


def _compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise NvmlBuildError(
        "no C compiler found (tried $CC, cc, gcc, clang): the simulator compiles its NVML library "
        "on first use; install one (e.g. apt-get install gcc) or set CC"
    )


def library_path() -> Path:
    """Path of the compiled library, building it first when the cache lacks this version."""
    source = source_text()
    digest = hashlib.sha256((source + " ".join(CFLAGS)).encode()).hexdigest()[:16]
    target = cache_dir() / f"libnvidia-ml-sim-{digest}.so"
    if target.is_file():
        return target
    compiler = _compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="burnin-nvml-", dir=target.parent) as work:
        src = Path(work) / _SOURCE
        src.write_text(source, encoding="utf-8")
        out = Path(work) / "lib.so"
        try:
            proc = subprocess.run([compiler, *CFLAGS, "-o", str(out), str(src)],
                                  capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NvmlBuildError(f"cannot run C compiler {compiler!r}: {exc}") from exc
        if proc.returncode != 0:
            raise NvmlBuildError(f"{compiler} failed to build the simulated NVML library "
                                 f"(exit {proc.returncode}): {proc.stderr.strip()[:600]}")
        os.replace(out, target)  # atomic: concurrent builders each rename a complete file
    return target


def _flag(value: bool) -> str:
    return "1" if value else "0"


def _ints(values: list[int] | list[bool]) -> str:
    return ",".join(str(int(v)) for v in values)


def _gpu_lines(index: int, gpu: GpuState) -> list[str]:
    domain, bus, rest = gpu.bus_id.split(":")
    device = rest.split(".")[0]
    nvml_bus = f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}"
    values: dict[str, object] = {
        "name": gpu.name, "uuid": gpu.uuid, "serial": gpu.serial, "bus_id": nvml_bus,
        "vbios": gpu.vbios, "board_part": gpu.board_part, "inforom_image": gpu.inforom_image,
        "inforom_oem": gpu.inforom_oem, "inforom_ecc": gpu.inforom_ecc, "inforom_power": gpu.inforom_power,
        "cpulist": gpu.cpulist, "domain": int(domain, 16), "bus": int(bus, 16),
        "device": int(device, 16), "pci_device_id": "0x233010DE", "pci_subsystem_id": "0x16C110DE",
        "memory_total": gpu.memory_total_mib * 1024 * 1024,
        "memory_reserved": gpu.memory_reserved_mib * 1024 * 1024,
        "memory_used": gpu.memory_used_mib * 1024 * 1024,
        "lost": _flag(gpu.lost), "persistence": _flag(gpu.persistence),
        "mig_current": _flag(gpu.mig_current), "mig_pending": _flag(gpu.mig_pending),
        "ecc_current": _flag(gpu.ecc_current), "ecc_pending": _flag(gpu.ecc_pending),
        "remap_correctable": gpu.remap_correctable, "remap_uncorrectable": gpu.remap_uncorrectable,
        "remap_pending": _flag(gpu.remap_pending), "remap_failure": _flag(gpu.remap_failure),
        "remap_histogram": _ints(gpu.remap_histogram),
        "clock_event_reasons": hex(gpu.clock_event_reasons),
        "supported_clock_event_reasons": "0x1ff",
        "temperature": gpu.temperature_c, "memory_temperature": gpu.memory_temperature_c,
        # Indexed by nvmlTemperatureThresholds_t: SHUTDOWN, SLOWDOWN, MEM_MAX, GPU_MAX, ...
        "temperature_thresholds": _ints([gpu.shutdown_c, gpu.slowdown_c, gpu.memory_max_c, gpu.gpu_max_c]),
        "power_enforced_mw": gpu.power_enforced_mw, "power_default_mw": gpu.power_default_mw,
        "power_limit_mw": gpu.power_limit_mw, "power_min_mw": gpu.power_min_mw,
        "power_max_mw": gpu.power_max_mw, "power_usage_mw": gpu.power_usage_mw,
        "utilization_gpu": gpu.utilization_pct, "clock_sm": gpu.sm_clock_mhz,
        "compute_pids": _ints(gpu.compute_pids),
        "pcie_gen_current": gpu.pcie_gen_current, "pcie_gen_max": gpu.pcie_gen_max,
        "pcie_gen_gpu_max": gpu.pcie_gen_gpu_max, "pcie_width_current": gpu.pcie_width_current,
        "pcie_width_max": gpu.pcie_width_max, "pcie_replay": gpu.pcie_replay,
        "nvlink_count": len(gpu.nvlink_active), "nvlink_active": _ints(gpu.nvlink_active),
        "nvlink_speed_mbps": gpu.nvlink_speed_mbps,
        "fabric_supported": _flag(gpu.fabric_supported), "fabric_state": gpu.fabric_state,
        "fabric_status": gpu.fabric_status, "fabric_health_mask": 0,
        "numa_node": gpu.numa_node, "minor": gpu.minor, "module_id": gpu.module_id,
        "recovery_action": 1 if gpu.remap_pending else 0,
    }
    for key in ECC_KEYS:
        values[f"ecc_{key}"] = gpu.ecc[key]
    for counter in NVLINK_COUNTERS:
        values[f"nvlink_{counter}"] = _ints(gpu.nvlink_errors.get(counter, []))
    return [f"gpu.{index}.{key}={value}" for key, value in values.items()]


def render_state(state: NodeState) -> str:
    """The ``key=value`` file the C library reads at every nvmlInit."""
    gpus = state.visible_gpus
    lines = [
        f"# burnin simulated NVML state for node {state.name}",
        f"driver_version={state.host.driver_version}",
        f"nvml_version=12.{state.host.driver_version}",
        f"cuda_version={state.host.cuda_version}",
        f"device_count={len(gpus)}",
    ]
    for index, gpu in enumerate(gpus):
        lines += _gpu_lines(index, gpu)
    return "\n".join(lines) + "\n"
