"""``dcgmi health -c``: DCGM's passive health report (check-catalog GPU-12).

The reference set (docs/design.md) has no real capture of this command, so the
shape below is read from DCGM's own sources (NVIDIA/DCGM, DCGM 3.x/4.x):

- ``dcgmi/Health.cpp`` ``CheckWatches`` / ``GenerateOutputFromResponse``: the
  header ``Health Monitor Report``, the row ``Overall Health``, then per entity
  group (``GPU``, ``Switch``, ...) one row per entity id holding its health, an
  ``Errors`` row, and per health system one row with the system's health
  followed by its message. Health words (``HelperHealthToString``):
  ``Healthy``, ``Warning``, ``Failure``, ``Internal error``. Systems
  (``HelperSystemToString``): ``PCIe system``, ``NVLINK system``, ``Memory
  system``, ``InfoROM system``, ``Thermal system``, ``Power system``,
  ``Driver``, ... Several incidents of one system are joined with ``", "``; a
  message longer than 54 characters is cut at word boundaries into overflow
  rows (``AddErrorMessage``), so chunks are joined back with one space.
- ``dcgmi/DcgmiOutput.cpp`` ``DcgmiOutputTree(28, 60)``: ``+---+---+``
  borders, ``| <label, 25 wide> | <value, 56 wide> |`` rows, a child row's
  label indented three spaces per level after the first and prefixed ``-> ``;
  an overflow row has an empty label.
- ``dcgmi/tests/HealthTests.cpp``: the rows DCGM's tests expect, e.g.
  ``| Overall Health            | Failure`` and ``|       -> Memory system    | Failure``.
- Failures of the command itself are one ``Error: ...`` line (``Health.cpp``:
  ``Error: Health watches not enabled. Please enable watches.``; ``Command.cpp``:
  ``Error: Unable to connect to host engine. Host engine connection
  invalid/disconnected.``): :func:`burnin.parsers.dcgmi.command_errors` reads
  those, this parser raises ParseError on them.

An example (two incidents on GPU 3)::

    +---------------------------+----------------------------------------------------------+
    | Health Monitor Report                                                                |
    +===========================+==========================================================+
    | Overall Health            | Warning                                                  |
    | GPU                       |                                                          |
    | -> 3                      | Warning                                                  |
    |    -> Errors              |                                                          |
    |       -> PCIe system      | Warning                                                  |
    |                           | Detected more than 8 PCIe replays per minute for GPU 3 : |
    |                           | 13                                                       |
    +---------------------------+----------------------------------------------------------+
"""

from __future__ import annotations

from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, require_text

TOOL = "dcgmi-health"
HEADER = "Health Monitor Report"
OVERALL = "Overall Health"
HEALTH_WORDS = ("Healthy", "Warning", "Failure", "Internal error")
_ARROW = "-> "
_ERRORS = "Errors"


@dataclass(frozen=True, slots=True)
class HealthIncident:
    """One health system's finding on one entity."""

    entity_group: str  # "GPU", "Switch", "ConnectX", ... as DCGM names the group
    entity_id: str  # DCGM's id of the entity in its group ("3")
    system: str  # "PCIe system", "Memory system", ...
    health: str  # "Warning", "Failure", ... as printed
    message: str  # DCGM's message(s), the wrapped chunks joined back


@dataclass(frozen=True, slots=True)
class DcgmiHealth:
    overall: str  # "Healthy", "Warning", "Failure", "Internal error" (as printed)
    entities: dict[str, str]  # "GPU 3" -> that entity's health
    incidents: tuple[HealthIncident, ...]
    truncated: bool  # the table lacks its closing border


def _row(line: str) -> tuple[str, str] | None:
    """(label cell, value cell) of a ``| label | value |`` row; the label keeps its leading spaces (its depth)."""
    if not (line.startswith("|") and line.endswith("|")):
        return None
    inner = line[1:-1]
    if "|" not in inner:
        return None
    label, value = inner.split("|", 1)
    return label.rstrip(), value.strip()


def _level(label: str) -> tuple[int, str]:
    """Tree depth of a label (0 for a section, 1 for ``-> x``, 2 for ``   -> x``...) and the label's text.

    DCGM indents each level three more characters; ``// 3`` also absorbs the one pad space after the ``|``.
    """
    arrow = label.find(_ARROW)
    if arrow < 0 or label[:arrow].strip():
        return 0, label.strip()
    return arrow // 3 + 1, label[arrow + len(_ARROW):].strip()


class _Draft:
    def __init__(self) -> None:
        self.overall: str | None = None
        self.header = False
        self.group: str | None = None
        self.entity: str | None = None
        self.entities: dict[str, str] = {}
        self.incidents: list[tuple[str, str, str, str, list[str]]] = []
        self.open: list[str] | None = None  # the message chunks of the system row being read

    def add(self, label: str, value: str) -> None:
        if not label.strip():
            if self.open is not None and value:
                self.open.append(value)
            return
        self.open = None
        depth, text = _level(label)
        if depth == 0:
            if text == OVERALL:
                self.overall = value
            else:
                self.group, self.entity = text, None
        elif depth == 1 and self.group is not None:
            self.entity = text
            self.entities[f"{self.group} {text}"] = value
        elif depth == 3 and self.group is not None and self.entity is not None:
            self.open = []
            self.incidents.append((self.group, self.entity, text, value, self.open))

    def build(self, text: str, closed: bool) -> DcgmiHealth:
        if self.overall is None:
            what = "no 'Overall Health' row" if self.header else f"no '{HEADER}' table"
            fail(TOOL, f"{what} in the dcgmi health output", head_excerpt(text))
        incidents = tuple(HealthIncident(group, entity, system, health, " ".join(" ".join(chunks).split()))
                          for group, entity, system, health, chunks in self.incidents)
        return DcgmiHealth(self.overall, self.entities, incidents, truncated=not closed)


def parse_dcgmi_health(text: str) -> DcgmiHealth:
    """Parse ``dcgmi health -c`` (the text tree; see the module docstring for where its shape comes from)."""
    require_text(TOOL, text)
    draft = _Draft()
    closed = False
    for raw in iter_lines(text):
        line = raw.strip()
        if not line.startswith(("|", "+")):
            continue  # chatter around the table
        if set(line) <= {"+", "-"}:
            closed = draft.overall is not None  # a border after the rows closes the table
            continue
        closed = False  # any other table line (the ``+===+`` rule under the header too) is not an end
        if line.strip("|").strip() == HEADER:
            draft.header = True
            continue
        row = _row(line)
        if row is not None and draft.header:
            draft.add(*row)
    return draft.build(text, closed)
