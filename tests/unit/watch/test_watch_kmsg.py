"""Kernel log records to watch events, on real kernel logs (../shared/reference/dmesg)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from burnin.watch.events import Action, Kind, classify
from burnin.watch.kmsg import KernelRecord, events_from_record, parse_record


def _events(lines: list[str]) -> list:  # type: ignore[type-arg]
    found = []
    for line in lines:
        record = parse_record(line)
        if record is not None:
            found += events_from_record(record, 100.0)
    return found


def test_kmsg_record_fields() -> None:
    record = parse_record("4,1893,523280204,-;NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', "
                          "name=<unknown>, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:52:00.0\n")
    assert record == KernelRecord(1893, 523280204, 4, "NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', "
                                                       "name=<unknown>, GPU has fallen off the bus.")
    (event,) = events_from_record(record, 7.5, {"0000:52:00": "gpu2"})
    assert (event.kind, event.device, event.code, event.label) == (Kind.XID, "0000:52:00", 79, "gpu2")
    assert (event.kernel_seq, event.kernel_usec, event.detected_at) == (1893, 523280204, 7.5)


def test_priority_with_facility_and_extra_flags() -> None:
    record = parse_record("30,12,99,-,caller=T1;ib0: lost carrier")
    assert record == KernelRecord(12, 99, 6, "ib0: lost carrier")


def test_continuation_and_blank_lines_are_not_records() -> None:
    assert parse_record(" SUBSYSTEM=pci") is None
    assert parse_record("") is None


def test_plain_lines_are_taken_whole() -> None:
    record = parse_record("[  123.456] NVRM: Xid (PCI:0000:1b:00): 63, pid=7, Row Remapper")
    assert record is not None and record.seq is None and record.text.startswith("[  123.456]")


def test_control_characters_from_the_node_are_escaped() -> None:
    record = parse_record("4,1,2,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=7, name=\x1b[31mevil, bad")
    assert record is not None
    (event,) = events_from_record(record, 0.0)
    assert "\x1b" not in event.text and "\\x1b[31m" in event.text


def test_mlx5_cable_events() -> None:
    down = parse_record("4,5,6,-;mlx5_core 0000:4F:00.0: Port module event: module 0, Cable unplugged")
    up = parse_record("6,7,8,-;mlx5_core 0000:4f:00.0: Port module event: module 0, Cable plugged")
    assert down is not None and up is not None
    (gone,) = events_from_record(down, 0.0, {"0000:4f:00.0": "mlx5_2"})
    (back,) = events_from_record(up, 0.0)
    assert (gone.kind, gone.device, gone.subject) == (Kind.IB_PORT_DOWN, "0000:4f:00.0", "mlx5_2")
    assert back.kind is Kind.IB_PORT_UP


def test_ethernet_carrier_is_not_an_ib_event() -> None:
    record = parse_record("6,1,2,-;eth0: lost carrier")
    assert record is not None and events_from_record(record, 0.0) == []


def _reference(reference_dir: Path, name: str) -> list[str]:
    return (reference_dir / "dmesg" / name).read_text(encoding="utf-8").splitlines()


def test_real_xid_119_gsp_log_is_one_evicting_incident(reference_dir: Path) -> None:
    events = _events(_reference(reference_dir, "dmesg-T-xid119-gsp-rpc-timeout-h100.txt"))
    assert [(e.kind, e.device, e.code) for e in events] == [(Kind.XID, "0000:9b:00", 119)] * 5
    assert {classify(e).key for e in events} == {("GPU-04", "xid", "0000:9b:00", "119")}
    assert classify(events[0]).action is Action.EVICT


def test_real_xid_63_line_is_recorded_only(reference_dir: Path) -> None:
    (event,) = _events(_reference(reference_dir, "xid63-row-remapper-a100.txt"))
    assert (event.device, event.code) == ("0000:10:1c", 63)
    assert classify(event).action is Action.RECORD


def test_real_decoded_iso_log(reference_dir: Path) -> None:
    events = _events(_reference(reference_dir, "dmesg-decode-time-format-iso-xid13-and-misc.txt"))
    codes = Counter(e.code for e in events)
    assert set(codes) <= {13, 43, 63} and codes[13] > 600
    assert all(classify(e).action is Action.RECORD for e in events)


def test_real_ib_link_flap_syslog(reference_dir: Path) -> None:
    events = _events(_reference(reference_dir, "syslog-ib-link-flap-ndv4-azure-nhc.txt"))
    kinds = Counter((e.kind, e.device) for e in events)
    assert kinds == {(Kind.IB_PORT_DOWN, "ib6"): 6, (Kind.IB_PORT_UP, "ib6"): 6}


@pytest.mark.parametrize("name", ["dmesg-T-xid119-gsp-rpc-timeout-h100.txt", "xid63-row-remapper-a100.txt"])
def test_real_lines_wrapped_as_kmsg_records_give_the_same_events(reference_dir: Path, name: str) -> None:
    lines = _reference(reference_dir, name)
    plain = _events(lines)
    records = _events([f"4,{seq},{1000 * seq},-;{line}" for seq, line in enumerate(lines)])
    assert [(e.kind, e.device, e.code) for e in records] == [(e.kind, e.device, e.code) for e in plain]
    assert all(e.kernel_seq is not None for e in records)


def test_nvswitch_sxid_headlines_are_events_and_continuations_are_not() -> None:
    lines = [
        "3,2001,2317531452,-;nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Fatal, Link 40 sourcetrack TCEN0 "
        "crumbstore ECC DBE Error",
        "3,2002,2317531460,-;nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Severity 0 Engine instance 40 "
        "Sub-engine instance 00",
        "4,2003,2318000001,-;nvidia-nvswitch1: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 41 egress "
        "non-posted PRIV error (First)",
    ]
    events = _events(lines)
    assert [(e.kind, e.device, e.code) for e in events] == [
        (Kind.SXID_FATAL, "nvidia-nvswitch3", 24007), (Kind.SXID, "nvidia-nvswitch1", 12028)]
    fatal, non_fatal = (classify(e) for e in events)
    assert (fatal.action, fatal.check_id, fatal.cause) == (Action.EVICT, "INV-04", "nvidia-nvswitch3 fatal SXid 24007")
    assert fatal.reason() == "burnin: INV-04 nvidia-nvswitch3 fatal SXid 24007"
    assert (non_fatal.action, non_fatal.check_id) == (Action.RECORD, "INV-04")
