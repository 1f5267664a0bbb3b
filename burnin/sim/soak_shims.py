"""The soak's tools on every simulated node: shims in ``bin/``, their model and outputs in ``out/soak/``.

``bin/gpu_burn`` and ``bin/dcgmi`` run ``out/soak/tools.py`` (a copy of
:mod:`burnin.sim.soak_tools`, which follows the soak's simulated clock), with
``out/soak/node.json`` as what they need of the node's state. ``bin/stress-ng``,
``bin/stream``, ``bin/numactl`` and ``bin/nvme`` are shell scripts printing
outputs rendered here (a soak starts hundreds of them: no Python). STREAM's
rate is per node and socket; ``numactl --cpunodebind=N`` tells ``stream``
its socket. ``nvidia-smi dmon -s pucm -c 1`` prints ``out/nvidia-smi/dmon.txt``,
one sample of the node's NVML state in dmon's format (columns as in the real
H100 sample of the reference set, docs/design.md).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from burnin.sim import bytecode, dcgm, soak_tools
from burnin.sim.state import GPU_PCI_ID, NodeState

PYTHON_TOOLS = ("gpu_burn", "dcgmi")
STREAM_TRIAD_MBS = 322000.0
NVME_DEVICES = ("/dev/nvme0n1", "/dev/nvme1n1")
TOOLS_SOURCE = "soak/tools.py"
NODE_FILE = "soak/node.json"
DMON_FILE = "nvidia-smi/dmon.txt"
LOADED_W = 300.0  # above this draw a GPU counts as busy in dmon's sm/mem columns

_STRESS_NG = r'''out="${0%/*}/../out/soak"
t=60 vm=4
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) shift; t=${1%s} ;;
    --timeout=*) t=${1#--timeout=}; t=${t%s} ;;
    --vm) shift; vm=$1 ;;
    -h|--help) echo "usage: stress-ng [stressor specific options] (burnin simulator)"; exit 0 ;;
  esac
  shift
done
case "$t" in ""|*[!0-9]*) echo "stress-ng: invalid timeout" >&2; exit 1 ;; esac
exec sed -e "s/@SECONDS@/$t/g" -e "s/@VM@/$vm/g" "$out/stress-ng.txt"
'''

_STREAM = 'exec cat "${0%/*}/../out/soak/stream${BURNIN_SIM_NUMA:-0}.txt"\n'

_NUMACTL = r'''numa=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cpunodebind=*) numa=${1#--cpunodebind=} ;;
    --membind=*) numa=${1#--membind=} ;;
    -N|-m|--cpunodebind|--membind) shift; numa=$1 ;;
    -H|--hardware) echo "available: 2 nodes (0-1) (burnin simulator)"; exit 0 ;;
    -*) echo "numactl: unrecognized option '$1'" >&2; exit 1 ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "usage: numactl [--cpunodebind=nodes] [--membind=nodes] command args ..." >&2; exit 1; }
BURNIN_SIM_NUMA=$numa exec "$@"
'''

_NVME = r'''out="${0%/*}/../out/soak"
case "$1" in
  list) exec cat "$out/nvme-list.json" ;;
  smart-log)
    case "$2" in
{cases}
      *) echo "$2: No such file or directory" >&2; exit 1 ;;
    esac ;;
  *) echo "usage: nvme <list|smart-log DEV> --output-format=json (burnin simulator)" >&2; exit 1 ;;
esac
'''


@cache
def tools_source() -> str:
    return Path(__file__).with_name("soak_tools.py").read_text(encoding="utf-8")


def _dcgm_failure(state: NodeState, index: int) -> str | None:
    gpu = next(g for g in state.gpus if g.index == index)
    if gpu.remap_pending or gpu.remap_failure:
        return f"GPU {index} has uncorrectable memory errors and row remappings are pending"
    if gpu.ecc["uncorrected_volatile_dram"] > 0:
        return f"GPU {index} has {gpu.ecc['uncorrected_volatile_dram']} uncorrectable DRAM ECC errors"
    return None


def node_document(state: NodeState) -> dict[str, Any]:
    sockets = sorted(state.host.numa_cpulists)
    cpus = sum(len(_cpus(state.host.numa_cpulists[n])) for n in sockets)
    return {
        "name": state.name,
        "gpus": [{"index": position, "name": gpu.name, "uuid": gpu.uuid, "temperature_c": gpu.temperature_c,
                  "dcgm_fail": _dcgm_failure(state, gpu.index),
                  "dcgm_deployment": dcgm.deployment_failures(state, gpu)}
                 for position, gpu in enumerate(state.visible_gpus)],
        "dcgm": {"hostengine": state.host.dcgm.hostengine, "driver": state.host.driver_version,
                 "device_ids": [GPU_PCI_ID[1].removeprefix("0x") for _ in state.visible_gpus]},
        "sockets": sockets,
        "cpus": cpus,
        "cores_per_socket": cpus // max(1, len(sockets)) // 2 or 1,
    }


def _cpus(cpulist: str) -> list[int]:
    out: list[int] = []
    for part in cpulist.split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            if low.isdigit() and high.isdigit():
                out += range(int(low), int(high) + 1)
        elif part.strip().isdigit():
            out.append(int(part))
    return out


def dmon(state: NodeState) -> str:
    """``nvidia-smi dmon -s pucm -c 1``: one line per GPU (the real tool's columns and header spacing)."""
    names = ("gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk", "fb", "bar1",
             "ccpm")
    units = ("Idx", "W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz", "MB", "MB", "MB")
    lines = ["# gpu" + "".join(f"{n:>7}" for n in names[1:]) + " ",
             "# Idx" + "".join(f"{u:>7}" for u in units[1:]) + " "]
    for position, gpu in enumerate(state.visible_gpus):
        watts = gpu.power_usage_mw / 1000
        busy = watts > LOADED_W
        values = (position, round(watts), gpu.temperature_c, gpu.memory_temperature_c, 100 if busy else 0,
                  45 if busy else 0, 0, 0, 0, 0, 2619, 1980, gpu.memory_used_mib, 2, 0)
        lines.append(f"{values[0]:>5}" + "".join(f"{v:>7}" for v in values[1:]) + " ")
    return "\n".join(lines) + "\n"


def _wobble(*parts: object, spread: float) -> float:
    import hashlib

    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=4).digest()
    return 1.0 + spread * (int.from_bytes(digest, "big") / 0xFFFFFFFF * 2.0 - 1.0)


