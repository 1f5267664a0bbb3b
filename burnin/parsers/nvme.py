"""nvme-cli JSON: ``nvme smart-log DEV --output-format=json`` and ``nvme list --output-format=json``.

smart-log keys (nvme-cli 1.x and 2.x): ``critical_warning`` (a bit field; 0 is
healthy), ``media_errors``, ``num_err_log_entries``, ``percent_used``,
``avail_spare``, ``spare_thresh``, ``temperature`` (kelvin). ``nvme list``
prints ``{"Devices": [{"DevicePath": "/dev/nvme0n1", ...}]}`` (1.x) or, with
2.x's verbose form, subsystems with controllers and namespaces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from burnin.parsers._common import fail, head_excerpt, require_text

SMART_TOOL = "nvme-smart-log"
LIST_TOOL = "nvme-list"


@dataclass(frozen=True, slots=True)
class NvmeSmartLog:
    critical_warning: int | None
    media_errors: int | None
    error_log_entries: int | None
    percent_used: int | None
    available_spare: int | None
    spare_threshold: int | None
    temperature_c: float | None


def _document(tool: str, text: str) -> Any:
    require_text(tool, text)
    start = text.find("{")
    if start < 0:
        fail(tool, "no JSON object", head_excerpt(text))
    try:
        return json.loads(text[start: text.rfind("}") + 1])
    except (ValueError, RecursionError) as exc:
        fail(tool, f"not JSON: {exc}", head_excerpt(text))


def _count(doc: dict[str, Any], key: str) -> int | None:
    value = doc.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, dict) and isinstance(value.get("value"), int):  # nvme-cli 2.x critical_warning
        return int(value["value"])
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def parse_smart_log(text: str) -> NvmeSmartLog:
    doc = _document(SMART_TOOL, text)
    if not isinstance(doc, dict) or "critical_warning" not in doc:
        fail(SMART_TOOL, "no critical_warning key: not a smart-log document", head_excerpt(text))
    kelvin = _count(doc, "temperature")
    return NvmeSmartLog(
        critical_warning=_count(doc, "critical_warning"),
        media_errors=_count(doc, "media_errors"),
        error_log_entries=_count(doc, "num_err_log_entries"),
        percent_used=_count(doc, "percent_used"),
        available_spare=_count(doc, "avail_spare"),
        spare_threshold=_count(doc, "spare_thresh"),
        temperature_c=None if kelvin is None else round(kelvin - 273.15, 2),
    )


def parse_nvme_list(text: str) -> tuple[str, ...]:
    """Device paths (``/dev/nvme0n1``, or ``/dev/nvme0`` per controller in 2.x's verbose form)."""
    doc = _document(LIST_TOOL, text)
    devices = doc.get("Devices") if isinstance(doc, dict) else None
    if not isinstance(devices, list):
        fail(LIST_TOOL, "no 'Devices' list", head_excerpt(text))
    paths: list[str] = []
    for device in devices:
        if not isinstance(device, dict):
            continue
        if isinstance(device.get("DevicePath"), str):
            paths.append(device["DevicePath"])
            continue
        for subsystem in device.get("Subsystems", []) if isinstance(device.get("Subsystems"), list) else []:
            controllers = subsystem.get("Controllers", []) if isinstance(subsystem, dict) else []
            for controller in controllers if isinstance(controllers, list) else []:
                if isinstance(controller, dict) and isinstance(controller.get("Controller"), str):
                    paths.append(f"/dev/{controller['Controller']}")
    return tuple(dict.fromkeys(paths))
