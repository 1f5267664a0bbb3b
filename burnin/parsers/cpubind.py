"""Slurm ``srun --cpu-bind=verbose,...`` reports: which CPUs each task was bound to.

srun's task/affinity plugin prints one line per task on stderr::

    cpu-bind=MASK - aion-0014, task  0  0 [3431378]: mask 0x1 set

(bind type, node, global task id, local task id, pid, the hexadecimal CPU mask).
Older Slurm spells it ``cpu_bind=``; masks wider than 64 CPUs may carry commas.
``taskset --cpu-list --pid`` answers (``pid 3431378's current affinity list: 0-3``)
printed next to them are read as well, keyed by pid. Other lines (prompts, fences,
the job's own output) are ignored, so a whole terminal session can be read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import compress_cpu_list, expand_cpu_list, fail, head_excerpt, iter_lines, require_text

TOOL = "cpu-bind"
MAX_MASK_DIGITS = 4096  # 16384 CPUs

_BIND = re.compile(
    r"cpu[-_]bind(?:[-_][a-z]+)?=(?P<type>[A-Z_]+)\s+-\s+(?P<node>[^\s,]+),\s+task\s+(?P<task>\d{1,7})\s+"
    r"(?P<local>\d{1,7})\s+\[(?P<pid>\d{1,10})\]:\s+mask\s+0x(?P<mask>[0-9A-Fa-f,]{1,8192})\s+(?P<verb>set|get)\b")
_TASKSET = re.compile(r"\bpid (?P<pid>\d{1,10})'s current affinity list: (?P<list>[0-9,\- ]+)\s*$")


@dataclass(frozen=True, slots=True)
class CpuBindTask:
    """One task's binding as srun reported it."""

    node: str
    task: int
    local_task: int
    pid: int
    bind_type: str
    """``MASK``, ``MAP``, ``LDMASK``, ``NONE``, ... as printed."""
    mask: str
    """The mask as printed, without ``0x`` and commas (lower case)."""
    cpus: tuple[int, ...]
    line: int

    @property
    def cpu_list(self) -> str:
        """``0-3``: the CPUs of the mask in Linux list form."""
        return compress_cpu_list(self.cpus)


@dataclass(frozen=True, slots=True)
class TasksetAffinity:
    pid: int
    cpus: tuple[int, ...]
    line: int


@dataclass(frozen=True, slots=True)
class CpuBindReport:
    tasks: tuple[CpuBindTask, ...]
    affinities: tuple[TasksetAffinity, ...]

    def by_node(self) -> dict[str, list[CpuBindTask]]:
        out: dict[str, list[CpuBindTask]] = {}
        for task in self.tasks:
            out.setdefault(task.node, []).append(task)
        return out


def mask_cpus(mask: str) -> tuple[int, ...]:
    """``f0`` -> (4, 5, 6, 7); bit N of the mask is CPU N."""
    value = int(mask, 16)
    cpus = []
    bit = 0
    while value:
        if value & 1:
            cpus.append(bit)
        value >>= 1
        bit += 1
    return tuple(cpus)


def parse_cpu_bind(text: str) -> CpuBindReport:
    """Every ``cpu-bind=... mask 0x... set`` line and ``taskset`` affinity answer in ``text``.

    A text with neither is a ParseError (srun printed no binding report: ``verbose`` missing from
    ``--cpu-bind``, or the task/affinity plugin is not configured).
    """
    require_text(TOOL, text)
    tasks: list[CpuBindTask] = []
    affinities: list[TasksetAffinity] = []
    for number, line in enumerate(iter_lines(text), start=1):
        if "bind" in line:
            match = _BIND.search(line)
            if match is not None:
                mask = match.group("mask").replace(",", "").lower().lstrip("0") or "0"
                if len(mask) > MAX_MASK_DIGITS:
                    fail(TOOL, "CPU mask wider than 16384 CPUs", line.strip())
                tasks.append(CpuBindTask(node=match.group("node"), task=int(match.group("task")),
                                         local_task=int(match.group("local")), pid=int(match.group("pid")),
                                         bind_type=match.group("type"), mask=mask, cpus=mask_cpus(mask),
                                         line=number))
                continue
        if "affinity list" in line:
            found = _TASKSET.search(line)
            if found is not None:
                affinities.append(TasksetAffinity(int(found.group("pid")),
                                                  expand_cpu_list(found.group("list").replace(" ", "")), number))
    if not tasks and not affinities:
        fail(TOOL, "no 'cpu-bind=TYPE - NODE, task N N [PID]: mask 0x... set' line found", head_excerpt(text))
    return CpuBindReport(tuple(tasks), tuple(affinities))
