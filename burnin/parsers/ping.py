"""iputils ``ping`` output (Debian iputils-ping 20221126 and 20240117), as STO-04's path-MTU probe reads it.

Give the parser stdout and stderr together: the replies and the statistics go
to stdout, the local errors to stderr. What it reads:

- the header ``PING 10.20.0.10 (10.20.0.10) 8972(9000) bytes of data.`` (IPv6:
  ``PING fd12::2(fd12::2) 8952 data bytes``): the destination and the payload size;
- replies ``8980 bytes from 10.20.0.10: icmp_seq=1 ttl=64 time=0.017 ms``;
- the statistics ``3 packets transmitted, 0 received, +3 errors, 100% packet
  loss, time 406ms`` and ``rtt min/avg/max/mdev = 0.048/0.197/0.491/0.207 ms``;
- ICMP errors from a hop: ``From 10.98.1.254 icmp_seq=1 Frag needed and DF set
  (mtu = 1500)`` (IPv6 ``Packet too big: mtu=1500``), ``Destination Host
  Unreachable``, ``Destination Net Unreachable``...;
- the tool's own messages, ``ping: local error: message too long, mtu=1500``
  (IPv6 ``mtu: 1500``; the kernel refused a don't-fragment packet larger than
  the route's MTU: the interface's, or a path MTU a router reported earlier),
  ``ping: sendmsg: Message too long``, ``ping: connect: Network is unreachable``.

Note that ``-q`` silences the local errors (and leaves them out of ``+N
errors``): a path-MTU probe must not use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_float, parse_int, require_text

TOOL = "ping"
MAX_LINE = 4096
HEADER_BYTES = {4: 28, 6: 48}
"""IP + ICMP header bytes of an echo request: IPv4 20 + 8, IPv6 40 + 8."""

_HEADER_DEST = re.compile(r"^PING (?P<dest>[^\s(]+)")
_HEADER_SIZE = re.compile(r"[\s)](?P<payload>\d+)(?:\(\d+\))? (?:bytes of data|data bytes)")
_REPLY = re.compile(r"^(?P<bytes>\d+) bytes from (?P<source>.+?): icmp_seq=(?P<seq>\d+)")
_FROM = re.compile(r"^From (?P<source>\S+)(?: \([^)]*\))?:? icmp_seq=(?P<seq>\d+) (?P<message>.+)$")
_STATISTICS = re.compile(
    r"^(?P<sent>\d+) packets transmitted, (?P<received>\d+) (?:packets )?received"
    r"(?:, \+(?P<duplicates>\d+) duplicates)?(?:, \+(?P<corrupted>\d+) corrupted)?(?:, \+(?P<errors>\d+) errors)?"
    r", (?P<loss>[0-9.]+)% packet loss(?:, time (?P<time>\d+)ms)?")
_RTT = re.compile(r"^(?:rtt|round-trip) min/avg/max(?:/mdev|/stddev)? = (?P<values>[0-9./]+) ms")
_MTU_IN_ICMP = re.compile(r"\bmtu ?[=:] ?(\d+)", re.IGNORECASE)
_LOCAL_TOO_LONG = re.compile(r"^local error: message too long, mtu ?[=:] ?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PingStatistics:
    """The summary line."""

    transmitted: int
    received: int
    errors: int
    duplicates: int
    loss_percent: float
    time_ms: int | None


@dataclass(frozen=True, slots=True)
class PingRtt:
    """``rtt min/avg/max/mdev`` in milliseconds (mdev None where the tool prints three values)."""

    min_ms: float
    avg_ms: float
    max_ms: float
    mdev_ms: float | None


@dataclass(frozen=True, slots=True)
class PingIcmpError:
    """``From <source> icmp_seq=N <message>``: an ICMP error a hop sent back; ``mtu`` when it names one."""

    source: str
    seq: int
    message: str
    mtu: int | None

    @property
    def too_big(self) -> bool:
        """Fragmentation needed (IPv4) or packet too big (IPv6): the hop's next link is smaller."""
        text = self.message.lower()
        return self.mtu is not None and ("frag needed" in text or "too big" in text)


