"""NVML facts through pynvml: one init, one pass over every GPU, per-field errors kept.

A field NVML cannot answer becomes ``None`` with its error recorded under the
GPU's ``errors`` map, so the controller can tell "not measured" from "bad".
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


NVLINK_MAX_LINKS = 18


_ERROR_NAMES: dict[object, str] = {}
"""pynvml's error code -> its ``NVML_ERROR_*`` name (the first in ``dir()`` order), filled on the first error."""


def _error_name(exc: BaseException) -> str:
    if not _ERROR_NAMES:
        import pynvml

        for name in dir(pynvml):
            if name.startswith("NVML_ERROR_"):
                _ERROR_NAMES.setdefault(getattr(pynvml, name), name)
    value = getattr(exc, "value", None)
    try:
        return _ERROR_NAMES[value]
    except (KeyError, TypeError):  # a code pynvml does not name, or an unhashable value
        return f"{type(exc).__name__}: {exc}"


class _Gpu:
    """Collects one GPU's fields, recording each failing call instead of raising."""

    def __init__(self, index: int) -> None:
        self.facts: dict[str, Any] = {"index": index, "errors": {}, "lost": False}

    def get(self, field: str, call: Callable[[], T]) -> T | None:
        import pynvml

        try:
            return call()
        except pynvml.NVMLError as exc:
            name = _error_name(exc)
            self.facts["errors"][field] = name
            if getattr(exc, "value", None) == pynvml.NVML_ERROR_GPU_IS_LOST:
                self.facts["lost"] = True
            return None


