"""DCGM on a simulated node: ``dcgmi health -c`` and the deployment part of ``dcgmi diag`` (GPU-12, GPU-13).

The node's DCGM is ``state.host.dcgm`` (installed, host engine answering, the incidents its passive health
watches hold) and each GPU's ``inforom_valid``; row-remap state is the GPU's own (NVML reads the same).

- ``bin/dcgmi health -c`` prints ``out/dcgmi/health.txt``, rendered here in DCGM's text tree
  (``DcgmiOutputTree(28, 60)`` of NVIDIA/DCGM ``dcgmi/Health.cpp``; the shape is described in
  :mod:`burnin.parsers.dcgmi_health`). A host engine that is down prints dcgmi's two connection
  ``Error:`` lines instead (``dcgmi/Command.cpp``).
- ``bin/dcgmi diag ...`` runs ``out/soak/tools.py`` (:mod:`burnin.sim.soak_tools`), which reads the
  deployment failures :func:`deployment_failures` puts in ``out/soak/node.json``; ``diag -r 1`` (the node
  suite's) prints what that same code rendered ahead, ``out/dcgmi/diag-r1.txt``.
- A topology with ``dcgm: {required: false}`` gets no ``bin/dcgmi`` at all.

The health model holds only the incidents a fault put there: a simulated node has no sample history for
DCGM's watches to judge, so other faults (an Xid in dmesg, NVML counters) do not show up in it.
"""

from __future__ import annotations

import textwrap

from burnin.sim import bytecode
from burnin.sim.faults import Fault
from burnin.sim.state import DcgmIncident, GpuState, NodeState