@dataclass(frozen=True, slots=True)
class PingReport:
    destination: str | None
    """As the header names it (None when ping printed no header, e.g. it could not connect)."""
    payload_bytes: int | None
    """ICMP payload per request (``-s``), from the header."""
    replies: int
    """``N bytes from`` lines (zero under ``-q``, which prints none)."""
    statistics: PingStatistics | None
    rtt: PingRtt | None
    icmp_errors: tuple[PingIcmpError, ...]
    local_mtus: tuple[int, ...]
    """The ``mtu=`` of every ``local error: message too long`` line."""
    send_too_long: bool
    """``sendmsg: Message too long``: the kernel refused the packet without saying the MTU."""
    messages: tuple[str, ...]
    """The tool's other messages (``connect: Network is unreachable``, ``socket: Operation not permitted``...)."""

    @property
    def received(self) -> int:
        """Replies received: the statistics' count, else the reply lines."""
        return self.statistics.received if self.statistics is not None else self.replies

    @property
    def path_mtu(self) -> int | None:
        """The smallest MTU the kernel or a hop reported for the path; None when none was reported."""
        found = [*self.local_mtus, *(e.mtu for e in self.icmp_errors if e.too_big and e.mtu is not None)]
        return min(found) if found else None

    @property
    def too_long(self) -> bool:
        """Any evidence that the don't-fragment packet was larger than the path allows."""
        return self.path_mtu is not None or self.send_too_long

    @property
    def unreachable(self) -> tuple[str, ...]:
        """Why the destination could not be reached: ICMP unreachables and ``connect:`` errors."""
        icmp = [f"From {e.source}: {e.message}" for e in self.icmp_errors if "unreachable" in e.message.lower()]
        return (*icmp, *(m for m in self.messages if "unreachable" in m.lower()))


def _tool_message(line: str) -> str | None:
    """``ping: <message>`` (any path or name of the binary containing ``ping``) -> ``<message>``."""
    program, sep, message = line.partition(": ")
    if not sep or not program or " " in program or "ping" not in program.rsplit("/", 1)[-1]:
        return None
    return message.strip()


def _rtt(text: str) -> PingRtt | None:
    values = [parse_float(v) for v in text.split("/")]
    if len(values) not in (3, 4) or any(v is None for v in values):
        return None
    numbers = [float(v) for v in values if v is not None]
    return PingRtt(numbers[0], numbers[1], numbers[2], numbers[3] if len(numbers) == 4 else None)


def _statistics(match: re.Match[str]) -> PingStatistics | None:
    sent, received = parse_int(match.group("sent")), parse_int(match.group("received"))
    loss = parse_float(match.group("loss"))
    if sent is None or received is None or loss is None:
        return None
    return PingStatistics(sent, received, parse_int(match.group("errors")) or 0,
                          parse_int(match.group("duplicates")) or 0, loss, parse_int(match.group("time")))


def parse_ping(text: str) -> PingReport:
    """Parse what one ``ping`` run printed (stdout and stderr together).

    Raises ParseError when the text holds nothing ping prints: no header, reply,
    statistics line, ICMP error or message of the tool.
    """
    require_text(TOOL, text)
    destination: str | None = None
    payload: int | None = None
    replies = 0
    statistics: PingStatistics | None = None
    rtt: PingRtt | None = None
    icmp: list[PingIcmpError] = []
    local_mtus: list[int] = []
    send_too_long = False
    messages: list[str] = []
    for raw in iter_lines(text):
        if len(raw) > MAX_LINE:
            continue
        line = raw.strip()
        if not line:
            continue
        if line.startswith("PING ") and destination is None:
            header, size = _HEADER_DEST.match(line), _HEADER_SIZE.search(line)
            if header is not None and size is not None:
                destination, payload = header.group("dest"), parse_int(size.group("payload"))
                continue
        if _REPLY.match(line) is not None:
            replies += 1
        elif (hop := _FROM.match(line)) is not None:
            mtu = _MTU_IN_ICMP.search(hop.group("message"))
            icmp.append(PingIcmpError(hop.group("source"), int(hop.group("seq")), hop.group("message").strip(),
                                      parse_int(mtu.group(1)) if mtu else None))
        elif (summary := _STATISTICS.match(line)) is not None:
            statistics = _statistics(summary) or statistics
        elif (times := _RTT.match(line)) is not None:
            rtt = _rtt(times.group("values")) or rtt
        elif (message := _tool_message(line)) is not None:
            too_long = _LOCAL_TOO_LONG.match(message)
            if too_long is not None:
                local_mtus.append(int(too_long.group(1)))
            elif message.lower() == "sendmsg: message too long":
                send_too_long = True
            else:
                messages.append(message)
    if destination is None and not replies and statistics is None and not icmp and not local_mtus \
            and not send_too_long and not messages:
        fail(TOOL, "no ping header, reply, statistics line or ping message", head_excerpt(text))
    return PingReport(destination, payload, replies, statistics, rtt, tuple(icmp), tuple(local_mtus),
                      send_too_long, tuple(messages))


def df_payload(mtu: int, ipv6: bool = False) -> int:
    """The ``-s`` of a don't-fragment ping that fills ``mtu`` exactly (9000 -> 8972, IPv6 8952)."""
    return mtu - HEADER_BYTES[6 if ipv6 else 4]