def _text(value: str | bytes | None) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _normalise_bus_id(bus_id: str | None) -> str | None:
    """NVML's ``00000000:1B:00.0`` → sysfs's ``0000:1b:00.0``."""
    if not bus_id:
        return None
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def _gpu_facts(index: int) -> dict[str, Any]:
    import pynvml as n

    gpu = _Gpu(index)
    f = gpu.facts
    handle = gpu.get("handle", lambda: n.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        return f
    f["name"] = _text(gpu.get("name", lambda: n.nvmlDeviceGetName(handle)))
    if gpu.facts["lost"]:
        return f
    f["uuid"] = _text(gpu.get("uuid", lambda: n.nvmlDeviceGetUUID(handle)))
    f["serial"] = _text(gpu.get("serial", lambda: n.nvmlDeviceGetSerial(handle)))
    pci = gpu.get("pci", lambda: n.nvmlDeviceGetPciInfo(handle))
    f["bus_id"] = _normalise_bus_id(_text(pci.busId)) if pci is not None else None
    mem = gpu.get("memory", lambda: n.nvmlDeviceGetMemoryInfo(handle))
    f["memory_total_mib"] = int(mem.total) // (1024 * 1024) if mem is not None else None
    f["vbios"] = _text(gpu.get("vbios", lambda: n.nvmlDeviceGetVbiosVersion(handle)))
    f["inforom"] = _inforom_facts(gpu, handle)
    persistence = gpu.get("persistence_mode", lambda: n.nvmlDeviceGetPersistenceMode(handle))
    f["persistence_mode"] = None if persistence is None else persistence == n.NVML_FEATURE_ENABLED
    mig = gpu.get("mig_mode", lambda: n.nvmlDeviceGetMigMode(handle))
    f["mig_mode"] = None if mig is None else {"current": int(mig[0]), "pending": int(mig[1])}
    ecc = gpu.get("ecc_mode", lambda: n.nvmlDeviceGetEccMode(handle))
    f["ecc_mode"] = None if ecc is None else {"current": bool(ecc[0]), "pending": bool(ecc[1])}

    unc, cor = n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_MEMORY_ERROR_TYPE_CORRECTED
    vol, agg = n.NVML_VOLATILE_ECC, n.NVML_AGGREGATE_ECC
    f["ecc_errors"] = {
        "volatile_uncorrected": gpu.get("ecc_volatile_uncorrected",
                                        lambda: n.nvmlDeviceGetTotalEccErrors(handle, unc, vol)),
        "aggregate_uncorrected": gpu.get("ecc_aggregate_uncorrected",
                                         lambda: n.nvmlDeviceGetTotalEccErrors(handle, unc, agg)),
        "volatile_corrected": gpu.get("ecc_volatile_corrected",
                                      lambda: n.nvmlDeviceGetTotalEccErrors(handle, cor, vol)),
        "aggregate_corrected": gpu.get("ecc_aggregate_corrected",
                                       lambda: n.nvmlDeviceGetTotalEccErrors(handle, cor, agg)),
        "sram_aggregate_uncorrected": gpu.get(
            "ecc_sram_aggregate_uncorrected",
            lambda: n.nvmlDeviceGetMemoryErrorCounter(handle, unc, agg, n.NVML_MEMORY_LOCATION_SRAM)),
        "dram_aggregate_uncorrected": gpu.get(
            "ecc_dram_aggregate_uncorrected",
            lambda: n.nvmlDeviceGetMemoryErrorCounter(handle, unc, agg, n.NVML_MEMORY_LOCATION_DRAM)),
    }
    rows = gpu.get("remapped_rows", lambda: n.nvmlDeviceGetRemappedRows(handle))
    f["remapped_rows"] = None if rows is None else {
        "correctable": int(rows[0]), "uncorrectable": int(rows[1]),
        "pending": bool(rows[2]), "failure": bool(rows[3]),
    }
    f["clock_event_reasons"] = gpu.get("clock_event_reasons",
                                       lambda: n.nvmlDeviceGetCurrentClocksEventReasons(handle))
    f["temperature_c"] = gpu.get("temperature",
                                 lambda: n.nvmlDeviceGetTemperature(handle, n.NVML_TEMPERATURE_GPU))
    f["temperature_thresholds"] = {
        name: gpu.get(f"temperature_threshold_{name}",
                      partial(n.nvmlDeviceGetTemperatureThreshold, handle, threshold))
        for name, threshold in (
            ("slowdown", n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            ("shutdown", n.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            ("gpu_max", n.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        )
    }
    f["power"] = {
        "enforced_limit_mw": gpu.get("power_enforced_limit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(handle)),
        "default_limit_mw": gpu.get("power_default_limit",
                                    lambda: n.nvmlDeviceGetPowerManagementDefaultLimit(handle)),
    }
    f["pcie"] = {
        "curr_gen": gpu.get("pcie_curr_gen", lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        "max_gen": gpu.get("pcie_max_gen", lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
        "gpu_max_gen": gpu.get("pcie_gpu_max_gen", lambda: n.nvmlDeviceGetGpuMaxPcieLinkGeneration(handle)),
        "curr_width": gpu.get("pcie_curr_width", lambda: n.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        "max_width": gpu.get("pcie_max_width", lambda: n.nvmlDeviceGetMaxPcieLinkWidth(handle)),
    }
    f["nvlink"] = _nvlink_facts(gpu, handle)
    f["fabric"] = _fabric_facts(gpu, handle)
    return f


INFOROM_OBJECTS = ("oem", "ecc", "power")
"""nvmlInforomObject_t members nvidia-smi -q shows (OEM, ECC, Power Management Object), in enum order."""


def _inforom_facts(gpu: _Gpu, handle: Any) -> dict[str, str | None]:
    """InfoROM image and object versions; one NVML can not give is None with its error (``inforom_<name>``)."""
    import pynvml as n

    facts = {"image": _text(gpu.get("inforom_image", lambda: n.nvmlDeviceGetInforomImageVersion(handle)))}
    for name, obj in zip(INFOROM_OBJECTS, (n.NVML_INFOROM_OEM, n.NVML_INFOROM_ECC, n.NVML_INFOROM_POWER),
                         strict=True):
        facts[name] = _text(gpu.get(f"inforom_{name}", partial(n.nvmlDeviceGetInforomVersion, handle, obj)))
    return facts


def _nvlink_facts(gpu: _Gpu, handle: Any) -> list[dict[str, Any]] | None:
    import pynvml as n

    links: list[dict[str, Any]] = []
    counters = (
        ("replay", n.NVML_NVLINK_ERROR_DL_REPLAY),
        ("recovery", n.NVML_NVLINK_ERROR_DL_RECOVERY),
        ("crc_flit", n.NVML_NVLINK_ERROR_DL_CRC_FLIT),
    )
    for link in range(NVLINK_MAX_LINKS):
        try:
            state = n.nvmlDeviceGetNvLinkState(handle, link)
        except n.NVMLError as exc:
            if getattr(exc, "value", None) in (n.NVML_ERROR_INVALID_ARGUMENT, n.NVML_ERROR_NOT_SUPPORTED):
                break  # no such link: the GPU has fewer links (or none)
            gpu.facts["errors"][f"nvlink_{link}_state"] = _error_name(exc)
            if getattr(exc, "value", None) == n.NVML_ERROR_GPU_IS_LOST:
                gpu.facts["lost"] = True
                return None
            continue
        entry: dict[str, Any] = {"link": link, "active": state == n.NVML_FEATURE_ENABLED}
        for name, counter in counters:
            entry[name] = gpu.get(f"nvlink_{link}_{name}",
                                  partial(n.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter))
        links.append(entry)
    return links


def _fabric_facts(gpu: _Gpu, handle: Any) -> dict[str, Any] | None:
    import ctypes

    import pynvml as n

    info = n.c_nvmlGpuFabricInfo_t()
    # pynvml passes this argument through as is: it must be a pointer, not the struct.
    if gpu.get("fabric", lambda: n.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))) is None:
        return None
    return {"state": int(info.state), "status": int(info.status)}


def collect_nvml() -> dict[str, Any]:
    """Driver-level and per-GPU facts. Raises only when NVML itself cannot start."""
    import pynvml as n

    try:
        n.nvmlInit()
    except n.NVMLError as exc:
        raise RuntimeError(f"nvmlInit failed: {_error_name(exc)}") from None
    try:
        facts: dict[str, Any] = {"driver_version": _text(n.nvmlSystemGetDriverVersion())}
        try:
            facts["cuda_driver_version"] = int(n.nvmlSystemGetCudaDriverVersion())
        except n.NVMLError as exc:
            facts["cuda_driver_version"] = None
            facts["cuda_driver_version_error"] = _error_name(exc)
        count = int(n.nvmlDeviceGetCount())
        facts["device_count"] = count
        facts["gpus"] = [_gpu_facts(i) for i in range(count)]
        return facts
    finally:
        try:
            n.nvmlShutdown()
        except n.NVMLError:
            pass
