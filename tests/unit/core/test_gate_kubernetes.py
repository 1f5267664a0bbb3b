"""The Kubernetes gate's policy (burnin.gate.kubernetes): pure, on Node documents as the API server returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.gate.decide import NodeDecision
from burnin.gate.kubernetes import (
    CONDITION,
    LABEL_ADMITTED,
    LABEL_RUN,
    NO_EXECUTE,
    NO_SCHEDULE,
    REASON_FAILED,
    REASON_INCOMPLETE,
    TAINT_KEY,
    NodeState,
    plan_node,
    put_back,
    taint_ids,
    taint_value,
    take_out,
    valid_label_value,
    with_version,
)
from burnin.gate.kubernetes_apply import kubectl_command, node_map, read_fleet

NOW = 1_764_619_200.0  # 2025-12-01T20:00:00Z
OPERATOR = {"key": "ops/maintenance", "value": "psu", "effect": "NoSchedule"}


def node(name: str = "sim03", *, taints: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None,
         condition: dict[str, Any] | None = None, cordoned: bool = False, version: str = "41") -> dict[str, Any]:
    doc: dict[str, Any] = {"metadata": {"name": name, "resourceVersion": version, "labels": labels or {}},
                           "spec": {"taints": taints or []},
                           "status": {"conditions": [{"type": "Ready", "status": "True", "message": "burnin: X-01"}]}}
    if cordoned:
        doc["spec"]["unschedulable"] = True
    if condition is not None:
        doc["status"]["conditions"].append({"type": CONDITION, **condition})
    return doc


def ours(value: str, effect: str = NO_SCHEDULE, added: str = "2025-12-01T19:00:00Z") -> dict[str, Any]:
    return {"key": TAINT_KEY, "value": value, "effect": effect, "timeAdded": added}


def held(message: str) -> dict[str, Any]:
    return {"status": "False", "reason": REASON_FAILED, "message": message,
            "lastTransitionTime": "2025-12-01T19:00:00Z"}


REJECT_GPU = NodeDecision("sim03", False, failed=("GPU-02",), reasons=("GPU-02 7 of 8 GPUs visible",),
                          passed=("GPU-01", "IB-01"))
ADMIT = NodeDecision("sim03", True, passed=("GPU-01", "GPU-02", "IB-01"))


def test_rejected_node_gets_our_taint_condition_and_run_label_beside_the_operators_taint() -> None:
    state = NodeState.from_node(node(taints=[OPERATOR], labels={LABEL_ADMITTED: "20251130T100000Z", "zone": "a"}))
    patch = plan_node(REJECT_GPU, state, run_id="20251201-200000-ab12", now=NOW)
    assert patch.action == "taint"
    assert patch.spec is not None and patch.status is not None
    assert patch.spec["spec"]["taints"] == [OPERATOR, {"key": TAINT_KEY, "value": "GPU-02", "effect": NO_SCHEDULE,
                                                       "timeAdded": "2025-12-01T20:00:00Z"}]
    # only burnin's own labels: the admitted-at of an earlier run goes, the zone label is not in the patch
    assert patch.spec["metadata"]["labels"] == {LABEL_ADMITTED: None, LABEL_RUN: "20251201-200000-ab12"}
    condition = patch.status["status"]["conditions"]
    assert condition == [{"type": CONDITION, "status": "False", "reason": REASON_FAILED,
                          "message": "burnin: GPU-02 7 of 8 GPUs visible", "lastHeartbeatTime": "2025-12-01T20:00:00Z",
                          "lastTransitionTime": "2025-12-01T20:00:00Z"}]


def test_admitted_node_loses_only_our_taints_and_gets_the_time_label() -> None:
    state = NodeState.from_node(node(taints=[OPERATOR, ours("GPU-02"), ours("GPU-02", NO_EXECUTE)],
                                     labels={LABEL_RUN: "r1"}, condition=held("burnin: GPU-02 lost")))
    patch = plan_node(ADMIT, state, now=NOW)
    assert patch.action == "admit"
    assert patch.spec is not None and patch.status is not None
    assert patch.spec["spec"]["taints"] == [OPERATOR]
    assert patch.spec["metadata"]["labels"] == {LABEL_ADMITTED: "20251201T200000Z", LABEL_RUN: None}
    [condition] = patch.status["status"]["conditions"]
    assert condition["status"] == "True"
    assert condition["lastTransitionTime"] == "2025-12-01T20:00:00Z"


def test_admission_that_did_not_judge_the_held_check_leaves_the_node_out() -> None:
    state = NodeState.from_node(node(taints=[ours("IB-03")], condition=held("burnin: IB-03 port down")))
    patch = plan_node(ADMIT, state, now=NOW)
    assert patch.action == "keep"
    assert "IB-03" in patch.note and patch.spec is None and patch.status is None


def test_unreadable_ids_are_left_to_an_operator() -> None:
    state = NodeState.from_node(node(taints=[ours("edited-by-hand")]))
    assert plan_node(ADMIT, state, now=NOW).action == "keep"
    assert take_out(state, "burnin: GPU-04 Xid 79", now=NOW).action == "keep"


def test_a_cut_taint_value_reads_its_ids_from_the_condition() -> None:
    ids = [f"{family}-{n:02d}" for family in ("GPU", "INV", "TOP", "IB", "STO") for n in range(1, 14, 2)]
    value = taint_value(ids)
    assert valid_label_value(value) and taint_ids(value) is None
    message = f"burnin: {','.join(ids)} many"
    state = NodeState.from_node(node(taints=[ours(value)], condition=held(message)))
    assert state.held_ids() == tuple(ids)
    assert plan_node(NodeDecision("sim03", True, passed=tuple(ids)), state, now=NOW).action == "admit"


def test_ids_round_trip_through_a_taint_value() -> None:
    assert taint_value(["GPU-02", "IB-01", "RUN"]) == "GPU-02_IB-01_RUN"
    assert taint_ids("GPU-02_IB-01_RUN") == ("GPU-02", "IB-01", "RUN")
    lost = ["INV-01", "GPU-01", "GPU-03", "GPU-05", "GPU-06", "GPU-07", "GPU-08", "GPU-10", "GPU-11", "INV-02",
            "INV-04", "INV-06", "INV-07", "INV-08", "INV-11"]  # a lost GPU: every per-GPU check unmeasured
    value = taint_value(lost)
    assert value == "INV-01.02.04.06.07.08.11_GPU-01.03.05.06.07.08.10.11" and valid_label_value(value)
    assert sorted(taint_ids(value) or ()) == sorted(lost)
    assert taint_ids("GPU-02,IB-01") is None and taint_ids("gpu-02") is None


def test_earlier_ids_stay_when_a_new_failure_taints_again() -> None:
    state = NodeState.from_node(node(taints=[ours("IB-03")], condition=held("burnin: IB-03 port down")))
    patch = plan_node(REJECT_GPU, state, now=NOW)
    assert patch.action == "taint" and patch.spec is not None
    [taint] = patch.spec["spec"]["taints"]
    assert taint["value"] == "GPU-02_IB-03"
    assert taint["timeAdded"] == "2025-12-01T19:00:00Z"  # held since then: the breaker's time is the first one
    assert patch.note == "burnin: GPU-02,IB-03 7 of 8 GPUs visible"


def test_incomplete_only_keeps_a_node_burnin_holds_already() -> None:
    state = NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 lost")))
    decision = NodeDecision("sim03", False, incomplete=("IB-01",), reasons=("IB-01 no answer",))
    assert plan_node(decision, state, now=NOW).action == "keep"
    fresh = plan_node(decision, NodeState.from_node(node()), now=NOW)
    assert fresh.action == "taint" and fresh.status is not None
    assert fresh.status["status"]["conditions"][0]["reason"] == REASON_INCOMPLETE


def test_same_reason_again_is_no_patch() -> None:
    state = NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 7 of 8 GPUs visible")))
    assert plan_node(REJECT_GPU, state, now=NOW).action == "keep"


def test_evict_adds_noexecute_beside_our_noschedule() -> None:
    state = NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 lost")))
    patch = take_out(state, "burnin: GPU-04 Xid 79 on gpu2", effect=NO_EXECUTE, now=NOW)
    assert patch.spec is not None
    effects = {(t["effect"], t["value"]) for t in patch.spec["spec"]["taints"]}
    assert effects == {(NO_SCHEDULE, "GPU-02"), (NO_EXECUTE, "GPU-04.02")}


def test_a_cordon_is_never_touched() -> None:
    state = NodeState.from_node(node(cordoned=True, taints=[ours("GPU-02")], condition=held("burnin: GPU-02 x")))
    patch = plan_node(ADMIT, state, now=NOW)
    assert patch.spec is not None and "unschedulable" not in patch.spec.get("spec", {})
    assert state.out_of_pool()


def test_every_patch_carries_its_resource_version() -> None:
    patch = plan_node(REJECT_GPU, NodeState.from_node(node(version="77")), run_id="r1", now=NOW)
    assert patch.spec is not None
    sent = with_version(patch.spec, "77")
    assert sent["metadata"]["resourceVersion"] == "77" and sent["metadata"]["labels"]
    assert "resourceVersion" not in patch.spec.get("metadata", {})


def test_dry_run_prints_kubectl_patches() -> None:
    line = kubectl_command("sim03", {"spec": {"taints": []}}, status=True)
    assert line == "kubectl patch node sim03 --subresource=status --type=strategic -p '{\"spec\":{\"taints\":[]}}'"


class _Listing:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    def get_node(self, name: str) -> dict[str, Any]:
        raise AssertionError("not read one by one")

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        raise AssertionError("the breaker only reads")


def test_the_breaker_counts_nodes_with_our_taint_by_their_time() -> None:
    fleet, error = read_fleet(_Listing([node("a", taints=[ours("GPU-02")]), node("b", taints=[OPERATOR]),
                                        node("c", taints=[ours("GPU-02", added="garbage")]), node("d")]),
                              {"c": "sim-c"})
    assert error is None and fleet is not None
    assert fleet.total == 4
    assert {(d.name, d.at is None) for d in fleet.drained} == {("a", False), ("sim-c", True)}


def test_node_map_reads_pairs_and_refuses_garbage() -> None:
    assert node_map("sim01=gpu-a1, sim02=gpu-a2") == {"sim01": "gpu-a1", "sim02": "gpu-a2"}
    with pytest.raises(UsageError, match="burnin-name=kubernetes-name"):
        node_map("sim01")


def test_node_map_reads_an_inventorys_kubernetes_names(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("nodes:\n  rack1-n01: {kubernetes: gpu-a1.example}\n  rack1-n02: {}\n")
    assert node_map(str(inventory)) == {"rack1-n01": "gpu-a1.example"}
    inventory.write_text("nodes:\n  rack1-n[01-02]: {kubernetes: gpu-a1}\n")
    with pytest.raises(ConfigError, match="cannot be shared by a node set"):
        node_map(str(inventory))
    inventory.write_text("nodes:\n  rack1-n01: {kubernetes: GPU_A1}\n")
    with pytest.raises(ConfigError, match="not a Kubernetes Node name"):
        node_map(str(inventory))
    with pytest.raises(ConfigError, match="cannot read"):
        node_map(str(tmp_path / "missing.yaml"))


def test_admit_without_any_earlier_state_sets_the_condition_true() -> None:
    patch = put_back(NodeState.from_node(node()), ("GPU-01",), now=NOW)
    assert patch.action == "admit" and patch.spec is not None and patch.status is not None
    assert "spec" not in patch.spec  # no taint of ours: the taint list is not sent at all
    assert patch.status["status"]["conditions"][0]["status"] == "True"


def test_a_check_this_decision_judged_and_passed_is_not_carried() -> None:
    state = NodeState.from_node(node(taints=[ours("GPU-02_IB-03")], condition=held("burnin: GPU-02,IB-03 x")))
    decision = NodeDecision("sim03", False, failed=("GPU-02",), reasons=("GPU-02 lost",), passed=("IB-03",))
    patch = plan_node(decision, state, now=NOW)
    assert patch.spec is not None and patch.note == "burnin: GPU-02 lost"
    assert [t["value"] for t in patch.spec["spec"]["taints"]] == ["GPU-02"]
    # one it did not judge stays, named after the decision's own
    unjudged = NodeDecision("sim03", False, failed=("GPU-04",), reasons=("GPU-04 Xid 79",), passed=("IB-03",))
    assert plan_node(unjudged, state, now=NOW).note == "burnin: GPU-04,GPU-02 Xid 79"


def test_the_probe_and_watch_carry_every_earlier_id_with_their_cause() -> None:
    state = NodeState.from_node(node(taints=[ours("IB-03")], condition=held("burnin: IB-03 port down")))
    patch = take_out(state, "burnin: GPU-04 Xid 79 on gpu2", now=NOW)
    assert patch.note == "burnin: GPU-04,IB-03 Xid 79 on gpu2"


def test_keep_needs_both_our_taint_and_our_false_condition_and_the_same_ids() -> None:
    reason = "burnin: GPU-02 7 of 8 GPUs visible"
    no_condition = NodeState.from_node(node(taints=[ours("GPU-02")]))
    assert plan_node(REJECT_GPU, no_condition, now=NOW).action == "taint"  # the condition is set again
    other_value = NodeState.from_node(node(taints=[ours("GPU-09")], condition=held(reason)))
    assert plan_node(REJECT_GPU, other_value, now=NOW).action == "taint"
    two = NodeState.from_node(node(taints=[ours("GPU-02"), ours("GPU-09")], condition=held(reason)))
    assert take_out(two, reason, now=NOW, carry=False).action == "taint"  # every taint of the effect must match
    other_reason = NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 other")))
    assert plan_node(REJECT_GPU, other_reason, now=NOW).action == "taint"


def test_the_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    state = NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 old cause")))
    patch = plan_node(REJECT_GPU, state, now=NOW)
    assert patch.status is not None
    [condition] = patch.status["status"]["conditions"]
    assert condition["lastTransitionTime"] == "2025-12-01T19:00:00Z"
    assert condition["lastHeartbeatTime"] == "2025-12-01T20:00:00Z"
    assert patch.patches() == [(False, patch.spec), (True, patch.status)]  # the taint first, then the condition


def test_out_of_pool_and_the_time_taken_out() -> None:
    assert NodeState.from_node(node(cordoned=True)).out_of_pool()
    assert NodeState.from_node(node(taints=[ours("GPU-02")])).out_of_pool()
    assert not NodeState.from_node(node(taints=[OPERATOR])).out_of_pool()
    one_unknown = NodeState.from_node(node(taints=[ours("GPU-02"), ours("GPU-02", NO_EXECUTE, added="?")]))
    assert one_unknown.taken_at() is None  # the breaker errs towards counting it now
    both = NodeState.from_node(node(taints=[ours("GPU-02", added="2025-12-01T19:00:00Z"),
                                            ours("GPU-02", NO_EXECUTE, added="2025-12-01T19:30:00Z")]))
    assert both.taken_at() == NOW - 3600


def test_label_values_and_their_limit() -> None:
    assert valid_label_value("a" * 63) and not valid_label_value("a" * 64)
    assert not valid_label_value("run 1") and not valid_label_value("-run")
    patch = plan_node(REJECT_GPU, NodeState.from_node(node()), run_id="not a label value", now=NOW)
    assert patch.spec is not None and "metadata" not in patch.spec  # no label rather than a refused patch
    exact = [f"GPU-{n:02d}" for n in range(1, 21)]  # GPU-01.02....20: 63 characters
    assert len(taint_value(exact)) == 63 and taint_ids(taint_value(exact)) == tuple(exact)
    assert taint_value([*exact, "GPU-21"]).endswith("_more")
    assert taint_ids("") is None and taint_ids(None) is None and taint_ids("GPU-01_more") is None


def test_the_messages_say_what_held_the_node() -> None:
    again = plan_node(ADMIT, NodeState.from_node(node(taints=[ours("GPU-02")], condition=held("burnin: GPU-02 x"))),
                      now=NOW)
    assert again.status is not None
    assert again.status["status"]["conditions"][0]["message"] == "burnin: GPU-02 passed again"
    fresh = plan_node(ADMIT, NodeState.from_node(node()), now=NOW)
    assert fresh.status is not None
    assert fresh.status["status"]["conditions"][0]["message"] == "burnin: every check passed"
    kept = plan_node(ADMIT, NodeState.from_node(node(taints=[ours("IB-03")])), now=NOW)
    assert kept.note.endswith("(burnin/unhealthy=IB-03:NoSchedule)")
    assert plan_node(ADMIT, NodeState.from_node(node(taints=[ours("x")])), now=NOW).note.endswith(
        "(burnin/unhealthy=x:NoSchedule); left as it is")


def test_a_false_condition_without_our_taint_is_not_held_out() -> None:
    # someone removed burnin's taint by hand: an incomplete run taints again rather than keep it in the pool
    state = NodeState.from_node(node(condition=held("burnin: GPU-02 lost")))
    decision = NodeDecision("sim03", False, incomplete=("GPU-02",), reasons=("GPU-02 no answer",))
    assert plan_node(decision, state, now=NOW).action == "taint"


def test_the_condition_message_is_the_slurm_reason_capped_alike() -> None:
    decision = NodeDecision("sim03", False, failed=("GPU-02",), reasons=("GPU-02 " + "x" * 5000,))
    patch = plan_node(decision, NodeState.from_node(node()), now=NOW)
    assert patch.status is not None
    message = patch.status["status"]["conditions"][0]["message"]
    assert len(message) == 200 and message.startswith("burnin: GPU-02 xxx") and message.endswith("...")
