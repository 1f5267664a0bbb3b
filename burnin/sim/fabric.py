"""Fabric tools of a simulated node: ``bin/<collective>_perf``, ``bin/nvbandwidth``, ``bin/ib_write_bw``,
``bin/p2pBandwidthLatencyTest``.

``out/fabric/health.json`` is what the model needs of the node (NVLink share
per GPU, PCIe share, peer access, the link that retrains under traffic, each HCA's state, link
layer and bandwidth factor, the NCCL faults, the interface NCCL bootstraps over); the model
reads each member's ``root/etc/nccl.conf`` itself; ``out/fabric/model.py`` is a copy of
:mod:`burnin.sim.fabric_model` (standard library only), which reads the health of every member
of a job; ``out/fabric/perftest_format.py`` and ``out/fabric/p2p_format.py`` are copies of
:mod:`burnin.sim.formats.perftest` and :mod:`burnin.sim.formats.p2p`, ``out/fabric/traffic.py``
of :mod:`burnin.sim.traffic` (NVLink counters that grow under traffic), ``out/fabric/rendezvous.py``
of :mod:`burnin.sim.rendezvous` (how the ranks of an mpirun job learn each other). The shims
prefer the interpreter that rendered the node (fast to start) and fall back to
the node's ``python3``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from burnin.sim import bytecode
from burnin.sim.state import NodeState

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast", "reduce")
MODEL = "fabric/model.py"
PERFTEST_FORMAT = "fabric/perftest_format.py"
P2P_FORMAT = "fabric/p2p_format.py"
TRAFFIC = "fabric/traffic.py"
RENDEZVOUS = "fabric/rendezvous.py"
P2P_TOOL = "p2pBandwidthLatencyTest"
HEALTH = "fabric/health.json"
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)")

_LAUNCHER = "BURNIN_SIM_LAUNCHER_PID=$PPID; export BURNIN_SIM_LAUNCHER_PID\n"


def _shim(tool: str) -> str:
    """A tool's shim: the model (its bytecode, burnin.sim.bytecode) run for ``tool``."""
    return _LAUNCHER + bytecode.launch('"${0%/*}/../out/fabric"', "model", tool)


# ib_write_bw without a server name is the server of a loopback pair: its output is never read, so the
# shim answers it without starting Python (half the processes of an IB-08 run).
_IB_WRITE_BW_SERVER = r'''skip=0 server=1
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    -d|-s|-n|-q|-p|-D|-x|-i|-m|--ib-dev|--size|--iters|--qp|--port|--duration|--use_cuda) skip=1 ;;
    -*) ;;
    *) server=0 ;;
  esac
done
if [ "$server" = 1 ]; then
  printf '\n************************************\n* Waiting for client to connect... *\n'
  printf '************************************\n'
  exit 0
fi
'''


@cache
def model_source() -> str:
    return (Path(__file__).with_name("fabric_model.py")).read_text(encoding="utf-8")


@cache
def perftest_format_source() -> str:
    return (Path(__file__).parent / "formats" / "perftest.py").read_text(encoding="utf-8")


@cache
def p2p_format_source() -> str:
    return (Path(__file__).parent / "formats" / "p2p.py").read_text(encoding="utf-8")


@cache
def traffic_source() -> str:
    return Path(__file__).with_name("traffic.py").read_text(encoding="utf-8")


@cache
def rendezvous_source() -> str:
    return Path(__file__).with_name("rendezvous.py").read_text(encoding="utf-8")


def _rate(text: str) -> float:
    match = _RATE.match(text)
    return float(match.group(1)) if match else 0.0


def health(state: NodeState) -> dict[str, Any]:
    """The node as the fabric model sees it."""
    gpus: list[dict[str, Any]] = []
    for gpu in state.visible_gpus:
        domain, _, rest = gpu.bus_id.partition(":")
        gpus.append({
            "index": len(gpus),
            "bus_id": f"{domain}:{rest.rsplit('.', 1)[0]}",
            "links": len(gpu.nvlink_active),
            "active": sum(gpu.nvlink_active),
            "factor": gpu.nvlink_bandwidth_factor,
            "pcie": min(1.0, gpu.pcie_gen_current / 5) * min(1.0, gpu.pcie_width_current / 16),
            "lost": gpu.lost,
            "p2p": gpu.p2p_access,
            "flaky_link": gpu.nvlink_flaky_link,
        })
    hcas = [{"name": hca.name, "role": hca.role, "up": hca.state.endswith("ACTIVE"),
             "rate_gbps": _rate(hca.rate), "factor": hca.bandwidth_factor, "switch": hca.switch_factor,
             "link_layer": hca.link_layer}
            for hca in state.hcas]
    model = state.gpus[0].name if state.gpus else "NVIDIA H100 80GB HBM3"
    return {"node": state.name, "gpu_name": model, "driver": state.host.driver_version,
            "cuda": state.host.cuda_version, "gpus": gpus, "hcas": hcas,
            "nccl_wrong": state.host.nccl_wrong, "nccl_hang": state.host.nccl_hang, "oob": _oob(state)}


def _oob(state: NodeState) -> str:
    """``IF:ADDR`` NCCL bootstraps over: the first compute HCA's IPoIB netdev (burnin.sim.addressing's plan)."""
    from burnin.sim.addressing import plan
    from burnin.sim.state import topology_from_dict

    addresses = plan(topology_from_dict(state.topology)).node(state.name)
    first = next((h.netdev for h in state.hcas if h.role == "compute" and h.netdev), None)
    if first is None or not addresses.ipoib:
        return f"eth0:{addresses.oob.ip if addresses.oob is not None else '127.0.0.1'}"
    return f"{first}:{addresses.ipoib[0].ip}"


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text."""
    return {HEALTH: json.dumps(health(state), indent=1) + "\n", MODEL: model_source(),
            PERFTEST_FORMAT: perftest_format_source(), P2P_FORMAT: p2p_format_source(), TRAFFIC: traffic_source(),
            RENDEZVOUS: rendezvous_source()}


def scripts() -> dict[str, str]:
    """``bin/<tool>`` -> body (after the shim preamble)."""
    bodies = {f"{c}_perf": _shim(f"perf {c}") for c in COLLECTIVES}
    bodies["nvbandwidth"] = _shim("nvbandwidth")
    bodies[P2P_TOOL] = _shim(P2P_TOOL)
    bodies["ib_write_bw"] = _IB_WRITE_BW_SERVER + _shim("ib_write_bw")
    return bodies
