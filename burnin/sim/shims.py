"""Shim commands for ``<node>/bin`` and the pre-rendered outputs they print from ``<node>/out``.

A health probe runs these every few minutes, so each shim is a small POSIX sh
script: it maps its arguments to a file rendered from the node's state and
``cat``s it with the real tool's exit status (one awk pass for ``lspci``
filters). Scripts find their outputs relative to their own path, so a node
directory can be moved.
"""

from __future__ import annotations

import re
import sys
import time

from burnin.sim import fabric, sdc, soak_shims, software
from burnin.sim.formats import dmesg, ibstat, ibv_devinfo, lspci, nvidia_smi
from burnin.sim.megatron import outputs as megatron_outputs
from burnin.sim.megatron import scripts as megatron_scripts
from burnin.sim.state import NodeState
from burnin.sim.sysfs import loaded_modules

_PREAMBLE = '#!/bin/sh\n# burnin simulator: {tool} of node {node}, printed from pre-rendered state.\n'

_NVIDIA_SMI = r'''out="${0%/*}/../out/nvidia-smi"
case "$*" in
  "") f=summary ;;
  "topo -m"|"topo --matrix") f=topo-m ;;
  "-q"|"--query") f=q ;;
  "-L"|"--list-gpus") f=L ;;
  "nvlink -s"|"nvlink --status") f=nvlink-s ;;
  "nvlink -e"|"nvlink --errorcounters") f=nvlink-e ;;
  "dmon -s pucm -c 1"|"dmon -c 1 -s pucm") f=dmon ;;
  "-h"|"--help") exec cat "$out/help.txt" ;;
  "--query-compute-apps=pid --format=csv,noheader -i "[0-9]*) exit 0 ;;
  "-r -i "[0-9]*|"--gpu-reset -i "[0-9]*|"-r --id="[0-9]*|"--gpu-reset --id="[0-9]*)
    i=${*##* }; i=${i#--id=}
    case "$i" in
      *[!0-9]*) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."; exit 2 ;;
    esac
    exec "@PYTHON@" -m burnin.sim.reset gpu "${0%/*}/.." "$i" ;;
  *) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."; exit 2 ;;
esac
'''

_NVIDIA_SMI_HELP = """NVIDIA System Management Interface -- v{driver}

NVSMI provides monitoring information for Tesla and select Quadro devices.
This simulated nvidia-smi (burnin) answers:

    nvidia-smi                       GPU summary table
    nvidia-smi -q | --query          full query
    nvidia-smi -L | --list-gpus      GPU list
    nvidia-smi topo -m               topology matrix
    nvidia-smi nvlink --status|-s    NVLink link speeds
    nvidia-smi nvlink --errorcounters|-e   NVLink error counters
    nvidia-smi -r -i N               reset GPU N (clears its transient faults)
    nvidia-smi --query-compute-apps=pid --format=csv,noheader -i N   processes on GPU N (none)
"""

_DMESG = r'''out="${0%/*}/../out/dmesg"
fmt=plain
while [ $# -gt 0 ]; do
  case "$1" in
    -T|--ctime) fmt=ctime ;;
    -t|--notime) fmt=notime ;;
    --time-format=*|--time-format)
      if [ "$1" = --time-format ]; then shift; tf=$1; else tf=${1#--time-format=}; fi
      case "$tf" in
        iso) fmt=iso ;; ctime) fmt=ctime ;; notime) fmt=notime ;; raw|reltime|delta) fmt=plain ;;
        *) echo "dmesg: unknown time format: $tf" >&2; exit 1 ;;
      esac ;;
    -k|--kernel|-P|--nopager|-L|--color|--color=*) ;;
    *) echo "dmesg: unrecognized option '$1'" >&2
       echo "Try 'dmesg --help' for more information." >&2; exit 1 ;;
  esac
  shift
done
exec cat "$out/$fmt.txt"
'''

_IBSTAT = r'''out="${0%/*}/../out/ibstat"
[ $# -eq 0 ] && exec cat "$out/all.txt"
case "$1" in
  -l|--list_of_cas) exec cat "$out/list.txt" ;;
  -h|--help) echo "Usage: ibstat [options] <ca_name> [portnum]"; exit 0 ;;
  -*) echo "ibstat: unrecognized option '$1'" >&2; exit 255 ;;
  *[!A-Za-z0-9_.-]*) ;;
  *) [ -f "$out/ca/$1.txt" ] && exec cat "$out/ca/$1.txt" ;;
esac
echo "ibpanic: [$$] main: stat of IB device '$1' failed: No such file or directory" >&2
exit 255
'''

