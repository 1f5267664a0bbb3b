"""The simulated world of a soak: nodes under load whose faults unfold on a simulated clock.

:class:`SoakWorld` takes a rack rendered by :func:`burnin.sim.build_rack` (with
its static faults) and, each time the soak's simulated clock moves
(:meth:`SoakWorld.advance`), re-renders every node whose state changed at the
new time ``t`` (seconds since the soak started):

- from ``t = 0`` every GPU is under load: about 60 C, 650 W, no idle clock event;
- the soak faults (``FaultSpec.suite == "soak"``) act at or over ``t``:
  ``xid-at:MIN:N`` logs the Xid at minute MIN, ``ecc-growth``,
  ``thermal-creep`` and ``nvlink-errors-growth`` grow their counters or
  temperatures with the hours, ``throughput-drift`` slows the GPU's
  ``gpu_burn`` rates (``soak.json``), ``mce`` logs a machine check and an EDAC
  uncorrectable error a third into the soak; ``sdc-when-hot`` makes the GPU's SDC workload result wrong
  from an hour into the soak (:mod:`burnin.sim.sdc`).

Beside the rendered state it writes what the simulator's nodes otherwise lack:
``root/proc/uptime`` (the node booted ``BOOT_AGE_S`` before the soak),
``root/proc/sys/kernel/random/boot_id`` and the EDAC counters under
``root/sys/devices/system/edac/mc``, and ``<node>/soak.json`` for the tools.
The world is a function of ``t``: a resumed soak rebuilt at the same ``t``
sees the same nodes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from burnin.sim.build import SimNode, render_node
from burnin.sim.events import record_changes
from burnin.sim.faults import FAULTS, Fault
from burnin.sim.inject import NVLINK_FAULT_LINK, XID_TEXT
from burnin.sim.sdc import HOT_AFTER_S as SDC_HOT_AFTER_S
from burnin.sim.sdc import WRONG_KERNEL as SDC_WRONG_KERNEL
from burnin.sim.state import GpuState, KernelMessage, NodeState, XidEvent
from burnin.sim.writer import replace_file

WORLD_FILE = "soak.json"
BOOT_AGE_S = 3 * 86400.0
LOAD_TEMPERATURE_RISE_C = 26
LOAD_MEMORY_RISE_C = 24
LOAD_POWER_MW = 580000
ECC_GROWTH_PER_H = 500
CREEP_C_PER_H = 2.5
CREEP_MAX_C = 15
DRIFT_PER_H = 0.03
DRIFT_MAX = 0.20
NVLINK_REPLAY_PER_H = 300
MCE_LINES = (
    "mce: [Hardware Error]: Machine check events logged",
    "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x4a3f1 "
    "offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0001:0091 socket:0 imc:0 rank:0 bg:1 ba:2 row:0x1a2b "
    "col:0x3c0)",
)


def is_soak_fault(fault: Fault) -> bool:
    return fault.spec.suite == "soak"


def split_faults(faults: Mapping[str, Sequence[Fault]]) -> tuple[dict[str, list[Fault]], dict[str, list[Fault]]]:
    """(static faults to build the rack with, soak faults for the world), per node."""
    static = {node: [f for f in items if not is_soak_fault(f)] for node, items in faults.items()}
    soak = {node: [f for f in items if is_soak_fault(f)] for node, items in faults.items()}
    return static, {node: items for node, items in soak.items() if items}


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=4).digest(), "big")


def boot_id(node: str, boot: int = 0) -> str:
    h = hashlib.blake2b(f"{node}/boot/{boot}".encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class _Node:
    sim: SimNode
    base: NodeState
    faults: list[Fault]
    rendered: NodeState | None = None
    signature: tuple[object, ...] | None = None  # what the faults changed at the last render
    extras: dict[str, str] | None = None  # the extra files as last written


class SoakWorld:
    """Simulated nodes of one soak, re-rendered as the simulated clock moves."""

    def __init__(self, nodes: Mapping[str, SimNode], faults: Mapping[str, Sequence[Fault]], *,
                 duration_s: float, wall_clock: bool = False) -> None:
        self.duration_s = duration_s
        self.wall_clock = wall_clock  # the soak runs on real time: its gpu_burn takes the seconds it is given
        self._nodes = {name: _Node(node, node.state(), list(faults.get(name, ()))) for name, node in nodes.items()}
        self.t = -1.0

    def advance(self, t: float) -> None:
        """Bring every node to simulated time ``t`` (seconds since the soak started)."""
        self.t = t
        for name, node in self._nodes.items():
            signature = self._signature(node, t)
            if node.rendered is None or signature != node.signature:
                state = self.state_at(name, t)
                before = node.rendered or node.sim.state()
                render_node(node.sim.dir, state)
                record_changes(node.sim.dir, before, state)
                node.rendered, node.signature, node.extras = state, signature, None
            self._write_extras(name, node, t)

    def _signature(self, node: _Node, t: float) -> tuple[object, ...]:
        """What the node's faults change at ``t`` (equal signatures: equal states, no re-render)."""
        hours = max(0.0, t) / 3600.0
        marks: list[object] = []
        for fault in node.faults:
            if fault.name == "xid-at":
                marks.append(fault.minute is not None and t >= fault.minute * 60)
            elif fault.name == "ecc-growth":
                marks.append(int(ECC_GROWTH_PER_H * hours))
            elif fault.name == "thermal-creep":
                marks.append(round(min(CREEP_MAX_C, CREEP_C_PER_H * hours)))
            elif fault.name == "nvlink-errors-growth":
                marks.append(int(NVLINK_REPLAY_PER_H * hours))
            elif fault.name == "mce":
                marks.append(t >= self.mce_at())
            elif fault.name == "sdc-when-hot":
                marks.append(t >= SDC_HOT_AFTER_S)
        return tuple(marks)

    def state_at(self, name: str, t: float) -> NodeState:
        node = self._nodes[name]
        state = node.base.model_copy(deep=True)
        for gpu in state.gpus:
            gpu.temperature_c += LOAD_TEMPERATURE_RISE_C
            gpu.memory_temperature_c += LOAD_MEMORY_RISE_C
            gpu.power_usage_mw += LOAD_POWER_MW
            gpu.clock_event_reasons &= ~0x1  # not idle
        hours = max(0.0, t) / 3600.0
        for fault in node.faults:
            target = state.gpu(fault.target) if fault.target and fault.target.startswith("gpu") else None
            self._apply(name, state, fault, target, t, hours)
        return state

    def _apply(self, name: str, state: NodeState, fault: Fault, gpu: GpuState | None, t: float,
               hours: float) -> None:
        if fault.name == "xid-at" and gpu is not None and fault.minute is not None and t >= fault.minute * 60:
            number = fault.arg if fault.arg is not None else 79
            state.host.xids.append(XidEvent(
                bus_id=gpu.bus_id, xid=number, uptime_s=self.uptime(name, fault.minute * 60.0),
                text=XID_TEXT.get(number, f"Xid {number} reported by the GPU").replace("{gpu}", str(gpu.index)),
                pid="pid='<unknown>', name=<unknown>"))
        elif fault.name == "ecc-growth" and gpu is not None:
            grown = int(ECC_GROWTH_PER_H * hours)
            gpu.ecc["corrected_volatile_dram"] += grown
            gpu.ecc["corrected_aggregate_dram"] += grown
        elif fault.name == "thermal-creep" and gpu is not None:
            rise = round(min(CREEP_MAX_C, CREEP_C_PER_H * hours))
            gpu.temperature_c += rise
            gpu.memory_temperature_c += rise
        elif fault.name == "nvlink-errors-growth" and gpu is not None and gpu.nvlink_active:
            link = min(NVLINK_FAULT_LINK, len(gpu.nvlink_active) - 1)
            gpu.nvlink_errors["replay"][link] += int(NVLINK_REPLAY_PER_H * hours)
        elif fault.name == "sdc-when-hot" and gpu is not None and t >= SDC_HOT_AFTER_S:
            gpu.sdc_wrong = sorted({*gpu.sdc_wrong, SDC_WRONG_KERNEL})
        elif fault.name == "mce" and t >= self.mce_at():
            uptime = self.uptime(name, self.mce_at())
            state.host.messages += [KernelMessage(uptime_s=uptime + 0.001 * k, text=text, level="err")
                                    for k, text in enumerate(MCE_LINES)]

    def mce_at(self) -> float:
        return self.duration_s / 3

    def uptime(self, name: str, t: float) -> float:
        return BOOT_AGE_S + _digest(name, "boot") % 3600 + t

    def _drift(self, node: _Node) -> dict[str, tuple[float, float]]:
        drift: dict[str, tuple[float, float]] = {}
        for fault in node.faults:
            if fault.name == "throughput-drift" and fault.target:
                position = next(i for i, g in enumerate(node.base.visible_gpus) if f"gpu{g.index}" == fault.target)
                drift[str(position)] = (DRIFT_PER_H, DRIFT_MAX)
        return drift

    def _write_extras(self, name: str, node: _Node, t: float) -> None:
        root = node.sim.root
        ue = 1 if any(f.name == "mce" for f in node.faults) and t >= self.mce_at() else 0
        files = {
            "proc/uptime": f"{self.uptime(name, t):.2f} {self.uptime(name, t) * 100:.2f}\n",
            "proc/sys/kernel/random/boot_id": boot_id(name) + "\n",
            "sys/devices/system/edac/mc/mc0/ce_count": "0\n",
            "sys/devices/system/edac/mc/mc0/ue_count": f"{ue}\n",
            "sys/devices/system/edac/mc/mc1/ce_count": "0\n",
            "sys/devices/system/edac/mc/mc1/ue_count": "0\n",
        }
        world = {"t": t, "throughput_drift": self._drift(node), "wall_clock": self.wall_clock}
        files[f"../{WORLD_FILE}"] = json.dumps(world) + "\n"
        written = node.extras or {}
        for rel, text in files.items():
            if written.get(rel) == text:
                continue
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(path, text)
        node.extras = files


def soak_fault_names() -> list[str]:
    return [name for name, spec in FAULTS.items() if spec.suite == "soak"]


def load_rack(state_dir: Path, names: Sequence[str]) -> dict[str, SimNode]:
    """The nodes a soak rendered under ``state_dir`` (to resume it)."""
    nodes = {}
    for name in names:
        node_dir = Path(state_dir) / "nodes" / name
        nodes[name] = SimNode.load(node_dir)
    return nodes


def remove_world_files(node: SimNode) -> None:
    try:
        os.unlink(node.dir / WORLD_FILE)
    except FileNotFoundError:
        pass