def stress_ng(state: NodeState) -> str:
    """stress-ng --metrics-brief (older format); ``@SECONDS@`` and ``@VM@`` are filled in by the shim."""
    cpus = node_document(state)["cpus"]
    prefix = "stress-ng: info:  [4242]"
    lines = [f"{prefix} setting to a @SECONDS@ second run per stressor",
             f"{prefix} dispatching hogs: {cpus} cpu, @VM@ vm",
             f"{prefix} successful run completed in @SECONDS@.02s",
             f"{prefix} stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s",
             f"{prefix}                           (secs)    (secs)    (secs)   (real time) (usr+sys time)",
             f"{prefix} cpu             9876543    @SECONDS@.00  66000.00      1.00     16460.90       149.64",
             f"{prefix} vm              1234567    @SECONDS@.01   2300.00     80.00      2057.57       518.72"]
    return "\n".join(lines) + "\n"


def stream(state: NodeState, socket: int) -> str:
    """STREAM 5.10 on one socket (the rate wobbles by node and socket, not by time)."""
    rate = STREAM_TRIAD_MBS * _wobble(state.name, "stream", socket, spread=0.01)
    threads = max(1, int(node_document(state)["cores_per_socket"]))
    dash = "-" * 61
    lines = [dash, "STREAM version $Revision: 5.10 $", dash, "This system uses 8 bytes per array element.", dash,
             "Array size = 400000000 (elements), Offset = 0 (elements)", dash,
             f"Number of Threads requested = {threads}", f"Number of Threads counted = {threads}", dash,
             "Function    Best Rate MB/s  Avg time     Min time     Max time"]
    for kernel, share, arrays in (("Copy", 0.93, 2), ("Scale", 0.93, 2), ("Add", 0.995, 3), ("Triad", 1.0, 3)):
        best = rate * share
        seconds = arrays * 8 * 400000000 / (best * 1e6)
        lines.append(f"{kernel + ':':<12}{best:>12.1f}  {seconds * 1.004:>11.6f}  {seconds:>11.6f}  "
                     f"{seconds * 1.01:>11.6f}")
    lines += [dash, "Solution Validates: avg error less than 1.000000e-13 on all three arrays", dash]
    return "\n".join(lines) + "\n"


def nvme_list() -> str:
    devices = [{"NameSpace": 1, "DevicePath": d, "ModelNumber": "SAMSUNG MZWLO3T8HCLS",
                "SerialNumber": f"S6{k:06d}", "PhysicalSize": 3840755982336} for k, d in enumerate(NVME_DEVICES)]
    return json.dumps({"Devices": devices}, indent=2) + "\n"


def nvme_smart() -> str:
    return json.dumps({"critical_warning": 0, "temperature": 309, "avail_spare": 100, "spare_thresh": 10,
                       "percent_used": 1, "data_units_read": 1234567, "data_units_written": 2345678,
                       "media_errors": 0, "num_err_log_entries": 0}, indent=2) + "\n"


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text."""
    document = json.dumps(node_document(state), indent=1) + "\n"
    diag, diag_status = soak_tools.diag_report(json.loads(document), "1", as_json=False)  # as tools.py reads it
    out = {TOOLS_SOURCE: tools_source(), NODE_FILE: document,
           dcgm.DIAG_L1_FILE: diag, dcgm.DIAG_L1_STATUS_FILE: f"{diag_status}\n",
           DMON_FILE: dmon(state), "soak/stress-ng.txt": stress_ng(state), "soak/nvme-list.json": nvme_list(),
           "soak/nvme-smart.json": nvme_smart(), **dcgm.outputs(state)}
    for socket in sorted(state.host.numa_cpulists):
        out[f"soak/stream{socket}.txt"] = stream(state, socket)
    return out


def scripts() -> dict[str, str]:
    """``bin/<tool>`` -> body (after the shim preamble)."""
    bodies = {tool: bytecode.launch('"${0%/*}/../out/soak"', "tools", tool) for tool in PYTHON_TOOLS}
    bodies["dcgmi"] = dcgm.shim()  # `health -c` from a pre-rendered file (the probe runs it), the rest in Python
    cases = "\n".join(f'      {d}) exec cat "$out/nvme-smart.json" ;;' for d in NVME_DEVICES)
    bodies.update({"stress-ng": _STRESS_NG, "stream": _STREAM, "numactl": _NUMACTL,
                   "nvme": _NVME.replace("{cases}", cases)})
    return bodies
