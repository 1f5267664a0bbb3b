"""The ``ping`` of a simulated node: STO-04's path-MTU probe, in iputils 20221126's format.

The answer follows the node's storage view (burnin.sim.storage): the route to
the destination (:func:`burnin.sim.storage.resolve`, policy rules and VRF
included) picks the egress netdev, and a don't-fragment request larger than
that netdev's MTU gets the kernel's refusal, as real ping prints it on stderr
(``ping: local error: message too long, mtu=1500``; IPv6 ``mtu: 1500``) with
``+N errors`` in the statistics. Otherwise the destination answers (unless the
netdev is down: then nothing comes back). So a healthy node's targets answer
8972-byte pings; ``storage-mtu-1500`` refuses them on the target carried by
the first BlueField netdev (mtu=1500), and ``storage-route-via-ib`` sends the
first target through IPoIB (mtu=4092). No route: ``ping: connect: Network is
unreachable``, exit status 2.

Options read: ``-4 -6 -n -q -M MODE -s SIZE -c COUNT -i INTERVAL -W/-w SECONDS
-I VRF|NETDEV`` and ``-V``. Without ``-c`` the simulated ping sends one request
(the real one runs until interrupted). ``-q`` prints what the real one prints:
no replies and no local errors (nor ``+N errors``).
"""

from __future__ import annotations

import shlex

from burnin.sim.state import NodeState
from burnin.sim.storage import SimNetdev, SimStorage, derive, resolve

VERSION = "ping from iputils 20221126"

_SCRIPT = r'''v6=0 mode=want size=56 count=1 interval=1 quiet=0 bind= addr=
while [ $# -gt 0 ]; do
  case "$1" in
    -V) echo "{version}"; exit 0 ;;
    -4) v6=0 ;;
    -6) v6=1 ;;
    -n|-v) ;;
    -q) quiet=1 ;;
    -M) shift; mode=$1 ;;
    -M*) mode=${1#-M} ;;
    -s) shift; size=$1 ;;
    -c) shift; count=$1 ;;
    -i) shift; interval=$1 ;;
    -W|-w) shift ;;
    -I) shift; bind=$1 ;;
    -*) echo "ping: invalid option -- '${1#-}'" >&2; exit 2 ;;
    *) addr=$1 ;;
  esac
  shift
done
[ -n "$addr" ] || { echo "ping: usage error: Destination address required" >&2; exit 1; }
case "$size" in ""|*[!0-9]*) echo "ping: invalid argument: '$size'" >&2; exit 1 ;; esac
case "$count" in ""|*[!0-9]*|0) echo "ping: invalid argument: '$count'" >&2; exit 1 ;; esac
case "$interval" in ""|*[!0-9.]*) echo "ping: bad timing interval: $interval" >&2; exit 1 ;; esac
case "$mode" in do|want|dont|probe) ;; *) echo "ping: invalid -M argument: $mode" >&2; exit 2 ;; esac
case "$bind" in
{binds}
  *) echo "ping: SO_BINDTODEVICE $bind: No such device" >&2; exit 2 ;;
esac
dev= mtu= up= src=
case "$bind|$addr" in
{routes}
esac
[ -n "$dev" ] || { echo "ping: connect: Network is unreachable" >&2; exit 2; }
if [ $v6 = 1 ]; then hdr=48; else hdr=28; fi
total=$((size + hdr))
from=; [ -n "$bind" ] && from=" from $src $bind:"
if [ $v6 = 1 ]; then
  echo "PING $addr($addr)$from $size data bytes"
else
  echo "PING $addr ($addr)$from $size($total) bytes of data."
fi
elapsed=$(awk -v c="$count" -v i="$interval" 'BEGIN { printf "%d", (c - 1) * i * 1000 + 3 }')
stats() { echo; echo "--- $addr ping statistics ---"; echo "$count packets transmitted, $1"; }
if [ "$mode" = do ] && [ "$total" -gt "$mtu" ]; then
  if [ $quiet = 1 ]; then
    stats "0 received, 100% packet loss, time ${elapsed}ms"; echo; exit 1
  fi
  stats "0 received, +$count errors, 100% packet loss, time ${elapsed}ms"; echo
  if [ $v6 = 1 ]; then sep=": "; else sep="="; fi
  i=0
  while [ $i -lt "$count" ]; do echo "ping: local error: message too long, mtu$sep$mtu" >&2; i=$((i + 1)); done
  exit 1
fi
if [ "$up" != 1 ]; then
  stats "0 received, 100% packet loss, time ${elapsed}ms"; echo; exit 1
fi
if [ $quiet = 0 ]; then
  i=1
  while [ $i -le "$count" ]; do
    echo "$((size + 8)) bytes from $addr: icmp_seq=$i ttl=64 time=0.$((100 + i * 7)) ms"; i=$((i + 1))
  done
fi
stats "$count received, 0% packet loss, time ${elapsed}ms"
echo "rtt min/avg/max/mdev = 0.107/0.114/0.121/0.006 ms"
'''

_PREAMBLE = "#!/bin/sh\n# burnin simulator: ping of node {node} (answers follow the node's routes and MTUs).\n"


def _route_line(bind: str, address: str, netdev: SimNetdev, src: str | None) -> str:
    key = shlex.quote(f"{bind}|{address}")
    return (f"  {key}) dev={shlex.quote(netdev.name)} mtu={netdev.mtu} up={1 if netdev.up else 0} "
            f"src={shlex.quote(src or netdev.address or 'unknown')} ;;")


def _routes(storage: SimStorage) -> list[str]:
    """``bind|address`` -> egress netdev, for every storage destination: by route, in the VRF, or bound to a netdev."""
    lines: list[str] = []
    for address in storage.destinations:
        route = resolve(storage, address)
        netdev = storage.netdev(route.dev) if route is not None else None
        if route is not None and netdev is not None:
            lines.append(_route_line("", address, netdev, route.prefsrc))
        if storage.vrf:
            route = resolve(storage, address, storage.vrf)
            netdev = storage.netdev(route.dev) if route is not None else None
            if route is not None and netdev is not None:
                lines.append(_route_line(storage.vrf, address, netdev, route.prefsrc))
        for netdev in storage.netdevs:
            lines.append(_route_line(netdev.name, address, netdev, netdev.address))
    return lines


def render_script(state: NodeState) -> str:
    """``bin/ping`` of this node."""
    storage = derive(state)
    binds = ['  "") ;;', *(f"  {shlex.quote(name)}) ;;" for name in
                          [*([storage.vrf] if storage.vrf else []), *(n.name for n in storage.netdevs)])]
    body = (_SCRIPT.replace("{version}", VERSION).replace("{binds}", "\n".join(binds))
            .replace("{routes}", "\n".join(_routes(storage))))
    return _PREAMBLE.format(node=state.name) + body
