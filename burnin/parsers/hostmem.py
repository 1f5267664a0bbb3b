"""Host memory and CPU-frequency settings as the kernel prints them.

- ``/proc/meminfo``: ``MemTotal:       2113059436 kB`` lines (fs/proc/meminfo.c:
  a label padded to 16 columns, the value, ``kB`` for sizes; the ``HugePages_*``
  counts have no unit);
- ``/sys/devices/system/node/node<N>/meminfo``: the same lines prefixed with
  ``Node <N> `` (drivers/base/node.c);
- ``/sys/kernel/mm/transparent_hugepage/enabled`` and ``.../defrag``: every mode
  the kernel offers, the active one in brackets (``always [madvise] never``);
- ``/sys/kernel/mm/hugepages/hugepages-<size>kB``: the page size in a
  directory name.

Values are kept in the kernel's units (kB, which are KiB, or a count of pages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

TOOL = "meminfo"
_LINE = re.compile(r"^(?:Node (?P<node>\d{1,6}) )?(?P<key>[A-Za-z][A-Za-z0-9_()]{0,40}):\s*"
                   r"(?P<value>\d{1,20})(?: (?P<unit>kB))?\s*$")
_HUGEPAGE_DIR = re.compile(r"^hugepages-(\d{1,12})kB$")
_MODE = re.compile(r"^\[?[a-z][a-z+]{0,30}\]?$")


@dataclass(frozen=True, slots=True)
class Meminfo:
    """One meminfo file: key -> value in its unit (kB for sizes, pages for ``HugePages_*``)."""

    node: int | None
    """The NUMA node of a ``node<N>/meminfo`` file; None for ``/proc/meminfo``."""
    values: dict[str, int]
    units: dict[str, str]
    """Key -> ``kB`` for the sizes; keys without a unit are counts."""

    def kib(self, key: str) -> int | None:
        """A size in KiB (the kernel's ``kB``), or None when the key is absent or not a size."""
        return self.values.get(key) if self.units.get(key) == "kB" else None

    def count(self, key: str) -> int | None:
        """A unitless count (``HugePages_Total``), or None when absent or a size."""
        return self.values.get(key) if key in self.values and key not in self.units else None


def parse_meminfo(text: str) -> Meminfo:
    """``/proc/meminfo`` or a ``node<N>/meminfo`` file; ParseError without a MemTotal line."""
    require_text(TOOL, text)
    values: dict[str, int] = {}
    units: dict[str, str] = {}
    nodes: set[int] = set()
    for line in iter_lines(text):
        if not line.strip():
            continue
        match = _LINE.match(line.strip())
        if match is None:
            continue  # a line of another kernel's making: the keys we read are checked below
        if match.group("node") is not None:
            nodes.add(int(match.group("node")))
        key = match.group("key")
        if key in values:
            continue
        value = parse_int(match.group("value"))
        if value is None:
            continue
        values[key] = value
        if match.group("unit"):
            units[key] = "kB"
    if "MemTotal" not in values or units.get("MemTotal") != "kB":
        fail(TOOL, "no 'MemTotal: N kB' line", head_excerpt(text))
    if len(nodes) > 1:
        fail(TOOL, f"lines of several NUMA nodes ({', '.join(str(n) for n in sorted(nodes))}) in one file",
             head_excerpt(text))
    return Meminfo(node=next(iter(nodes), None), values=values, units=units)


@dataclass(frozen=True, slots=True)
class KernelChoice:
    """A sysfs setting that lists its choices with the active one in brackets."""

    active: str
    choices: tuple[str, ...]


def parse_kernel_choice(text: str, tool: str = "transparent_hugepage") -> KernelChoice:
    """``always [madvise] never`` -> active ``madvise``; ParseError unless exactly one choice is bracketed."""
    require_text(tool, text)
    words = text.split()
    if len(words) > 16 or not all(_MODE.match(w) for w in words):
        fail(tool, "not a list of modes", head_excerpt(text))
    active = [w[1:-1] for w in words if w.startswith("[") and w.endswith("]")]
    if len(active) != 1 or any(w.count("[") != w.count("]") for w in words):
        fail(tool, "expected exactly one mode in brackets (the active one)", head_excerpt(text))
    return KernelChoice(active=active[0], choices=tuple(w.strip("[]") for w in words))


def hugepage_size_kib(directory: str) -> int:
    """``hugepages-1048576kB`` -> 1048576; ParseError for another name."""
    match = _HUGEPAGE_DIR.match(directory)
    size = int(match.group(1)) if match else 0
    if size <= 0:
        fail("hugepages", "not a hugepages-<size>kB directory", directory[:80])
    return size
