"""The fabric measurement phase: run everything, before pytest judges anything.

Order (each launch bounded by ``timeout_s``; every command goes to
``OUT/fabric-commands.log``):

1. single-node nccl-tests on every node, one collective after the other;
2. nvbandwidth on every node;
3. p2pBandwidthLatencyTest on every node (NVL-03, :mod:`burnin.fabric.p2p`);
4. ``ib_write_bw`` loopback through each compute HCA of every node, from the
   paired GPU's memory and from host memory (IB-08), one HCA after the other;
5. the collector's ``nvml`` source gathered again through the dispatcher: the
   NVLink states and error counters after that traffic (NVL-04,
   :mod:`burnin.fabric.nvlink_after`; the launcher gives an allocation of its
   own back meanwhile, and takes the nodes again for what follows);
6. the single-node checks judge those results (NCCL-01/02/05, NVL-01..04,
   IB-08): a node that failed one, or could not be measured, is left out of
   everything multi-node, with the reason recorded;
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

With ``--dry-run`` (:meth:`Phase.plan`) the launcher is a
:class:`~burnin.fabric.launch.DryRunLauncher`: steps 1-4 and the multi-node
run of step 7 are printed as they would start, over every node, and nothing
is launched or gathered again; what follows them depends on their results and
is named in one line. Every node's ``fabric`` section says
:data:`~burnin.phases.DRY_RUN_REASON`, so every check of the suite is incomplete.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from burnin.dispatch.base import launcher_of
from burnin.errors import UsageError
from burnin.fabric import commands, judge, nccl_evidence, nvlink_after
from burnin.fabric.launch import DryRunLauncher, Launcher, OnCommand, SlurmLauncher, TransportLauncher
from burnin.fabric.localize import Job, Localizer
from burnin.fabric.measure import NcclMeasurement, gdr_measurement, nccl_measurement, nvb_measurement
from burnin.fabric.p2p import TOOL as P2P_TOOL
from burnin.fabric.p2p import p2p_measurement
from burnin.fabric.results import JobRecord, Localization, PhaseResult, node_documents
from burnin.fabric.settings import FabricSettings, load_settings, size_bytes
from burnin.facts import Facts
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

FABRIC_FILE = "fabric.json"
LOG_FILE = "fabric-commands.log"
Recollect = Callable[[Sequence[str]], Mapping[str, Facts]]
"""Gather the collector's NVML source again on these nodes (the dispatcher's ``gather``)."""


@dataclass(frozen=True, slots=True)
class FabricOptions:
    """What ``burnin run`` passes in: the site config file and ``--localize``."""

    config: Path | None = None
    localize: bool = False


def run_fabric_phase(dispatcher: object, facts: dict[str, Facts], *, topology: Topology, out_dir: Path,
                     options: FabricOptions, dry_run: bool = False,
                     say: Callable[[str], None] = print) -> PhaseResult:
    """Measure (or, with ``dry_run``, print every command), merge a ``fabric`` section into each reachable
    node's facts, write fabric.json.

    The dispatcher's job launcher (:func:`burnin.dispatch.base.launcher_of`) says how jobs
    start and which built-in settings fit the nodes (simulated or production).
    """
    reachable = [node for node, node_facts in facts.items() if not node_facts.unreachable]
    jobs = launcher_of(dispatcher, facts)
    settings = load_settings(options.config, simulated=jobs.preset == "simulated",
                             overrides={"localize": "always"} if options.localize else None)
    log = _CommandLog(out_dir / LOG_FILE)
    launcher = launcher_for(dispatcher, topology, settings, on_command=log.command, facts=facts)
    hosts = {node: nccl_evidence.nccl_host(node, facts[node].data.get("hostname")) for node in reachable}
    if dry_run:  # the one seam: the phase asks a launcher that prints instead of starting
        from burnin.phases import DRY_RUN_REASON

        dry = DryRunLauncher(launcher, say, DRY_RUN_REASON)
        result = Phase(dry, topology, settings, log, hosts=hosts, facts=facts).plan(reachable, say=say)
    else:
        try:
            result = Phase(launcher, topology, settings, log, hosts=hosts, facts=facts,
                           recollect=recollector(dispatcher, settings)).run(reachable)
        finally:
            launcher.close()
    for node, doc in node_documents(result).items():
        facts[node].data["fabric"] = doc
    for node, runs in result.nccl_runtime.items():
        facts[node].data[nccl_evidence.SECTION] = {"runs": runs}
    (out_dir / FABRIC_FILE).write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    return result


def recollector(dispatcher: object, settings: FabricSettings) -> Recollect | None:
    """NVL-04's second look: the dispatcher's ``gather`` of the collector's ``nvml`` source (None: it has none)."""
    gather = getattr(dispatcher, "gather", None)
    if not callable(gather):
        return None

    def recollect(nodes: Sequence[str]) -> Mapping[str, Facts]:
        gathered: Mapping[str, Facts] = gather(sources=nvlink_after.SOURCES,
                                               timeout=settings.nvlink_recollect_timeout_s)
        return {node: gathered[node] for node in nodes if node in gathered}

    return recollect


