"""parse_lspci_at: the devices parse_lspci gives at some addresses, from their stanzas alone; parse_lspci_control_at:
their port types and ACS Control bits alone (TOP-04 reads a whole machine's lspci -vvv for the few ports in its
GPU/HCA paths)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from burnin.errors import ParseError
from burnin.parsers.lspci import LspciReport, PortControl, parse_lspci, parse_lspci_at, parse_lspci_control_at


def _filtered(text: str, addresses: set[str]) -> LspciReport:
    return LspciReport(tuple(d for d in parse_lspci(text).devices if d.address in addresses))


def _same(text: str, addresses: set[str]) -> None:
    """parse_lspci_at gives what parse_lspci does at ``addresses``, and parse_lspci_control_at its port types and
    ACS Control bits (the last device at an address), or the same ParseError."""
    try:
        expected = _filtered(text, addresses)
    except ParseError as exc:
        for parse in (parse_lspci_at, parse_lspci_control_at):
            with pytest.raises(ParseError) as raised:
                parse(text, addresses)
            assert str(raised.value) == str(exc)
        return
    assert parse_lspci_at(text, addresses) == expected
    assert parse_lspci_control_at(text, addresses) == {d.address: PortControl(d.port_type, d.acs_ctl)
                                                       for d in expected.devices}


def test_reference_outputs_give_the_same_devices(reference_dir: Path) -> None:
    files = sorted((reference_dir / "lspci").glob("*.txt"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        every = [d.address for d in parse_lspci(text).devices]
        for addresses in (set(every), set(every[::3]), {every[-1]}, set(), {"0000:ff:1f.7"}):
            _same(text, addresses)


def test_a_whole_machine_keeps_only_the_stanzas_asked_for(reference_dir: Path) -> None:
    text = (reference_dir / "lspci" / "lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt").read_text(encoding="utf-8")
    devices = parse_lspci(text).devices
    ports = [d for d in devices if d.port_type == "Downstream Port"][:2]
    assert len(ports) == 2 and len(devices) > 20
    assert parse_lspci_at(text, {p.address for p in ports}).devices == tuple(ports)


_LINES = st.sampled_from([
    "0000:1a:00.0 Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]",
    "1a:00.0 Ethernet controller [0200]: Mellanox [15b3:1021]",
    "0000:19:00.0 PCI bridge: PLX Technology, Inc. Device c030 (rev b0)",
    "19:00.0 ",
    "0000:18:01.0  ",
    "ABCD:18:01.0 PCI bridge: x",
    "garbage at column zero",
    "\tNUMA node: 1",
    "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-",
    "\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00",
    "\t\tLnkSta:\tSpeed 32GT/s, Width x16 (ok)",
    "\tBus: primary=17, secondary=19, subordinate=19, sec-latency=0",
    "",
    "   ",
    # lines the stanza reader must read exactly as the line loop does (its keys are whole, stripped words)
    "\u00a0NUMA node: 2",
    "\x0b\tLnkCap :\tPort #0, Speed 16GT/s, Width x8",
    "\t\tLnkCap2: Supported Link Speeds: 2.5-32GT/s",
    "\tBusy: primary=17, secondary=20, subordinate=20",
    "\tNUMA  node: 3",
    "\tCapabilities: [10c v1] Secondary PCI Express",
    "\tCapabilities : [40] Express (v2) Root Port (Slot-), MSI 00",
    "\tCapabilitiesX: [40] Express (v2) Endpoint, MSI 00",
    "\t\tACSCtl:\u2028SrcValid+ TransBlk-",
    "\t\tUESta:\tDLP- SDES- TLP-\x1c",
    "\tKernel driver in use:\tnvidia:x",
    "\t\tACSCtl :\tSrcValid+ TransBlk-",
    "ACSCtl:\tSrcValid+ ReqRedir+",
    "Capabilities: [68] Express (v2) Root Port (Slot+), MSI 00",
])


@given(st.lists(_LINES, max_size=24), st.sampled_from(["\n", "\r\n"]),
       st.sets(st.sampled_from(["0000:1a:00.0", "0000:19:00.0", "0000:18:01.0", "abcd:18:01.0"])))
@example(["0000:19:00.0 PCI bridge: x", "", "ACSCtl:\tSrcValid+ ReqRedir+", "",
          "Capabilities: [68] Express (v2) Root Port (Slot+), MSI 00"], "\n", {"0000:19:00.0"})
def test_any_output_gives_what_the_whole_parse_gives(lines: list[str], newline: str, addresses: set[str]) -> None:
    _same(newline.join(lines), addresses)


STANZA = """0000:19:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)
\tSubsystem: Vendor Express (v2) Endpoint, MSI 00
\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00
\tCapabilities: [a0] Express (v2) Root Port (Slot-), MSI 00
\t\tUESta:\tDLP+ SDES- TLP-
\t\tCESta:\tRxErr+ BadTLP-
\t\tUESta:\tDLP- SDES+ TLP-
\t\tCESta:\tRxErr- BadTLP+
"""


def test_a_stanza_keeps_the_first_express_capability_and_aer_status_lines() -> None:
    """The port type comes from the first ``Capabilities: ... Express`` line (not from any other line naming
    one), the AER status bits from the first UESta/CESta lines: whole or cut to the stanza, the same."""
    for report in (parse_lspci(STANZA), parse_lspci_at(STANZA, {"0000:19:00.0"})):
        (device,) = report.devices
        assert device.port_type == "Downstream Port"
        assert device.aer_uncorrectable == {"DLP": True, "SDES": False, "TLP": False}
        assert device.aer_correctable == {"RxErr": True, "BadTLP": False}
    assert parse_lspci_control_at(STANZA, {"0000:19:00.0"}) == {"0000:19:00.0": PortControl("Downstream Port", None)}


def test_two_stanzas_at_one_address_read_as_the_last() -> None:
    """TOP-04 looks a port up by its address: of two stanzas there, the last one's lines are what it reads."""
    second = "\n".join(["0000:19:00.0 PCI bridge: another", "\tCapabilities: [68] Express (v2) Root Port, MSI 00",
                        "\t\tACSCtl:\tSrcValid+ TransBlk-", ""])
    text = STANZA.replace("\t\tUESta:\tDLP+ SDES- TLP-\n", "\t\tACSCtl:\tSrcValid- TransBlk-\n") + second
    assert parse_lspci_control_at(text, {"0000:19:00.0"}) == {
        "0000:19:00.0": PortControl("Root Port", {"SrcValid": True, "TransBlk": False})}
    _same(text, {"0000:19:00.0"})


def test_devices_with_the_same_flag_lines_have_flags_of_their_own(reference_dir: Path) -> None:
    """A flag line read once per parse (most ports show the same ACSCap/ACSCtl/AER lines) is each device's copy."""
    text = (reference_dir / "lspci" / "lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt").read_text(encoding="utf-8")
    every = {d.address for d in parse_lspci(text).devices}
    for report in (parse_lspci(text).devices, parse_lspci_at(text, every).devices,
                   parse_lspci_control_at(text, every).values()):
        controls = [d.acs_ctl for d in report if d.acs_ctl is not None]
        assert len(controls) >= 2 and controls[0] == controls[1]
        controls[0].clear()
        assert controls[1]
