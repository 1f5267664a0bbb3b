"""`burnin run --gate kubernetes` against a real kube-apiserver: taints, conditions, labels, RBAC, conflicts.

The issue's done criterion: a run with sim03's GPU lost taints and conditions exactly sim03, with the GPU
checks named; a second, healthy run removes burnin's taint from sim03; a taint an operator set on sim05
is still there after both runs. The gate runs as ``burnin-gate``, the least-privilege user.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from k8s_support import burnin, our_condition, our_taints

from burnin.errors import UsageError
from burnin.gate.decide import NodeDecision
from burnin.gate.kubernetes import LABEL_ADMITTED, LABEL_RUN, NO_SCHEDULE, REASON_FAILED, taint_ids
from burnin.gate.kubernetes_apply import KubernetesGate
from burnin.reasons import reason_checks
from burnin.transport.kubernetes import KubeClient, KubeError
from burnin_lab.k8s import K8sLab

pytestmark = pytest.mark.xdist_group("k8s")

OPERATOR_TAINT = {"key": "ops.example.com/maintenance", "value": "psu-swap", "effect": "NoSchedule"}
RUN_NODES = [f"sim{n:02d}" for n in range(1, 9)]


def _operator_taints(lab: K8sLab, node: str, *taints: dict[str, Any]) -> None:
    current = lab.taints(node)
    lab.patch_node(node, {"spec": {"taints": [*current, *taints]}})


def test_a_run_taints_exactly_the_faulted_node_and_a_healthy_run_puts_it_back(
        k8s: K8sLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("BURNIN_HISTORY", str(history))  # this test's own fleet memory
    _operator_taints(k8s, "sim05", OPERATOR_TAINT)
    k8s.patch_node("sim05", {"metadata": {"labels": {"ops.example.com/owner": "alice"}}})

    first = burnin(k8s, "run", "--sim", "8", "--fault", "sim03:gpu-lost", "--gate", "kubernetes",
                   "--out", str(tmp_path / "first"))
    assert first.returncode == 1, first.stdout + first.stderr
    assert "burnin gate: taint sim03" in first.stdout
    [taint] = our_taints(k8s, "sim03")
    assert taint["effect"] == NO_SCHEDULE
    assert taint["value"].startswith("INV-01") and "_GPU-01." in taint["value"]
    condition = our_condition(k8s, "sim03")
    assert condition is not None and condition["status"] == "False" and condition["reason"] == REASON_FAILED
    decided = json.loads((tmp_path / "first" / "gate.json").read_text())["nodes"]["sim03"]
    named = {*decided["failed"], *decided["incomplete"]}
    assert "INV-01" in named and "GPU-01" in named
    assert set(reason_checks(condition["message"]) or ()) == named  # every check, GPU ones included
    assert set(taint_ids(taint["value"]) or ()) == named
    labels = k8s.node("sim03")["metadata"]["labels"]
    assert LABEL_RUN in labels and LABEL_ADMITTED not in labels
    for node in RUN_NODES:
        if node == "sim03":
            continue
        assert our_taints(k8s, node) == [], node
        healthy = our_condition(k8s, node)
        assert healthy is not None and healthy["status"] == "True", node
        assert LABEL_ADMITTED in k8s.node(node)["metadata"]["labels"], node
    assert OPERATOR_TAINT in k8s.taints("sim05")

    second = burnin(k8s, "run", "--sim", "8", "--gate", "kubernetes", "--out", str(tmp_path / "second"))
    assert second.returncode == 0, second.stdout + second.stderr
    assert our_taints(k8s, "sim03") == []
    condition = our_condition(k8s, "sim03")
    assert condition is not None and condition["status"] == "True"
    labels = k8s.node("sim03")["metadata"]["labels"]
    assert LABEL_ADMITTED in labels and LABEL_RUN not in labels
    # the operator's taint and label outlived both runs, untouched
    assert [t for t in k8s.taints("sim05") if t["key"] == OPERATOR_TAINT["key"]] == [OPERATOR_TAINT]
    assert k8s.node("sim05")["metadata"]["labels"]["ops.example.com/owner"] == "alice"
    # the history holds both gate actions on sim03, and none for the nodes that stayed healthy
    from burnin.history.store import Store

    with Store(history, create=False) as store:
        actions = [(node, action, set(ids.split(",")) if ids else set()) for node, action, ids in store.db.execute(
            "SELECT n.name, a.action, a.check_ids FROM actions a JOIN node_names n ON n.id = a.node ORDER BY a.id")]
    assert actions == [("sim03", "taint", named), ("sim03", "untaint", set())], actions


def test_dry_run_prints_the_patches_and_sends_none(k8s: K8sLab, tmp_path: Path) -> None:
    proc = burnin(k8s, "run", "--sim", "8", "--fault", "sim03:gpu-lost", "--gate", "kubernetes", "--dry-run",
                  "--out", str(tmp_path / "dry"))
    before = k8s.node("sim03")["metadata"]["resourceVersion"]
    assert "kubectl patch node sim03 --type=strategic -p" in proc.stdout, proc.stdout + proc.stderr
    assert "--subresource=status" in proc.stdout
    assert k8s.node("sim03")["metadata"]["resourceVersion"] == before


class _ConcurrentOperator:
    """The real API as the gate user; the first patch of ``node`` is preceded by an operator's change to it,
    so the gate's patch carries a resourceVersion that is no longer current: a real 409 from the server."""

    def __init__(self, lab: K8sLab, node: str) -> None:
        self.lab = lab
        self.node = node
        self.real = KubeClient()
        self.conflicts = 0
        self.interfered = False

    def get_node(self, name: str) -> dict[str, Any]:
        return self.real.get_node(name)

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.real.list_nodes()

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        if name == self.node and not self.interfered:
            self.interfered = True
            _operator_taints(self.lab, name, OPERATOR_TAINT)
        try:
            return self.real.patch_node(name, patch, status=status)
        except KubeError as exc:
            self.conflicts += exc.conflict
            raise


