"""The iputils ``ping`` parser (STO-04's path-MTU probe) on output captured from the real tool.

../shared holds no ping sample, so the samples below are inline (short, and
only because no reference file exists). Where they came from: iputils-ping
3:20221126-1+deb12u1 on Debian 12 (bookworm), run while writing this parser in
network namespaces made for the purpose (a veth pair with one end at MTU 1500;
a router namespace with a 9000-byte link in and a 1500-byte link out; IPv6 on
the same), as root and as an unprivileged user through a copy of the binary
without file capabilities (net.ipv4.ping_group_range open: ICMP datagram
sockets), which is why some error lines start with ``/tmp/ping-nocap:``. stdout
and stderr are joined as the measurement joins them. The one form not
reproduced here, ``ping: sendmsg: Message too long``, is written as iputils
prints it (``error(0, errno, "sendmsg")`` when the kernel queued no error) and
said so in its test.
"""

from __future__ import annotations

import pytest

from burnin.errors import ParseError
from burnin.parsers.ping import PingRtt, PingStatistics, df_payload, parse_ping

# ping -M do -s 8972 -c 3 -i 0.2 -W 1 -q 127.0.0.1  (root, loopback MTU 65536)
LOOPBACK_QUIET = """\
PING 127.0.0.1 (127.0.0.1) 8972(9000) bytes of data.

--- 127.0.0.1 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 406ms
rtt min/avg/max/mdev = 0.048/0.197/0.491/0.207 ms
"""

# ping -n -M do -s 8972 -c 3 -i 0.2 -W 1 10.98.1.254  (unprivileged, datagram socket, 9000-byte link)
REPLIES_UNPRIVILEGED = """\
PING 10.98.1.254 (10.98.1.254) 8972(9000) bytes of data.
8980 bytes from 10.98.1.254: icmp_seq=1 ttl=64 time=0.148 ms
8980 bytes from 10.98.1.254: icmp_seq=2 ttl=64 time=0.112 ms
8980 bytes from 10.98.1.254: icmp_seq=3 ttl=64 time=0.105 ms

--- 10.98.1.254 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 405ms
rtt min/avg/max/mdev = 0.105/0.121/0.148/0.018 ms
"""

# ping -n -M do -s 8972 -c 3 -i 0.2 -W 1 10.99.0.2  (root; the local veth end at MTU 1500)
LOCAL_ERROR = """\
PING 10.99.0.2 (10.99.0.2) 8972(9000) bytes of data.

--- 10.99.0.2 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 406ms

ping: local error: message too long, mtu=1500
ping: local error: message too long, mtu=1500
ping: local error: message too long, mtu=1500
"""

# the same with -q: the local errors are neither printed nor counted
LOCAL_ERROR_QUIET = """\
PING 10.99.0.2 (10.99.0.2) 8972(9000) bytes of data.

--- 10.99.0.2 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 413ms

"""

# unprivileged (ICMP datagram socket), through the router whose outgoing link is MTU 1500, route cache flushed:
# the first request draws the router's Frag needed, the next two a local error from the learnt path MTU
FRAG_NEEDED_UNPRIVILEGED = """\
PING 10.98.2.2 (10.98.2.2) 8972(9000) bytes of data.
From 10.98.1.254 icmp_seq=1 Frag needed and DF set (mtu = 1500)

--- 10.98.2.2 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 408ms

/tmp/ping-nocap: local error: message too long, mtu=1500
/tmp/ping-nocap: local error: message too long, mtu=1500
"""

# ping -6 -n -M do -s 8952 -c 3 -i 0.2 -W 1 fd14::2  (root, through the router)
PACKET_TOO_BIG_V6 = """\
PING fd14::2(fd14::2) 8952 data bytes
From fd13::fe icmp_seq=1 Packet too big: mtu=1500

--- fd14::2 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 407ms

ping: local error: message too long, mtu: 1500
ping: local error: message too long, mtu: 1500
"""

