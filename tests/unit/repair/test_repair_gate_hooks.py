"""A node the repair ladder sent to the vendor keeps its reason: no gate, probe or watch drains it again with
another reason (which would hide the bundle) or resumes it; an operator returns it (docs/repair.md). A node
Slurm is rebooting is not drained meanwhile."""

from __future__ import annotations

from burnin.gate.decide import NodeDecision, sent_to_vendor
from burnin.gate.slurm import SlurmNode, drain_action, plan, resume_blockers

VENDOR = "burnin: GPU-04 sent to vendor: /var/lib/burnin/repair-bundles/n1-20261201T180000Z.tar.gz"


def test_the_vendor_reason_is_told_from_others() -> None:
    assert sent_to_vendor(VENDOR)
    assert sent_to_vendor("burnin: GPU-04,IB-03 sent to vendor: n1.tar.gz : reboot issued")
    for other in ("burnin: GPU-04 gpu3 Xid 79", "GPU-04 sent to vendor: x", "burnin: sent to vendor: x",
                  "burnin: GPU-04 gpu3 was sent to vendor: x", ""):
        assert not sent_to_vendor(other), other


def test_a_failing_run_or_probe_keeps_the_vendor_reason() -> None:
    info = SlurmNode("n1", "IDLE+DRAIN", VENDOR)
    rejected = NodeDecision("n1", False, failed=("GPU-04",), reasons=("GPU-04 gpu3 Xid 79",))
    [action] = plan({"n1": rejected}, {"n1": info})
    assert action.action == "keep" and "sent to the vendor" in action.note
    kept = drain_action("n1", "GPU-04 gpu3 Xid 79", info)
    assert kept.action == "keep" and VENDOR in kept.note


def test_a_passing_run_does_not_resume_a_node_at_the_vendor() -> None:
    admitted = NodeDecision("n1", True, passed=("GPU-04",))
    [action] = plan({"n1": admitted}, {"n1": SlurmNode("n1", "IDLE+DRAIN", VENDOR)})
    assert action.action == "keep" and "sent to the vendor" in action.note
    assert resume_blockers(VENDOR, ("GPU-04",)) == "it was sent to the vendor (an operator returns it)"
    assert resume_blockers("burnin: GPU-04 gpu3 Xid 79", ("GPU-04",)) == ""


def test_a_node_slurm_is_rebooting_is_not_drained_meanwhile() -> None:
    rejected = NodeDecision("n1", False, failed=("GPU-04",), reasons=("GPU-04 gpu3 Xid 79",))
    for state in ("DOWN+DRAIN+REBOOT_ISSUED", "IDLE+DRAIN+REBOOT_REQUESTED", "REBOOT"):
        info = SlurmNode("n1", state, "burnin: GPU-04 repair: reboot (gpu ladder), then acceptance")
        [action] = plan({"n1": rejected}, {"n1": info})
        assert action.action == "keep" and "being rebooted" in action.note, state
        assert drain_action("n1", "GPU-04 gpu3 Xid 79", info).action == "keep"
    assert drain_action("n1", "GPU-04 gpu3 Xid 79", SlurmNode("n1", "IDLE", "")).action == "drain"
