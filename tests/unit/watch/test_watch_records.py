"""Kernel log lines to records: the format says whether the kernel wrote the line (burnin.watch.records)."""

from __future__ import annotations

import pytest

from burnin.watch.records import KernelRecord, LineReader, LogFormat, detect, read_dmesg, read_kmsg, read_syslog

XID = "NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def test_kmsg_record_fields() -> None:
    record = read_kmsg(f"4,1893,523280204,-;{XID}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:52:00.0\n")
    assert record == KernelRecord(1893, 523280204, 4, XID)
    assert record.trusted and record.origin == "kernel"


def test_kmsg_priority_with_the_kernel_facility_and_extra_flags() -> None:
    assert read_kmsg("6,12,99,-,caller=T1;ib0: lost carrier") == KernelRecord(12, 99, 6, "ib0: lost carrier")


@pytest.mark.parametrize(("prio", "origin"), [
    (12, "kmsg facility 1 (user)"),  # what the kernel makes of a user-space write to /dev/kmsg
    (14, "kmsg facility 1 (user)"),
    (30, "kmsg facility 3 (daemon)"),  # systemd and other daemons writing to /dev/kmsg
    (38, "kmsg facility 4 (auth)"),
    (134, "kmsg facility 16 (local0)"),
    (191, "kmsg facility 23 (local7)"),
    (192, "kmsg facility 24 (24)"),
    (100, "kmsg facility 12 (12)"),
    (8, "kmsg facility 1 (user)"),  # facility 1 at level 0: the level is no facility
])
def test_kmsg_records_of_another_facility_are_not_trusted(prio: int, origin: str) -> None:
    record = read_kmsg(f"{prio},7,8,-;{XID}")
    assert record is not None and not record.trusted and record.origin == origin
    assert (record.seq, record.text) == (7, XID)  # still read: the sequence number counts


def test_kmsg_levels_0_to_7_of_the_kernel_facility_are_trusted() -> None:
    for level in range(8):
        record = read_kmsg(f"{level},1,2,-;{XID}")
        assert record is not None and record.trusted and record.level == level


def test_kmsg_continuation_and_blank_lines_are_not_records() -> None:
    assert read_kmsg(" SUBSYSTEM=pci") is None
    assert read_kmsg("") is None
    assert read_kmsg("   \n") is None


def test_a_line_that_is_no_kmsg_record_is_not_trusted_in_a_kmsg_log() -> None:
    record = read_kmsg(XID)
    assert record is not None and not record.trusted and record.origin == "not a kmsg record"


@pytest.mark.parametrize("line", [
    f"[  523.280204] {XID}",  # dmesg
    f"[Sun Feb 23 16:24:18 2025] {XID}",  # dmesg -T
    f"[  +0.000010] {XID}",  # dmesg --time-format delta
    f"2025-01-21T02:21:33,498559+00:00 {XID}",  # dmesg --time-format iso
    f"kern  :warn  : 2025-01-21T02:21:33,498559+00:00 {XID}",  # dmesg -x --time-format iso
    f"kern  :warn  : [  523.280204] {XID}",  # dmesg -x
    f"<4>[  523.280204] {XID}",  # dmesg -r
    f"<4>{XID}",  # dmesg -r -t
    XID,  # dmesg -t
])
def test_dmesg_lines_are_the_kernels_and_read_without_their_prefix(line: str) -> None:
    record = read_dmesg(line)
    assert record is not None and record.trusted and record.text == XID


def test_dmesg_raw_priority_gives_the_level() -> None:
    record = read_dmesg(f"<3>[    1.0] {XID}")
    assert record is not None and record.level == 3


@pytest.mark.parametrize(("line", "origin"), [
    (f"user  :warn  : [  523.280204] {XID}", "dmesg facility 1 (user)"),
    (f"daemon:info  : 2025-01-21T02:21:33,498559+00:00 {XID}", "dmesg facility 3 (daemon)"),
    (f"local3:notice: {XID}", "dmesg facility 19 (local3)"),
    (f"<12>[  523.280204] {XID}", "dmesg facility 1 (user)"),
])
def test_a_dmesg_line_that_names_another_facility_is_not_trusted(line: str, origin: str) -> None:
    record = read_dmesg(line)
    assert record is not None and not record.trusted and record.origin == origin and record.text == XID


def test_a_word_before_a_colon_is_no_facility() -> None:
    record = read_dmesg("audit:info : something")
    assert record is not None and record.trusted and record.text == "audit:info : something"