def launcher_for(dispatcher: object, topology: Topology, settings: FabricSettings, *,
                 on_command: OnCommand | None = None,
                 facts: Mapping[str, Facts] | None = None) -> TransportLauncher | SlurmLauncher:
    """srun when the dispatcher reaches its nodes through Slurm; otherwise its transport (mpirun, or a
    job that runs as one process when the dispatcher's jobs may, as on a simulated rack)."""
    jobs = launcher_of(dispatcher, facts or {})
    if jobs.slurm is not None and settings.launcher in ("auto", "srun"):
        return SlurmLauncher.over(jobs.slurm, topology, settings, on_command=on_command)
    if settings.launcher == "srun":
        raise UsageError("fabric setting launcher: srun needs --via slurm")
    if jobs.transport is None:
        raise UsageError(f"{type(dispatcher).__name__} offers no transport for the fabric phase")
    if jobs.form == "local" and settings.launcher == "auto":
        return TransportLauncher(jobs.transport, topology, settings, "sim", on_command=on_command,
                                 job_env=jobs.job_env)
    return TransportLauncher(jobs.transport, topology, settings, "mpirun", on_command=on_command)


class _CommandLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def command(self, argv: Sequence[str], result: CommandResult) -> None:
        status = "timed out" if result.timed_out else result.error or f"exit {result.exit_status}"
        self.line(f"$ {' '.join(argv)}\n  -> {status} in {result.duration_s:.2f} s")

    def line(self, text: str) -> None:
        with self._lock:
            try:
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            except OSError:
                pass  # the log is an aid; the run goes on


