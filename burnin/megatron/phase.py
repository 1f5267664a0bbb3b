"""The Megatron phase: the placement probe and the training runs, launched the way the nodes are reached.

Order (:func:`burnin.megatron.measure.measure`): the placement probe on every
node, the single-node run on every node, then one multi-node run of the nodes
that passed alone. The phase holds its nodes through its launcher first (through
Slurm one exclusive allocation of the nodes, or the allocation burnin runs in;
burnin-drained nodes are rechecked as the collector step does), declaring every
launch it will make; then every run is an ``srun`` step started where burnin
runs, or each node's ``torchrun`` command, all nodes of a run at once. Every
launch is bounded by its timeout.

Each node's facts get a ``megatron`` and a ``placement`` section; every rank's
log goes under ``OUT/megatron/``; every command to ``OUT/megatron-commands.log``.
With ``--dry-run`` the launcher prints the launches and holds nothing (every
MEG/PIN check is then incomplete, saying so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.launch.base import ALLOC_WAIT_S, Hold, Launcher, PlanItem, slack
from burnin.megatron.alone import PassedAlone
from burnin.megatron.commands import Form, plan
from burnin.megatron.config import MegatronSettings, load_megatron_settings
from burnin.megatron.measure import Measurement, launcher_runner, measure, unavailable
from burnin.topology.model import Topology

LOG_FILE = "megatron-commands.log"


@dataclass(frozen=True, slots=True)
class MegatronOptions:
    """What ``burnin run`` passes in: the site config file (``--megatron-config``)."""

    config: Path | None = None


def run_megatron_phase(launcher: Launcher, facts: dict[str, Facts], *, topology: Topology, out_dir: Path,
                       options: MegatronOptions, passed_alone: PassedAlone) -> Measurement:
    """Measure through ``launcher``, merge each node's sections, write the logs; the launcher is closed at the
    end. A node joins the multi-node run only when ``passed_alone`` says it passed on its own."""
    nodes = [node for node, node_facts in facts.items() if not node_facts.unreachable]
    try:
        settings = load_megatron_settings(options.config, simulated=launcher.preset == "simulated")
        form = settings.launcher_for(slurm=launcher.form == "srun")
        refuse_launcher(settings, form, launcher)
        result = Measurement()
        if nodes:
            launches: list[PlanItem] = [item for launch in plan(settings, topology, nodes, form=form)
                                        for item in launch.plan()]
            failure = launcher.hold(nodes, hold(settings), launches)
            result = unavailable(nodes, failure) if failure else measure(
                settings, topology, nodes, launcher_runner(launcher), form=form, passed_alone=passed_alone)
    finally:
        launcher.close()
    for node in nodes:
        facts[node].data.update(result.facts_for(node))
    write_logs(out_dir, result.logs)
    return result


def refuse_launcher(settings: MegatronSettings, form: Form, launcher: Launcher) -> None:
    """A launch form the dispatcher cannot start is a usage error, before any node is touched."""
    if form == "srun" and launcher.form != "srun":
        raise UsageError("megatron setting launcher: srun needs --via slurm")
    if form == "torchrun" and launcher.form == "srun":
        raise UsageError(f"megatron setting launcher: torchrun needs a transport to the nodes, which "
                         f"{launcher.name} dispatch does not offer (use launcher: srun)")
    if form == "torchrun" and settings.container is not None and settings.container.runner == "pyxis":
        raise UsageError("megatron setting container.runner: pyxis runs a container only through srun "
                         "(--via slurm); with torchrun use runner: docker or apptainer")


def hold(settings: MegatronSettings) -> Hold:
    """Whole nodes for the probe, the single-node runs and the multi-node run one after the other."""
    runs = 2 if settings.multi_node_run else 1
    limit = (settings.probe_timeout_s + slack(settings.probe_timeout_s)
             + runs * (settings.timeout_s + slack(settings.timeout_s)) + 120.0)
    return Hold("megatron", "the megatron phase", time_limit_s=limit, wait_s=min(ALLOC_WAIT_S, settings.timeout_s),
                measures=("megatron", "placement"))  # burnin.megatron.measure.Measurement's sections


def write_logs(out_dir: Path, logs: Mapping[str, str]) -> None:
    """Every rank's log (``relative path -> text``) under ``out_dir``; a path leaving it is skipped."""
    root = out_dir.resolve()
    for relative, text in logs.items():
        path = (out_dir / relative).resolve()
        if not path.is_relative_to(root):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
