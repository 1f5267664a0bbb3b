"""``sacctmgr show event`` (-P): the real capture from the lab's slurmdbd 22.05.8, and what is refused."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from field_samples import field_text

from burnin.errors import ParseError
from burnin.parsers import parse, to_jsonable
from burnin.parsers.sacctmgr import EVENT_FORMAT, parse_sacctmgr_events
from burnin.transport.slurm import sacctmgr_events_argv

CAPTURE = "sacctmgr-events-P-slurmdbd-22.05.8-burnin-lab-drain-down-pipe-in-reason.txt"
UTC = timezone.utc


def test_the_lab_capture_reads_with_its_open_event_and_a_separator_in_a_reason() -> None:
    events = parse_sacctmgr_events(field_text(CAPTURE)).events
    assert [(e.node, e.state, e.user) for e in events] == [
        ("sim01", "DRAIN", "root(0)"), ("sim01", "DRAIN", "root(0)"), ("sim02", "DOWN", "root(0)")]
    first, still_open, operator = events
    assert first.start == datetime(2026, 12, 2, 0, 36, 41, tzinfo=UTC)
    assert first.end == datetime(2026, 12, 2, 0, 36, 44, tzinfo=UTC) and not first.open
    assert still_open.end is None and still_open.open
    assert still_open.reason == "burnin: IB-02,GPU-10 mlx5_2 200 Gb/sec (4X HDR) (expected >= 400 Gb/s)"
    assert operator.reason == "fan replaced | by ops"  # the last column keeps the separator
    assert [e.line for e in events] == [2, 3, 4]  # line 1 is the header
    assert to_jsonable(parse("sacctmgr-events", field_text(CAPTURE)))["events"][0]["start"] == (  # type: ignore[index]
        "2026-12-02T00:36:41+00:00")


def test_times_are_read_in_the_zone_sacctmgr_ran_in() -> None:
    plus2 = timezone(timedelta(hours=2))
    event = parse_sacctmgr_events("Node|n1|2026-01-01T10:00:00|None|DOWN*|root(0)|Not responding\n", plus2).events[0]
    assert event.start == datetime(2026, 1, 1, 8, 0, 0, tzinfo=UTC) and event.end is None


def test_no_line_is_no_event_and_a_cluster_event_is_kept_apart() -> None:
    assert parse_sacctmgr_events("").events == []
    found = parse_sacctmgr_events("Cluster||2026-12-02T00:36:34|Unknown|||Cluster Registered TRES\n")
    assert found.events[0].kind == "Cluster" and found.node_events() == []


TABLE = """\
  Event NodeName                  TimeStart             TimeEnd  State       User                         Reason 
------- --------------- ------------------- ------------------- ------ ---------- ------------------------------ 
   Node sim01           2026-12-02T00:37:49             Unknown  DRAIN    root(0) burnin: IB-02,GPU-10 mlx5_2 2+ 
"""  # noqa: W291 - the table as sacctmgr 22.05.8 printed it in the lab, trailing spaces and all


@pytest.mark.parametrize(("text", "said"), [
    (TABLE, "table form"),
    (TABLE.split("\n", 1)[1], "table form"),  # without its header line
    ("Node|sim01|2026-12-02T00:36:41|Unknown|DRAIN|root(0)\n", "6 of the 7 columns"),
    ("Node|sim01|00:36:41|Unknown|DRAIN|root(0)|x\n", "SLURM_TIME_FORMAT=standard"),  # relative/time-only format
    ("Node|sim01|2026-12-02T00:36:41|soon|DRAIN|root(0)|x\n", "neither a time nor Unknown"),
    ("Node|sim01|2026-12-02T00:36:41|2026-12-02T00:36:40|DRAIN|root(0)|x\n", "ends before it starts"),
    ("Node|sim01|2026-02-30T00:36:41|Unknown|DRAIN|root(0)|x\n", "is not YYYY-MM-DD"),
    ("Node||2026-12-02T00:36:41|Unknown|DRAIN|root(0)|x\n", "without a node name"),
    ("Node|sim01|2026-12-02T00:36:41|Unknown|drained!|root(0)|x\n", "without a node name and state"),
    ("Job|sim01|2026-12-02T00:36:41|Unknown|DRAIN|root(0)|x\n", "neither Node nor Cluster"),
    ("sacctmgr: error: Problem talking to the database\n", "1 of the 7 columns"),
])
def test_what_is_not_a_whole_event_is_refused_with_the_line(text: str, said: str) -> None:
    with pytest.raises(ParseError, match="sacctmgr-events") as caught:
        parse_sacctmgr_events(text)
    assert said in str(caught.value) and "near:" in str(caught.value)


def test_one_bad_line_refuses_the_whole_output_never_a_partial_answer() -> None:
    good = "Node|sim01|2026-12-02T00:36:41|Unknown|DRAIN|root(0)|burnin: GPU-04 x\n"
    with pytest.raises(ParseError, match="line 2"):
        parse_sacctmgr_events(good + "Node|sim02|2026-12-02T00:36:41\n")


def test_burnin_asks_for_the_columns_the_parser_reads_in_utc() -> None:
    since = datetime(2026, 12, 1, 2, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert sacctmgr_events_argv(since, EVENT_FORMAT) == [
        "sacctmgr", "--parsable2", "--noheader", "show", "event", "Event=Node", "Start=2026-12-01T00:00:00",
        "format=Event,NodeName,Start,End,State,User,Reason"]
