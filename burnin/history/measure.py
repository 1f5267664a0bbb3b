"""The number a check measured, read from its ``measured`` text (pure).

A verdict's ``measured`` is a line for people (``479.5 GB/s at 8 GiB (NVLS enabled)``, ``group sim[01-08]
360.2 GB/s``, ``GPUDirect min 386.1 Gb/s, host min 390.4 Gb/s over 8 HCAs``). The history keeps the first
throughput in it as the check's measurement: a bandwidth or a training throughput,
and a PCIe link's speed (``32 GT/s x16``: IB-06, a link that trained down), for all of which lower is worse,
so that a diff can say it moved and a trend can say it is falling. Other checks (counts, versions, states,
temperatures that swing with the room and the last job, a latency that is never a check's first number) have no
measurement here: a diff would only be noise.
"""

from __future__ import annotations

import math
import re

_UNITS = {"GB/s": "GB/s", "Gb/s": "Gb/s", "Gb/sec": "Gb/s", "TFLOP/s": "TFLOP/s", "GT/s": "GT/s"}
_THROUGHPUT = re.compile(r"(?<![\w.\-])(\d{1,9}(?:\.\d+)?)\s?(GB/s|Gb/sec|Gb/s|TFLOP/s|GT/s)(?![\w/])")
MEASURED_LIMIT = 2000
"""Only the beginning of a measured text is searched (a forged record may hold megabytes)."""


def measurement(measured: object) -> tuple[float, str] | None:
    """``(value, unit)`` of the first throughput in ``measured``; None when it names none."""
    if not isinstance(measured, str):
        return None
    match = _THROUGHPUT.search(measured[:MEASURED_LIMIT])
    if match is None:
        return None
    value = float(match.group(1))
    if not math.isfinite(value):
        return None
    return value, _UNITS[match.group(2)]
