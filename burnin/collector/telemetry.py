"""What ``burnin soak`` samples every interval on top of the ``nvml`` and ``infiniband`` sources.

Sources (asked for by name; not part of ``all``):

- ``gpu-telemetry``: per GPU, the BRN-07 readings the ``nvml`` source does not
  take: power draw, memory temperature and its limit, PCIe replay counter, SM
  clock. A field NVML cannot answer is ``None`` with its error kept.
- ``host-health``: uptime, boot id and the EDAC memory-controller counters
  (``/sys/devices/system/edac/mc/mc*/{ce,ue}_count``).
- ``kernel-events``: the kernel log's lines about Xids, machine checks, EDAC
  and PCIe AER (``dmesg``), raw, for the controller's parsers.
- ``dmon``: ``nvidia-smi dmon -s pucm -c 1`` (power, temperatures, clocks), the
  controller's fallback when NVML cannot be read.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from burnin.collector.commands import run_tool

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

NVML_FI_DEV_MEMORY_TEMP = 82
NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2
NVML_CLOCK_SM = 1
_KERNEL_KEEP = ("Xid", "NVRM", "mce", "Machine check", "Hardware Error", "EDAC", "AER")


def _gpu(index: int) -> dict[str, Any]:
    import pynvml as n

    facts: dict[str, Any] = {"index": index, "errors": {}}

    def get(field: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except n.NVMLError as exc:
            facts["errors"][field] = f"{type(exc).__name__}: {exc}"
            return None

    handle = get("handle", lambda: n.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        return facts
    facts["power_mw"] = get("power", lambda: n.nvmlDeviceGetPowerUsage(handle))
    facts["pcie_replay"] = get("pcie_replay", lambda: n.nvmlDeviceGetPcieReplayCounter(handle))
    facts["memory_max_c"] = get("memory_max", lambda: n.nvmlDeviceGetTemperatureThreshold(
        handle, NVML_TEMPERATURE_THRESHOLD_MEM_MAX))
    facts["sm_clock_mhz"] = get("sm_clock", lambda: n.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM))
    values = get("memory_temperature", lambda: n.nvmlDeviceGetFieldValues(handle, [NVML_FI_DEV_MEMORY_TEMP]))
    facts["memory_temperature_c"] = None
    if values is not None:
        value = values[0]
        if int(value.nvmlReturn) == 0:
            facts["memory_temperature_c"] = int(value.value.uiVal)
        else:
            facts["errors"]["memory_temperature"] = f"NVML return {int(value.nvmlReturn)}"
    return facts


def gpu_telemetry() -> dict[str, Any]:
    """Per-GPU power, memory temperature (and its limit), PCIe replays and SM clock."""
    import pynvml as n

    try:
        n.nvmlInit()
    except n.NVMLError as exc:
        raise RuntimeError(f"nvmlInit failed: {exc}") from None
    try:
        return {"gpus": [_gpu(i) for i in range(int(n.nvmlDeviceGetCount()))]}
    finally:
        try:
            n.nvmlShutdown()
        except n.NVMLError:
            pass


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def host_health(root: str) -> dict[str, Any]:
    """Uptime (s), boot id, and EDAC counters per memory controller."""
    base = root.rstrip("/") or ""
    uptime_text = _read(f"{base}/proc/uptime")
    uptime: float | None = None
    if uptime_text:
        try:
            uptime = float(uptime_text.split()[0])
        except ValueError:
            uptime = None
    edac_dir = f"{base}/sys/devices/system/edac/mc"
    controllers: dict[str, dict[str, int | None]] = {}
    if os.path.isdir(edac_dir):
        for name in sorted(os.listdir(edac_dir)):
            if name.startswith("mc") and name[2:].isdigit():
                controllers[name] = {"ce_count": _number(_read(f"{edac_dir}/{name}/ce_count")),
                                     "ue_count": _number(_read(f"{edac_dir}/{name}/ue_count"))}
    return {"uptime_s": uptime, "boot_id": _read(f"{base}/proc/sys/kernel/random/boot_id"),
            "edac": controllers, "edac_present": os.path.isdir(edac_dir)}


def kernel_events(root: str, timeout: float) -> dict[str, Any]:
    """The kernel log's Xid, NVRM, machine-check, EDAC and AER lines (the rest stays on the node)."""
    record = run_tool(["dmesg"], timeout)
    lines = record["stdout"].splitlines()
    kept = [line for line in lines if any(key in line for key in _KERNEL_KEEP)]
    record["stdout"] = "\n".join(kept) + ("\n" if kept else "")
    record["lines_total"] = len(lines)
    return record


def dmon(root: str, timeout: float) -> dict[str, Any]:
    return run_tool(["nvidia-smi", "dmon", "-s", "pucm", "-c", "1"], timeout)


SOAK_SOURCES: dict[str, tuple[str, Callable[[str, float], Any]]] = {
    "gpu-telemetry": ("gpu_telemetry", lambda root, timeout: gpu_telemetry()),
    "host-health": ("host_health", lambda root, timeout: host_health(root)),
    "kernel-events": ("commands", kernel_events),
    "dmon": ("commands", dmon),
}
