"""Reason lines as people read them: one line per cause, not one per check that shares it.

A node whose GPU fell off the bus has a dozen checks that "could not be
measured: gpu3: NVML_ERROR_GPU_IS_LOST". The end-of-run summary and
report.html both show them as one line naming the checks
(``13 checks (GPU-01,GPU-03,... +7) could not be measured: gpu3: ...``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

UNMEASURED = " could not be measured: "
MARKERS = (UNMEASURED, " not judged: ")
"""What separates a check id from a cause that many checks share (a run's incompletes, a soak's unjudged)."""


def id_list(ids: Sequence[str], limit: int = 6) -> str:
    """``GPU-01,GPU-03`` or, for many, ``26 checks (GPU-01,... +20)``."""
    if len(ids) <= limit:
        return ",".join(ids)
    return f"{len(ids)} checks ({','.join(ids[:limit])},... +{len(ids) - limit})"


def _split(reason: str) -> tuple[str, str, str] | None:
    """(check id, marker, cause) of a line that names one check and a shared cause; None for any other line."""
    for marker in MARKERS:
        check_id, sep, cause = reason.partition(marker)
        if sep and check_id and " " not in check_id:
            return check_id, marker, cause
    return None


def condense(reasons: Iterable[str]) -> list[str]:
    """Fold "X could not be measured: CAUSE" lines that share a cause into one line, where the first stood."""
    by_cause: dict[tuple[str, str], list[str]] = defaultdict(list)
    lines: list[str | tuple[str, str]] = []  # a line as it is, or the (marker, cause) of a folded one
    for reason in reasons:
        split = _split(reason)
        if split is None:
            lines.append(reason)
            continue
        check_id, marker, cause = split
        if (marker, cause) not in by_cause:
            lines.append((marker, cause))
        by_cause[(marker, cause)].append(check_id)
    return [line if isinstance(line, str) else f"{id_list(by_cause[line])}{line[0]}{line[1]}" for line in lines]