# ping -6 -n -M do -s 8952 -c 3 -i 0.2 -W 1 fd13::fe
REPLIES_V6 = """\
PING fd13::fe(fd13::fe) 8952 data bytes
8960 bytes from fd13::fe: icmp_seq=1 ttl=64 time=0.058 ms
8960 bytes from fd13::fe: icmp_seq=2 ttl=64 time=0.063 ms
8960 bytes from fd13::fe: icmp_seq=3 ttl=64 time=0.063 ms

--- fd13::fe ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 405ms
rtt min/avg/max/mdev = 0.058/0.061/0.063/0.002 ms
"""

# no route at all (exit status 2): nothing on stdout
NO_ROUTE = "ping: connect: Network is unreachable\n"

# an on-link address nobody answers ARP for (exit status 1, after 2971 ms)
HOST_UNREACHABLE = """\
PING 10.98.1.77 (10.98.1.77) 8972(9000) bytes of data.
From 10.98.1.1 icmp_seq=1 Destination Host Unreachable
From 10.98.1.1 icmp_seq=2 Destination Host Unreachable

--- 10.98.1.77 ping statistics ---
3 packets transmitted, 0 received, +2 errors, 100% packet loss, time 2971ms
pipe 3
"""

# a router with no route onwards
NET_UNREACHABLE = """\
PING 10.97.0.5 (10.97.0.5) 8972(9000) bytes of data.
From 10.98.1.254 icmp_seq=1 Destination Net Unreachable
From 10.98.1.254 icmp_seq=2 Destination Net Unreachable

--- 10.97.0.5 ping statistics ---
3 packets transmitted, 0 received, +2 errors, 100% packet loss, time 406ms
"""

# the router with net.ipv4.icmp_echo_ignore_all=1: silence
SILENT = """\
PING 10.98.1.254 (10.98.1.254) 8972(9000) bytes of data.

--- 10.98.1.254 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 405ms

"""

# -I pm12a: the header names the source and device
BOUND_TO_DEVICE = """\
PING 10.99.0.2 (10.99.0.2) from 10.99.0.1 pm12a: 8972(9000) bytes of data.

--- 10.99.0.2 ping statistics ---
2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 202ms

ping: local error: message too long, mtu=1500
ping: local error: message too long, mtu=1500
"""


def test_replies_under_quiet_are_read_from_the_statistics() -> None:
    report = parse_ping(LOOPBACK_QUIET)
    assert (report.destination, report.payload_bytes, report.replies) == ("127.0.0.1", 8972, 0)
    assert report.statistics == PingStatistics(3, 3, 0, 0, 0.0, 406)
    assert report.rtt == PingRtt(0.048, 0.197, 0.491, 0.207)
    assert report.received == 3 and not report.too_long and report.path_mtu is None and not report.unreachable


def test_reply_lines_are_counted() -> None:
    report = parse_ping(REPLIES_UNPRIVILEGED)
    assert report.replies == 3 and report.received == 3 and report.payload_bytes == 8972
    assert report.rtt is not None and report.rtt.max_ms == 0.148
    assert not report.icmp_errors and not report.local_mtus and not report.messages


def test_local_error_gives_the_route_mtu() -> None:
    report = parse_ping(LOCAL_ERROR)
    assert report.local_mtus == (1500, 1500, 1500)
    assert report.statistics == PingStatistics(3, 0, 3, 0, 100.0, 406)
    assert report.received == 0 and report.too_long and report.path_mtu == 1500


def test_quiet_hides_the_local_error() -> None:
    """Why the probe never passes -q: the same failure shows no MTU evidence at all."""
    report = parse_ping(LOCAL_ERROR_QUIET)
    assert report.statistics == PingStatistics(3, 0, 0, 0, 100.0, 413)
    assert not report.too_long and report.path_mtu is None


