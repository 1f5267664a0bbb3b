"""MEG-01..04 on facts sections: table-driven, every verdict with its reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from megatron_support import FLOPS_TP8, hung, iterations, members, run, section

from burnin.checks import load_all
from burnin.evaluate.verdict import Status, Verdict
from burnin.facts import Facts
from burnin.megatron import judge
from burnin.topology.model import Topology

WATCHDOG_1207 = (
    # The message NVIDIA/Megatron-LM issue #1207 quotes ("Watchdog caught collective operation timeout:
    # WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013
    # milliseconds before timing out."), with the rank prefix torch's ProcessGroupNCCL puts before it.
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
    "milliseconds before timing out."
)


def verdict(check_id: str, data: dict[str, Any] | None, topology: Topology) -> Verdict:
    facts = Facts("n1", {} if data is None else {"megatron": data})
    return load_all()[check_id].func(facts, topology)


def _with_single(**overrides: Any) -> dict[str, Any]:
    return section(run(**overrides))


def _multi(**overrides: Any) -> dict[str, Any]:
    group = ["n1", "n2", "n3"]
    record = run("multi", tuple(group), iterations=iterations(gpus=24, tflops=420.0, flops=FLOPS_TP8))
    record.update(overrides)
    return {"applicable": True, "reason": "", "excluded": None, "group": group, "run": record,
            "members_single": members()}


CASES: list[tuple[str, str, Callable[[], dict[str, Any] | None], Status, list[str]]] = [
    # (id, check, facts section, status, words in the reason)
    ("healthy-01", "MEG-01", section, Status.PASS, ["8 ranks exited 0"]),
    ("healthy-02", "MEG-02", section, Status.PASS, ["50/50 iterations parsed"]),
    ("healthy-03", "MEG-03", section, Status.PASS, ["MFU 43.5%", "430.0 TFLOP/s/GPU", "log 430.0"]),
    ("healthy-04", "MEG-04", section, Status.PASS, ["not a straggler", "fell by"]),
    ("absent", "MEG-04", lambda: None, Status.INCOMPLETE, ["megatron measurements not collected",
                                                           "--suite megatron"]),
    ("unavailable", "MEG-01", lambda: {"unavailable": "no Slurm allocation: Invalid partition"},
     Status.INCOMPLETE, ["no Slurm allocation"]),
    ("exit-1", "MEG-01", lambda: _with_single(exit_status=1, tails={"-1": ["ChildFailedError: pretrain_gpt.py"]}),
     Status.FAIL, ["single-node exited 1", "launcher: ChildFailedError"]),
    ("not-started", "MEG-01", lambda: _with_single(exit_status=None, error="gpu01: cannot start torchrun"),
     Status.INCOMPLETE, ["did not start", "cannot start torchrun"]),
    ("hang-01", "MEG-01", lambda: section(hung(run())), Status.INCOMPLETE,
     ["hung: stopped after 900.0 s", "rank 0: training ...", "rank 7:  iteration        3/      50 |"]),
    ("hang-02", "MEG-02", lambda: section(hung(run())), Status.INCOMPLETE, ["hung"]),
    ("hang-03", "MEG-03", lambda: section(hung(run())), Status.INCOMPLETE, ["hung"]),
    ("hang-04", "MEG-04", lambda: section(hung(run())), Status.INCOMPLETE, ["hung", "last lines"]),
    ("missing-iterations", "MEG-02", lambda: _with_single(iterations=iterations()[:12], exit_status=1),
     Status.FAIL, ["12/50 iterations logged (missing 13-50)", "exited 1"]),
    ("gap", "MEG-02", lambda: _with_single(iterations=[it for it in iterations() if it["iteration"] not in (5, 6, 9)]),
     Status.FAIL, ["missing 5-6,9"]),
    ("no-iteration-line", "MEG-02", lambda: _with_single(iterations=[], parse_error="megatron-log: no lines"),
     Status.INCOMPLETE, ["no iteration line parsed"]),
    ("crashed-at-start", "MEG-02", lambda: _with_single(iterations=[], parse_error="megatron-log: no lines",
                                                        exit_status=1, tails={"0": ["CUDA error: no device"]}),
     Status.FAIL, ["0/50 iterations logged, the run exited 1 (rank 0: CUDA error: no device)"]),
    ("no-throughput-field", "MEG-02",
     lambda: _with_single(iterations=[dict(it, tflops_per_gpu=None) for it in iterations()]),
     Status.INCOMPLETE, ["--log-throughput"]),
    ("other-length", "MEG-02", lambda: _with_single(iterations=iterations(100)), Status.INCOMPLETE,
     ["extra_args overrode the run length"]),
    ("low-mfu", "MEG-03", lambda: _with_single(iterations=iterations(tflops=250.0)), Status.FAIL,
     ["MFU 25.3%", "expected MFU >= 30%"]),
    ("log-disagrees", "MEG-03", lambda: _with_single(iterations=iterations(logged_factor=1.2)), Status.INCOMPLETE,
     ["burnin computes 430.0", "the log prints 516.0", "model shape is not what ran"]),
    ("straggler", "MEG-04", lambda: section(run(iterations=iterations(tflops=344.0))), Status.FAIL,
     ["straggler: 344.0 TFLOP/s/GPU is 20% below the run's median 430.0 TFLOP/s/GPU of 8 nodes"]),
    # two nodes have no median: the topology's reference (400) is the norm, so a lone slow node still straggles
    ("small-fleet-slow", "MEG-04", lambda: section(run(iterations=iterations(tflops=344.0)), count=2), Status.FAIL,
     ["straggler: 344.0 TFLOP/s/GPU is 14% below the topology's reference 400 TFLOP/s/GPU"]),
    ("small-fleet", "MEG-04", lambda: section(run(iterations=iterations(tflops=361.0)), count=2), Status.PASS,
     ["not a straggler"]),
    # most nodes slow: their median (344) is no norm; the reference is
    ("slow-majority", "MEG-04", lambda: section(run(iterations=iterations(tflops=344.0)), median=344.0),
     Status.FAIL, ["344.0 TFLOP/s/GPU is 14% below the topology's reference 400"]),
    ("below-reference", "MEG-04", lambda: section(run(iterations=iterations(tflops=300.0)), median=300.0),
     Status.FAIL, ["single-node throughput 300.0 TFLOP/s/GPU", ">= 330"]),
    ("nan", "MEG-04", lambda: _with_single(iterations=iterations(nan_from=17)), Status.FAIL,
     ["lm loss NAN at iteration 17 (first of 34 non-finite)", "34 NaN and 0 skipped"]),
    ("skipped", "MEG-04", lambda: _with_single(iterations=iterations(skipped_at=30)), Status.FAIL,
     ["0 NaN and 1 skipped iterations (first at iteration 30)"]),
    ("flat-loss", "MEG-04", lambda: _with_single(iterations=iterations(flat_loss=True)), Status.FAIL,
     ["lm loss 11.50 -> 11.50 (fell by 0.00)"]),
    ("watchdog", "MEG-04", lambda: _with_single(nccl_errors=[{"rank": 3, "line": WATCHDOG_1207}]), Status.FAIL,
     ["rank 3:", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE"]),
    ("multi-slow", "MEG-04", lambda: section(multi=_multi(iterations=iterations(gpus=24, tflops=300.0,
                                                                                flops=FLOPS_TP8))),
     Status.INCOMPLETE, ["300.0 TFLOP/s/GPU vs 430.0 single-node (median of its 3 members) (30% below)",
                         "not attributable to one node"]),
    # judged against its members together: this node's own single-node run (430) is not the measure
    ("multi-short-of-members", "MEG-04",
     lambda: section(multi=dict(_multi(iterations=iterations(gpus=24, tflops=380.0, flops=FLOPS_TP8)),
                                members_single=members(430.0))),
     Status.INCOMPLETE, ["380.0 TFLOP/s/GPU vs 430.0 single-node (median of its 3 members) (12% below)"]),
    ("multi-within-members", "MEG-04",
     lambda: section(run(iterations=iterations(tflops=480.0)),
                     multi=dict(_multi(iterations=iterations(gpus=24, tflops=400.0, flops=FLOPS_TP8)),
                                members_single=members(430.0))),
     Status.PASS, ["400.0 TFLOP/s/GPU vs 430.0 single-node (median of its 3 members)"]),
    ("multi-no-members", "MEG-04", lambda: section(multi={k: v for k, v in _multi().items() if k != "members_single"}),
     Status.INCOMPLETE, ["no single-node value of its members to compare with"]),
    ("multi-members-garbage", "MEG-04", lambda: section(multi=dict(_multi(), members_single={"median": "NaN"})),
     Status.INCOMPLETE, ["no single-node value of its members to compare with"]),
    ("multi-watchdog", "MEG-04", lambda: section(multi=_multi(nccl_errors=[{"rank": 12, "line": WATCHDOG_1207}])),
     Status.INCOMPLETE, ["rank 12", "not attributable"]),
    ("multi-exit", "MEG-01", lambda: section(multi=_multi(exit_status=1)), Status.INCOMPLETE,
     ["multi-node", "exited 1", "not attributable"]),
    ("multi-hang", "MEG-04", lambda: section(multi=_multi(timed_out=True, exit_status=None)), Status.INCOMPLETE,
     ["the run on n1,n2,n3 hung"]),
    ("multi-not-applicable", "MEG-04",
     lambda: section(multi={"applicable": False, "reason": "a group of one node", "group": ["n1"]}),
     Status.PASS, ["not applicable: a group of one node"]),
    # the run applies (a group of 2+) but every partner failed alone: unmeasured, never a pass (issue 19)
    ("multi-lone-survivor", "MEG-04",
     lambda: section(multi={"applicable": True, "reason": "", "excluded": None, "group": ["n1", "n2"], "run": None,
                            "unavailable": "no partner: every other node of the group failed on its own (n2)"}),
     Status.INCOMPLETE, ["no multi-node run: no partner: every other node of the group failed on its own (n2)"]),
    ("multi-left-out", "MEG-01",
     lambda: section(multi={"applicable": True, "excluded": "failed on its own: MEG-04 ...", "group": ["n1"]}),
     Status.PASS, []),
    ("multi-missing", "MEG-04", lambda: section(multi=None), Status.INCOMPLETE, ["no multi-node record"]),
    ("multi-healthy-03", "MEG-03", lambda: section(multi=_multi(iterations=[])), Status.PASS, []),
]


@pytest.mark.parametrize(("check_id", "make", "status", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_meg_verdicts(h100_topology: Topology, check_id: str, make: Callable[[], dict[str, Any] | None],
                      status: Status, words: list[str]) -> None:
    result = verdict(check_id, make(), h100_topology)
    assert result.status is status, result.reason
    for word in words:
        assert word in result.reason, (word, result.reason)


def test_a_missing_reference_is_incomplete_with_its_name(h100_topology: Topology) -> None:
    import dataclasses

    refs = {k: v for k, v in h100_topology.references.items() if k != judge.MFU_REF}
    bare = dataclasses.replace(h100_topology, references=refs)
    result = verdict("MEG-03", section(), bare)
    assert result.status is Status.INCOMPLETE and "defines no megatron_mfu" in result.reason


def test_unreachable_node_says_so(h100_topology: Topology) -> None:
    facts = Facts.unreachable_node("n1", "ssh: connect to host n1 port 22: No route to host")
    for check_id in ("MEG-01", "MEG-02", "MEG-03", "MEG-04"):
        result = load_all()[check_id].func(facts, h100_topology)
        assert result.status is Status.INCOMPLETE and "No route to host" in result.reason


def test_throughput_skips_warmup_and_uses_the_recorded_flops() -> None:
    slow_start = iterations()
    for it in slow_start[:10]:
        it["elapsed_ms"] *= 3  # compilation and warm-up
    rate = judge.throughput(run(iterations=slow_start))
    assert rate.computed == pytest.approx(430.0, rel=1e-3) and rate.iterations == 40


def test_attach_fleet_counts_the_nodes_that_have_a_throughput() -> None:
    sections = {"a": section(run()), "b": section(run(iterations=iterations(tflops=344.0))),
                "c": section(run(iterations=iterations(tflops=420.0))), "d": section(hung(run()))}
    fleet = judge.attach_fleet(sections)
    assert fleet["count"] == 3 and fleet["median"] == pytest.approx(420.0, rel=1e-3)
    assert all(s["fleet"]["single.tflops_per_gpu"] == fleet for s in sections.values())


def test_single_node_verdicts_ignore_the_multi_node_run(h100_topology: Topology) -> None:
    from burnin.megatron.alone import passed_alone

    data = section(multi=None)
    assert passed_alone(Facts("n1", {"megatron": data}), h100_topology) == (True, "")
    slow = section(run(iterations=iterations(tflops=344.0)), multi=None)
    ok, why = passed_alone(Facts("n1", {"megatron": slow}), h100_topology)
    assert not ok and why.startswith("MEG-04") and "straggler" in why
