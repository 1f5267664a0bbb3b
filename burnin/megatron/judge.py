"""MEG-01..04 findings from a node's ``megatron`` section (pure; check-catalog section 9).

Each function takes the node's section (burnin.megatron.record) and the topology
and returns findings; :mod:`burnin.checks.workload` rolls them into verdicts.

- MEG-01 the launch: every rank ran and exited 0 within the timeout;
- MEG-02 the log: every iteration 1..train_iters parsed with its time and loss;
- MEG-03 MFU: TFLOP/s/GPU computed by burnin from the model shape and the iteration
  time (Megatron's formula), over the topology's dense peak, and compared with the
  value the log prints;
- MEG-04 the run was healthy: finite falling loss, no NaN or skipped iteration, no
  NCCL watchdog timeout or NCCL error in any rank's log, throughput at or above the
  reference and within tolerance of the norm (the run's median node, but never less
  than the topology's reference value: a majority of slow nodes cannot make itself
  the norm), the multi-node run within tolerance of its members' median single-node
  run.

A hung run, or one whose launcher was not found, is ``incomplete`` with the cause.
A multi-node run holds several nodes that each passed alone, so what goes wrong in
it is not attributable to one of them: every member gets the same ``incomplete``
with the cause, never a failure (the run is judged against its members together,
never against one member's own run, so two members can never disagree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from burnin.evaluate.verdict import Finding, Status, Unmeasurable, bad, ok, unknown
from burnin.megatron.record import FLEET_KEY, MEMBERS_KEY, MIN_FLEET
from burnin.topology.model import Reference, Topology

PEAK_REF = "gpu_bf16_dense_tflops"
MFU_REF = "megatron_mfu"
TFLOPS_REF = "megatron_tflops_per_gpu"
STRAGGLER_REF = "megatron_straggler_tolerance"
MULTI_REF = "megatron_multi_node_tolerance"
LOSS_DROP_REF = "megatron_loss_drop"
AGREEMENT_REF = "megatron_tflops_agreement"
LOSS_WINDOW = 10
UNATTRIBUTABLE = "not attributable to one node: each passed its single-node run (burnin run --suite fabric localises)"
UNIT = "TFLOP/s/GPU"


def share(ref: Reference) -> str:
    """A fraction reference as percentages: ``>= 30%``."""
    if ref.lower is not None and (ref.upper is None or ref.upper >= 1.0):
        return f">= {ref.lower:.0%}"
    if ref.lower is not None and ref.upper is not None:
        return f"{ref.lower:.0%}..{ref.upper:.0%}"
    return f"<= {ref.upper:.0%}" if ref.upper is not None else f"{ref.value:.0%}"


def summary(findings: list[Finding]) -> str:
    """Every finding as ``subject: measured`` (a passing verdict's measured text)."""
    return "; ".join(f"{f.subject}: {f.measured}" for f in findings)


def reference(topology: Topology, key: str) -> Reference:
    ref = topology.ref(key)
    if ref is None:
        raise Unmeasurable(f"topology {topology.name} defines no {key}")
    return ref


def section(data: object) -> dict[str, Any]:
    """The node's megatron section; Unmeasurable when the phase did not record one."""
    if not isinstance(data, dict):
        raise Unmeasurable("megatron measurements not collected: the megatron phase did not run "
                           "(burnin run --suite megatron)")
    if data.get("unavailable"):
        raise Unmeasurable(str(data["unavailable"]))
    single = data.get("single")
    if isinstance(single, dict) and single.get("unavailable"):
        raise Unmeasurable(str(single["unavailable"]))  # the launcher was not found: nothing ran on this node
    return data


def _median(values: Sequence[float]) -> float | None:
    data = sorted(values)
    if not data:
        return None
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2.0


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _iterations(record: dict[str, Any]) -> list[dict[str, Any]]:
    items = record.get("iterations")
    return [it for it in items if isinstance(it, dict) and isinstance(it.get("iteration"), int)] \
        if isinstance(items, list) else []


def _where(record: dict[str, Any]) -> str:
    nodes = record.get("nodes") or []
    return f" on {','.join(map(str, nodes))}" if len(nodes) > 1 else ""


def hang_note(record: dict[str, Any], limit: int = 8) -> str:
    """``hung: stopped after 900 s; last lines: rank 0: ...; rank 7: ...`` (each rank's last line)."""
    tails = record.get("tails") or {}
    shown = []
    for rank, lines in sorted(tails.items(), key=lambda kv: int(kv[0]) if str(kv[0]).lstrip("-").isdigit() else 0):
        if lines:
            who = "launcher" if str(rank) == "-1" else f"rank {rank}"
            shown.append(f"{who}: {str(lines[-1])[:160]}")
    more = f"; +{len(shown) - limit} more" if len(shown) > limit else ""
    last = "; ".join(shown[:limit]) + more if shown else "no output"
    return f"the run{_where(record)} hung: stopped after {record.get('timeout_s', '?')} s; last lines: {last}"


def _failure(record: dict[str, Any]) -> str | None:
    """Why the launch did not finish cleanly (None: every rank exited 0); raises Unmeasurable when it never ran
    to an end (not started, hung)."""
    if record.get("timed_out"):
        raise Unmeasurable(hang_note(record))
    status = record.get("exit_status")
    if status is None:  # no exit status: it never ran to an end that says anything about the node
        raise Unmeasurable(f"the run{_where(record)} did not start: {_not_started(record)}")
    if status == 0:
        return None
    evidence = _evidence(record)
    return f"exited {status}" + (f" ({evidence})" if evidence else "")


def _evidence(record: dict[str, Any]) -> str:
    """The line that says most about a failed run: the first NCCL error, else the launcher's last line, else
    the first rank's last line."""
    errors = [e for e in record.get("nccl_errors") or [] if isinstance(e, dict)]
    if errors:
        return f"rank {errors[0].get('rank')}: {str(errors[0].get('line'))[:160]}"
    tails = {str(k): v for k, v in (record.get("tails") or {}).items() if v}
    if tails.get("-1"):
        return f"launcher: {str(tails['-1'][-1])[:160]}"
    ranks = sorted((int(k), v) for k, v in tails.items() if k.lstrip("-").isdigit())
    return f"rank {ranks[0][0]}: {str(ranks[0][1][-1])[:160]}" if ranks else ""


def _runs(data: dict[str, Any], include_multi: bool) -> list[tuple[str, dict[str, Any] | None, str]]:
    """(subject, record or None, why-not) for the single-node run and, with ``include_multi``, the multi-node one."""
    single = data.get("single")
    runs: list[tuple[str, dict[str, Any] | None, str]] = [
        ("single-node", single if isinstance(single, dict) else None, "no single-node run recorded")]
    if include_multi:
        runs.append(multi_run(data))
    return runs


def multi_run(data: dict[str, Any]) -> tuple[str, dict[str, Any] | None, str]:
    multi = data.get("multi")
    if not isinstance(multi, dict):
        return "multi-node", None, "no multi-node record: the phase did not finish"
    if not multi.get("applicable", True):
        return "multi-node", None, f"not applicable: {multi.get('reason') or 'no multi-node run'}"
    if multi.get("excluded"):
        # The node failed (or could not be measured) alone, so it is rejected whatever this says.
        return "multi-node", None, f"not applicable: left out of the multi-node run, {multi['excluded']}"
    if multi.get("unavailable"):
        return "multi-node", None, f"no multi-node run: {multi['unavailable']}"
    run = multi.get("run")
    return "multi-node", run if isinstance(run, dict) else None, "no multi-node run recorded"


def _absent(subject: str, why: str, expected: str) -> Finding:
    if why.startswith("not applicable"):
        return ok(subject, why, expected)
    return unknown(subject, why, expected)


def _per_run(data: dict[str, Any], include_multi: bool, expected: str,
             judge_run: Callable[[str, dict[str, Any]], list[Finding]]) -> list[Finding]:
    findings: list[Finding] = []
    for subject, record, why in _runs(data, include_multi):
        if record is None:
            findings.append(_absent(subject, why, expected))
            continue
        if record.get("unavailable"):
            findings.append(unknown(subject, str(record["unavailable"]), expected))
            continue
        try:
            found = judge_run(subject, record)
        except Unmeasurable as exc:
            found = [unknown(subject, exc.reason, expected)]
        findings += unattributable(found) if subject == "multi-node" else found
    return findings


def unattributable(findings: list[Finding]) -> list[Finding]:
    """A multi-node run's failures as not measured for each member (every member passed alone)."""
    return [Finding(f.subject, Status.INCOMPLETE, "not measured", f.expected,
                    f"{f.measured}: {UNATTRIBUTABLE}") if f.status is Status.FAIL else f for f in findings]


# ------------------------------------------------------------------ MEG-01


def meg01(data: dict[str, Any], topology: Topology, *, include_multi: bool = True) -> list[Finding]:
    expected = f"every rank ({topology.gpus.count} per node) exits 0 within the launch timeout"

    def judge_run(subject: str, record: dict[str, Any]) -> list[Finding]:
        failure = _failure(record)
        if failure is not None:
            return [bad(subject, failure, expected)]
        return [ok(subject, f"{record.get('world_size')} ranks exited 0 in {record.get('duration_s')} s", expected)]

    return _per_run(data, include_multi, expected, judge_run)


# ------------------------------------------------------------------ MEG-02


def _ranges(numbers: Sequence[int]) -> str:
    """``[5, 6, 9, 13, 14, 15]`` -> ``5-6,9,13-15``."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and runs[-1][1] + 1 == n:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def meg02(data: dict[str, Any], topology: Topology, *, include_multi: bool = True) -> list[Finding]:
    expected = "every iteration 1..train_iters logged with its time, throughput and loss"

    def judge_run(subject: str, record: dict[str, Any]) -> list[Finding]:
        if record.get("timed_out"):
            raise Unmeasurable(hang_note(record))
        total, interval = int(record.get("train_iters") or 0), int(record.get("log_interval") or 1)
        wanted = set(range(interval, total + 1, interval))
        if record.get("parse_error"):
            failure = _failure(record)
            if failure is not None:  # it ended before logging an iteration
                return [bad(subject, f"0/{len(wanted)} iterations logged, the run {failure}", expected)]
            raise Unmeasurable(f"no iteration line parsed: {record['parse_error']}")
        iters = _iterations(record)
        seen = {it["iteration"] for it in iters}
        totals = {it.get("total") for it in iters}
        if totals != {total}:
            raise Unmeasurable(f"the log counts to {sorted(map(str, totals))}, burnin launched train_iters {total}: "
                               "extra_args overrode the run length")
        unreadable = [it["iteration"] for it in iters
                      if it.get("elapsed_ms") is None or it.get("lm_loss") is None or it.get("tflops_per_gpu") is None]
        if unreadable:
            raise Unmeasurable(f"iteration {unreadable[0]} lacks its time, throughput or loss "
                               f"({len(unreadable)} such lines): is --log-throughput set?")
        missing = sorted(wanted - seen)
        if missing:
            why = f", the run {_failure(record) or 'exited 0'}"
            return [bad(subject, f"{len(wanted) - len(missing)}/{len(wanted)} iterations logged "
                                 f"(missing {_ranges(missing)}){why}", expected)]
        return [ok(subject, f"{len(wanted)}/{len(wanted)} iterations parsed", expected)]

    return _per_run(data, include_multi, expected, judge_run)


# ------------------------------------------------------------------ MEG-03


@dataclass(frozen=True, slots=True)
class Throughput:
    """A run's median TFLOP/s/GPU over the iterations after warm-up: burnin's and the log's."""

    computed: float
    logged: float | None
    iterations: int
    iteration_ms: float


def throughput(record: dict[str, Any]) -> Throughput:
    """burnin's TFLOP/s/GPU from the recorded FLOP count and each iteration's time; Unmeasurable without one."""
    flops = _finite(record.get("flops_per_iteration"))
    gpus = record.get("world_size")
    if flops is None or flops <= 0 or not isinstance(gpus, int) or gpus < 1:
        raise Unmeasurable("the run record has no FLOP count or world size")
    warmup = int(record.get("warmup_iters") or 0)
    steady = [it for it in _iterations(record) if it["iteration"] > warmup]
    times = [t for t in (_finite(it.get("elapsed_ms")) for it in steady) if t is not None and t > 0]
    if not times:
        raise Unmeasurable(f"no iteration after the {warmup} warm-up iterations has a time")
    logged = [v for v in (_finite(it.get("tflops_per_gpu")) for it in steady) if v is not None and v > 0]
    per_gpu = [flops / (t / 1000.0 * gpus * 1e12) for t in times]
    computed = _median(per_gpu)
    assert computed is not None
    return Throughput(computed, _median(logged), len(times), _median(times) or 0.0)


def meg03(data: dict[str, Any], topology: Topology, *, include_multi: bool = False) -> list[Finding]:
    """MFU of the single-node run (the catalog's floor is for one node); the multi-node run is MEG-04's."""
    peak = reference(topology, PEAK_REF)
    floor = reference(topology, MFU_REF)
    agreement = reference(topology, AGREEMENT_REF).value
    expected = f"MFU {share(floor)} of {peak.value:g} {UNIT} (BF16 dense); the log's value within {agreement:.0%}"

    def judge_run(subject: str, record: dict[str, Any]) -> list[Finding]:
        if record.get("timed_out"):
            raise Unmeasurable(hang_note(record))
        rate = throughput(record)
        if rate.logged is None:
            raise Unmeasurable("the log prints no 'throughput per GPU (TFLOP/s/GPU)': is --log-throughput set?")
        if abs(rate.computed - rate.logged) > agreement * rate.logged:
            raise Unmeasurable(f"burnin computes {rate.computed:.1f} {UNIT} from the model shape and iteration time, "
                               f"the log prints {rate.logged:.1f}: the config's model shape is not what ran")
        share = rate.computed / peak.value
        measured = (f"MFU {share:.1%} ({rate.computed:.1f} {UNIT}, log {rate.logged:.1f}, median of "
                    f"{rate.iterations} iterations at {rate.iteration_ms:.0f} ms)")
        return [(ok if floor.admits(share) else bad)(subject, measured, expected)]

    return _per_run(data, include_multi, expected, judge_run)


def attach_fleet(sections: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Write the run's median single-node TFLOP/s/GPU into every node's section (``fleet``); returns it.

    Nodes whose single-node run has no steady throughput (hung, crashed early) are not counted.
    """
    values: list[float] = []
    for data in sections.values():
        single = data.get("single") if isinstance(data, dict) else None
        if isinstance(single, dict) and not single.get("timed_out"):
            try:
                values.append(throughput(single).computed)
            except Unmeasurable:
                continue
    median = _median(values)
    fleet = {"median": round(median, 3), "count": float(len(values))} if median is not None else {}
    for data in sections.values():
        data.setdefault("fleet", {})[FLEET_KEY] = fleet
    return fleet


def attach_group(sections: dict[str, dict[str, Any]], members: Sequence[str]) -> dict[str, float]:
    """Write the members' median single-node TFLOP/s/GPU into each member's ``multi`` entry; returns it.

    The multi-node run is judged against its members together (MEG-04), so every member sees the same
    comparison: a run short of the group is short for all of them, never for one member alone.
    """
    values: list[float] = []
    for node in members:
        single = sections.get(node, {}).get("single")
        if isinstance(single, dict) and not single.get("timed_out"):
            try:
                values.append(throughput(single).computed)
            except Unmeasurable:
                continue
    median = _median(values)
    stats = {"median": round(median, 3), "count": float(len(values))} if median is not None else {}
    for node in members:
        multi = sections.get(node, {}).get("multi")
        if isinstance(multi, dict):
            multi[MEMBERS_KEY] = stats
    return stats


# ------------------------------------------------------------------ MEG-04


def _loss(value: object) -> float | None:
    """A finite loss, or None for NaN/inf (stored as text) and anything unreadable."""
    return _finite(value)


def loss_findings(subject: str, record: dict[str, Any], drop: Reference) -> list[Finding]:
    iters = sorted(_iterations(record), key=lambda it: it["iteration"])
    expected_finite = "a finite lm loss at every iteration, 0 NaN and 0 skipped iterations"
    findings: list[Finding] = []
    bad_loss = [it for it in iters if _loss(it.get("lm_loss")) is None]
    nan_count = sum(int(it.get("nan") or 0) for it in iters)
    skipped = sum(int(it.get("skipped") or 0) for it in iters)
    if bad_loss:
        first = bad_loss[0]
        findings.append(bad(f"{subject} loss", f"lm loss {first.get('lm_loss')} at iteration {first['iteration']} "
                                              f"(first of {len(bad_loss)} non-finite)", expected_finite))
    flagged = [it["iteration"] for it in iters if int(it.get("nan") or 0) or int(it.get("skipped") or 0)]
    if nan_count or skipped:
        findings.append(bad(f"{subject} iterations", f"{nan_count} NaN and {skipped} skipped iterations "
                                                     f"(first at iteration {flagged[0]})", expected_finite))
    if findings or record.get("timed_out"):
        return findings
    losses = [v for v in (_loss(it.get("lm_loss")) for it in iters) if v is not None]
    window = min(LOSS_WINDOW, len(losses) // 2)
    expected_fall = f"the {LOSS_WINDOW}-iteration mean lm loss falls by {drop.describe()}"
    if window < 1:
        return [unknown(f"{subject} loss", f"{len(losses)} losses logged: too few to see a fall", expected_fall)]
    start, end = sum(losses[:window]) / window, sum(losses[-window:]) / window
    measured = f"lm loss {start:.2f} -> {end:.2f} (fell by {start - end:.2f})"
    return [ok(f"{subject} loss", measured, expected_fall) if drop.admits(start - end)
            else bad(f"{subject} loss", measured, expected_fall)]


def nccl_findings(subject: str, record: dict[str, Any]) -> list[Finding]:
    expected = "no NCCL watchdog timeout or NCCL error in any rank's log"
    errors = [e for e in record.get("nccl_errors") or [] if isinstance(e, dict)]
    if not errors:
        return [ok(f"{subject} nccl", "no NCCL error line", expected)]
    ranks = sorted({int(e.get("rank", -1)) for e in errors})
    first = errors[0]
    who = "launcher" if int(first.get("rank", -1)) == -1 else f"rank {first.get('rank')}"
    return [bad(f"{subject} nccl", f"{who}: {str(first.get('line'))[:200]} "
                                   f"({len(errors)} lines from rank{'s' if len(ranks) > 1 else ''} "
                                   f"{','.join(map(str, ranks))})", expected)]


def _fleet_median(fleet: object) -> tuple[float, int] | None:
    """The run's median single-node TFLOP/s/GPU and its node count, when there are MIN_FLEET nodes or more."""
    stats = fleet.get(FLEET_KEY) if isinstance(fleet, dict) else None
    if not isinstance(stats, dict):
        return None
    median, count = _finite(stats.get("median")), _finite(stats.get("count"))
    if median is None or median <= 0 or count is None or count < MIN_FLEET:
        return None
    return median, int(count)


def straggler(value: float, fleet: object, tol: float, typical: float | None) -> str | None:
    """Why ``value`` is a straggler, or None: more than ``tol`` below the norm.

    The norm is the run's median node (with MIN_FLEET nodes or more) but never less than the topology's
    reference value (``typical``): when most nodes of a run are slow the median is theirs, and a slow
    majority must not make itself the norm and pass while the healthy minority looks fast.
    """
    norms: list[tuple[float, str]] = []
    fleet_median = _fleet_median(fleet)
    if fleet_median is not None:
        median, count = fleet_median
        norms.append((median, f"the run's median {median:.1f} {UNIT} of {count} nodes"))
    if typical is not None and math.isfinite(typical) and typical > 0:
        norms.append((typical, f"the topology's reference {typical:g} {UNIT} ({TFLOPS_REF})"))
    if not norms:
        return None
    norm, what = max(norms, key=lambda item: item[0])
    if value >= (1.0 - tol) * norm:
        return None
    return f"straggler: {value:.1f} {UNIT} is {1.0 - value / norm:.0%} below {what} (tolerance {tol:.0%})"


def meg04(data: dict[str, Any], topology: Topology, *, include_multi: bool = True) -> list[Finding]:
    drop = reference(topology, LOSS_DROP_REF)
    floor = reference(topology, TFLOPS_REF)
    tol = reference(topology, STRAGGLER_REF).value
    multi_tol = reference(topology, MULTI_REF).value
    findings: list[Finding] = []
    single = data.get("single") if isinstance(data.get("single"), dict) else None
    single_rate: float | None = None
    if single is None:
        findings.append(unknown("single-node", "no single-node run recorded"))
    else:
        findings += _run_health("single-node", single, drop)
        if not single.get("timed_out"):
            try:
                single_rate = throughput(single).computed
            except Unmeasurable as exc:
                findings.append(unknown("single-node throughput", exc.reason, floor.describe()))
        if single_rate is not None:
            measured = f"{single_rate:.1f} {UNIT}"
            findings.append((ok if floor.admits(single_rate) else bad)("single-node throughput", measured,
                                                                       f"{floor.describe()}"))
            slow = straggler(single_rate, data.get("fleet"), tol, floor.value)
            fleet_expected = f"within {tol:.0%} of the run's median node and of {floor.value:g} {UNIT}"
            findings.append(bad("single-node", slow, fleet_expected) if slow
                            else ok("single-node fleet", "not a straggler", fleet_expected))
    if include_multi:
        findings += _multi_findings(data, drop, multi_tol)
    return findings


def _multi_findings(data: dict[str, Any], drop: Reference, tol: float) -> list[Finding]:
    """The multi-node run's health and throughput against its members' median single-node run: the same
    findings for every member, and a shortfall not attributable to one of them."""
    subject, record, why = multi_run(data)
    expected = f"within {tol:.0%} of its members' median single-node {UNIT}"
    if record is None:
        return [_absent(subject, why, expected)]
    if record.get("unavailable"):
        return [unknown(subject, str(record["unavailable"]), expected)]
    found = _run_health(subject, record, drop)
    if not record.get("timed_out"):
        try:
            rate = throughput(record).computed
            found.append(_multi_vs_members(rate, data["multi"].get(MEMBERS_KEY), tol, expected))
        except Unmeasurable as exc:
            found.append(unknown(subject, exc.reason, expected))
    return unattributable(found)


def _run_health(subject: str, record: dict[str, Any], drop: Reference) -> list[Finding]:
    """Loss, NaN/skipped counters and NCCL errors of one run; a hang adds a not-measured finding."""
    found = loss_findings(subject, record, drop) + nccl_findings(subject, record)
    if record.get("timed_out"):
        found.append(unknown(subject, hang_note(record)))
    elif record.get("exit_status") is None:
        found.append(unknown(subject, f"did not start: {_not_started(record)}"))
    return found


def _not_started(record: dict[str, Any]) -> str:
    return str(record.get("error") or "no exit status recorded")


def _multi_vs_members(rate: float, members: object, tol: float, expected: str) -> Finding:
    stats = members if isinstance(members, dict) else {}
    median, count = _finite(stats.get("median")), _finite(stats.get("count"))
    if median is None or median <= 0 or count is None or count < 1:
        return unknown("multi-node", f"{rate:.1f} {UNIT}, but no single-node value of its members to compare with",
                       expected)
    measured = f"{rate:.1f} {UNIT} vs {median:.1f} single-node (median of its {int(count)} members)"
    if rate < (1.0 - tol) * median:
        return bad("multi-node", f"{measured} ({1.0 - rate / median:.0%} below)", expected)
    return ok("multi-node", measured, expected)
