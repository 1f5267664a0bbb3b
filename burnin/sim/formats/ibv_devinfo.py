"""``ibv_devinfo`` output (rdma-core), one ``hca_id:`` block per HCA, as libibverbs/examples/devinfo.c prints it.

Tabs as the tool prints them; the port block shows the state, MTUs, LIDs and link
layer of port 1 (no ``-v`` attributes: the shim prints the same text with ``-v``).
"""

from __future__ import annotations

from burnin.sim.formats.ibstat import ordered
from burnin.sim.state import HcaState, NodeState

_PORT_STATE = {"1": "PORT_DOWN", "2": "PORT_INIT", "3": "PORT_ARMED", "4": "PORT_ACTIVE"}
_MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}

SCRIPT = r'''out="${0%/*}/../out/ibv_devinfo"
dev=
while [ $# -gt 0 ]; do
  case "$1" in
    -l|--list) exec cat "$out/list.txt" ;;
    -d|--ib-dev) shift; dev=$1 ;;
    --ib-dev=*) dev=${1#--ib-dev=} ;;
    -d*) dev=${1#-d} ;;
    -i|--ib-port) shift ;;
    -i*|--ib-port=*|-v|--verbose) ;;
    *) cat "$out/usage.txt"; exit 255 ;;
  esac
  shift
done
if [ -z "$dev" ]; then
  [ -s "$out/all.txt" ] && exec cat "$out/all.txt"
  echo "No IB devices found" >&2
  exit 255
fi
case "$dev" in
  *[!A-Za-z0-9_.-]*) ;;
  *) [ -f "$out/dev/$dev.txt" ] && exec cat "$out/dev/$dev.txt" ;;
esac
echo "IB device '$dev' wasn't found" >&2
exit 255
'''

_USAGE = """Usage: ibv_devinfo             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
"""


def _guid(value: int) -> str:
    text = f"{value:016x}"
    return ":".join(text[i:i + 4] for i in range(0, 16, 4))


def _mtu(size: int) -> str:
    code = _MTU_CODE.get(size)
    return f"{size} ({code})" if code is not None else f"invalid MTU ({size})"


def device_block(hca: HcaState) -> str:
    number = hca.state.split(":", 1)[0].strip()
    state = _PORT_STATE.get(number, "invalid state")
    part = hca.hca_type.removeprefix("MT")
    return (
        f"hca_id:\t{hca.name}\n"
        "\ttransport:\t\t\tInfiniBand (0)\n"
        f"\tfw_ver:\t\t\t\t{hca.fw_ver}\n"
        f"\tnode_guid:\t\t\t{_guid(hca.node_guid)}\n"
        f"\tsys_image_guid:\t\t\t{_guid(hca.node_guid)}\n"
        "\tvendor_id:\t\t\t0x02c9\n"
        f"\tvendor_part_id:\t\t\t{part}\n"
        f"\thw_ver:\t\t\t\t0x{'1' if hca.hca_type == 'MT41692' else '0'}\n"
        f"\tboard_id:\t\t\t{hca.board_id}\n"
        "\tphys_port_cnt:\t\t\t1\n"
        "\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\t{state} ({number})\n"
        f"\t\t\tmax_mtu:\t\t{_mtu(hca.max_mtu)}\n"
        f"\t\t\tactive_mtu:\t\t{_mtu(hca.active_mtu)}\n"
        f"\t\t\tsm_lid:\t\t\t{hca.sm_lid}\n"
        f"\t\t\tport_lid:\t\t{hca.lid}\n"
        "\t\t\tport_lmc:\t\t0x00\n"
        f"\t\t\tlink_layer:\t\t{hca.link_layer}\n"
        "\n"
    )


def ibv_devinfo(state: NodeState) -> str:
    return "".join(device_block(h) for h in ordered(state))


def device_list(state: NodeState) -> str:
    """``ibv_devinfo -l``."""
    hcas = ordered(state)
    return f"{len(hcas)} HCA{'s' if len(hcas) != 1 else ''} found:\n" + "".join(f"\t{h.name}\n" for h in hcas) + "\n"


def outputs(state: NodeState) -> dict[str, str]:
    """``out/ibv_devinfo/...`` -> text."""
    out = {
        "ibv_devinfo/all.txt": ibv_devinfo(state),
        "ibv_devinfo/list.txt": device_list(state),
        "ibv_devinfo/usage.txt": _USAGE,
    }
    for hca in ordered(state):
        out[f"ibv_devinfo/dev/{hca.name}.txt"] = device_block(hca)
    return out