_LSPCI = r'''db="${0%/*}/../out/lspci.db"
verbose=0 domain=0 numeric=0 slot= sel=
while [ $# -gt 0 ]; do
  case "$1" in
    -s) shift; slot=$1 ;;
    -s*) slot=${1#-s} ;;
    -d) shift; sel=$1 ;;
    -d*) sel=${1#-d} ;;
    -[vnDkq]*)
      opt=${1#-}
      while [ -n "$opt" ]; do
        c=${opt%"${opt#?}"}; opt=${opt#?}
        case "$c" in
          v) verbose=$((verbose + 1)) ;; n) numeric=$((numeric + 1)) ;; D) domain=1 ;; k|q) ;;
          *) echo "lspci: invalid option -- '$c'" >&2; exit 2 ;;
        esac
      done ;;
    *) echo "lspci: invalid option -- '$1'" >&2; exit 2 ;;
  esac
  shift
done
exec awk -v verbose="$verbose" -v domain="$domain" -v numeric="$numeric" \
  -v slot="$slot" -v sel="$sel" '
function emit() {
  if (bdf == "") return
  if (slot != "") {
    s = tolower(slot); full = (split(s, parts, ":") == 3) ? bdf : substr(bdf, 6)
    if (index(full, s) != 1) return
  }
  if (sel != "") {
    split(tolower(sel), vd, ":")
    if (vd[1] != "" && vd[1] != ven) return
    if (vd[2] != "" && vd[2] != dev) return
  }
  hdr = (numeric == 0) ? h : ((numeric == 1) ? n : b)
  printf "%s %s\n", (domain ? bdf : substr(bdf, 6)), hdr
  if (verbose > 0) printf "%s\n", body
}
/^@/ { emit(); bdf = substr($1, 2); ven = $2; dev = $3; body = ""; next }
/^H/ { h = substr($0, 2); next }
/^N/ { n = substr($0, 2); next }
/^B/ { b = substr($0, 2); next }
{ body = body $0 "\n" }
END { emit() }' "$db"
'''

_SYSTEMCTL = r'''verb=$1
[ $# -gt 0 ] && shift
case "$verb" in
  is-active|is-enabled) ;;
  "") echo "systemctl (burnin simulator): only is-active and is-enabled are supported" >&2; exit 1 ;;
  *) echo "Unknown command verb $verb." >&2; exit 1 ;;
esac
quiet=0
for arg in "$@"; do case "$arg" in -q|--quiet) quiet=1 ;; esac; done
rc=0
for unit in "$@"; do
  case "$unit" in -*) continue ;; esac
  case "$verb:${unit%.service}" in
{cases}
    is-active:*) s=inactive ;;
    is-enabled:*) echo "Failed to get unit file state for ${unit%.service}.service: No such file or directory" >&2
                  rc=1; continue ;;
  esac
  [ $quiet -eq 1 ] || echo "$s"
  case "$s" in active|enabled) ;; *) [ "$verb" = is-active ] && rc=3 || rc=1 ;; esac
done
exit $rc
'''

_SETPCI = r'''slot= reg=
while [ $# -gt 0 ]; do
  case "$1" in
    -s) shift; slot=$1 ;;
    -s*) slot=${1#-s} ;;
    -v) ;;
    -*) echo "setpci: Invalid option $1" >&2; exit 1 ;;
    *) reg=$1 ;;
  esac
  shift
done
case "$reg" in
  ECAP_ACS+0x6.w|ECAP_ACS+6.w|ECAP_ACS+0x06.w|ECAP0d+0x6.w|ECAP0d+6.w|ecap_acs+0x6.w|ecap_acs+6.w) ;;
  *) echo "setpci (burnin simulator): only ECAP_ACS+0x6.w is supported, got '$reg'" >&2; exit 1 ;;
esac
slot=$(printf '%s' "$slot" | tr 'A-F' 'a-f')
case "$slot" in ??:??.?) slot=0000:$slot ;; esac
case "$slot" in
{cases}
  *) echo "setpci: Warning: No devices selected for \"$reg\"." >&2; exit 1 ;;
esac
'''

_LSMOD = 'exec cat "${0%/*}/../out/lsmod.txt"\n'

