"""The fabric measurement phase: run everything, before pytest judges anything.

Order (each launch bounded by ``timeout_s``; every command goes to
``OUT/fabric-commands.log``):

1. single-node nccl-tests on every node, one collective after the other;
2. nvbandwidth on every node;
3. p2pBandwidthLatencyTest on every node (NVL-03, :mod:`burnin.fabric.p2p`);
4. ``ib_write_bw`` loopback through each compute HCA of every node, from the
   paired GPU's memory and from host memory (IB-08), one HCA after the other;
5. the collector's ``nvml`` source launched again on every node: the NVLink
   states and error counters after that traffic (NVL-04,
   :mod:`burnin.fabric.nvlink_after`);
6. the single-node checks judge those results (NCCL-01/02/05, NVL-01..04,
   IB-08; the phase is handed them as ``failed_alone``): a node that failed
   one, or could not be measured, is left out of everything multi-node, with
   the reason recorded;
7. one multi-node all_reduce over the other nodes (none when fewer than two
   are left: the multi-node checks then do not apply to them, as in a run of
   one node); where the topology has a storage fabric it runs with
   ``NCCL_DEBUG=INFO``, and one short run more over the same nodes leaves
   ``NCCL_IB_HCA`` to each node's own NCCL configuration (setting
   ``nccl_evidence``): the devices NCCL opened on each node are STO-02's
   runtime evidence (:mod:`burnin.fabric.nccl_evidence`);
8. localisation rounds (:mod:`burnin.fabric.localize`) when that group fails
   (below its reference, wrong values, hang) or with ``--localize``;
9. single-rail runs (``NCCL_IB_HCA=<one HCA>``) of each named node with a
   known-good partner, one HCA after the other, to name the slow HCA;
10. the nodes localisation cleared, alone together again, to confirm them.

The results are merged into each node's facts (``fabric``, and ``nccl_runtime``
for the nodes of an evidence run) and written to ``OUT/fabric.json``.

The phase declares what it will start when it holds its nodes (:meth:`Phase.plan`:
steps 1-4 over every node, the multi-node run of step 7, what follows named in
one line). Under ``--dry-run`` the launcher is a
:class:`~burnin.launch.dryrun.DryRunLauncher`: it prints that plan and holds
nothing, so every node's ``fabric`` section says why (the dry-run reason) and
every check of the suite is incomplete, as for any launcher that could not
hold the nodes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from burnin.errors import UsageError
from burnin.evaluate.verdict import Status, Verdict
from burnin.fabric import commands, judge, nccl_evidence, nvlink_after
from burnin.fabric.localize import Job, Localizer
from burnin.fabric.measure import NcclMeasurement, gdr_measurement, nccl_measurement, nvb_measurement
from burnin.fabric.p2p import TOOL as P2P_TOOL
from burnin.fabric.p2p import p2p_measurement
from burnin.fabric.results import JobRecord, Localization, PhaseResult, node_documents
from burnin.fabric.settings import FabricSettings, load_settings, size_bytes
from burnin.facts import Facts
from burnin.launch.base import ALLOC_WAIT_S, SLACK_S, Each, Hold, JobSpec, Launcher, Note, PlanItem, fan_out
from burnin.launch.gather import collector_args, facts_from_result
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

MEASURES = ("fabric", nccl_evidence.SECTION)
"""The facts sections this phase fills on each node (:attr:`burnin.launch.base.Hold.measures`)."""
FABRIC_FILE = "fabric.json"
LOG_FILE = "fabric-commands.log"
FailedAlone = Callable[[Facts, Topology], list[Verdict]]
"""The single-node checks a node did not pass on its own results (empty: it passed them all)."""


@dataclass(frozen=True, slots=True)
class FabricOptions:
    """What ``burnin run`` passes in: the site config file and ``--localize``."""

    config: Path | None = None
    localize: bool = False


def run_fabric_phase(launcher: Launcher, facts: dict[str, Facts], *, topology: Topology, out_dir: Path,
                     options: FabricOptions, failed_alone: FailedAlone) -> PhaseResult:
    """Measure through ``launcher``, merge a ``fabric`` section into each reachable node's facts, write
    fabric.json; the launcher is closed at the end. Its preset says which built-in settings fit the nodes."""
    try:
        reachable = [node for node, node_facts in facts.items() if not node_facts.unreachable]
        settings = load_settings(options.config, simulated=launcher.preset == "simulated",
                                 overrides={"localize": "always"} if options.localize else None)
        refuse_launcher(settings, launcher)
        hosts = {node: nccl_evidence.nccl_host(node, facts[node].data.get("hostname")) for node in reachable}
        result = Phase(launcher, topology, settings, hosts=hosts, facts=facts, failed_alone=failed_alone).run(reachable)
    finally:
        launcher.close()
    for node, doc in node_documents(result).items():
        facts[node].data["fabric"] = doc
    for node, runs in result.nccl_runtime.items():
        facts[node].data[nccl_evidence.SECTION] = {"runs": runs}
    (out_dir / FABRIC_FILE).write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    return result


def refuse_launcher(settings: FabricSettings, launcher: Launcher) -> None:
    """A ``launcher:`` setting the dispatcher cannot honour is a usage error (srun: under Slurm only; mpirun:
    needs a transport to the nodes, which Slurm's steps are not)."""
    if settings.launcher == "srun" and launcher.form != "srun":
        raise UsageError("fabric setting launcher: srun needs --via slurm")
    if settings.launcher == "mpirun" and launcher.form == "srun":
        raise UsageError(f"fabric setting launcher: mpirun needs a transport to the nodes, which {launcher.name} "
                         "dispatch does not offer (use launcher: srun or auto)")


class Phase:
    def __init__(self, launcher: Launcher, topology: Topology, settings: FabricSettings, *,
                 failed_alone: FailedAlone, hosts: Mapping[str, str] | None = None,
                 facts: Mapping[str, Facts] | None = None) -> None:
        """``failed_alone``: the single-node checks a node did not pass (it is then left out of everything
        multi-node); ``hosts``: node -> the host name NCCL prints for it (default: the node's name up to its first
        dot); ``facts``: what was gathered before the phase (NVL-04 compares NVLink with it)."""
        self.launcher = launcher
        self.failed_alone = failed_alone
        self.facts = dict(facts or {})
        self.topology = topology
        self.settings = settings
        self.timeout = settings.timeout_s
        self.judge_min = size_bytes(settings.judge_min_bytes)
        self.hosts = dict(hosts or {})
        self.srun = commands.srun_options(settings)
        wanted = settings.nccl_evidence if topology.storage is not None else "off"
        self.evidence = {"full": (commands.GROUP_EVIDENCE, commands.NODE_CONFIG_EVIDENCE),
                         "group": (commands.GROUP_EVIDENCE,), "off": ()}[wanted]

    def hold(self) -> Hold:
        """Whole nodes for single-node runs per collective, nvbandwidth, the group, localisation and rail rounds."""
        return Hold("fabric", "the fabric phase", time_limit_s=40 * (self.timeout + SLACK_S),
                    wait_s=min(ALLOC_WAIT_S, self.timeout), measures=MEASURES)

    def run(self, nodes: list[str]) -> PhaseResult:
        result = PhaseResult(nodes, self.settings, self.launcher.name,
                             group_floor_gbps=judge.floor(self.topology.ref(judge.MULTI_REF)))
        if not nodes:
            return result
        result.unavailable = self.launcher.hold(nodes, self.hold(), self.plan(nodes))
        if result.unavailable:
            return result
        self._single(result, nodes)
        self._nvbandwidth(result, nodes)
        self._p2p(result, nodes)
        self._ib_write_bw(result, nodes)
        self._nvlink_after(result, nodes)
        if self.settings.multi_node and len(nodes) >= 2:
            self._leave_out_failed(result, nodes)
            self._multi(result, nodes)
        return result

    def plan(self, nodes: list[str]) -> list[PlanItem]:
        """Every launch of a run whose nodes all pass alone, in order; what depends on results, in words."""
        each = tuple(nodes)
        items: list[PlanItem] = [
            Note(f"fabric: single-node runs on {len(nodes)} nodes, each node at once, one command after the other")]
        items += [Each(each, tuple(command), self.timeout + SLACK_S, srun=self.srun)
                  for command in self._single_node_commands()]
        items.append(Note("fabric: NVL-04 gathers the collector's nvml source again on every node (read-only)"))
        if self.settings.multi_node and len(nodes) >= 2:
            items.append(Note("fabric: the multi-node run over the nodes that passed every single-node check "
                              "(here: all)"))
            items += [self._group_job(nodes, evidence) for evidence in self.evidence] or [self._group_job(nodes)]
            if self.settings.localize != "never":
                when = "then (--localize)" if self.settings.localize == "always" else "then, if that run falls short"
                items.append(Note(f"fabric: {when}: pairwise localisation rounds and single-rail runs, whose pairs "
                                  "depend on the results"))
        return items

    def _single_node_commands(self) -> list[list[str]]:
        """Steps 1-4, in order."""
        out = [commands.single_node_command(self.topology, self.settings, c) for c in self.settings.collectives]
        out += [commands.nvbandwidth_command(self.settings), commands.p2p_bandwidth_command(self.settings)]
        return out + [commands.ib_write_bw_command(self.settings, hca, gpu, port=port)
                      for hca, _kind, gpu, port in self._gdr_runs()]

    # -- single node ----------------------------------------------------------------------

    def _single(self, result: PhaseResult, nodes: list[str]) -> None:
        for collective in self.settings.collectives:
            command = commands.single_node_command(self.topology, self.settings, collective)
            runs = self._per_node(nodes, command)
            for node, run in runs.items():
                result.single.setdefault(node, {})[collective] = nccl_measurement(
                    run, collective, (node,), timeout_s=self.timeout, judge_min_bytes=self.judge_min,
                    nvls=self.settings.nvls)

    def _nvbandwidth(self, result: PhaseResult, nodes: list[str]) -> None:
        runs = self._per_node(nodes, commands.nvbandwidth_command(self.settings))
        for node, run in runs.items():
            result.nvb[node] = nvb_measurement(run, self.settings.nvbandwidth_testcases, timeout_s=self.timeout)

    def _p2p(self, result: PhaseResult, nodes: list[str]) -> None:
        """NVL-03: the CUDA sample's connectivity, bandwidth and latency matrices on every node."""
        runs = self._per_node(nodes, commands.p2p_bandwidth_command(self.settings))
        for node, run in runs.items():
            result.p2p[node] = p2p_measurement(run, timeout_s=self.timeout)

    def _traffic(self) -> list[str]:
        """The single-node tools that ran before NVL-04's second look, in their order."""
        tools = [f"{c}_perf" for c in self.settings.collectives] + ["nvbandwidth", P2P_TOOL]
        return tools + (["ib_write_bw"] if self.topology.compute_hcas else [])

    def _nvlink_after(self, result: PhaseResult, nodes: list[str]) -> None:
        """NVL-04: the collector's NVML source launched again on every node, after the single-node traffic."""
        after = self._traffic()
        started = time.perf_counter()
        timeout = self.settings.nvlink_recollect_timeout_s
        runs = self.launcher.collect(nodes, collector_args(nvlink_after.SOURCES, timeout), timeout_s=timeout)
        gathered = {node: facts_from_result(run) for node, run in runs.items()}
        for node in nodes:
            result.nvlink_after[node] = nvlink_after.snapshot(gathered[node], after)
        read = sum(1 for facts in gathered.values() if not facts.unreachable)
        self.launcher.note(f"NVL-04: NVML gathered again on {read} of {len(nodes)} nodes after "
                           f"{', '.join(after)} in {time.perf_counter() - started:.2f} s")

    def _gdr_runs(self) -> list[tuple[str, str, int | None, int]]:
        """IB-08's runs in order: (HCA, memory kind, paired GPU or None, port), GPU memory before host memory."""
        paired = {d.hca: d.index for d in self.topology.gpus.devices if d.hca}
        runs: list[tuple[str, str, int | None, int]] = []
        for index, hca in enumerate(self.topology.compute_hcas):
            for kind in commands.MEMORY_KINDS:
                gpu = paired.get(hca.name) if kind == "cuda" else None
                if kind == "cuda" and gpu is None:
                    continue  # the topology pairs no GPU with this HCA: host memory only
                runs.append((hca.name, kind, gpu, commands.ib_write_bw_port(self.settings, index, kind)))
        return runs

    def _ib_write_bw(self, result: PhaseResult, nodes: list[str]) -> None:
        """IB-08: each compute HCA in loopback, from its paired GPU's memory, then from host memory."""
        for hca, kind, gpu, port in self._gdr_runs():
            runs = self._per_node(nodes, commands.ib_write_bw_command(self.settings, hca, gpu, port=port))
            for node, run in runs.items():
                result.gdr.setdefault(node, {}).setdefault(hca, {})[kind] = gdr_measurement(
                    run, hca, gpu, timeout_s=self.timeout)

    def _per_node(self, nodes: list[str], command: list[str]) -> dict[str, CommandResult]:
        return self.launcher.everywhere(nodes, command, timeout_s=self.timeout + SLACK_S, srun=self.srun)

    def _leave_out_failed(self, result: PhaseResult, nodes: list[str]) -> None:
        """Nodes that failed a single-node check, or could not be measured there, stay out of multi-node runs."""
        documents = node_documents(result)
        for node in nodes:
            before = self.facts.get(node)
            data = {**(before.data if before is not None else {}), "fabric": documents[node]}
            bad = self.failed_alone(Facts(node, data), self.topology)
            if bad:
                ids = ", ".join(f"{v.check_id} {'failed' if v.status is Status.FAIL else v.status.value}"
                                for v in bad)
                result.excluded_by[node] = ids
                result.excluded_why[node] = [v.reason for v in bad]
                result.excluded[node] = f"left out of multi-node runs and localisation: {ids} on this node"
                self.launcher.note(f"{node} {result.excluded[node]}")

    # -- multi-node -----------------------------------------------------------------------

    def _group_job(self, nodes: Sequence[str], evidence: commands.NcclEvidence | None = None, *,
                   ib_hca: str | None = None) -> JobSpec:
        """The multi-node all_reduce over ``nodes`` (an evidence run of STO-02 stops after its own timeout)."""
        timeout = self.timeout if evidence is None or evidence.name == "group" else min(
            self.timeout, self.settings.nccl_evidence_timeout_s)
        return commands.group_job(nodes, self.topology, self.settings, "all_reduce", ib_hca=ib_hca,
                                  evidence=evidence, timeout_s=timeout)

    def _job(self, nodes: Sequence[str], *, ib_hca: str | None = None) -> NcclMeasurement:
        run = self.launcher.job(self._group_job(nodes, ib_hca=ib_hca))
        return self._measure(run, nodes, ib_hca)

    def _measure(self, run: CommandResult, nodes: Sequence[str], ib_hca: str | None) -> NcclMeasurement:
        return nccl_measurement(run, "all_reduce", nodes, timeout_s=self.timeout, judge_min_bytes=self.judge_min,
                                ib_hca=ib_hca, nvls=self.settings.nvls)

    def _group(self, result: PhaseResult, members: Sequence[str]) -> NcclMeasurement:
        """The multi-node all_reduce, with each evidence run (STO-02) recorded for its nodes."""
        group: NcclMeasurement | None = None
        for evidence in self.evidence:
            run = self.launcher.job(self._group_job(members, evidence))
            if evidence.name == "group":
                group = self._measure(run, members, None)
            set_to = commands.nccl_env(self.topology, self.settings, evidence=evidence).get("NCCL_IB_HCA")
            for node, record in nccl_evidence.node_records(evidence, run, members, self.hosts,
                                                           ib_hca=set_to).items():
                result.nccl_runtime.setdefault(node, []).append(record)
        return group if group is not None else self._job(members)

    def _jobs(self, groups: Sequence[Sequence[str]], *, ib_hca: str | None = None) -> list[NcclMeasurement]:
        """Disjoint jobs side by side."""
        return fan_out(list(groups), lambda group: self._job(group, ib_hca=ib_hca), workers=32)

    def _multi(self, result: PhaseResult, nodes: list[str]) -> None:
        members = [n for n in nodes if n not in result.excluded]
        if len(members) < 2:
            left_out = "; ".join(f"{n} {result.excluded_by.get(n, 'left out')}" for n in nodes
                                 if n in result.excluded)
            for node in members:
                result.alone[node] = f"no partner: every other node was left out ({left_out})"
            return
        result.group = self._group(result, members)
        wanted = self.settings.localize == "always" or (self.settings.localize == "auto" and not result.group_passed)
        if not wanted:
            return
        why = "--localize" if result.group_passed else f"the group failed: {judge.describe(result.group)}"
        loc = result.localization = self._localize(members, why)
        if not result.group_passed and (loc.named or loc.unresolved):
            cleared = [n for n in members if n in loc.cleared]
            if len(cleared) >= 2:
                result.regroup = self._job(cleared)

    def _localize(self, members: list[str], why: str) -> Localization:
        planner = Localizer(members, seed=self.settings.seed, confirm=self.settings.confirm)
        loc = Localization(floor_gbps=0.0, median_gbps=None, reason=why)
        minimum: float | None = None
        while True:
            started = time.perf_counter()
            tests = planner.next_round()
            loc.planning_ms += (time.perf_counter() - started) * 1000
            if not tests:
                break
            runs = self._jobs([t.nodes for t in tests])
            if minimum is None:
                loc.median_gbps = judge.median(m.busbw_gbps for m in runs
                                               if m.ok and not m.corrupt and m.busbw_gbps is not None)
                minimum = judge.pair_floor(self.topology, loc.median_gbps)
                loc.floor_gbps = round(minimum, 3)
            outcomes = [judge.passed(m, minimum) for m in runs]
            planner.record(outcomes)
            loc.tests += [_record(planner.rounds, t, ok, m) for t, ok, m in zip(tests, outcomes, runs, strict=True)]
        loc.rounds = planner.rounds
        loc.named = sorted(planner.named)
        loc.unresolved = sorted(planner.unresolved)
        loc.cleared = sorted(planner.good)
        if loc.named and self.settings.rail_isolation:
            self._rails(loc, sorted(planner.good))
        return loc

    def _rails(self, loc: Localization, good: list[str]) -> None:
        """Each named node with a known-good partner, one compute HCA at a time."""
        if not good:
            return
        partners = {node: good[i % len(good)] for i, node in enumerate(loc.named)}
        loc.rail_partner = partners
        # a partner serves one named node per wave; waves run one after the other
        waves: list[list[str]] = []
        for i, node in enumerate(loc.named):
            if i % len(good) == 0:
                waves.append([])
            waves[-1].append(node)
        for hca in self.topology.compute_hcas:
            for wave in waves:
                runs = self._jobs([(node, partners[node]) for node in wave], ib_hca=commands.single_hca(hca.name))
                for node, run in zip(wave, runs, strict=True):
                    loc.rails.setdefault(node, {})[hca.name] = run
        for node, rails in loc.rails.items():
            loc.slow[node] = judge.slow_rails(rails, self.topology)


def _record(round_no: int, test: Job, ok: bool, measurement: NcclMeasurement) -> JobRecord:
    return JobRecord(round_no, test.kind, test.nodes, test.suspect, ok, measurement)