def test_a_concurrent_change_is_retried_not_overwritten(k8s: K8sLab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(k8s.kubeconfig("burnin-gate")))
    api = _ConcurrentOperator(k8s, "race01")
    decision = NodeDecision("race01", False, failed=("GPU-04",), reasons=("GPU-04 Xid 79 on gpu2",))
    assert KubernetesGate(api=api, run_id="race").apply({"race01": decision}, dry_run=False)
    assert api.conflicts == 1
    taints = k8s.taints("race01")
    assert OPERATOR_TAINT in taints  # the operator's change between our read and our patch survived
    assert [t["value"] for t in our_taints(k8s, "race01")] == ["GPU-04"]


def test_a_user_without_rights_gets_one_clear_line_and_exit_2(k8s: K8sLab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(k8s.kubeconfig("nobody")))
    decision = NodeDecision("rbac01", False, failed=("GPU-04",), reasons=("GPU-04 Xid 79",))
    with pytest.raises(UsageError, match=r"may not patch Nodes.*403"):
        KubernetesGate(run_id="rbac").apply({"rbac01": decision}, dry_run=False)
    assert our_taints(k8s, "rbac01") == []

    proc = burnin(k8s, "run", "--sim", "2", "--fault", "sim02:gpu-lost", "--gate", "kubernetes",
                  "--out", str(k8s.state / "rbac-run"), user="nobody")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("burnin run:")]
    assert "may not patch Nodes" in line and "nodes/status" in line and "forbidden" in line
    assert (k8s.state / "rbac-run" / "gate.json").is_file()  # the reports are written before the refusal
    assert our_taints(k8s, "sim02") == []


def test_the_breaker_counts_burnins_taints_and_holds_beyond_its_budget(
        k8s: K8sLab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from burnin.breaker import state
    from burnin.breaker.budget import Settings, budget
    from burnin.gate.kubernetes_apply import read_fleet

    monkeypatch.setenv("KUBECONFIG", str(k8s.kubeconfig("burnin-gate")))
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path / "state"))
    fleet, error = read_fleet(KubeClient())
    assert fleet is not None, error
    # whatever the tier's other tests left tainted within the window counts too: it is the fleet's state
    already = len(budget(fleet, Settings(), time.time()).counted)
    (tmp_path / "state").mkdir()
    state.save(folder=tmp_path / "state", settings=Settings(nodes=already + 2, percent=0.0))
    nodes = ["brk01", "brk02", "brk03"]
    decisions = {n: NodeDecision(n, False, failed=("GPU-04",), reasons=("GPU-04 Xid 79",)) for n in nodes}
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        assert KubernetesGate(run_id="brk").apply(decisions, dry_run=False, out=stream)
    assert [bool(our_taints(k8s, n)) for n in nodes] == [True, True, False]
    assert "brk03: held by the breaker" in out.read_text()


def test_a_node_with_no_node_object_is_left_alone_and_the_others_are_gated(
        k8s: K8sLab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(k8s.kubeconfig("burnin-gate")))
    reject = {n: NodeDecision(n, False, failed=("GPU-04",), reasons=("GPU-04 Xid 79",)) for n in ("ghost01", "solo01")}
    err = io.StringIO()
    assert not KubernetesGate(run_id="ghost").apply(reject, dry_run=False, out=io.StringIO(), err=err)
    assert "ghost01: state unknown (get node ghost01: 404" in err.getvalue()
    assert [t["value"] for t in our_taints(k8s, "solo01")] == ["GPU-04"]
