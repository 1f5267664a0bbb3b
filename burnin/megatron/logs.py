"""Per-rank logs out of a launcher's output, NCCL error lines and log tails (pure).

srun ``--label`` prefixes each line with the task number (``  3: text``); torchrun
``--tee 3`` with the local rank (``[default3]:text``), which becomes a global rank
with the node's ``--node_rank``. Lines without a prefix (the launcher's own) are
kept under rank ``-1``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from burnin.parsers._common import iter_lines

LAUNCHER = -1
"""The 'rank' of lines no rank printed (srun, torchrun, the shell)."""

_SRUN_LABEL = re.compile(r"^\s*(\d{1,6}): ?(.*)$")
_TORCHRUN_LABEL = re.compile(r"^\[default(\d{1,6})\]:(.*)$")

# What a rank prints when NCCL or torch's NCCL process group gives up (check-catalog MEG-04).
NCCL_ERROR_PATTERNS = (
    re.compile(r"Watchdog caught collective operation timeout"),
    # torch's error-level log lines from the NCCL process group (``[E1206 18:44:12.715 ProcessGroupNCCL.cpp:607]``,
    # older ``[E ProcessGroupNCCL.cpp:458]``); its info lines (``TIMEOUT(ms): 600000``) are not errors.
    re.compile(r"\[E(?:\d{4}\s+[\d:.]+)?\s+ProcessGroupNCCL\.cpp:\d+\]"),
    re.compile(r"\bNCCL error\b", re.IGNORECASE),
    re.compile(r"\bNCCL WARN\b.*(?:failure|error|timeout)", re.IGNORECASE),
    re.compile(r"ncclSystemError|ncclInternalError|ncclRemoteError|ncclUnhandledCudaError"),
    re.compile(r"DistBackendError"),
)
TAIL_LINES = 5
LINE_LIMIT = 300


def split_ranks(text: str, form: str, *, node_rank: int = 0, ranks_per_node: int = 8) -> dict[int, list[str]]:
    """``{rank: lines}`` from one launch's output (srun: global task ids; torchrun: local ranks of one node)."""
    label = _SRUN_LABEL if form == "srun" else _TORCHRUN_LABEL
    offset = 0 if form == "srun" else node_rank * ranks_per_node
    ranks: dict[int, list[str]] = {}
    for line in iter_lines(text):
        match = label.match(line)
        if match is None:
            ranks.setdefault(LAUNCHER, []).append(line)
            continue
        ranks.setdefault(offset + int(match.group(1)), []).append(match.group(2))
    return ranks


def merge(parts: Iterable[Mapping[int, list[str]]]) -> dict[int, list[str]]:
    """Several outputs (stdout and stderr, several nodes) into one ``{rank: lines}``."""
    merged: dict[int, list[str]] = {}
    for part in parts:
        for rank, lines in part.items():
            merged.setdefault(rank, []).extend(lines)
    return merged


@dataclass(frozen=True, slots=True)
class NcclErrorLine:
    rank: int
    line: str


def nccl_errors(ranks: Mapping[int, list[str]], limit: int = 20) -> list[NcclErrorLine]:
    """Watchdog timeouts and NCCL errors in any rank's log, first ones first (at most ``limit``)."""
    found: list[NcclErrorLine] = []
    for rank in sorted(ranks):
        for line in ranks[rank]:
            if any(p.search(line) for p in NCCL_ERROR_PATTERNS):
                found.append(NcclErrorLine(rank, line.strip()[:LINE_LIMIT]))
                if len(found) >= limit:
                    return found
    return found


def tails(ranks: Mapping[int, list[str]], lines: int = TAIL_LINES) -> dict[int, list[str]]:
    """The last non-empty lines of each rank's log (the launcher's too)."""
    out: dict[int, list[str]] = {}
    for rank in sorted(ranks):
        kept = [line.rstrip()[:LINE_LIMIT] for line in ranks[rank] if line.strip()]
        out[rank] = kept[-lines:]
    return out


def logging_rank_text(ranks: Mapping[int, list[str]]) -> str:
    """The text holding the iteration lines: Megatron prints them on the last rank (``print_rank_last``).

    The highest rank with an ``iteration`` line, else the highest rank, else the launcher's lines.
    """
    with_iterations = [r for r, lines in ranks.items() if r != LAUNCHER and any("iteration" in x for x in lines)]
    candidates = with_iterations or [r for r in ranks if r != LAUNCHER] or list(ranks)
    if not candidates:
        return ""
    return "\n".join(ranks[max(candidates)]) + "\n"
