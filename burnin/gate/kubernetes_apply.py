"""The Kubernetes gate acting: read each Node, plan (:mod:`burnin.gate.kubernetes`), patch it, retry on conflict.

``burnin run|soak|sweep --gate kubernetes`` applies the decisions (:class:`KubernetesGate`), ``burnin probe
--gate kubernetes --drain/--undrain`` and ``burnin watch --gate kubernetes`` take one node out and put it back
through the same code. Every patch carries the ``resourceVersion`` its plan was computed from; a 409 Conflict
(another controller changed the Node in between) reads the Node again and plans again, up to
:data:`CONFLICT_RETRIES` times. With ``dry_run`` the Nodes are read and the patches printed as ``kubectl``
commands, nothing is sent. Every drain asks the fleet-wide breaker first (docs/breaker.md): its shared state
is burnin's taints on the cluster's Nodes (:func:`read_fleet`).

A user the API server denies (401/403), or no credentials at all, is a configuration error: one line per
node, then :class:`~burnin.errors.UsageError` (exit 2) naming the role docs/kubernetes.md shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from burnin.breaker.budget import Drained, Fleet
from burnin.breaker.guard import guard
from burnin.errors import UsageError
from burnin.gate.kubernetes import NO_EXECUTE, NO_SCHEDULE, NodePatch, NodeState, plan_node, put_back, take_out
from burnin.gate.kubernetes import with_version as _with_version
from burnin.history.actions import TakenAction, record_actions
from burnin.outdir import new_run_id
from burnin.reasons import reason_checks
from burnin.text import printable
from burnin.transport.kubernetes import KubeClient, KubeError, NodeApi

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision

CONFLICT_RETRIES = 5
NODE_NAME_ENV = "KUBERNETES_NODE_NAME"  # the DaemonSet's downward API: spec.nodeName
NODE_MAP_ENV = "BURNIN_K8S_NODE_MAP"  # burnin=kubernetes,... when the Node names differ from burnin's
DENIED_HINT = ("the credentials may not patch Nodes (docs/kubernetes.md, 'Least privilege': get, list and patch "
               "on nodes and nodes/status)")

Plan = Callable[[NodeState], NodePatch]


def kubectl_command(node: str, patch: Mapping[str, Any], *, status: bool) -> str:
    argv = ["kubectl", "patch", "node", node, *(["--subresource=status"] if status else []), "--type=strategic",
            "-p", json.dumps(patch, sort_keys=True, separators=(",", ":"))]
    return shlex.join(argv)


def update_node(api: NodeApi, name: str, plan: Plan, *, dry_run: bool = False, out: TextIO | None = None,
                read: dict[str, Any] | None = None, node: str | None = None) -> NodePatch:
    """Read the Node (``read``: as the caller just read it), plan, send the patches with the resourceVersion
    read; on a conflict read and plan again. What was sent goes to the history as a gate action of ``node``
    (burnin's name of it; default ``name``).

    Raises :class:`KubeError` when the Node cannot be read or patched (the last conflict included).
    """
    document = read if read is not None else api.get_node(name)
    for attempt in range(CONFLICT_RETRIES + 1):
        state = NodeState.from_node(document)
        patch = plan(state)
        if dry_run:
            for is_status, body in patch.patches():
                (out or sys.stdout).write(kubectl_command(name, body, status=is_status) + "\n")
            return patch
        try:
            version = state.resource_version
            for is_status, body in patch.patches():
                document = api.patch_node(name, _with_version(body, version), status=is_status)
                version = str((document.get("metadata") or {}).get("resourceVersion", version))
            if patch.action == "taint":  # out of the pool (again: a changed reason is a new action)
                ids = reason_checks(patch.note)
                record_actions([TakenAction(node or name, "taint", tuple(ids or ()), patch.note)])
            elif patch.action == "admit" and state.ours():  # back in (a healthy node's condition refresh is not)
                record_actions([TakenAction(node or name, "untaint", (), patch.note)])
            return patch
        except KubeError as exc:
            if not exc.conflict or attempt == CONFLICT_RETRIES:
                raise
            document = api.get_node(name)  # another controller changed it: plan again on what it wrote
    raise AssertionError("unreachable")  # pragma: no cover


def read_fleet(api: NodeApi, names: Mapping[str, str] | None = None) -> tuple[Fleet | None, str | None]:
    """The breaker's shared state: every Node, and those burnin's taint holds out, with the taint's time
    (``names``: a Node's name -> burnin's, where they differ)."""
    try:
        nodes = [NodeState.from_node(node) for node in api.list_nodes()]
    except KubeError as exc:
        return None, str(exc)
    names = names or {}
    held = tuple(Drained(names.get(node.name, node.name), node.condition_reason or "burnin taint", node.taken_at())
                 for node in nodes if node.ours())
    return Fleet(len(nodes), held), None


def node_map(text: str | None = None) -> dict[str, str]:
    """burnin's node name -> the Node's name, from ``BURNIN_K8S_NODE_MAP``: pairs (``sim01=gpu-a1,sim02=gpu-a2``)
    or an inventory file (its nodes' ``kubernetes:`` names, burnin.inventory)."""
    text = os.environ.get(NODE_MAP_ENV, "") if text is None else text
    if text.strip().endswith((".yaml", ".yml")):
        from burnin.inventory import load_inventory

        inventory = load_inventory(text.strip())  # a ConfigError names the file, key and line
        return {name: node.kubernetes for name, node in inventory.nodes.items() if node.kubernetes}
    names: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        ours, sep, theirs = item.partition("=")
        if not sep or not ours.strip() or not theirs.strip():
            raise UsageError(f"${NODE_MAP_ENV}: {item!r} is not burnin-name=kubernetes-name")
        names[ours.strip()] = theirs.strip()
    return names


class KubernetesGate:
    """The Kubernetes gate as a registered gate (:class:`burnin.gate.registry.Gate`)."""

    name = "kubernetes"

    def __init__(self, *, api: NodeApi | None = None, names: Mapping[str, str] | None = None,
                 run_id: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self._api = api
        self.names = dict(node_map() if names is None else names)
        self.run_id = run_id or new_run_id()
        self.clock = clock

    @property
    def api(self) -> NodeApi:
        if self._api is None:
            self._api = KubeClient()
        return self._api

    def node_name(self, node: str) -> str:
        return self.names.get(node, node)

    # ------------------------------------------------------------------ the run's decisions

    def apply(self, decisions: Mapping[str, NodeDecision], *, dry_run: bool, out: TextIO | None = None,
              err: TextIO | None = None) -> bool:
        out = out or sys.stdout
        err = err or sys.stderr
        now = self.clock()
        plans = {node: self._plan(decision, now) for node, decision in sorted(decisions.items())}
        states: dict[str, NodeState] = {}
        documents: dict[str, dict[str, Any]] = {}
        ok = True
        for node in plans:
            try:
                documents[node] = self.api.get_node(self.node_name(node))
                states[node] = NodeState.from_node(documents[node])
            except KubeError as exc:
                if exc.denied or exc.config:
                    return self._failed(f"cannot read the Nodes: {exc}", exc, err)
                ok = False  # this node is left as it is (a Node not registered, an API hiccup), the others go on
                err.write(printable(f"burnin gate: {node}: state unknown ({exc}); left as it is") + "\n")
        drains = {node: patch.note for node, patch in ((n, plans[n](s)) for n, s in states.items())
                  if patch.action == "taint"}
        denied: KubeError | None = None
        with self._breaker(drains, dry_run=dry_run, err=err) as held:
            for node, plan in plans.items():
                if node not in states:
                    continue
                if node in held:
                    out.write(printable(f"burnin gate: {node}: {held[node]}") + "\n")
                    continue
                try:
                    patch = update_node(self.api, self.node_name(node), plan, dry_run=dry_run, out=out, node=node,
                                        read=documents[node])
                except KubeError as exc:
                    ok = False
                    denied = exc if exc.denied else denied
                    err.write(printable(f"burnin gate: could not update {node}: {exc}") + "\n")
                    continue
                if not dry_run or patch.action == "keep":
                    out.write(printable(self._said(node, patch, dry_run)) + "\n")
        if denied is not None:
            raise UsageError(f"--gate kubernetes: {DENIED_HINT}: {denied}")
        return ok

    def _plan(self, decision: NodeDecision, now: float) -> Plan:
        return lambda state: plan_node(decision, state, run_id=self.run_id, now=now)

    @staticmethod
    def _said(node: str, patch: NodePatch, dry_run: bool) -> str:
        if patch.action == "keep":
            return f"{'# ' if dry_run else 'burnin gate: '}{node}: {patch.note}"
        verb = "taint" if patch.action == "taint" else "admit"
        return f"burnin gate: {verb} {node}: {patch.note}"

    def _failed(self, line: str, exc: KubeError, err: TextIO) -> bool:
        err.write(printable(f"burnin gate: {line}") + "\n")
        if exc.denied or exc.config:
            raise UsageError(f"--gate kubernetes: {DENIED_HINT}: {exc}" if exc.denied else f"--gate kubernetes: {exc}")
        return False

    @contextlib.contextmanager
    def _breaker(self, drains: Mapping[str, str], *, dry_run: bool, err: TextIO) -> Iterator[dict[str, str]]:
        """The breaker around a set of taints (docs/breaker.md): yields node -> why it is held (record mode or
        the budget); the claim file is held until the caller has sent the taints. Nodes a check found broken
        come first, then those held only for what the run could not measure (RUN)."""
        checks = {node: reason_checks(reason) for node, reason in drains.items()}
        first = sorted(drains, key=lambda node: (not any(c != "RUN" for c in checks[node] or ()), node))
        back = {theirs: ours for ours, theirs in self.names.items()}
        with guard(first, by="gate", reasons=drains, checks=checks, dry_run=dry_run,
                   fleet=lambda: read_fleet(self.api, back)) as admission:
            for note in admission.notes:
                err.write(printable(note) + "\n")
            yield {node: admission.line(node).removeprefix(f"{node}: ") for node in admission.withheld()}

    # ------------------------------------------------------------------ one node (probe, watch)

    def take_out(self, node: str, reason: str, *, effect: str = NO_SCHEDULE, dry_run: bool = False,
                 out: TextIO | None = None, err: TextIO | None = None) -> tuple[bool, str]:
        """burnin's taint (``effect``) and False condition on ``node``, if the breaker allows; (out of the pool
        now, what happened)."""
        err = err or sys.stderr
        name = self.node_name(node)
        now = self.clock()

        def plan(state: NodeState) -> NodePatch:
            return take_out(state, reason, effect=effect, run_id="", now=now)

        try:
            document = self.api.get_node(name)
            state = NodeState.from_node(document)
        except KubeError as exc:
            if exc.denied or exc.config:
                raise
            return False, str(exc)
        first = plan(state)
        if first.action == "keep":
            return True, first.note
        with self._breaker({node: first.note}, dry_run=dry_run, err=err) as held:
            if node in held:
                return False, f"{held[node]}; not tainted, the node stays in service (burnin breaker status)"
            try:
                done = update_node(self.api, name, plan, dry_run=dry_run, out=out, read=document, node=node)
            except KubeError as exc:
                if exc.denied:
                    raise
                return False, str(exc)
        return True, f"{effect} taint: {done.note}"

    def drain(self, node: str, reason: str, *, dry_run: bool = False) -> bool:
        try:
            ok, note = self.take_out(node, reason, dry_run=dry_run)
        except KubeError as exc:
            sys.stderr.write(printable(f"burnin: {node}: not taken out: {exc}") + "\n")
            raise UsageError(f"--gate kubernetes: {DENIED_HINT}: {exc}" if exc.denied
                             else f"--gate kubernetes: {exc}") from None
        if not ok:
            sys.stderr.write(printable(f"burnin: {node}: not taken out: {note}") + "\n")
        return ok

    def resume(self, node: str, *, passed: Collection[str], dry_run: bool = False) -> bool:
        now = self.clock()
        try:
            patch = update_node(self.api, self.node_name(node), lambda s: put_back(s, passed, now=now,
                                                                                    note="healthy"),
                                dry_run=dry_run, node=node)
        except KubeError as exc:
            sys.stderr.write(printable(f"burnin: {node}: not put back: {exc}") + "\n")
            if exc.denied or exc.config:
                raise UsageError(f"--gate kubernetes: {DENIED_HINT}: {exc}" if exc.denied
                                 else f"--gate kubernetes: {exc}") from None
            return False
        return patch.action == "admit"

    def out_of_pool(self, node: str) -> bool:
        """burnin's taint holds it out, or someone cordoned it; also True when the Node cannot be read."""
        try:
            return NodeState.from_node(self.api.get_node(self.node_name(node))).out_of_pool()
        except KubeError:
            return True


__all__ = ["NO_EXECUTE", "NO_SCHEDULE", "KubernetesGate", "kubectl_command", "node_map", "read_fleet", "update_node"]
