"""What the watch does in Kubernetes (``burnin watch --gate kubernetes``; docs/kubernetes.md).

- evict-class events: burnin's ``NoExecute`` taint, the check id in its value: every pod without a matching
  toleration (the training job's) is evicted by Kubernetes itself, and nothing new is scheduled there;
- drain-class events: burnin's ``NoSchedule`` taint and its ``BurninHealthy=False`` condition: the running
  pods finish, nothing new starts.

Both go through the Kubernetes gate (:class:`burnin.gate.kubernetes_apply.KubernetesGate`): its rules (never
over a taint or condition someone else set, the resourceVersion retried on conflict) and the fleet-wide
breaker. The daemon finds its Node by ``$KUBERNETES_NODE_NAME`` (the DaemonSet's downward API,
``spec.nodeName``), else by ``--node``. There are no jobs to release: Kubernetes reschedules evicted pods.
"""

from __future__ import annotations

import os
from typing import TextIO

from burnin.errors import UsageError
from burnin.gate.kubernetes import NO_EXECUTE, NO_SCHEDULE, TAINT_KEY, taint_value
from burnin.gate.kubernetes_apply import NODE_NAME_ENV, KubernetesGate
from burnin.reasons import reason_checks
from burnin.text import printable
from burnin.transport.kubernetes import KubeError
from burnin.watch.actions import Outcome, Step


class KubernetesActor:
    """The watch's actions on its own Node (:class:`burnin.watch.actions.Actor`)."""

    name = "Kubernetes"

    def __init__(self, node: str, *, gate: KubernetesGate | None = None, dry_run: bool = False,
                 out: TextIO | None = None) -> None:
        self.node = node
        kube_name = os.environ.get(NODE_NAME_ENV) or node
        self.gate = gate or KubernetesGate(names={node: kube_name})
        self.dry_run = dry_run
        self.out = out

    def connect(self) -> None:
        """Read the own Node once at start: wrong credentials or a wrong name are a usage error now, not at
        the first event (and the client is loaded before it counts)."""
        try:
            self.gate.api.get_node(self.gate.node_name(self.node))
        except KubeError as exc:
            raise UsageError(f"--gate kubernetes: cannot read this node's Node object: {exc}") from None

    def out_of_pool(self) -> bool:
        return self.gate.out_of_pool(self.node)

    def _taint(self, reason: str, effect: str) -> Outcome:
        ids = reason_checks(reason) or ("RUN",)
        command = f"taint {self.gate.node_name(self.node)} {TAINT_KEY}={taint_value(ids)}:{effect}"
        ok, note = self.gate.take_out(self.node, reason, effect=effect, dry_run=self.dry_run, out=self.out)
        return Outcome((Step(command, ok, printable(note, limit=300)),), out_of_pool=ok)

    def drain(self, reason: str) -> Outcome:
        return self._taint(reason, NO_SCHEDULE)

    def evict(self, reason: str) -> Outcome:
        return self._taint(reason, NO_EXECUTE)

    def release(self, job: str) -> Step:
        return Step(f"# job {job}", True, "Kubernetes reschedules evicted pods itself")