@pytest.mark.parametrize("line", [
    f"Dec  1 13:00:00 gpu001 kernel: {XID}",  # rsyslog
    f"Dec 01 13:00:00 gpu001 kernel: {XID}",  # journalctl -k
    f"Dec  1 13:00:00.123456 gpu001 kernel: {XID}",  # journalctl -k -o short-precise
    f"2025-12-01T13:00:00+0000 gpu001 kernel: {XID}",  # journalctl -k -o short-iso
    f"2025-12-01T13:00:00.123456+00:00 gpu001.cluster kernel: {XID}",  # rsyslog RFC 3339
    f"Dec  1 13:00:00 gpu001 kernel: [  523.280204] {XID}",  # imklog with the kernel's time
])
def test_syslog_lines_tagged_kernel_are_trusted(line: str) -> None:
    record = read_syslog(line)
    assert record is not None and record.trusted and record.text == XID


@pytest.mark.parametrize(("line", "origin"), [
    (f"Dec  1 13:00:00 gpu001 alice: {XID}", "syslog tag 'alice'"),  # logger -t alice
    (f"Dec  1 13:00:00 gpu001 kernel[4242]: {XID}", "syslog tag 'kernel[4242]'"),  # logger -i -t kernel
    (f"Dec  1 13:00:00 gpu001 sudo:    alice : TTY=pts/0 ; COMMAND=/usr/bin/echo {XID}", "syslog tag 'sudo'"),
    ("Aug 17 06:18:01 jplc7eb7-vm-0 systemd-networkd[5398]: ib6: lost carrier",
     "syslog tag 'systemd-networkd[5398]'"),
    (f"Dec  1 13:00:00 gpu001 Kernel: {XID}", "syslog tag 'Kernel'"),
])
def test_syslog_lines_of_programs_are_not_trusted(line: str, origin: str) -> None:
    record = read_syslog(line)
    assert record is not None and not record.trusted and record.origin == origin


@pytest.mark.parametrize("line", [XID, f"[  523.280204] {XID}", f"gpu001 kernel: {XID}",
                                  f"Dec  1 gpu001 kernel: {XID}"])
def test_a_line_without_a_syslog_header_is_not_trusted_in_a_syslog_log(line: str) -> None:
    record = read_syslog(line)
    assert record is not None and not record.trusted and record.origin == "not a syslog line"


def test_the_host_is_the_first_word_so_a_program_cannot_write_the_tag() -> None:
    record = read_syslog(f"Dec  1 13:00:00 gpu001 alice: kernel: {XID}")
    assert record is not None and not record.trusted and record.text == f"kernel: {XID}"


@pytest.mark.parametrize(("line", "fmt"), [
    (f"4,1,2,-;{XID}", LogFormat.KMSG),
    (f"12,1,2,-;{XID}", LogFormat.KMSG),
    (f"Dec  1 13:00:00 gpu001 kernel: {XID}", LogFormat.SYSLOG),
    (f"Dec  1 13:00:00 gpu001 alice: {XID}", LogFormat.SYSLOG),
    (f"2025-12-01T13:00:00+0000 gpu001 kernel: {XID}", LogFormat.SYSLOG),
    (f"[  523.280204] {XID}", LogFormat.DMESG),
    (f"[Sun Feb 23 16:24:18 2025] {XID}", LogFormat.DMESG),
    (f"2025-01-21T02:21:33,498559+00:00 {XID}", LogFormat.DMESG),
    (f"kern  :warn  : {XID}", LogFormat.DMESG),
    (f"user  :warn  : {XID}", LogFormat.DMESG),
    (f"<4>{XID}", LogFormat.DMESG),
    (XID, None),  # a bare line: dmesg -t, or anything
    ("audit:info : x", None),
    ("", None),
    (" SUBSYSTEM=pci", None),
])
def test_detect(line: str, fmt: LogFormat | None) -> None:
    assert detect(line) is fmt


def test_auto_trusts_nothing_until_a_line_settles_the_format_then_keeps_it() -> None:
    reader = LineReader()
    first = reader.read(XID)
    assert first is not None and not first.trusted and first.origin == "log format not known yet"
    assert reader.read("") is None and reader.format is LogFormat.AUTO
    settled = reader.read(f"Dec  1 13:00:00 gpu001 kernel: {XID}")
    assert settled is not None and settled.trusted and reader.format is LogFormat.SYSLOG
    # A later line in another form is read as syslog: not the kernel's.
    for line in (f"[  523.280204] {XID}", f"4,1,2,-;{XID}", XID):
        record = reader.read(line)
        assert record is not None and not record.trusted, line


def test_auto_settled_on_dmesg_takes_bare_lines() -> None:
    reader = LineReader()
    reader.read(f"[  523.280204] {XID}")
    record = reader.read(XID)
    assert reader.format is LogFormat.DMESG and record is not None and record.trusted


def test_a_given_format_is_never_changed() -> None:
    reader = LineReader(LogFormat.KMSG)
    record = reader.read(f"Dec  1 13:00:00 gpu001 kernel: {XID}")
    assert reader.format is LogFormat.KMSG and record is not None and not record.trusted