def test_frag_needed_from_a_router() -> None:
    report = parse_ping(FRAG_NEEDED_UNPRIVILEGED)
    hop, = report.icmp_errors
    assert (hop.source, hop.seq, hop.mtu, hop.too_big) == ("10.98.1.254", 1, 1500, True)
    assert hop.message == "Frag needed and DF set (mtu = 1500)"
    assert report.local_mtus == (1500, 1500)  # the binary's name, not "ping", starts these lines
    assert report.path_mtu == 1500 and not report.unreachable


def test_ipv6_packet_too_big_and_local_error() -> None:
    report = parse_ping(PACKET_TOO_BIG_V6)
    assert (report.destination, report.payload_bytes) == ("fd14::2", 8952)
    hop, = report.icmp_errors
    assert (hop.source, hop.mtu, hop.too_big) == ("fd13::fe", 1500, True)
    assert report.local_mtus == (1500, 1500) and report.path_mtu == 1500


def test_ipv6_replies() -> None:
    report = parse_ping(REPLIES_V6)
    assert (report.destination, report.payload_bytes, report.replies, report.received) == ("fd13::fe", 8952, 3, 3)


def test_no_route_is_a_message_not_an_mtu() -> None:
    report = parse_ping(NO_ROUTE)
    assert report.destination is None and report.statistics is None
    assert report.messages == ("connect: Network is unreachable",)
    assert report.unreachable == ("connect: Network is unreachable",) and not report.too_long


@pytest.mark.parametrize(("text", "source", "what"), [
    (HOST_UNREACHABLE, "10.98.1.1", "Destination Host Unreachable"),
    (NET_UNREACHABLE, "10.98.1.254", "Destination Net Unreachable"),
])
def test_icmp_unreachable(text: str, source: str, what: str) -> None:
    report = parse_ping(text)
    assert report.unreachable == (f"From {source}: {what}",) * 2
    assert all(e.mtu is None and not e.too_big for e in report.icmp_errors)
    assert report.statistics is not None and report.statistics.errors == 2 and not report.too_long


def test_silence_is_total_loss_without_evidence() -> None:
    report = parse_ping(SILENT)
    assert report.statistics == PingStatistics(3, 0, 0, 0, 100.0, 405)
    assert not report.too_long and not report.unreachable and not report.messages


def test_header_with_source_and_device() -> None:
    report = parse_ping(BOUND_TO_DEVICE)
    assert (report.destination, report.payload_bytes, report.path_mtu) == ("10.99.0.2", 8972, 1500)


def test_sendmsg_message_too_long() -> None:
    """Not reproduced on this kernel (it always queued the local error); the line as iputils' source prints it."""
    report = parse_ping(LOCAL_ERROR_QUIET + "ping: sendmsg: Message too long\n")
    assert report.send_too_long and report.too_long and report.path_mtu is None


def test_older_capitalised_local_error() -> None:
    """iputils before 2021 wrote ``Message too long`` (the same line otherwise)."""
    assert parse_ping(LOCAL_ERROR.replace("message too long", "Message too long")).local_mtus == (1500,) * 3


def test_partial_loss_keeps_the_fraction() -> None:
    text = REPLIES_UNPRIVILEGED.replace("3 received, 0% packet loss", "2 received, 33.3333% packet loss")
    stats = parse_ping(text).statistics
    assert stats is not None and (stats.received, stats.loss_percent) == (2, 33.3333)


@pytest.mark.parametrize("text", ["", "   \n", "garbage\nmore garbage\n", "sh: 1: ping: not found\n",
                                  "PING but nothing else\n"])
def test_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match=r"^ping: "):
        parse_ping(text)


def test_overlong_lines_are_skipped() -> None:
    with pytest.raises(ParseError):
        parse_ping("PING " + "1 " * 5000 + "\n" + ")" + "9" * 5000 + " bytes of data\n")


def test_df_payload() -> None:
    assert (df_payload(9000), df_payload(9000, ipv6=True), df_payload(1500)) == (8972, 8952, 1472)