class Phase:
    def __init__(self, launcher: Launcher, topology: Topology, settings: FabricSettings, log: _CommandLog, *,
                 hosts: Mapping[str, str] | None = None, facts: Mapping[str, Facts] | None = None,
                 recollect: Recollect | None = None) -> None:
        """``hosts``: node -> the host name NCCL prints for it (default: the node's name up to its first dot);
        ``facts``: what was gathered before the phase (NVL-04 compares NVLink with it); ``recollect``: how to
        gather NVML again after the single-node traffic (None: NVL-04 has no second look and is incomplete)."""
        self.launcher = launcher
        self.facts = dict(facts or {})
        self.recollect = recollect
        self.topology = topology
        self.settings = settings
        self.log = log
        self.timeout = settings.timeout_s
        self.judge_min = size_bytes(settings.judge_min_bytes)
        self.hosts = dict(hosts or {})
        wanted = settings.nccl_evidence if topology.storage is not None else "off"
        self.evidence = {"full": (commands.GROUP_EVIDENCE, commands.NODE_CONFIG_EVIDENCE),
                         "group": (commands.GROUP_EVIDENCE,), "off": ()}[wanted]

    def run(self, nodes: list[str]) -> PhaseResult:
        result = PhaseResult(nodes, self.settings, self.launcher.name,
                             group_floor_gbps=judge.floor(self.topology.ref(judge.MULTI_REF)))
        if not nodes:
            return result
        result.unavailable = self.launcher.open(nodes)
        if result.unavailable:
            self.log.line(f"# {result.unavailable}")
            return result
        self._single(result, nodes)
        self._nvbandwidth(result, nodes)
        self._p2p(result, nodes)
        self._ib_write_bw(result, nodes)
        multi = self.settings.multi_node and len(nodes) >= 2
        self._nvlink_after(result, nodes, take_back=multi)
        if multi:
            self._leave_out_failed(result, nodes)
            if result.multi_unavailable:
                self.log.line(f"# no multi-node run: {result.multi_unavailable}")
            else:
                self._multi(result, nodes)
        return result

    def plan(self, nodes: list[str], *, say: Callable[[str], None]) -> PhaseResult:
        """``--dry-run`` (the launcher prints instead of starting): every launch of a run whose nodes all pass
        alone, in order; nothing is measured, so the result says why for every node."""
        from burnin.phases import DRY_RUN_REASON

        result = PhaseResult(nodes, self.settings, self.launcher.name, unavailable=DRY_RUN_REASON,
                             group_floor_gbps=judge.floor(self.topology.ref(judge.MULTI_REF)))
        if not nodes:
            return result
        shown = PhaseResult(nodes, self.settings, self.launcher.name)  # what the printed launches "measured"
        self.launcher.open(nodes)
        say(f"# fabric: single-node runs on {len(nodes)} nodes, each node at once, one command after the other")
        self._single(shown, nodes)
        self._nvbandwidth(shown, nodes)
        self._p2p(shown, nodes)
        self._ib_write_bw(shown, nodes)
        say("# fabric: NVL-04 gathers the collector's nvml source again on every node (read-only)")
        if self.settings.multi_node and len(nodes) >= 2:
            say("# fabric: the multi-node run over the nodes that passed every single-node check (here: all)")
            self._group(shown, nodes)
            if self.settings.localize != "never":
                when = "then (--localize)" if self.settings.localize == "always" else "then, if that run falls short"
                say(f"# fabric: {when}: pairwise localisation rounds and single-rail runs, whose pairs depend "
                    "on the results")
        return result

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

    def _nvlink_after(self, result: PhaseResult, nodes: list[str], *, take_back: bool) -> None:
        """NVL-04: NVML gathered again through the dispatcher; ``take_back``: multi-node runs follow."""
        after = self._traffic()
        if self.recollect is None:
            for node in nodes:
                result.nvlink_after[node] = nvlink_after.unavailable(
                    "the fabric phase had no way to gather NVML again (no dispatcher gather)", after)
            return
        why = ""
        started = time.perf_counter()
        self.launcher.pause()
        try:
            gathered = self.recollect(nodes)
        except Exception as exc:  # noqa: BLE001 - a failed second look makes NVL-04 incomplete, not the run fail
            gathered, why = {}, f"gathering NVML again failed: {type(exc).__name__}: {exc}"
        # not on an interrupt: the nodes are not taken again, the phase's close() cleans up
        failure = self.launcher.resume(nodes) if take_back else None
        for node in nodes:
            facts = gathered.get(node)
            result.nvlink_after[node] = (nvlink_after.snapshot(facts, after) if facts is not None else
                                         nvlink_after.unavailable(why or f"{node} was not gathered again", after))
        read = sum(1 for facts in gathered.values() if not facts.unreachable)
        self.log.line(f"# NVL-04: NVML gathered again on {read} of {len(nodes)} nodes after "
                      f"{', '.join(after)} in {time.perf_counter() - started:.2f} s{'; ' + why if why else ''}")
        if failure:
            result.multi_unavailable = f"the nodes could not be taken back after NVML was gathered again: {failure}"

    def _ib_write_bw(self, result: PhaseResult, nodes: list[str]) -> None:
        """IB-08: each compute HCA in loopback, from its paired GPU's memory, then from host memory."""
        paired = {d.hca: d.index for d in self.topology.gpus.devices if d.hca}
        for index, hca in enumerate(self.topology.compute_hcas):
            for kind in commands.MEMORY_KINDS:
                gpu = paired.get(hca.name) if kind == "cuda" else None
                if kind == "cuda" and gpu is None:
                    continue  # the topology pairs no GPU with this HCA: host memory only
                port = commands.ib_write_bw_port(self.settings, index, kind)
                runs = self._per_node(nodes, commands.ib_write_bw_command(self.settings, hca.name, gpu, port=port))
                for node, run in runs.items():
                    result.gdr.setdefault(node, {}).setdefault(hca.name, {})[kind] = gdr_measurement(
                        run, hca.name, gpu, timeout_s=self.timeout)

    def _per_node(self, nodes: list[str], command: list[str]) -> dict[str, CommandResult]:
        return self.launcher.per_node(nodes, command, timeout=self.timeout)

    def _leave_out_failed(self, result: PhaseResult, nodes: list[str]) -> None:
        """Nodes that failed a single-node check, or could not be measured there, stay out of multi-node runs."""
        from burnin.checks.fabric import single_node_verdicts
        from burnin.evaluate.verdict import Status

        documents = node_documents(result)
        for node in nodes:
            before = self.facts.get(node)
            data = {**(before.data if before is not None else {}), "fabric": documents[node]}
            verdicts = single_node_verdicts(Facts(node, data), self.topology)
            bad = [v for v in verdicts if v.status is not Status.PASS]
            if bad:
                ids = ", ".join(f"{v.check_id} {'failed' if v.status is Status.FAIL else v.status.value}"
                                for v in bad)
                result.excluded_by[node] = ids
                result.excluded_why[node] = [v.reason for v in bad]
                result.excluded[node] = f"left out of multi-node runs and localisation: {ids} on this node"
                self.log.line(f"# {node} {result.excluded[node]}")

    # -- multi-node -----------------------------------------------------------------------

    def _job(self, nodes: Sequence[str], *, ib_hca: str | None = None) -> NcclMeasurement:
        run = self.launcher.job(nodes, "all_reduce", ib_hca=ib_hca, timeout=self.timeout)
        return self._measure(run, nodes, ib_hca)

    def _measure(self, run: CommandResult, nodes: Sequence[str], ib_hca: str | None) -> NcclMeasurement:
        return nccl_measurement(run, "all_reduce", nodes, timeout_s=self.timeout, judge_min_bytes=self.judge_min,
                                ib_hca=ib_hca, nvls=self.settings.nvls)

    def _group(self, result: PhaseResult, members: Sequence[str]) -> NcclMeasurement:
        """The multi-node all_reduce, with each evidence run (STO-02) recorded for its nodes."""
        group: NcclMeasurement | None = None
        for evidence in self.evidence:
            timeout = self.timeout if evidence.name == "group" else min(self.timeout,
                                                                          self.settings.nccl_evidence_timeout_s)
            run = self.launcher.job(members, "all_reduce", ib_hca=None, timeout=timeout, evidence=evidence)
            if evidence.name == "group":
                group = self._measure(run, members, None)
            set_to = commands.nccl_env(self.topology, self.settings, evidence=evidence).get("NCCL_IB_HCA")
            for node, record in nccl_evidence.node_records(evidence, run, members, self.hosts,
                                                           ib_hca=set_to).items():
                result.nccl_runtime.setdefault(node, []).append(record)
        return group if group is not None else self._job(members)

    def _jobs(self, groups: Sequence[Sequence[str]], *, ib_hca: str | None = None) -> list[NcclMeasurement]:
        """Disjoint jobs side by side."""
        if not groups:
            return []
        with ThreadPoolExecutor(max_workers=min(32, len(groups))) as pool:
            return list(pool.map(lambda g: self._job(g, ib_hca=ib_hca), groups))

    def _multi(self, result: PhaseResult, nodes: list[str]) -> None:
        members = [n for n in nodes if n not in result.excluded]
        if len(members) < 2:
            left_out = "; ".join(f"{n} {result.excluded_by.get(n, 'left out')}" for n in nodes
                                 if n in result.excluded)
            for node in members:
                result.alone[node] = f"no multi-node partner: every other node was left out ({left_out})"
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

