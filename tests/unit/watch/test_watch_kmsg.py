"""The kernel's driver messages to watch events, on real kernel logs (../shared/reference/dmesg)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from burnin.watch.devices import NodeDevices
from burnin.watch.events import Action, Kind, WatchEvent, classify
from burnin.watch.kmsg import events_from_record, pci_function
from burnin.watch.records import KernelRecord, LineReader, LogFormat, read_kmsg

# The devices the lines below name: a simulated H100 node's and the reference logs' GPUs.
DEVICES = NodeDevices(
    gpus=frozenset({"0000:1b:00", "0000:52:00", "0000:9b:00", "0000:10:1c", "0000:38:00"}),
    nvidia=frozenset({"0000:1b:00.0", "0000:52:00.0", "0000:86:00.0", "0000:8a:00.0"}),
    hcas=frozenset({"0000:4f:00.0"}),
    netdevs=frozenset({"ib0", "ib6", "ibp24s0", "eth0"}),
)
XID_79 = "NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
SXID_FATAL = ("nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Fatal, Link 40 sourcetrack TCEN0 crumbstore "
              "ECC DBE Error")


def _kernel(text: str, seq: int = 1) -> KernelRecord:
    return KernelRecord(seq, 1000 * seq, 4, text)


def _events(lines: list[str], fmt: LogFormat = LogFormat.AUTO,
            devices: NodeDevices = DEVICES) -> list[WatchEvent]:
    reader = LineReader(fmt)
    found: list[WatchEvent] = []
    for line in lines:
        record = reader.read(line)
        if record is not None:
            found += events_from_record(record, 100.0, {}, devices)
    return found


def test_kmsg_record_to_an_xid_event() -> None:
    record = read_kmsg(f"4,1893,523280204,-;{XID_79}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:52:00.0\n")
    assert record is not None
    (event,) = events_from_record(record, 7.5, {"0000:52:00": "gpu2"}, DEVICES)
    assert (event.kind, event.device, event.code, event.label, event.foreign) == (Kind.XID, "0000:52:00", 79,
                                                                                  "gpu2", "")
    assert (event.kernel_seq, event.kernel_usec, event.detected_at) == (1893, 523280204, 7.5)
    assert classify(event).action is Action.EVICT


def test_an_untrusted_record_has_no_event() -> None:
    record = KernelRecord(1, 2, 4, XID_79, trusted=False, origin="kmsg facility 1 (user)")
    assert events_from_record(record, 0.0, {}, DEVICES) == []


def test_control_characters_from_the_node_are_escaped() -> None:
    (event,) = events_from_record(_kernel("NVRM: Xid (PCI:0000:1b:00): 13, pid=7, name=\x1b[31mevil, bad"), 0.0,
                                  {}, DEVICES)
    assert "\x1b" not in event.text and "\\x1b[31m" in event.text


def test_an_xid_without_the_pci_prefix_of_older_drivers() -> None:
    (event,) = events_from_record(_kernel("NVRM: Xid (0000:52:00): 79, GPU has fallen off the bus."), 0.0, {},
                                  DEVICES)
    assert (event.device, event.code, event.foreign) == ("0000:52:00", 79, "")


@pytest.mark.parametrize("text", [
    # a segfault line of the kernel, naming a library file the user named after the pattern
    f"a.out[4242]: segfault at 0 ip 00007f0000001000 sp 00007ffc00000000 error 4 in {XID_79}.so[7f0000000000+1000]",
    # the pattern after another driver's prefix, or after text
    f"nvme nvme0: {XID_79}",
    f" {XID_79}",
    f"x{XID_79}",
    f"NVRM: GPU at PCI:0000:52:00: {XID_79}",
    # an AppArmor audit line naming a file the user created
    'audit: type=1400 audit(1700000000.000:42): apparmor="DENIED" operation="open" name="/tmp/ib0: lost carrier"',
    'audit: type=1400 audit(1700000000.000:42): apparmor="DENIED" operation="open" name="/tmp/ibp24s0: lost carrier"',
    "foo ib0: lost carrier",
    "ib0: lost carrier and more",
    # an SXid inside another line
    f'audit: type=1309 audit(1700000000.000:43): argc=2 a0="echo" a1="{SXID_FATAL}"',
    f"NVRM: {SXID_FATAL}",
    f"nvidia-nvswitch3: something {SXID_FATAL}",
    # mlx5's port module event quoted
    "foo: mlx5_core 0000:4f:00.0: Port module event: module 0, Cable unplugged",
    # the Xid words without their fields
    "NVRM: Xid (PCI:0000:52:00): seventy-nine",
])
def test_a_kernel_line_that_only_quotes_a_driver_message_is_no_event(text: str) -> None:
    assert events_from_record(_kernel(text), 0.0, {}, DEVICES) == []


def test_an_xid_of_a_gpu_that_is_not_this_nodes_is_recorded_not_acted_on() -> None:
    (event,) = events_from_record(_kernel("NVRM: Xid (PCI:0000:9c:00): 79, GPU has fallen off the bus."), 0.0, {},
                                  DEVICES)
    assert event.foreign == "not a GPU of this node"
    decision = classify(event)
    assert decision.action is Action.RECORD
    assert decision.cause == "PCI 0000:9c:00 Xid 79 (GPU has fallen off the bus), not a GPU of this node"
    assert decision.key == ("GPU-04", "xid", "0000:9c:00", "79")


def test_an_nvidia_function_that_is_no_gpu_is_not_a_gpu() -> None:
    """0000:86:00.0 is an NVSwitch of this node: an Xid naming it is no GPU's."""
    (event,) = events_from_record(_kernel("NVRM: Xid (PCI:0000:86:00): 79, x"), 0.0, {}, DEVICES)
    assert event.foreign == "not a GPU of this node"


