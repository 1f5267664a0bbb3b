"""One sample for the stall detector: each GPU's utilisation, power, SM clock and compute processes (pynvml),
and the compute HCAs' traffic counters (sysfs ``/sys/class/infiniband/<hca>/ports/<p>/counters``).

NVML stays initialised while the watch samples (one ``nvmlInit`` held), and each sample takes one more
``nvmlInit``/``nvmlShutdown`` pair around its reads: with the library already initialised that is a
reference count on a real node, and it is when the simulated library reads its node's state again.

A reading that fails is ``None`` (the detector then sees no stall); a counter stuck at 2^32-1 (a 32-bit
counter that saturated: it no longer moves whatever the traffic) is unreadable too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from burnin.watch.stall import GpuSample, Sample

NVML_CLOCK_SM = 1
TRAFFIC_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")
SATURATED = 2**32 - 1


def counter_files(root: str, hcas: Sequence[str] | None) -> list[tuple[str, str]]:
    """(label, path) of every traffic counter of ``hcas`` (None: every InfiniBand HCA sysfs lists)."""
    base = os.path.join(root, "sys/class/infiniband")
    try:
        present = sorted(os.listdir(base))
    except OSError:
        return []
    names = [name for name in present if hcas is None or name in hcas]
    files: list[tuple[str, str]] = []
    for name in names:
        ports = os.path.join(base, name, "ports")
        try:
            port_names = sorted(os.listdir(ports))
        except OSError:
            continue
        for port in port_names:
            if hcas is None and _read(os.path.join(ports, port, "link_layer")) != "InfiniBand":
                continue
            for counter in TRAFFIC_COUNTERS:
                files.append((f"{name}/{port}/{counter}", os.path.join(ports, port, "counters", counter)))
    return files


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def read_counters(files: Sequence[tuple[str, str]]) -> tuple[tuple[tuple[str, int], ...] | None, str]:
    """The counters' values, or None and why (a file missing, garbage, a saturated counter)."""
    if not files:
        return None, "no compute HCA traffic counters in sysfs"
    values: list[tuple[str, int]] = []
    for label, path in files:
        text = _read(path)
        if text is None or not text.isdigit():
            return None, f"{label}: {'unreadable' if text is None else 'not a number'}"
        value = int(text)
        if value == SATURATED:
            return None, f"{label}: saturated at 2^32-1"
        values.append((label, value))
    return tuple(values), ""


class NvmlSampler:
    """The GPUs' readings through pynvml; ``None`` fields where NVML could not answer."""

    def __init__(self) -> None:
        self.error = ""
        self._nv: Any = None

    def _library(self) -> Any:
        if self._nv is None:
            import pynvml

            pynvml.nvmlInit()  # held while the watch samples: each sample's own init is then a reference count
            self._nv = pynvml
        return self._nv

    def gpus(self) -> tuple[GpuSample, ...] | None:
        try:
            nv = self._library()
        except Exception as exc:  # noqa: BLE001 - no pynvml, no driver: no GPU readings, no stall
            self.error = f"NVML: {type(exc).__name__}: {exc}"
            return None
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            self.error = f"NVML: {exc}"
            return None
        try:
            return tuple(self._gpu(nv, index) for index in range(int(nv.nvmlDeviceGetCount())))
        except nv.NVMLError as exc:
            self.error = f"NVML: {exc}"
            return None
        finally:
            try:
                nv.nvmlShutdown()
            except nv.NVMLError:
                pass

    def _gpu(self, nv: Any, index: int) -> GpuSample:
        def ask(call: Any, *args: Any) -> Any:
            try:
                return call(*args)
            except nv.NVMLError:
                return None

        handle = ask(nv.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            return GpuSample(index, None, None, None)
        utilisation = ask(nv.nvmlDeviceGetUtilizationRates, handle)
        power_mw = ask(nv.nvmlDeviceGetPowerUsage, handle)
        limit_mw = ask(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
        processes = ask(nv.nvmlDeviceGetComputeRunningProcesses, handle)
        return GpuSample(
            index=index,
            utilisation_pct=None if utilisation is None else float(utilisation.gpu),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=None if limit_mw is None else limit_mw / 1000,
            sm_clock_mhz=ask(nv.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_SM),
            processes=None if processes is None else len(processes),
        )

    def close(self) -> None:
        if self._nv is not None:
            try:
                self._nv.nvmlShutdown()
            except self._nv.NVMLError:
                pass
            self._nv = None


def take_sample(at: float, nvml: NvmlSampler, files: Sequence[tuple[str, str]]) -> Sample:
    gpus = nvml.gpus()
    counters, why = read_counters(files)
    if gpus is None:
        why = "; ".join(part for part in (nvml.error, why) if part)
    return Sample(at, gpus or (), counters, why)
