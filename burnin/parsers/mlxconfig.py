"""``mlxconfig -d DEVICE q [PARAM...]`` (NVIDIA MFT / mstflint's ``mstconfig``): firmware configuration.

Layout (MFT 4.x)::

    Device #1:
    ----------

    Device type:        BlueField3
    Name:               900-9D3B6-00CV-AA0_Ax
    Description:        NVIDIA BlueField-3 B3220 P-Series FHHL DPU; ...
    Device:             0000:29:00.0

    Configurations:                                      Next Boot
            INTERNAL_CPU_MODEL                          EMBEDDED_CPU(1)
    *       INTERNAL_CPU_OFFLOAD_ENGINE                 DISABLED(1)

With ``-e`` the columns are ``Default  Current  Next Boot``. A ``*`` marks a
parameter changed from its default. Values keep their printed form
(``ENABLED(0)``); :func:`value_code` reads the number in parentheses.

BlueField operating mode (NVIDIA BlueField DPU documentation, "Modes of
Operation"): ``INTERNAL_CPU_OFFLOAD_ENGINE`` ``ENABLED(0)`` is DPU mode (the
Arm cores own the NIC), ``DISABLED(1)`` NIC mode; ``INTERNAL_CPU_MODEL``
``EMBEDDED_CPU(1)`` is the DPU's own model, ``SEPARATED_HOST(0)`` the
separated-host mode of older BlueFields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

TOOL = "mlxconfig"
MAX_LINE = 4096

_DEVICE_HEAD = re.compile(r"^Device\s+#(\d{1,4}):\s*$")
_FIELD = re.compile(r"^(Device type|Name|Description|Device|PCI device|Device ID)\s*:\s*(.*?)\s*$")
_PARAM = re.compile(r"^(?P<mark>\*)?\s+(?P<name>[A-Z][A-Z0-9_]{1,80}(?:\[\d{1,4}(?:\.\.\d{1,4})?\])?)"
                    r"\s+(?P<values>\S.*?)\s*$")
_CODE = re.compile(r"\((-?\d{1,20})\)\s*$")
_ERROR = re.compile(r"^-E-\s*(.*)$")


@dataclass(frozen=True, slots=True)
class MlxconfigParam:
    name: str
    values: tuple[str, ...]
    """One value per column (``Next Boot``; or ``Default``, ``Current``, ``Next Boot`` with ``-e``)."""
    modified: bool
    """Marked ``*``: differs from the default."""


@dataclass(frozen=True, slots=True)
class MlxconfigDevice:
    device_type: str | None
    name: str | None
    description: str | None
    device: str | None
    """The device as mlxconfig names it (``0000:29:00.0``, ``/dev/mst/mt41692_pciconf0``)."""
    columns: tuple[str, ...]
    params: tuple[MlxconfigParam, ...]

    def param(self, name: str) -> MlxconfigParam | None:
        return next((p for p in self.params if p.name == name), None)

    def current(self, name: str) -> str | None:
        """The value in force now: the ``Current`` column, else the only (``Next Boot``) one."""
        param = self.param(name)
        if param is None or not param.values:
            return None
        if "Current" in self.columns and len(param.values) == len(self.columns):
            return param.values[self.columns.index("Current")]
        return param.values[-1]

    def next_boot(self, name: str) -> str | None:
        param = self.param(name)
        if param is None or not param.values:
            return None
        return param.values[-1]


@dataclass(frozen=True, slots=True)
class MlxconfigReport:
    devices: tuple[MlxconfigDevice, ...]
    errors: tuple[str, ...]
    """``-E- ...`` lines (an unsupported parameter, a device that cannot be opened)."""


def value_code(value: str | None) -> int | None:
    """``ENABLED(0)`` -> 0, ``EMBEDDED_CPU(1)`` -> 1, ``9000`` -> 9000; None when there is no number."""
    if value is None:
        return None
    match = _CODE.search(value)
    return int(match.group(1)) if match else parse_int(value)


def _split_values(text: str, columns: int) -> tuple[str, ...]:
    parts = text.split()
    if columns > 1 and len(parts) >= columns:
        return tuple(parts[:columns])
    return (parts[0],) if parts else ()


class _Device:
    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.columns: tuple[str, ...] = ()
        self.params: list[MlxconfigParam] = []
        self.in_configs = False

    def record(self) -> MlxconfigDevice:
        f = self.fields
        return MlxconfigDevice(f.get("Device type"), f.get("Name"), f.get("Description"),
                               f.get("Device") or f.get("PCI device"), self.columns, tuple(self.params))


def parse_mlxconfig_query(text: str) -> MlxconfigReport:
    """Parse ``mlxconfig [-e] -d DEV q [PARAMS]`` (one or more ``Device #N`` blocks)."""
    require_text(TOOL, text)
    devices: list[_Device] = []
    errors: list[str] = []
    for line in iter_lines(text):
        if len(line) > MAX_LINE or not line.strip():
            continue
        error = _ERROR.match(line.strip())
        if error is not None:
            errors.append(error.group(1).strip())
            continue
        if _DEVICE_HEAD.match(line.strip()):
            devices.append(_Device())
            continue
        if not devices:
            continue
        device = devices[-1]
        stripped = line.strip()
        if stripped.startswith("Configurations:"):
            device.in_configs = True
            header = stripped[len("Configurations:"):]
            device.columns = tuple(c.strip() for c in re.split(r"\s{2,}", header.strip()) if c.strip())
            continue
        if device.in_configs:
            param = _PARAM.match(line)
            if param is not None:
                values = _split_values(param.group("values"), len(device.columns))
                device.params.append(MlxconfigParam(param.group("name"), values, param.group("mark") == "*"))
            continue
        field = _FIELD.match(stripped)
        if field is not None:
            device.fields.setdefault(field.group(1), field.group(2))
    if not devices and not errors:
        fail(TOOL, "no 'Device #N:' block and no '-E-' error line", head_excerpt(text))
    return MlxconfigReport(tuple(d.record() for d in devices), tuple(errors))