HEALTH_FILE = "dcgmi/health.txt"
HEALTH_STATUS_FILE = "dcgmi/health.rc"
DIAG_L1_FILE = "dcgmi/diag-r1.txt"
DIAG_L1_STATUS_FILE = "dcgmi/diag-r1.rc"
"""``dcgmi diag -r 1`` rendered ahead (:mod:`burnin.sim.soak_shims`): the node suite runs it on every node, and a
Python start for it cost a simulated node a tenth of its gathering."""
# dcgmi exits with DCGM's return code: DCGM_ST_CONNECTION_NOT_VALID (-21) and DCGM_ST_GENERIC_ERROR (-3).
EXIT_NO_HOSTENGINE = 256 - 21
HOSTENGINE_DOWN = ("Error: unable to establish a connection to the specified host: localhost\n"
                   "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
# DCGM's messages (NVIDIA/DCGM dcgmlib/dcgm_errors.h, DCGM_FR_*_MSG).
CORRUPT_INFOROM = "A corrupt InfoROM has been detected in GPU {gpu}."
PENDING_ROW_REMAP = "GPU {gpu} had memory errors and row remappings are pending"
ROW_REMAP_FAILURE = "GPU {gpu} had uncorrectable memory errors and row remapping failed."
PCIE_REPLAY_RATE = "Detected more than 8 PCIe replays per minute for GPU {gpu} : 13"  # {gpu}: filled in at render
UNCONTAINED_ERROR = "GPU had an uncontained error (XID 95)"

_LEFT, _RIGHT = 28, 60  # DcgmiOutputTree(28, 60) in dcgmi/Health.cpp CheckWatches
_MESSAGE_WIDTH = 54  # MAX_SIZE_OF_HEALTH_INFO: Health.cpp wraps a message at word ends within it
_WORST = {"Healthy": 0, "Warning": 1, "Failure": 2}

_SHIM = '''out="${{0%/*}}/../out"
if [ "$*" = "diag -r 1" ]; then
  cat "$out/{diag}"; read -r rc < "$out/{diag_status}"; exit "$rc"
fi
if [ "$1" = health ]; then
  shift
  case "$*" in
    -c|--check) cat "$out/{health}"; read -r rc < "$out/{status}"; exit "$rc" ;;
    *) echo "dcgmi health (burnin simulator): only -c / --check is answered" >&2; exit 255 ;;
  esac
fi
'''


def shim() -> str:
    """``bin/dcgmi``: ``health -c`` from the pre-rendered report (the probe runs it), the rest in Python. The exit
    status is read by the shell itself (``read``): a ``$(cat ...)`` cost the probe's ``dcgmi health -c`` a second
    fork and exec (3.5 ms of CPU, against 1.5 for the other one-file shims)."""
    head = _SHIM.format(health=HEALTH_FILE, status=HEALTH_STATUS_FILE, diag=DIAG_L1_FILE,
                        diag_status=DIAG_L1_STATUS_FILE)
    return head + bytecode.launch('"$out/soak"', "tools", "dcgmi")


def dcgm_gpu_id(state: NodeState, gpu: GpuState) -> int:
    """DCGM numbers GPUs as NVML does: by position among the GPUs on the bus."""
    return [g.index for g in state.visible_gpus].index(gpu.index)


def deployment_failures(state: NodeState, gpu: GpuState) -> list[tuple[str, str]]:
    """(deployment test, DCGM's error) for each level-1 test this GPU fails (DCGM's software plugin)."""
    gpu_id = dcgm_gpu_id(state, gpu)
    failures: list[tuple[str, str]] = []
    if gpu.remap_failure:
        failures.append(("Page Retirement/Row Remap", ROW_REMAP_FAILURE.format(gpu=gpu_id)))
    elif gpu.remap_pending:
        failures.append(("Page Retirement/Row Remap", PENDING_ROW_REMAP.format(gpu=gpu_id)))
    if not gpu.inforom_valid:
        failures.append(("Inforom", CORRUPT_INFOROM.format(gpu=gpu_id)))
    return failures


# ------------------------------------------------------------------ health report


def _hline(fill: str = "-") -> str:
    return f"+{fill * (_LEFT - 1)}+{fill * (_RIGHT - 2)}+"


def _row(level: int, label: str, value: str = "", *, overflow: bool = False) -> str:
    """``DcgmiOutputTree::rowStr``: the label indented three per level with ``-> `` before it."""
    prefix = "" if overflow or level == 0 else "-> "
    left = f"{prefix:>{level * 3}}{label}" if level else label
    return f"| {left:<{_LEFT - 3}} | {value:<{_RIGHT - 4}} |"


def _wrap(message: str) -> list[str]:
    return textwrap.wrap(message.replace("\n", " "), _MESSAGE_WIDTH) or [""]


def health_report(state: NodeState) -> tuple[str, int]:
    """What ``dcgmi health -c`` prints on this node, and its exit status."""
    dcgm = state.host.dcgm
    if not dcgm.hostengine:
        return HOSTENGINE_DOWN, EXIT_NO_HOSTENGINE
    by_gpu: dict[int, list[DcgmIncident]] = {}
    for incident in dcgm.incidents:
        gpu = next((g for g in state.visible_gpus if g.index == incident.gpu), None)
        if gpu is not None:
            by_gpu.setdefault(dcgm_gpu_id(state, gpu), []).append(incident)
    worst = max((_WORST.get(i.health, 0) for items in by_gpu.values() for i in items), default=0)
    overall = next(word for word, rank in _WORST.items() if rank == worst)
    lines = [_hline(), f"| {'Health Monitor Report':<{_LEFT + _RIGHT - 3}}|", _hline("="),
             _row(0, "Overall Health", overall)]
    if by_gpu:
        lines.append(_row(0, "GPU"))
    for gpu_id in sorted(by_gpu):
        incidents = by_gpu[gpu_id]
        entity = max(incidents, key=lambda i: _WORST.get(i.health, 0)).health
        lines += [_row(1, str(gpu_id), entity), _row(2, "Errors")]
        systems: dict[str, list[DcgmIncident]] = {}
        for incident in incidents:
            systems.setdefault(incident.system, []).append(incident)
        for system, found in systems.items():
            health = max(found, key=lambda i: _WORST.get(i.health, 0)).health
            lines.append(_row(3, system, health))
            message = ", ".join(i.message.replace("{gpu}", str(gpu_id)) for i in found)
            lines += [_row(3, "", chunk, overflow=True) for chunk in _wrap(message)]
    lines.append(_hline())
    return "\n".join(lines) + "\n", 0


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text: the health report and its exit status."""
    text, status = health_report(state)
    return {HEALTH_FILE: text, HEALTH_STATUS_FILE: f"{status}\n"}


# ------------------------------------------------------------------ faults


def _gpu(state: NodeState, fault: Fault) -> GpuState:
    assert fault.target is not None
    return state.gpu(fault.target)


def _incident(state: NodeState, gpu: GpuState, system: str, health: str, message: str) -> None:
    state.host.dcgm.incidents.append(DcgmIncident(gpu=gpu.index, system=system, health=health, message=message))


def dcgm_diag_fail(state: NodeState, fault: Fault) -> None:
    """The GPU's InfoROM is corrupt: DCGM's ``Inforom`` deployment test fails on it."""
    _gpu(state, fault).inforom_valid = False


def dcgm_health_warn(state: NodeState, fault: Fault) -> None:
    """DCGM's PCIe watch saw more than 8 replays a minute on the GPU (NVML's replay counter agrees)."""
    gpu = _gpu(state, fault)
    gpu.pcie_replay = max(gpu.pcie_replay, 13)
    _incident(state, gpu, "PCIe system", "Warning", PCIE_REPLAY_RATE)


def dcgm_health_fail(state: NodeState, fault: Fault) -> None:
    """DCGM's memory watch recorded an uncontained error (Xid 95) on the GPU, long gone from the kernel log."""
    _incident(state, _gpu(state, fault), "Memory system", "Failure", UNCONTAINED_ERROR)


MUTATORS = {
    "dcgm-diag-fail": dcgm_diag_fail,
    "dcgm-health-warn": dcgm_health_warn,
    "dcgm-health-fail": dcgm_health_fail,
}