_SAFE = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _systemctl_cases(state: NodeState) -> str:
    fm_active = "active" if state.host.fabric_manager_active else "inactive"
    fm_enabled = "enabled" if state.host.fabric_manager_installed else "disabled"
    cases = [
        ("is-active:nvidia-fabricmanager", fm_active),
        ("is-enabled:nvidia-fabricmanager", fm_enabled),
        ("is-active:nvidia-persistenced", "active"),
        ("is-enabled:nvidia-persistenced", "enabled"),
        ("is-active:openibd", "active"),
    ]
    return "\n".join(f"    {pattern}) s={value} ;;" for pattern, value in cases)


def _setpci_cases(state: NodeState) -> str:
    registers = lspci.acs_register(state)
    return "\n".join(f"  {bdf}) echo {value} ;;" for bdf, value in sorted(registers.items())
                     if _SAFE.match(bdf))


def render_scripts(state: NodeState) -> dict[str, str]:
    """``bin/<tool>`` -> script text."""
    smi = _NVIDIA_SMI.replace("@PYTHON@", sys.executable)
    if nvidia_smi.lost_message(state) is not None:
        smi += f'cat "$out/lost.txt"\nexit {nvidia_smi.LOST_RC}\n'
    smi += 'exec cat "$out/$f.txt"\n'
    bodies = {
        "nvidia-smi": smi,
        "dmesg": _DMESG,
        "ibstat": _IBSTAT,
        "ibv_devinfo": ibv_devinfo.SCRIPT,
        "lspci": _LSPCI,
        "systemctl": _SYSTEMCTL.replace("{cases}", _systemctl_cases(state)),
        "setpci": _SETPCI.replace("{cases}", _setpci_cases(state)),
        "lsmod": _LSMOD,
        **fabric.scripts(),
        **megatron_scripts(),
        **soak_shims.scripts(),
        "ofed_info": software.OFED_INFO_SCRIPT,
    }
    bodies["dcgmi"] = software.DCGMI_VERSION_PREFIX + bodies["dcgmi"]  # --version without Python (INV-10)
    if not state.host.dcgm.installed:
        del bodies["dcgmi"]  # a node type without DCGM has no dcgmi (GPU-12, GPU-13 not applicable)
    return {tool: _PREAMBLE.format(tool=tool, node=state.name) + body for tool, body in bodies.items()}


def _lsmod(state: NodeState) -> str:
    lines = ["Module                  Size  Used by"]
    for name, size, users, _taint in loaded_modules(state):
        used = users.rstrip(",")
        lines.append(f"{name:<19} {size:>8}  {users.count(',')}{' ' + used if used else ''}")
    return "\n".join(lines) + "\n"


def render_outputs(state: NodeState, now: float | None = None) -> dict[str, str]:
    """``out/<path>`` -> text, every output a shim may print."""
    now = time.time() if now is None else now
    out: dict[str, str] = {
        "nvidia-smi/summary.txt": nvidia_smi.summary(state, now),
        "nvidia-smi/topo-m.txt": nvidia_smi.topo_matrix(state),
        "nvidia-smi/q.txt": nvidia_smi.query(state, now),
        "nvidia-smi/L.txt": nvidia_smi.list_gpus(state),
        "nvidia-smi/nvlink-s.txt": nvidia_smi.nvlink_status(state),
        "nvidia-smi/nvlink-e.txt": nvidia_smi.nvlink_errors(state),
        "nvidia-smi/help.txt": _NVIDIA_SMI_HELP.format(driver=state.host.driver_version),
        "ibstat/all.txt": ibstat.ibstat(state),
        "ibstat/list.txt": ibstat.ca_list(state),
        "lspci.db": lspci.database(state),
        "lsmod.txt": _lsmod(state),
    }
    out.update(ibv_devinfo.outputs(state))
    out.update(fabric.outputs(state))
    out.update(megatron_outputs(state))
    out.update(soak_shims.outputs(state))
    out.update(software.outputs(state))  # ofed_info -s, dcgmi --version (INV-10)
    out.update(sdc.outputs(state))  # the GPUs the SDC workload tests, and which compute wrong (GPU-14)
    lost = nvidia_smi.lost_message(state)
    if lost is not None:
        out["nvidia-smi/lost.txt"] = lost
    for hca in ibstat.ordered(state):
        out[f"ibstat/ca/{hca.name}.txt"] = ibstat.ca_block(hca)
    for fmt in dmesg.TIME_FORMATS:
        out[f"dmesg/{fmt}.txt"] = dmesg.dmesg(state, fmt)
    return out
