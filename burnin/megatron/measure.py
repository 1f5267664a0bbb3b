"""The Megatron measurement, given a way to run launches: probe, single-node runs, fleet, multi-node runs.

Nothing here starts a process: :func:`measure` hands each batch of launches
(burnin.megatron.commands) to ``run_all``, which runs them at the same time and
returns what every node printed. :func:`launcher_runner` builds ``run_all`` over
the phase's :class:`~burnin.launch.base.Launcher`: a torchrun run is a command per
node started together, an srun run one job.

Order (check-catalog MEG-01, PIN-01): the placement probe on every node, the
single-node run on every node, the run's median, then one multi-node run per group
with the group's nodes that passed MEG-01..04 alone (a node failing alone would make
the group's result unattributable; it is recorded as left out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from burnin.facts import Facts
from burnin.launch.base import Launcher, fan_out
from burnin.megatron import judge
from burnin.megatron.alone import PassedAlone
from burnin.megatron.commands import Form, Launch, plan, probe_launch, training_launch
from burnin.megatron.config import MegatronSettings
from burnin.megatron.record import Outcome, multi_section, placement_record, rank_log_files, run_record
from burnin.topology.model import Topology

RunAll = Callable[[Sequence[Launch]], list[Mapping[str, Outcome]]]


@dataclass
class Measurement:
    """Per node its ``megatron`` and ``placement`` sections; per run its rank logs (``relative path -> text``)."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)

    def facts_for(self, node: str) -> dict[str, Any]:
        """What to merge into the node's facts (``{"megatron": ..., "placement": ...}``)."""
        return self.sections.get(node, {})


def log_dir(launch: Launch) -> str:
    """``megatron/single/sim01``, ``megatron/multi/sim01+sim02``, ``megatron/probe/sim01``."""
    return f"megatron/{launch.kind}/{'+'.join(launch.nodes)}"


def _keep_logs(out: Measurement, launch: Launch, results: Mapping[str, Outcome]) -> str:
    where = log_dir(launch)
    for name, text in rank_log_files(launch, results).items():
        out.logs[f"{where}/{name}"] = text
    return where


def measure(settings: MegatronSettings, topology: Topology, nodes: Sequence[str], run_all: RunAll, *,
            form: Form, passed_alone: PassedAlone, groups: Sequence[Sequence[str]] | None = None) -> Measurement:
    """Run everything and return each node's sections (docs/megatron.md shows their shape); a node joins a
    multi-node run only when ``passed_alone`` says it passed on its own run."""
    out = Measurement({node: {} for node in nodes})
    probes = [probe_launch(settings, topology, node, form=form) for node in nodes]
    for launch, results in zip(probes, run_all(probes), strict=True):
        _keep_logs(out, launch, results)
        out.sections[launch.nodes[0]]["placement"] = placement_record(launch, results)
    singles = [training_launch(settings, topology, [node], form=form) for node in nodes]
    megatron: dict[str, dict[str, Any]] = {}
    for launch, results in zip(singles, run_all(singles), strict=True):
        where = _keep_logs(out, launch, results)
        megatron[launch.nodes[0]] = {"single": run_record(launch, results, settings, log_dir=where)}
    judge.attach_fleet(megatron)
    multis: list[Launch] = []
    for group in (groups if groups is not None else [list(nodes)]):
        passed: list[str] = []
        for node in group:
            ok, why = passed_alone(Facts(node, {"megatron": megatron[node]}), topology)
            if ok:
                passed.append(node)
            else:
                megatron[node]["multi"] = multi_section(group, None, excluded=f"failed on its own: {why}")
        if not settings.multi_node_run or len(group) < 2:
            reason = "multi_node_run is off in the megatron config" if not settings.multi_node_run \
                else "a group of one node"
            for node in passed:
                megatron[node]["multi"] = multi_section(group, None, applicable=False, reason=reason)
            continue
        if len(passed) < 2:  # the run applies, but no partner passed alone: unmeasured, never a pass
            failed = ",".join(n for n in group if n not in passed)
            for node in passed:
                megatron[node]["multi"] = multi_section(
                    group, None, unavailable=f"no partner: every other node of the group failed on its own ({failed})")
            continue
        multis.append(training_launch(settings, topology, passed, form=form))
    for launch, results in zip(multis, run_all(multis) if multis else [], strict=True):
        where = _keep_logs(out, launch, results)
        record = run_record(launch, results, settings, log_dir=where)
        for node in launch.nodes:
            megatron[node]["multi"] = multi_section(launch.nodes, record)
        judge.attach_group(megatron, launch.nodes)  # judged against its members together (MEG-04)
    for node, section in megatron.items():
        section["settings"] = {"launcher": form, "binding": settings.binding_for(form),
                               "train_iters": settings.train_iters, "model": settings.model.model_dump(),
                               "peak_tflops_per_gpu": _peak(topology)}
        out.sections[node]["megatron"] = section
    return out


def _peak(topology: Topology) -> float | None:
    """The GPU's dense BF16 peak the topology names (MFU's denominator, kept for the metrics); None without it."""
    from burnin.megatron.judge import PEAK_REF

    ref = topology.references.get(PEAK_REF)
    return float(ref.value) if ref is not None else None


def unavailable(nodes: Sequence[str], reason: str) -> Measurement:
    """Sections saying why nothing was measured (no allocation, no launcher): every MEG/PIN check incomplete."""
    return Measurement({node: {"megatron": {"unavailable": reason}, "placement": {"unavailable": reason}}
                        for node in nodes})


def launcher_runner(launcher: Launcher) -> RunAll:
    """``run_all`` over ``launcher``: every launch of a batch at once (a multi-node torchrun run needs all its
    nodes started together), each bounded by its launch's timeout and slack."""

    def one(launch: Launch) -> Mapping[str, Outcome]:
        if launch.job is not None:
            return {launch.nodes[0]: launcher.job(launch.job)}
        return launcher.per_node(launch.commands, job=True)

    def run_all(launches: Sequence[Launch]) -> list[Mapping[str, Outcome]]:
        return fan_out(list(launches), one, workers=len(launches))

    return run_all


__all__ = ["Measurement", "RunAll", "launcher_runner", "log_dir", "measure", "plan", "unavailable"]
