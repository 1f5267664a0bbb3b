"""The write tools of a simulated node (``dd``, ``fio``): STO-03's storage I/O, in the real tools' formats.

Neither touches a disk. Each works out the bytes its arguments ask for
(``dd`` ``bs`` x ``count``; ``fio`` ``--size``) and, when the file lies on a
storage mount of the node's topology, adds them to the byte counters of the
netdev that carries that mount's target in the node's sysfs tree (unless those
counters are the kernel's: a lab node in its own network namespace, whose
write traffic the lab sends for real, docs/ssh.md): the
BlueField netdev's ``statistics/tx_bytes`` (write) or ``rx_bytes`` (read), or,
with the fault ``storage-traffic-on-ib``, compute HCA mlx5_2's
``ports/1/counters/port_xmit_data`` / ``port_rcv_data`` (4-byte units). Then it
prints what the real tool prints: coreutils ``dd``'s three stderr lines
(``N bytes (1.1 GB, 1.0 GiB) copied, S s, R GB/s``), ``fio --output-format=json``'s
job report (fio 3.x: ``jobs[].read/write.io_bytes``).
"""

from __future__ import annotations

import shlex

from burnin.sim.faults import DEFAULT_HCA
from burnin.sim.state import NodeState, topology_from_dict
from burnin.sim.storage import derive

FAULT = "storage-traffic-on-ib"
RATE_BYTES_PER_S = 4.0e9
"""The simulated storage throughput (the printed duration and rate)."""

_COMMON = r'''root="${0%/*}/../root"
add() { [ -f "$1" ] || return 0; v=$(cat "$1") && echo $((v + $2)) > "$1"; }
carry() {  # carry PATH BYTES write|read: count the bytes on the netdev that carries PATH's mount
  dev=$(route "$1")
  [ -n "$dev" ] || return 0
  if [ -n "$ib_hca" ]; then
    if [ "$3" = write ]; then port=port_xmit_data; else port=port_rcv_data; fi
    add "$root/sys/class/infiniband/$ib_hca/ports/1/counters/$port" $(($2 / 4))
  else
    if [ "$3" = write ]; then dir=tx; else dir=rx; fi
    # A lab node's counters are the kernel's (a link out of the tree): its traffic is real, not added here.
    [ -L "$root/sys/class/net/$dev/statistics" ] && return 0
    add "$root/sys/class/net/$dev/statistics/${dir}_bytes" "$2"
  fi
}
size_of() {  # 1M 4k 1G 512 -> bytes
  case "$1" in
    ""|*[!0-9KkMmGg]*) return 1 ;;
    *[Kk]) echo $(( ${1%?} * 1024 )) ;;
    *[Mm]) echo $(( ${1%?} * 1048576 )) ;;
    *[Gg]) echo $(( ${1%?} * 1073741824 )) ;;
    *) echo "$1" ;;
  esac
}
'''

_DD = r'''bs=512 count= in= out=
for a in "$@"; do
  case "$a" in
    if=*) in=${a#if=} ;; of=*) out=${a#of=} ;; bs=*) bs=${a#bs=} ;; count=*) count=${a#count=} ;;
    iflag=*|oflag=*|conv=*|status=*) ;;
    *) echo "dd: unrecognized operand '$a'" >&2; exit 1 ;;
  esac
done
bs=$(size_of "$bs") || { echo "dd: invalid number: '$bs'" >&2; exit 1; }
case "$count" in ""|*[!0-9]*) echo "dd (burnin simulator) needs count=N" >&2; exit 1 ;; esac
bytes=$((bs * count))
if [ -n "$out" ] && [ "$out" != /dev/null ]; then carry "$out" "$bytes" write; else carry "$in" "$bytes" read; fi
echo "$count+0 records in" >&2
echo "$count+0 records out" >&2
awk -v b="$bytes" -v r="{rate}" 'BEGIN {
  s = b / r + 0.0005
  printf "%d bytes (%.1f GB, %.1f GiB) copied, ", b, b / 1e9, b / 1073741824
  printf "%.4g s, %.1f GB/s\n", s, b / s / 1e9
}' >&2
'''

_FIO = r'''file= rw= size=
for a in "$@"; do
  case "$a" in
    --version) echo "fio-3.35"; exit 0 ;;
    --filename=*) file=${a#--filename=} ;; --rw=*) rw=${a#--rw=} ;; --size=*) size=${a#--size=} ;;
    --name=*|--bs=*|--direct=*|--end_fsync=*|--output-format=json) ;;
    *) echo "fio (burnin simulator) does not take $a" >&2; exit 1 ;;
  esac
done
bytes=$(size_of "$size") || { echo "fio: failed parsing size=$size" >&2; exit 1; }
case "$rw" in
  write) carry "$file" "$bytes" write; w=$bytes; r=0 ;;
  read) carry "$file" "$bytes" read; w=0; r=$bytes ;;
  *) echo "fio (burnin simulator) answers --rw=write or --rw=read" >&2; exit 1 ;;
esac
awk -v w="$w" -v r="$r" -v rate="{rate}" 'function side(name, n, last) {
  printf "      \"%s\" : {\n        \"io_bytes\" : %d,\n        \"io_kbytes\" : %d,\n", name, n, n / 1024
  printf "        \"bw_bytes\" : %d,\n        \"runtime\" : %d\n", n ? rate : 0, n ? int(n / rate * 1000) + 1 : 0
  printf "      }%s\n", last ? "" : ","
}
BEGIN {
  printf "{\n  \"fio version\" : \"fio-3.35\",\n  \"jobs\" : [\n    {\n"
  printf "      \"jobname\" : \"burnin-sto03\",\n      \"groupid\" : 0,\n      \"error\" : 0,\n"
  side("read", r, 0); side("write", w, 1)
  printf "    }\n  ]\n}\n"
}'
'''

_PREAMBLE = "#!/bin/sh\n# burnin simulator: {tool} of node {node} (storage I/O on the simulated fabric counters).\n"


def _route_function(state: NodeState) -> str:
    """``route PATH`` -> the BlueField netdev carrying the mount PATH lies on (empty: not a storage mount)."""
    topology = topology_from_dict(state.topology)
    lines = ["route() {", '  case "$1" in']
    fabric = topology.storage
    bluefields = derive(state).bluefields if fabric is not None else []
    if fabric is not None and bluefields:
        for j, target in enumerate(fabric.targets):
            if target.mount:
                mount = target.mount.rstrip("/") or "/"
                lines.append(f"    {shlex.quote(mount)}/*) echo {shlex.quote(bluefields[j % len(bluefields)].name)} ;;")
    lines += ["    *) echo ;;", "  esac", "}"]
    return "\n".join(lines) + "\n"


def render_scripts(state: NodeState) -> dict[str, str]:
    """``bin/dd`` and ``bin/fio`` of this node."""
    faulted = any(text.split("@", 1)[0] == FAULT for text in state.faults)
    head = _route_function(state) + f"ib_hca={DEFAULT_HCA if faulted else ''}\n" + _COMMON
    rate = f"{RATE_BYTES_PER_S:.0f}"
    return {tool: _PREAMBLE.format(tool=tool, node=state.name) + head + body.replace("{rate}", rate)
            for tool, body in (("dd", _DD), ("fio", _FIO))}
