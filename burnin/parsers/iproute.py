"""iproute2: ``ip route`` / ``ip route get``, ``ip addr`` (also ``-br``) and ``ip -d link``, text or ``-j`` JSON.

Each parser takes the text form or the JSON form (``ip -j ...``, recognised by
its leading ``[``). Text read through shell sessions may hold prompts and other
commands' output: a route line must start with a destination (``default``, an
address or a prefix, after an optional route type), an address or link block
with ``N: NAME:``; everything else is skipped.

JSON keys follow iproute2's own (``dst``, ``gateway``, ``dev``, ``prefsrc``,
``table``, ``ifname``, ``addr_info``, ``linkinfo``...). A VRF shows in
``ip -d link`` as ``master <vrf>`` on its members, ``vrf table N`` on the VRF
device and ``vrf_slave table N`` on each member (JSON: ``linkinfo.info_kind``
``vrf``, ``info_slave_kind`` ``vrf``, ``info_data``/``info_slave_data.table``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

ROUTE_TOOL = "ip-route"
ADDR_TOOL = "ip-addr"
LINK_TOOL = "ip-link"
MAX_LINE = 4096  # longer lines are no iproute2 output

_ROUTE_TYPES = frozenset({"unicast", "local", "broadcast", "multicast", "throw", "unreachable", "prohibit",
                          "blackhole", "nat", "anycast"})
# route keywords followed by one value
_ROUTE_VALUE_KEYS = {"via": "gateway", "dev": "dev", "table": "table", "proto": "protocol", "scope": "scope",
                     "src": "prefsrc", "metric": "metric", "from": "from", "uid": "uid", "tos": "tos",
                     "dsfield": "tos", "pref": "pref", "realm": "realm", "mtu": "mtu", "expires": "expires",
                     "iif": "iif", "oif": "oif", "weight": "weight", "vrf": "vrf", "error": "error", "nhid": "nhid"}
_ROUTE_FLAGS = frozenset({"linkdown", "onlink", "dead", "pervasive", "offload", "trap", "notify", "rt_offload",
                          "rt_trap", "rt_offload_failed"})
_LINK_HEAD = re.compile(
    r"^(?P<index>\d{1,10}):\s+(?P<name>[^\s:@]{1,64})(?:@(?P<link>[^\s:]{1,64}))?:\s+<(?P<flags>[A-Z0-9_,-]{0,300})>"
    r"(?P<rest>.*)$")
_OPER_STATES = frozenset({"UP", "DOWN", "UNKNOWN", "LOWERLAYERDOWN", "DORMANT", "NOTPRESENT", "TESTING"})


# ------------------------------------------------------------------ records


@dataclass(frozen=True, slots=True)
class IpNexthop:
    gateway: str | None
    dev: str | None
    weight: int | None


@dataclass(frozen=True, slots=True)
class IpRoute:
    dst: str
    """``default``, an address (``ip route get``) or a prefix."""
    type: str
    """``unicast`` unless printed (``local``, ``broadcast``, ``blackhole``, ``unreachable``...)."""
    gateway: str | None
    dev: str | None
    table: str | None
    """``None`` for the main table (iproute2 omits it); a number or name otherwise (``100``, ``local``)."""
    prefsrc: str | None
    protocol: str | None
    scope: str | None
    metric: int | None
    flags: tuple[str, ...]
    nexthops: tuple[IpNexthop, ...]


@dataclass(frozen=True, slots=True)
class IpRoutes:
    routes: tuple[IpRoute, ...]


@dataclass(frozen=True, slots=True)
class IpAddress:
    family: str
    """``inet`` or ``inet6``."""
    local: str
    prefixlen: int
    scope: str | None


@dataclass(frozen=True, slots=True)
class IpInterface:
    name: str
    ifindex: int | None
    link: str | None
    flags: tuple[str, ...]
    mtu: int | None
    operstate: str | None
    master: str | None
    link_type: str | None
    address: str | None
    addresses: tuple[IpAddress, ...]


@dataclass(frozen=True, slots=True)
class IpAddrs:
    interfaces: tuple[IpInterface, ...]


@dataclass(frozen=True, slots=True)
class IpLink:
    name: str
    ifindex: int | None
    link: str | None
    flags: tuple[str, ...]
    mtu: int | None
    operstate: str | None
    master: str | None
    link_type: str | None
    address: str | None
    kind: str | None
    """``linkinfo.info_kind``: ``vrf``, ``bond``, ``veth``, ``ipoib``..."""
    slave_kind: str | None
    """``linkinfo.info_slave_kind``: ``vrf`` for a VRF member."""
    vrf_table: int | None
    """The routing table of a VRF device (``vrf table N``)."""
    slave_table: int | None
    """The VRF table a member routes through (``vrf_slave table N``)."""


@dataclass(frozen=True, slots=True)
class IpLinks:
    links: tuple[IpLink, ...]


# ------------------------------------------------------------------ JSON


def _load_json(tool: str, text: str) -> list[dict[str, Any]] | None:
    """The JSON array ``ip -j`` prints (objects only), or None when the text is not JSON."""
    stripped = text.strip()
    if not stripped.startswith("["):
        return None
    try:
        data = json.loads(stripped)
    except (ValueError, RecursionError):
        # `ip -j` prints one array; several commands' arrays may follow each other
        try:
            decoder, items, pos = json.JSONDecoder(), [], 0
            while pos < len(stripped):
                value, pos = decoder.raw_decode(stripped, pos)
                items.extend(value if isinstance(value, list) else [value])
                while pos < len(stripped) and stripped[pos].isspace():
                    pos += 1
            data = items
        except (ValueError, RecursionError):
            fail(tool, "output starts like `ip -j` JSON but is not JSON", head_excerpt(text))
    if not isinstance(data, list):
        fail(tool, "`ip -j` output is not a JSON array", head_excerpt(text))
    return [item for item in data if isinstance(item, dict)]


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    text = str(value)
    return text if len(text) <= 256 else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**64 else None
    return parse_int(value) if isinstance(value, str) else None


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(s for s in (_str(v) for v in value) if s is not None) if isinstance(value, list) else ()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _route_from_json(item: dict[str, Any]) -> IpRoute | None:
    dst = _str(item.get("dst"))
    if dst is None:
        return None
    table = _str(item.get("table"))
    hops = []
    for hop in item.get("nexthops") or []:
        if isinstance(hop, dict):
            hops.append(IpNexthop(_str(hop.get("gateway")), _str(hop.get("dev")), _int(hop.get("weight"))))
    return IpRoute(dst=dst, type=_str(item.get("type")) or "unicast", gateway=_str(item.get("gateway")),
                   dev=_str(item.get("dev")), table=None if table == "main" else table,
                   prefsrc=_str(item.get("prefsrc")), protocol=_str(item.get("protocol")),
                   scope=_str(item.get("scope")), metric=_int(item.get("metric")),
                   flags=_strs(item.get("flags")), nexthops=tuple(hops))


def _address_from_json(item: dict[str, Any]) -> IpAddress | None:
    family, local, prefix = _str(item.get("family")), _str(item.get("local")), _int(item.get("prefixlen"))
    if family is None or local is None or prefix is None:
        return None
    return IpAddress(family, local, prefix, _str(item.get("scope")))


def _interface_from_json(item: dict[str, Any]) -> IpInterface | None:
    name = _str(item.get("ifname"))
    if name is None:
        return None
    infos = item.get("addr_info")
    addresses = [a for a in (_address_from_json(i) for i in infos if isinstance(i, dict))
                 if a is not None] if isinstance(infos, list) else []
    return IpInterface(name=name, ifindex=_int(item.get("ifindex")), link=_str(item.get("link")),
                       flags=_strs(item.get("flags")), mtu=_int(item.get("mtu")),
                       operstate=_str(item.get("operstate")), master=_str(item.get("master")),
                       link_type=_str(item.get("link_type")), address=_str(item.get("address")),
                       addresses=tuple(addresses))


def _link_from_json(item: dict[str, Any]) -> IpLink | None:
    name = _str(item.get("ifname"))
    if name is None:
        return None
    info = _dict(item.get("linkinfo"))
    data, slave = _dict(info.get("info_data")), _dict(info.get("info_slave_data"))
    kind, slave_kind = _str(info.get("info_kind")), _str(info.get("info_slave_kind"))
    return IpLink(name=name, ifindex=_int(item.get("ifindex")), link=_str(item.get("link")),
                  flags=_strs(item.get("flags")), mtu=_int(item.get("mtu")), operstate=_str(item.get("operstate")),
                  master=_str(item.get("master")), link_type=_str(item.get("link_type")),
                  address=_str(item.get("address")), kind=kind, slave_kind=slave_kind,
                  vrf_table=_int(data.get("table")) if kind == "vrf" else None,
                  slave_table=_int(slave.get("table")) if slave_kind == "vrf" else None)


# ------------------------------------------------------------------ routes


def _is_destination(word: str) -> bool:
    if word == "default":
        return True
    try:
        ipaddress.ip_network(word, strict=False)
    except ValueError:
        return False
    return True


def _route_from_text(line: str) -> IpRoute | None:
    tokens = line.split()
    if not tokens:
        return None
    kind = "unicast"
    if tokens[0] in _ROUTE_TYPES and len(tokens) > 1:
        kind, tokens = tokens[0], tokens[1:]
    if not _is_destination(tokens[0]):
        return None
    values: dict[str, str] = {}
    flags: list[str] = []
    i = 1
    while i < len(tokens):
        word = tokens[i]
        if word in _ROUTE_VALUE_KEYS and i + 1 < len(tokens):
            values.setdefault(_ROUTE_VALUE_KEYS[word], tokens[i + 1])
            i += 2
            continue
        if word in _ROUTE_FLAGS:
            flags.append(word)
        # other keywords (cache, cached attributes, ipid, ...) are not needed here
        i += 1
    if not values and not flags:
        return None  # a line that only looks like a route (a bare address, a prompt's echo)
    table = values.get("table")
    return IpRoute(dst=tokens[0], type=kind, gateway=values.get("gateway"), dev=values.get("dev"),
                   table=None if table == "main" else table, prefsrc=values.get("prefsrc"),
                   protocol=values.get("protocol"), scope=values.get("scope"),
                   metric=parse_int(values.get("metric")), flags=tuple(flags), nexthops=())


def _nexthop_from_text(line: str) -> IpNexthop | None:
    tokens = line.split()
    if not tokens or tokens[0] != "nexthop":
        return None
    values = {tokens[i]: tokens[i + 1] for i in range(1, len(tokens) - 1) if tokens[i] in ("via", "dev", "weight")}
    return IpNexthop(values.get("via"), values.get("dev"), parse_int(values.get("weight")))


def parse_ip_route(text: str) -> IpRoutes:
    """``ip route [show]``, ``ip route get ADDR`` (text or ``-j``): every route in order."""
    require_text(ROUTE_TOOL, text)
    items = _load_json(ROUTE_TOOL, text)
    if items is not None:
        routes = [r for r in (_route_from_json(i) for i in items) if r is not None]
        if not routes and items:
            fail(ROUTE_TOOL, "no route object (with a 'dst') in the JSON", head_excerpt(text))
        return IpRoutes(tuple(routes))
    out: list[IpRoute] = []
    for line in iter_lines(text):
        if len(line) > MAX_LINE or not line.strip():
            continue
        if line[:1].isspace() and out:
            hop = _nexthop_from_text(line)
            if hop is not None:
                last = out[-1]
                out[-1] = IpRoute(last.dst, last.type, last.gateway, last.dev, last.table, last.prefsrc,
                                  last.protocol, last.scope, last.metric, last.flags, (*last.nexthops, hop))
            continue
        route = _route_from_text(line)
        if route is not None:
            out.append(route)
    if not out:
        fail(ROUTE_TOOL, "no route line (DESTINATION [via GATEWAY] dev DEVICE ...)", head_excerpt(text))
    return IpRoutes(tuple(out))


# ------------------------------------------------------------------ links and addresses


def _head_values(rest: str) -> dict[str, str]:
    tokens = rest.split()
    return {tokens[i]: tokens[i + 1] for i in range(len(tokens) - 1)
            if tokens[i] in ("mtu", "qdisc", "master", "state", "mode", "group", "qlen")}


_DETAIL_KEYS = frozenset({"addrgenmode", "numtxqueues", "numrxqueues", "gso_max_size", "gso_max_segs",
                          "promiscuity", "allmulti", "minmtu", "maxmtu", "altname", "inet", "inet6",
                          "valid_lft", "tso_max_size", "tso_max_segs", "gro_max_size", "parentbus", "parentdev"})


def _block_link(head: re.Match[str], body: list[str]) -> IpLink:
    values = _head_values(head.group("rest"))
    link_type = address = kind = slave_kind = None
    vrf_table = slave_table = None
    for line in body:
        tokens = line.split()
        if not tokens or tokens[0] in ("inet", "inet6", "valid_lft", "altname"):
            continue
        if tokens[0].startswith("link/"):
            link_type = tokens[0][5:]
            address = tokens[1] if len(tokens) > 1 and tokens[1] not in ("brd", "promiscuity") else None
            continue
        # `ip -d` detail lines: "vrf table 100 ...", "vrf_slave table 100 ...", "veth ...", "ipoib pkey ..."
        if kind is None and tokens[0] not in _DETAIL_KEYS and not tokens[0].endswith("_slave") \
                and tokens[0].replace("_", "").isalnum() and not tokens[0].isdigit():
            kind = tokens[0]
        for i, word in enumerate(tokens[:-2]):
            if word == "vrf" and tokens[i + 1] == "table":
                kind, vrf_table = "vrf", parse_int(tokens[i + 2])
            elif word == "vrf_slave" and tokens[i + 1] == "table":
                slave_kind, slave_table = "vrf", parse_int(tokens[i + 2])
        if "vrf_slave" in tokens:
            slave_kind = "vrf"
    state = values.get("state")
    return IpLink(name=head.group("name"), ifindex=int(head.group("index")), link=head.group("link"),
                  flags=tuple(f for f in head.group("flags").split(",") if f), mtu=parse_int(values.get("mtu")),
                  operstate=state if state in _OPER_STATES else None, master=values.get("master"),
                  link_type=link_type, address=address, kind=kind, slave_kind=slave_kind, vrf_table=vrf_table,
                  slave_table=slave_table)


# The words an `ip addr`/`ip link` block's own lines start with: a copy that lost the relative
# indentation (a block pasted at one indent) still shows which lines belong to the head above.
_BODY_WORDS = ("link/", "inet", "inet6", "altname", "valid_lft", "vf ", "alias", "permaddr", "prog/", "netnsid")


def _blocks(text: str) -> list[tuple[re.Match[str], list[str]]]:
    """``N: NAME: <FLAGS> ...`` heads with their lines (indented deeper, or starting with a block word)."""
    blocks: list[tuple[re.Match[str], list[str]]] = []
    indent = 0  # the current head's indentation
    ended = True
    for line in iter_lines(text):
        if len(line) > MAX_LINE or not line.strip():
            continue
        stripped = line.lstrip()
        depth = len(line) - len(stripped)
        head = _LINK_HEAD.match(stripped)
        if head is not None:
            blocks.append((head, []))
            indent, ended = depth, False
        elif blocks and not ended and (depth > indent or (depth == indent and stripped.startswith(_BODY_WORDS))):
            blocks[-1][1].append(line)
        else:
            ended = True  # the block ended
    return blocks


def parse_ip_link(text: str) -> IpLinks:
    """``ip [-d] link [show]`` (text or ``-j``): every link with its VRF master and kind."""
    require_text(LINK_TOOL, text)
    items = _load_json(LINK_TOOL, text)
    if items is not None:
        links = [link for link in (_link_from_json(i) for i in items) if link is not None]
        if not links and items:
            fail(LINK_TOOL, "no link object (with an 'ifname') in the JSON", head_excerpt(text))
        return IpLinks(tuple(links))
    out = [_block_link(head, body) for head, body in _blocks(text)]
    if not out:
        fail(LINK_TOOL, "no 'N: NAME: <FLAGS> mtu ...' line", head_excerpt(text))
    return IpLinks(tuple(out))


def _address_from_text(line: str) -> IpAddress | None:
    tokens = line.split()
    if len(tokens) < 2 or tokens[0] not in ("inet", "inet6") or "/" not in tokens[1]:
        return None
    local, _, prefix = tokens[1].partition("/")
    length = parse_int(prefix)
    if length is None:
        return None
    scope = tokens[tokens.index("scope") + 1] if "scope" in tokens[:-1] else None
    return IpAddress(tokens[0], local, length, scope)


def _brief_interface(line: str) -> IpInterface | None:
    """``NAME  STATE  ADDR/PFX ...`` (``ip -br addr``)."""
    tokens = line.split()
    if len(tokens) < 2 or tokens[1] not in _OPER_STATES:
        return None
    name, _, link = tokens[0].partition("@")
    addresses = []
    for word in tokens[2:]:
        local, slash, prefix = word.partition("/")
        length = parse_int(prefix) if slash else None
        if length is None:
            return None
        try:
            version = ipaddress.ip_address(local).version
        except ValueError:
            return None
        addresses.append(IpAddress("inet" if version == 4 else "inet6", local, length, None))
    return IpInterface(name=name, ifindex=None, link=link or None, flags=(), mtu=None, operstate=tokens[1],
                       master=None, link_type=None, address=None, addresses=tuple(addresses))


def parse_ip_addr(text: str) -> IpAddrs:
    """``ip addr``, ``ip -br addr`` or ``ip -j addr``: every interface with its addresses."""
    require_text(ADDR_TOOL, text)
    items = _load_json(ADDR_TOOL, text)
    if items is not None:
        found = [i for i in (_interface_from_json(item) for item in items) if i is not None]
        if not found and items:
            fail(ADDR_TOOL, "no interface object (with an 'ifname') in the JSON", head_excerpt(text))
        return IpAddrs(tuple(found))
    blocks = _blocks(text)
    if blocks:
        out = []
        for head, body in blocks:
            link = _block_link(head, body)
            addresses = tuple(a for a in (_address_from_text(line) for line in body) if a is not None)
            out.append(IpInterface(link.name, link.ifindex, link.link, link.flags, link.mtu, link.operstate,
                                   link.master, link.link_type, link.address, addresses))
        return IpAddrs(tuple(out))
    brief = [i for i in (_brief_interface(line) for line in iter_lines(text) if len(line) <= MAX_LINE)
             if i is not None]
    if not brief:
        fail(ADDR_TOOL, "no 'N: NAME: <FLAGS>' block and no 'NAME STATE ADDRESS/PREFIX' line", head_excerpt(text))
    return IpAddrs(tuple(brief))
