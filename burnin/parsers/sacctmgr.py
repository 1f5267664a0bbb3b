"""``sacctmgr show event``: Slurm's recorded node (and cluster) events, from its accounting (slurmdbd).

burnin reads them as ``sacctmgr --parsable2 --noheader show event Event=Node Start=... format=`` with the
columns of :data:`EVENT_FORMAT`, run with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard`` (the transport does),
so each line is ``Node|sim01|2026-12-02T00:36:41|Unknown|DRAIN|root(0)|burnin: GPU-04 gpu3 Xid 79``:

- times are ``YYYY-MM-DDTHH:MM:SS`` in the zone sacctmgr ran in (``tz``, UTC by default), read as aware
  datetimes; an end of ``Unknown`` (or ``None``) is an event still open (the node is still down or drained);
- the reason is the last column, so a ``|`` inside it (an operator's ``fan replaced | by ops``) stays in it;
- a header line (``--parsable2`` without ``--noheader``) is skipped; no line at all is no event.

The default table form (without ``--parsable2``) cuts reasons to 30 characters, so it is refused with a
clear error rather than read into wrong reasons; so is any line that is not a whole event (a field
missing, a time that does not read, an end before its start), with the line as excerpt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo

from burnin.parsers._common import excerpt, fail, iter_lines

TOOL = "sacctmgr-events"
EVENT_FORMAT = ("Event", "NodeName", "Start", "End", "State", "User", "Reason")
"""The columns burnin asks for, in order (``format=``); Reason last: it may hold the separator."""
HEADER = ("Event", "NodeName", "TimeStart", "TimeEnd", "State", "User", "Reason")
"""How sacctmgr heads those columns."""
OPEN_ENDS = frozenset({"Unknown", "None"})
KINDS = frozenset({"Node", "Cluster"})
STAMP = "%Y-%m-%dT%H:%M:%S"
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_TABLE_RULE = re.compile(r"-{4,}(?: +-{2,})+")
_STATE = re.compile(r"[A-Z_]{1,40}[*~#!%$@^-]?(?:\+[A-Z_]{1,40}[*~#!%$@^-]?){0,15}")
_NODE = re.compile(r"[^\s|]{1,256}")
MAX_LINE = 8192


@dataclass(frozen=True, slots=True)
class SlurmEvent:
    kind: str
    """``Node`` (a node went down or was drained) or ``Cluster`` (the cluster's resources changed)."""
    node: str
    """The node's name; empty for a cluster event."""
    start: datetime
    end: datetime | None
    """None: still open."""
    state: str
    """The node's state during the event as printed (``DRAIN``, ``DOWN*``, ``IDLE+DRAIN``); empty for a cluster
    event."""
    user: str
    """Who set it, as printed (``root(0)``); empty when slurmctld did."""
    reason: str
    line: int
    """1-based line number in the input."""

    @property
    def open(self) -> bool:
        return self.end is None


@dataclass(frozen=True, slots=True)
class SlurmEvents:
    events: list[SlurmEvent]

    def node_events(self) -> list[SlurmEvent]:
        return [event for event in self.events if event.kind == "Node"]


def parse_stamp(text: str, tz: tzinfo = timezone.utc) -> datetime | None:
    """``2026-12-02T00:36:41`` in ``tz`` (None when it is not such a time)."""
    if _STAMP.fullmatch(text) is None:
        return None
    try:
        return datetime.strptime(text, STAMP).replace(tzinfo=tz)
    except ValueError:
        return None


def parse_sacctmgr_events(text: str, tz: tzinfo = timezone.utc) -> SlurmEvents:
    """Parse ``sacctmgr -P -n show event format=Event,NodeName,Start,End,State,User,Reason`` output."""
    if not isinstance(text, str):
        fail(TOOL, f"expected text, got {type(text).__name__}")
    events: list[SlurmEvent] = []
    for number, line in enumerate(iter_lines(text), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            fail(TOOL, f"line {number} is longer than {MAX_LINE} characters", line[:200])
        if _TABLE_RULE.fullmatch(line.strip()) or (number == 1 and "|" not in line and "TimeStart" in line):
            fail(TOOL, "this is sacctmgr's table form, which cuts reasons; burnin reads `sacctmgr --parsable2 "
                       "--noheader show event format=" + ",".join(EVENT_FORMAT) + "`", excerpt([line]))
        fields = line.split("|", len(EVENT_FORMAT) - 1)
        if tuple(fields) == HEADER and not events:
            continue
        events.append(_event(fields, number, line, tz))
    return SlurmEvents(events)


def _event(fields: list[str], number: int, line: str, tz: tzinfo) -> SlurmEvent:
    if len(fields) != len(EVENT_FORMAT):
        fail(TOOL, f"line {number} has {len(fields)} of the {len(EVENT_FORMAT)} columns "
                   f"{','.join(EVENT_FORMAT)}", excerpt([line]))
    kind, node, start_text, end_text, state, user, reason = fields
    if kind not in KINDS:
        fail(TOOL, f"line {number}: event {kind!r} is neither Node nor Cluster", excerpt([line]))
    if kind == "Node" and (_NODE.fullmatch(node) is None or _STATE.fullmatch(state) is None):
        fail(TOOL, f"line {number}: a node event without a node name and state", excerpt([line]))
    start = parse_stamp(start_text, tz)
    if start is None:
        fail(TOOL, f"line {number}: start {start_text!r} is not YYYY-MM-DDTHH:MM:SS "
                   "(run sacctmgr with SLURM_TIME_FORMAT=standard)", excerpt([line]))
    end = None if end_text in OPEN_ENDS else parse_stamp(end_text, tz)
    if end is None and end_text not in OPEN_ENDS:
        fail(TOOL, f"line {number}: end {end_text!r} is neither a time nor Unknown", excerpt([line]))
    if end is not None and end < start:
        fail(TOOL, f"line {number}: the event ends before it starts", excerpt([line]))
    return SlurmEvent(kind, node, start, end, state, user, reason, number)
