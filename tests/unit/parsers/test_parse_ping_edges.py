"""Edges of the ``ping`` parser that planted bugs slipped through (bench/mutants on burnin/parsers/ping.py).

../shared holds no ping output (see test_parse_ping.py); these tests take its captured
iputils samples and change only what each is about. Each pins one decision: the
longest line read (4096 characters), the path MTU a hop's Frag needed gives on its
own, an MTU only from a too-big error, the three-value ``round-trip`` line
(busybox), an rtt or statistics line with a value missing, and the first header
of a text that holds two.
"""

from __future__ import annotations

import pytest
from test_parse_ping import FRAG_NEEDED_UNPRIVILEGED, HOST_UNREACHABLE, LOOPBACK_QUIET, REPLIES_UNPRIVILEGED

from burnin.errors import ParseError
from burnin.parsers.ping import MAX_LINE, PingRtt, parse_ping

RTT_LINE = "rtt min/avg/max/mdev = 0.105/0.121/0.148/0.018 ms"


def test_a_line_of_4096_characters_is_read() -> None:
    message = "ping: socket: " + "x" * (MAX_LINE - 14)
    assert len(message) == MAX_LINE == 4096
    assert parse_ping(message + "\n").messages == (message[6:],)


def test_a_line_longer_than_4096_characters_is_skipped() -> None:
    with pytest.raises(ParseError, match="no ping header"):
        parse_ping("ping: socket: " + "x" * (MAX_LINE - 13) + "\n")


def test_a_hops_frag_needed_alone_gives_the_path_mtu() -> None:
    """One request (-c 1): the router's Frag needed and no local error after it."""
    text = "\n".join(line for line in FRAG_NEEDED_UNPRIVILEGED.splitlines() if "local error" not in line) + "\n"
    report = parse_ping(text)
    assert report.local_mtus == () and report.path_mtu == 1500 and report.too_long


def test_an_mtu_in_an_error_that_is_not_too_big_is_no_path_mtu() -> None:
    """A hop's message of another ping's making that names an MTU without saying the packet was too big."""
    text = HOST_UNREACHABLE.replace("Destination Host Unreachable", "Destination Host Unreachable (mtu = 1500)")
    report = parse_ping(text)
    assert all(e.mtu == 1500 and not e.too_big for e in report.icmp_errors)
    assert report.path_mtu is None and not report.too_long


def test_frag_needed_without_an_mtu_is_not_too_big() -> None:
    text = FRAG_NEEDED_UNPRIVILEGED.replace("Frag needed and DF set (mtu = 1500)", "Frag needed and DF set")
    hop, = parse_ping(text).icmp_errors
    assert hop.mtu is None and not hop.too_big


def test_busybox_round_trip_line_has_three_values() -> None:
    text = LOOPBACK_QUIET.replace("rtt min/avg/max/mdev = 0.048/0.197/0.491/0.207 ms",
                                  "round-trip min/avg/max = 0.048/0.197/0.491 ms")
    assert "round-trip" in text
    assert parse_ping(text).rtt == PingRtt(0.048, 0.197, 0.491, None)


@pytest.mark.parametrize("values", ["0.105/0.121//0.018", "0.105/0.121/0.148/", "0.105/0.121", "1/2/3/4/5"])
def test_an_rtt_line_with_a_value_missing_is_no_rtt(values: str) -> None:
    text = REPLIES_UNPRIVILEGED.replace(RTT_LINE, f"rtt min/avg/max/mdev = {values} ms")
    assert values in text
    report = parse_ping(text)
    assert report.rtt is None and report.received == 3


def test_a_statistics_line_with_an_unreadable_loss_is_no_statistics() -> None:
    text = REPLIES_UNPRIVILEGED.replace("3 received, 0% packet loss", "3 received, 0.0.0% packet loss")
    assert "0.0.0%" in text
    report = parse_ping(text)
    assert report.statistics is None and report.received == 3  # the reply lines count instead


def test_the_first_header_wins() -> None:
    report = parse_ping(REPLIES_UNPRIVILEGED + FRAG_NEEDED_UNPRIVILEGED)
    assert (report.destination, report.payload_bytes) == ("10.98.1.254", 8972)
    second = parse_ping(REPLIES_UNPRIVILEGED + LOOPBACK_QUIET.replace("8972(9000)", "56(84)"))
    assert (second.destination, second.payload_bytes) == ("10.98.1.254", 8972)
