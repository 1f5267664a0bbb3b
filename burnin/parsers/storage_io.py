"""How many bytes a storage write/read tool moved: ``dd``'s summary line and ``fio --output-format=json``.

``dd`` (GNU coreutils 8.x/9.x) ends its stderr with
``1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.912 s, 1.2 GB/s``; ``fio`` 3.x
reports each job's ``read``/``write`` ``io_bytes`` in its JSON output.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from burnin.errors import ParseError

_DD_COPIED = re.compile(r"^(\d+) bytes\b.*\bcopied\b", re.MULTILINE)


def parse_dd_bytes(text: str) -> int:
    """The bytes ``dd`` says it copied (its last summary line)."""
    found = _DD_COPIED.findall(text)
    if not found:
        raise ParseError("dd", "no 'N bytes ... copied' line", text)
    return int(found[-1])


def parse_fio_bytes(text: str, direction: Literal["read", "write"]) -> int:
    """The bytes every fio job moved in ``direction`` (``--output-format=json``)."""
    start = text.find("{")
    if start < 0:
        raise ParseError("fio", "no JSON output", text)
    try:
        data = json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError("fio", f"JSON unreadable: {exc.msg} at {exc.pos}", text) from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio", "no jobs in its JSON output", text)
    total = 0
    for job in jobs:
        side = job.get(direction) if isinstance(job, dict) else None
        value = side.get("io_bytes") if isinstance(side, dict) else None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ParseError("fio", f"a job has no {direction}.io_bytes", text)
        total += value
    return total
