"""The queue between the listeners and the handling thread: drain and evict first, records bounded."""

from __future__ import annotations

import threading

from burnin.watch.events import Action, Kind, Policy, WatchEvent, classify
from burnin.watch.lanes import EventLanes

OWN_GPU = "0000:1b:00"


def _xid(code: int, bus: str) -> WatchEvent:
    return WatchEvent("kmsg", Kind.XID, bus, code, f"NVRM: Xid (PCI:{bus}): {code}, pid=1, x", 1000.0)


def _distinct_bus(i: int) -> str:
    return f"{0x100 + i // 256:04x}:{i % 256:02x}:00"



def _lanes(limit: int = 16384) -> EventLanes:
    return EventLanes(lambda event: classify(event).action, routine_limit=limit)


def test_lanes_hand_out_drain_and_evict_first_each_lane_in_order() -> None:
    lanes = _lanes()
    for event in (_xid(13, "0000:01:00"), _xid(79, "0000:02:00"), _xid(13, "0000:03:00"), _xid(74, "0000:04:00")):
        lanes.put(event)
    assert len(lanes) == 4
    assert [lanes.get(0).device for _ in range(4)] == ["0000:02:00", "0000:04:00", "0000:01:00",  # type: ignore[union-attr]
                                                      "0000:03:00"]
    assert lanes.get(0) is None and len(lanes) == 0


def test_a_full_routine_lane_drops_records_never_an_eviction() -> None:
    lanes = _lanes(limit=3)
    for i in range(5):
        lanes.put(_xid(13, _distinct_bus(i)))
    lanes.put(_xid(79, OWN_GPU))
    assert lanes.dropped == 2 and len(lanes) == 4
    first = lanes.get(0)
    assert first is not None and first.code == 79
    assert [lanes.get(0).device for _ in range(3)] == [_distinct_bus(i) for i in range(3)]  # type: ignore[union-attr]


def test_a_get_waits_for_a_put() -> None:
    lanes = _lanes()
    got: list[WatchEvent | None] = []
    waiting = threading.Thread(target=lambda: got.append(lanes.get(timeout=60)))
    waiting.start()
    lanes.put(_xid(79, OWN_GPU))
    waiting.join(timeout=60)
    assert got and got[0] is not None and got[0].code == 79


def test_classification_of_the_lanes_follows_the_site_policy() -> None:
    lanes = EventLanes(lambda event: classify(event, Policy(ib_port_down=Action.RECORD)).action)
    lanes.put(_xid(13, "0000:01:00"))
    lanes.put(WatchEvent("kmsg", Kind.IB_PORT_DOWN, "ib0", None, "ib0: lost carrier", 0.0))
    lanes.put(_xid(48, "0000:02:00"))
    assert [lanes.get(0).code for _ in range(3)] == [48, 13, None]  # type: ignore[union-attr]


def test_without_routine_only_drain_and_evict_are_handed_out() -> None:
    lanes = _lanes()
    lanes.put(_xid(13, "0000:01:00"))
    assert lanes.get(0, routine=False) is None and len(lanes) == 1
    lanes.put(_xid(74, "0000:02:00"))
    got = lanes.get(0, routine=False)
    assert got is not None and got.code == 74
    got = lanes.get(0)
    assert got is not None and got.code == 13


def test_a_record_put_does_not_end_a_wait_for_urgent_events_an_eviction_does() -> None:
    lanes = _lanes()
    got: list[WatchEvent | None] = []
    waiting = threading.Thread(target=lambda: got.append(lanes.get(timeout=60, routine=False)))
    waiting.start()
    lanes.put(_xid(13, "0000:01:00"))
    lanes.put(_xid(79, OWN_GPU))
    waiting.join(timeout=60)
    assert got and got[0] is not None and got[0].code == 79
    assert len(lanes) == 1


def test_a_get_waits_for_a_record_put() -> None:
    lanes = _lanes()
    got: list[WatchEvent | None] = []
    waiting = threading.Thread(target=lambda: got.append(lanes.get(timeout=30)))
    waiting.start()
    lanes.put(_xid(13, "0000:01:00"))
    waiting.join(timeout=60)
    assert got and got[0] is not None and got[0].code == 13


def test_the_routine_lane_holds_16384_records() -> None:
    lanes = EventLanes(lambda event: classify(event).action)
    record = _xid(13, "0000:01:00")
    for _ in range(16385):
        lanes.put(record)
    assert len(lanes) == 16384 and lanes.dropped == 1
