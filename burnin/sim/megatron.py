"""Megatron tools of a simulated node: ``bin/torchrun``, ``bin/pretrain_gpt.py``, ``bin/burnin-placement-probe``.

``out/megatron/health.json`` is what the stand-ins need of the node (its GPUs with
their NUMA node and paired HCA, the NUMA CPU lists, the workload faults);
``out/megatron/model.py`` is a copy of :mod:`burnin.sim.megatron_model` (standard
library only), which prints Megatron-LM's and the placement probe's real formats.
The shims prefer the interpreter that rendered the node and fall back to ``python3``.

Faults (suite ``megatron``; burnin.sim.faults): ``train-loss-nan``, ``train-hang``,
``train-slow``, ``nccl-timeout``, ``cpu-bind-none``, ``cpu-bind-wrong-numa@gpuN``.
Each mutator records the fault in ``host.megatron_faults``, which only these tools read.
"""

from __future__ import annotations

import json
import shlex
import sys
from functools import cache
from pathlib import Path
from typing import Any

from burnin.sim.faults import Fault
from burnin.sim.state import NodeState

MODEL = "megatron/model.py"
HEALTH = "megatron/health.json"
FAULTS = ("train-loss-nan", "train-hang", "train-slow", "nccl-timeout", "cpu-bind-none", "cpu-bind-wrong-numa")

_SHIM = '''py={python}
[ -x "$py" ] || py=python3
exec "$py" -S "${{0%/*}}/../out/megatron/model.py" {tool} "$@"
'''


@cache
def model_source() -> str:
    return (Path(__file__).with_name("megatron_model.py")).read_text(encoding="utf-8")


def health(state: NodeState) -> dict[str, Any]:
    """The node as the stand-ins see it."""
    gpus = [{"index": g.index, "bus_id": g.bus_id, "numa_node": g.numa_node, "hca": g.hca}
            for g in state.visible_gpus]
    return {"node": state.name, "faults": list(state.host.megatron_faults), "gpus": gpus,
            "numa": {str(k): v for k, v in sorted(state.host.numa_cpulists.items())}}


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text."""
    return {HEALTH: json.dumps(health(state), indent=1) + "\n", MODEL: model_source()}


def scripts() -> dict[str, str]:
    """``bin/<tool>`` -> body (after the shim preamble)."""
    python = shlex.quote(sys.executable)
    return {"torchrun": _SHIM.format(python=python, tool="torchrun"),
            "pretrain_gpt.py": _SHIM.format(python=python, tool="pretrain"),
            "burnin-placement-probe": _SHIM.format(python=python, tool="probe")}


def record_fault(state: NodeState, fault: Fault) -> None:
    """The mutator of every workload fault: the stand-ins read ``host.megatron_faults``."""
    label = str(fault)
    if label not in state.host.megatron_faults:
        state.host.megatron_faults.append(label)


MUTATORS = dict.fromkeys(FAULTS, record_fault)