def test_no_known_device_means_nothing_is_acted_on() -> None:
    (event,) = events_from_record(_kernel(XID_79), 0.0, {}, NodeDevices())
    assert classify(event).action is Action.RECORD


def test_nvml_gpus_count_as_the_nodes() -> None:
    devices = NodeDevices().with_gpus({"00000000:52:00.0"})
    (event,) = events_from_record(_kernel(XID_79), 0.0, {}, devices)
    assert event.foreign == "" and classify(event).action is Action.EVICT


def test_mlx5_cable_events() -> None:
    down = _kernel("mlx5_core 0000:4F:00.0: Port module event: module 0, Cable unplugged")
    up = _kernel("mlx5_core 0000:4f:00.0: Port module event: module 0, Cable plugged")
    (gone,) = events_from_record(down, 0.0, {"0000:4f:00.0": "mlx5_2"}, DEVICES)
    (back,) = events_from_record(up, 0.0, {}, DEVICES)
    assert (gone.kind, gone.device, gone.subject, gone.foreign) == (Kind.IB_PORT_DOWN, "0000:4f:00.0", "mlx5_2", "")
    assert back.kind is Kind.IB_PORT_UP
    assert classify(gone).action is Action.EVICT


def test_mlx5_module_error_and_other_states() -> None:
    (error,) = events_from_record(_kernel("mlx5_core 0000:4f:00.0: Port module event[error]: module 0, "
                                          "Cable error, Bus stuck (I2C or data shorted)"), 0.0, {}, DEVICES)
    assert error.kind is Kind.IB_PORT_DOWN
    assert events_from_record(_kernel("mlx5_core 0000:4f:00.0: Port module event: module 0, Cable "
                                      "Enabled"), 0.0, {}, DEVICES) == []


def test_mlx5_event_of_an_hca_that_is_not_this_nodes() -> None:
    (event,) = events_from_record(_kernel("mlx5_core 0000:aa:00.0: Port module event: module 0, Cable unplugged"),
                                  0.0, {}, DEVICES)
    assert event.foreign == "not an HCA of this node" and classify(event).action is Action.RECORD


def test_ipoib_carrier_of_this_nodes_interfaces() -> None:
    (down,) = events_from_record(_kernel("ibp24s0: lost carrier"), 0.0, {}, DEVICES)
    (up,) = events_from_record(_kernel("ib0: Gained carrier"), 0.0, {}, DEVICES)
    assert (down.kind, down.device, down.foreign) == (Kind.IB_PORT_DOWN, "ibp24s0", "")
    assert (up.kind, up.device) == (Kind.IB_PORT_UP, "ib0")
    (other,) = events_from_record(_kernel("ib9: lost carrier"), 0.0, {}, DEVICES)
    assert other.foreign == "not a network interface of this node"
    assert classify(other).action is Action.RECORD


def test_ethernet_carrier_is_not_an_ib_event() -> None:
    assert events_from_record(_kernel("eth0: lost carrier"), 0.0, {}, DEVICES) == []


def test_nvswitch_sxid_headlines_are_events_and_continuations_are_not() -> None:
    lines = [
        f"3,2001,2317531452,-;{SXID_FATAL}",
        "3,2002,2317531460,-;nvidia-nvswitch3: SXid (PCI:0000:8a:00.0): 24007, Severity 0 Engine instance 40 "
        "Sub-engine instance 00",
        "4,2003,2318000001,-;nvidia-nvswitch1: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 41 egress "
        "non-posted PRIV error (First)",
    ]
    events = _events(lines)
    assert [(e.kind, e.device, e.code, e.foreign) for e in events] == [
        (Kind.SXID_FATAL, "nvidia-nvswitch3", 24007, ""), (Kind.SXID, "nvidia-nvswitch1", 12028, "")]
    fatal, non_fatal = (classify(e) for e in events)
    assert (fatal.action, fatal.check_id, fatal.cause) == (Action.EVICT, "INV-04", "nvidia-nvswitch3 fatal SXid 24007")
    assert fatal.reason() == "burnin: INV-04 nvidia-nvswitch3 fatal SXid 24007"
    assert (non_fatal.action, non_fatal.check_id) == (Action.RECORD, "INV-04")


