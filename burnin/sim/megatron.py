"""Megatron tools of a simulated node: ``bin/torchrun``, ``bin/pretrain_gpt.py``, ``bin/burnin-placement-probe``.

``out/megatron/health.json`` is what the stand-ins need of the node (its GPUs with
their NUMA node and paired HCA, the NUMA CPU lists, the workload faults);
``out/megatron/model.py`` is a copy of :mod:`burnin.sim.megatron_model` (standard
library only), which prints Megatron-LM's and the placement probe's real formats;
``out/megatron/rendezvous.py`` of :mod:`burnin.sim.rendezvous` (how the torchrun agents of
one run on several nodes learn each other).
The shims prefer the interpreter that rendered the node and fall back to ``python3``.

The container runtimes a site's ``container:`` setting may name are stand-ins too, so a
simulated run never starts the host's: ``bin/docker`` and ``bin/podman`` take ``run [OPTIONS]
IMAGE COMMAND...``, ``bin/apptainer`` and ``bin/singularity`` ``exec [OPTIONS] IMAGE COMMAND...``;
each sets the ``-e``/``--env`` variables and runs COMMAND on the node itself (the simulated node is
its own container: mounts, workdir and the image are accepted and not used). ``bin/enroot`` refuses
everything (pyxis needs srun).

Faults (suite ``megatron``; burnin.sim.faults): ``train-loss-nan``, ``train-hang``,
``train-slow``, ``nccl-timeout``, ``cpu-bind-none``, ``cpu-bind-wrong-numa@gpuN``.
Each mutator records the fault in ``host.megatron_faults``, which only these tools read.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from burnin.sim import bytecode
from burnin.sim.faults import Fault
from burnin.sim.state import NodeState

MODEL = "megatron/model.py"
RENDEZVOUS = "megatron/rendezvous.py"
HEALTH = "megatron/health.json"
FAULTS = ("train-loss-nan", "train-hang", "train-slow", "nccl-timeout", "cpu-bind-none", "cpu-bind-wrong-numa")

def _shim(tool: str) -> str:
    """A tool's shim: the model (its bytecode, burnin.sim.bytecode) run for ``tool``."""
    return bytecode.launch('"${0%/*}/../out/megatron"', "model", tool)


# docker/podman run: options before the image; those below take a value (as the next word or after `=`).
_DOCKER = r"""[ "$1" = run ] || { echo "${0##*/} (burnin simulator): only '${0##*/} run' is simulated" >&2; exit 125; }
shift
while [ $# -gt 0 ]; do
  case "$1" in
    -e|--env) export "$2"; shift 2 ;;
    --env=*) export "${1#--env=}"; shift ;;
    -v|--volume|-w|--workdir|--env-file|--gpus|--network|--net|--ipc|--pid|--ulimit|--cap-add|--cap-drop|\
--name|--shm-size|--device|--mount|-u|--user|--entrypoint|--runtime|--security-opt|-p|--publish|-l|--label|\
-h|--hostname|-m|--memory|--cpus|--cpuset-cpus|--add-host|--tmpfs|--group-add|--platform|--pull) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "${0##*/} (burnin simulator): run needs an image and a command" >&2; exit 125; }
shift
exec "$@"
"""

_APPTAINER = r"""if [ "$1" != exec ]; then
  echo "${0##*/} (burnin simulator): only '${0##*/} exec' is simulated" >&2; exit 255
fi
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --env) export "$2"; shift 2 ;;
    --env=*) export "${1#--env=}"; shift ;;
    -B|--bind|--pwd|-H|--home|--overlay|-W|--workdir|--env-file|--mount|--security|--network|--hostname|\
--scratch|-S) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "${0##*/} (burnin simulator): exec needs an image and a command" >&2; exit 255; }
shift
exec "$@"
"""

_ENROOT = """echo "enroot (burnin simulator): not simulated; a pyxis container runs through srun (--via slurm)" >&2
exit 1
"""

CONTAINER_RUNTIMES = ("docker", "podman", "apptainer", "singularity", "enroot")
"""The host's container runtimes a simulated node shadows with its own stand-ins."""


@cache
def model_source() -> str:
    return (Path(__file__).with_name("megatron_model.py")).read_text(encoding="utf-8")


@cache
def rendezvous_source() -> str:
    return (Path(__file__).with_name("rendezvous.py")).read_text(encoding="utf-8")


def health(state: NodeState) -> dict[str, Any]:
    """The node as the stand-ins see it."""
    gpus = [{"index": g.index, "bus_id": g.bus_id, "numa_node": g.numa_node, "hca": g.hca}
            for g in state.visible_gpus]
    return {"node": state.name, "faults": list(state.host.megatron_faults), "gpus": gpus,
            "numa": {str(k): v for k, v in sorted(state.host.numa_cpulists.items())}}


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text."""
    return {HEALTH: json.dumps(health(state), indent=1) + "\n", MODEL: model_source(),
            RENDEZVOUS: rendezvous_source()}


def scripts() -> dict[str, str]:
    """``bin/<tool>`` -> body (after the shim preamble)."""
    return {"torchrun": _shim("torchrun"),
            "pretrain_gpt.py": _shim("pretrain"),
            "burnin-placement-probe": _shim("probe"),
            "docker": _DOCKER, "podman": _DOCKER, "apptainer": _APPTAINER, "singularity": _APPTAINER,
            "enroot": _ENROOT}


def record_fault(state: NodeState, fault: Fault) -> None:
    """The mutator of every workload fault: the stand-ins read ``host.megatron_faults``."""
    label = str(fault)
    if label not in state.host.megatron_faults:
        state.host.megatron_faults.append(label)


MUTATORS = dict.fromkeys(FAULTS, record_fault)
