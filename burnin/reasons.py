"""The grammar of the reasons burnin takes a node out with (DESIGN.md, "Contracts"): ``burnin: IB-01,GPU-03..05
<cause>``. Pure text, below every layer that reads a reason back (the gate, the watch, the history's Slurm events).
"""

from __future__ import annotations

import re

RUN_CHECK = "RUN"  # the pseudo check id of reasons about the run itself
DRAIN_PREFIX = "burnin:"  # what every reason burnin takes a node out with starts with (DESIGN.md, "Contracts")
CHECK_ID = re.compile(r"^([A-Z][A-Z0-9]*)-(\d+)$")
_CHECK_RANGE = re.compile(r"^([A-Z][A-Z0-9]*)-(\d+)\.\.(\d+)$")


def parse_check_ids(text: str) -> tuple[str, ...] | None:
    """``IB-01,GPU-03..05,RUN`` -> the ids (ranges expanded); None when any item is no check id."""
    ids: list[str] = []
    for item in text.split(","):
        single = CHECK_ID.match(item)
        span = _CHECK_RANGE.match(item)
        if single is not None or item == RUN_CHECK:
            ids.append(item)
        elif span is not None and len(span.group(2)) == len(span.group(3)) and span.group(2) < span.group(3):
            family, first, last = span.group(1), int(span.group(2)), int(span.group(3))
            ids += [f"{family}-{n:0{len(span.group(2))}d}" for n in range(first, last + 1)]
        else:
            return None
    return tuple(dict.fromkeys(ids))


def reason_checks(reason: str) -> tuple[str, ...] | None:
    """The check ids a reason burnin set names (``burnin: IB-01,GPU-10 <cause>``); None when it is not
    burnin's, or its ids cannot be read (cut short, edited): such a reason is never resumed from."""
    if not reason.startswith(DRAIN_PREFIX):
        return None
    words = reason[len(DRAIN_PREFIX):].split(maxsplit=1)
    return parse_check_ids(words[0]) if words else None