def test_an_sxid_of_an_nvswitch_that_is_not_this_nodes() -> None:
    (event,) = events_from_record(_kernel(SXID_FATAL.replace("8a:00.0", "8b:00.0")), 0.0, {}, DEVICES)
    assert event.foreign == "not an NVSwitch of this node" and classify(event).action is Action.RECORD


@pytest.mark.parametrize(("text", "function"), [
    ("0000:8A:00.0", "0000:8a:00.0"), ("8a:00.0", "0000:8a:00.0"), ("0000:8a:00", "0000:8a:00.0"),
    ("PCI:0000:8a:00.1", "0000:8a:00.1"),
])
def test_pci_function(text: str, function: str) -> None:
    assert pci_function(text) == function


def _reference(reference_dir: Path, name: str) -> list[str]:
    return (reference_dir / "dmesg" / name).read_text(encoding="utf-8").splitlines()


def test_real_xid_119_gsp_log_is_one_evicting_incident(reference_dir: Path) -> None:
    events = _events(_reference(reference_dir, "dmesg-T-xid119-gsp-rpc-timeout-h100.txt"))
    assert [(e.kind, e.device, e.code, e.foreign) for e in events] == [(Kind.XID, "0000:9b:00", 119, "")] * 5
    assert {classify(e).key for e in events} == {("GPU-04", "xid", "0000:9b:00", "119")}
    assert classify(events[0]).action is Action.EVICT


def test_real_xid_63_line_is_recorded_only(reference_dir: Path) -> None:
    """Published without its dmesg prefix: a dmesg -t capture, read as one."""
    assert _events(_reference(reference_dir, "xid63-row-remapper-a100.txt")) == []  # auto: format not known yet
    (event,) = _events(_reference(reference_dir, "xid63-row-remapper-a100.txt"), LogFormat.DMESG)
    assert (event.device, event.code) == ("0000:10:1c", 63)
    assert classify(event).action is Action.RECORD


def test_real_decoded_iso_log(reference_dir: Path) -> None:
    events = _events(_reference(reference_dir, "dmesg-decode-time-format-iso-xid13-and-misc.txt"))
    codes = Counter(e.code for e in events)
    assert set(codes) == {13, 43} and codes[13] > 600
    assert all(classify(e).action is Action.RECORD for e in events)


def test_real_ib_link_flap_syslog_is_a_programs_not_the_kernels(reference_dir: Path) -> None:
    """systemd-networkd's 'ib6: lost carrier' lines: `logger -t systemd-networkd` writes the same."""
    lines = _reference(reference_dir, "syslog-ib-link-flap-ndv4-azure-nhc.txt")
    assert _events(lines) == []
    reader = LineReader()
    records = [r for r in map(reader.read, lines) if r is not None]
    assert reader.format is LogFormat.SYSLOG and len(records) == len(lines)
    assert all(not r.trusted for r in records)
    carriers = [r for r in records if "carrier" in r.text]
    assert len(carriers) == 12 and {r.origin for r in carriers} == {"syslog tag 'systemd-networkd[5398]'"}
    # the same messages from the kernel would be events
    as_kernel = [_kernel(r.text) for r in carriers]
    kinds = Counter(e.kind for r in as_kernel for e in events_from_record(r, 0.0, {}, DEVICES))
    assert kinds == {Kind.IB_PORT_DOWN: 6, Kind.IB_PORT_UP: 6}


@pytest.mark.parametrize("name", ["dmesg-T-xid119-gsp-rpc-timeout-h100.txt", "xid63-row-remapper-a100.txt"])
def test_real_lines_as_kmsg_records_syslog_kernel_lines_or_dmesg_give_the_same_events(reference_dir: Path,
                                                                                       name: str) -> None:
    lines = _reference(reference_dir, name)
    plain = _events(lines, LogFormat.DMESG)
    messages = [r.text for r in map(LineReader(LogFormat.DMESG).read, lines) if r is not None]
    records = _events([f"4,{seq},{1000 * seq},-;{text}" for seq, text in enumerate(messages)])
    syslog = _events([f"Feb 23 16:24:18 gpu001 kernel: {text}" for text in messages])
    assert plain
    assert [(e.kind, e.device, e.code) for e in records] == [(e.kind, e.device, e.code) for e in plain]
    assert [(e.kind, e.device, e.code) for e in syslog] == [(e.kind, e.device, e.code) for e in plain]
    assert all(e.kernel_seq is not None for e in records)
