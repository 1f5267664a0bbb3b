"""The Kubernetes gate's policy, without side effects: what burnin writes on a Node, and when.

Out of the training pool, the Kubernetes way (docs/kubernetes.md):

- a taint with burnin's key :data:`TAINT_KEY`: ``NoSchedule`` for a rejected node (the gate, the probe's
  ``--drain``, the watch's drain-class events), ``NoExecute`` for the watch's evict-class events (the
  training pods leave); its value names the check ids (``GPU-02_GPU-05``: a label value holds no comma);
- the node condition :data:`CONDITION` (``False``, reason :data:`REASON_FAILED` or
  :data:`REASON_INCOMPLETE`, message ``burnin: <ids> <cause>``: the gate's reason, the one Slurm's drain
  carries), ``True`` once admitted;
- a label :data:`LABEL_RUN` with the run id on a rejected node, :data:`LABEL_ADMITTED` with the time on an
  admitted one.

burnin never removes or edits a taint, label or condition it did not set: every patch carries the whole taint
list as read (other keys as they were) with the ``resourceVersion`` it was read at, so a concurrent change is
refused by the API server and recomputed, never overwritten. It never touches ``spec.unschedulable`` (a
cordon). A node is put back only when every check burnin's taints and condition name was judged and passed
(``NodeDecision.passed``), like the Slurm gate's resume; ids it cannot read keep the node out for an operator.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from burnin.gate.decide import check_ids_text
from burnin.reasons import DRAIN_PREFIX, RUN_CHECK, reason_checks
from burnin.transport.slurm_jobs import burnin_reason

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision

DOMAIN = "burnin"
TAINT_KEY = f"{DOMAIN}/unhealthy"
LABEL_RUN = f"{DOMAIN}/rejected-by-run"
LABEL_ADMITTED = f"{DOMAIN}/admitted-at"
CONDITION = "BurninHealthy"
REASON_FAILED = "BurninCheckFailed"
REASON_INCOMPLETE = "BurninCheckIncomplete"
REASON_PASSED = "BurninChecksPassed"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
LABEL_VALUE_LIMIT = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CUT_MARK = "_more"
_CHECK_ID = re.compile(r"^([A-Z][A-Z0-9]*)-(\d+)$")
_FAMILY = re.compile(r"^([A-Z][A-Z0-9]*)-(\d+(?:\.\d+)*)$")


def now_rfc3339(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


def label_time(now: float | None = None) -> str:
    """A time as a label value (no colons): ``20261201T210003Z``."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def parse_rfc3339(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))) - time.timezone
    except (ValueError, OverflowError):
        return None


def taint_value(ids: Collection[str]) -> str:
    """The check ids as a taint value (a label value: at most 63 of ``[-A-Za-z0-9_.]``), by family:
    ``INV-01.02.11_GPU-01.03``; ids that do not fit end in ``_more``, which reads as no ids: the condition's
    message then names them (:func:`taint_ids`)."""
    families: dict[str, list[str]] = {}
    others: list[str] = []
    for check in dict.fromkeys(ids):
        match = _CHECK_ID.match(check)
        if match is None:
            others.append(re.sub(r"[^-A-Za-z0-9_.]", "-", check))
        else:
            families.setdefault(match.group(1), []).append(match.group(2))
    text = "_".join([*(f"{family}-{'.'.join(numbers)}" for family, numbers in families.items()), *others])
    text = text.strip("-_.")
    if len(text) <= LABEL_VALUE_LIMIT:
        return text
    return text[: LABEL_VALUE_LIMIT - len(_CUT_MARK)].rstrip("-_.") + _CUT_MARK


def taint_ids(value: object) -> tuple[str, ...] | None:
    """The check ids of a burnin taint's value; None when they cannot be read (cut short, edited)."""
    if not isinstance(value, str) or not value or value.endswith(_CUT_MARK):
        return None
    ids: list[str] = []
    for item in value.split("_"):
        match = _FAMILY.match(item)
        if item == RUN_CHECK:
            ids.append(item)
        elif match is not None:
            ids += [f"{match.group(1)}-{number}" for number in match.group(2).split(".")]
        else:
            return None
    return tuple(dict.fromkeys(ids))


def valid_label_value(text: str) -> bool:
    return len(text) <= LABEL_VALUE_LIMIT and _LABEL_VALUE.match(text) is not None


@dataclass(frozen=True, slots=True)
class NodeState:
    """What the gate reads of one Node object."""

    name: str
    resource_version: str
    taints: tuple[dict[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    condition: Mapping[str, Any] | None = None  # burnin's own, if the node has one
    unschedulable: bool = False  # cordoned (by anyone: burnin never cordons)

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> NodeState:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        taints = tuple(t for t in spec.get("taints") or () if isinstance(t, dict))
        conditions = [c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == CONDITION]
        labels = meta.get("labels") or {}
        return cls(str(meta.get("name", "")), str(meta.get("resourceVersion", "")), taints,
                   {str(k): str(v) for k, v in labels.items()}, conditions[0] if conditions else None,
                   bool(spec.get("unschedulable")))

    def ours(self, effect: str | None = None) -> list[dict[str, Any]]:
        return [t for t in self.taints if t.get("key") == TAINT_KEY and effect in (None, t.get("effect"))]

    def others(self) -> list[dict[str, Any]]:
        return [t for t in self.taints if t.get("key") != TAINT_KEY]

    @property
    def condition_reason(self) -> str:
        """The message of burnin's condition while it is False (its ``burnin: <ids> <cause>``), else ""."""
        if self.condition is None or self.condition.get("status") != "False":
            return ""
        return str(self.condition.get("message", ""))

    def held_ids(self) -> tuple[str, ...] | None:
        """Every check id burnin holds the node out for (its taints' values, its False condition's message);
        None when one of them cannot be read."""
        from_condition = reason_checks(self.condition_reason) if self.condition_reason else ()
        ids: list[str] = list(from_condition or ())
        for taint in self.ours():
            found = taint_ids(taint.get("value"))
            if found is None:
                if not from_condition:
                    return None
                continue  # a value cut short: the condition names them all
            ids += found
        if self.condition_reason and from_condition is None:
            return None
        return tuple(dict.fromkeys(ids))

    def out_of_pool(self) -> bool:
        """burnin holds it out (its taint), or someone cordoned it."""
        return bool(self.ours()) or self.unschedulable

    def taken_at(self) -> float | None:
        """When burnin's taint was set (its earliest ``timeAdded``), None when it cannot be read."""
        times = [parse_rfc3339(t.get("timeAdded")) for t in self.ours()]
        known = [t for t in times if t is not None]
        return min(known) if known and len(known) == len(times) else None


@dataclass(frozen=True, slots=True)
class NodePatch:
    """What the gate does to one Node: ``taint`` / ``admit`` (patches to send) or ``keep`` (a note only)."""

    node: str
    action: str  # taint | admit | keep
    note: str
    spec: dict[str, Any] | None = None  # strategic-merge patch of the Node (taints, labels)
    status: dict[str, Any] | None = None  # ... of its status subresource (burnin's condition)

    def patches(self) -> list[tuple[bool, dict[str, Any]]]:
        """``(status?, patch)`` in the order they are sent: taint and labels, then the condition."""
        return [(is_status, p) for is_status, p in ((False, self.spec), (True, self.status)) if p is not None]


def _taint(effect: str, ids: Collection[str], added: str) -> dict[str, Any]:
    return {"key": TAINT_KEY, "value": taint_value(ids), "effect": effect, "timeAdded": added}


def _condition(state: NodeState, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    stamp = now_rfc3339(now)
    same = state.condition is not None and state.condition.get("status") == status
    since = str(state.condition.get("lastTransitionTime") or stamp) if same and state.condition else stamp
    return {"type": CONDITION, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": stamp, "lastTransitionTime": since}


def take_out(state: NodeState, reason: str, *, effect: str = NO_SCHEDULE, run_id: str = "",
             failed: bool = True, now: float | None = None, carry: bool = True) -> NodePatch:
    """burnin's taint (``effect``) and False condition for ``reason`` (``burnin: <ids> <cause>``); with
    ``carry`` the check ids burnin held the node for before stay in both, nothing judged them since (a
    decision that judged them names the ones to keep itself). ``failed`` False: the reason is about checks
    that could not be measured (a node burnin holds already keeps its reason)."""
    now = time.time() if now is None else now
    wanted = burnin_reason(reason)
    ids = reason_checks(wanted)
    earlier = state.held_ids()
    if ids is None:
        ids = (RUN_CHECK,)
        wanted = burnin_reason(f"{RUN_CHECK} {wanted[len(DRAIN_PREFIX):].strip()}")
    if earlier is None:
        if state.ours():
            return NodePatch(state.name, "keep", f"already tainted ({_describe(state)}; its check ids cannot "
                                                 "be read, so burnin leaves it to an operator)")
        earlier = ()
    if carry and (extra := [c for c in earlier if c not in ids]):
        cause = wanted[len(DRAIN_PREFIX):].split(maxsplit=1)[1:]
        ids = (*ids, *extra)
        wanted = burnin_reason(" ".join([check_ids_text(ids), *cause]))
    present = state.ours(effect)
    held_already = bool(present) and state.condition_reason != ""
    if held_already and (not failed or (state.condition_reason == wanted
                                        and all(t.get("value") == taint_value(ids) for t in present))):
        return NodePatch(state.name, "keep", f"already tainted ({_describe(state)})")
    taints = [t for t in state.taints if not (t.get("key") == TAINT_KEY and t.get("effect") == effect)]
    # a node held since then keeps that time: the breaker counts from the moment burnin took it out
    added = str(present[0].get("timeAdded") or "") if present else ""
    taints.append(_taint(effect, ids, added or now_rfc3339(now)))
    labels: dict[str, str | None] = {LABEL_ADMITTED: None} if LABEL_ADMITTED in state.labels else {}
    if run_id and valid_label_value(run_id):
        labels[LABEL_RUN] = run_id
    spec: dict[str, Any] = {"spec": {"taints": taints}}
    if labels:
        spec["metadata"] = {"labels": labels}
    word = REASON_FAILED if failed else REASON_INCOMPLETE
    status = {"status": {"conditions": [_condition(state, "False", word, wanted, now)]}}
    return NodePatch(state.name, "taint", wanted, spec, status)


def reject(decision: NodeDecision, state: NodeState, *, run_id: str = "", now: float | None = None) -> NodePatch:
    """A rejected node: burnin's NoSchedule taint and False condition for the decision's checks, with those of
    an earlier reason this decision did not judge."""
    earlier = state.held_ids() or ()
    judged = {*decision.failed, *decision.incomplete, *decision.passed}
    carry = [c for c in earlier if c not in judged]
    reason = burnin_reason(decision.short_reason(carry=carry))
    return take_out(state, reason, run_id=run_id, failed=bool(decision.failed), now=now, carry=False)


def put_back(state: NodeState, passed: Collection[str], *, now: float | None = None,
             note: str = "admitted") -> NodePatch:
    """An admitted node: burnin's taints removed and its condition True, only when every check they name is
    among ``passed``; the time in :data:`LABEL_ADMITTED`. Anything else is left as it is."""
    now = time.time() if now is None else now
    held = state.held_ids()
    if held is None:
        return NodePatch(state.name, "keep", f"{note}, but burnin's taint or condition names no check ids it can "
                                             f"read ({_describe(state)}); left as it is")
    missing = [c for c in held if c != RUN_CHECK and c not in passed]
    if missing:
        return NodePatch(state.name, "keep", f"{note}, but held for {check_ids_text(missing)}, which this run did "
                                             f"not judge and pass; left as it is ({_describe(state)})")
    labels: dict[str, str | None] = {LABEL_ADMITTED: label_time(now)}
    if LABEL_RUN in state.labels:
        labels[LABEL_RUN] = None
    spec: dict[str, Any] = {"metadata": {"labels": labels}}
    if state.ours():
        spec["spec"] = {"taints": state.others()}
    message = "burnin: every check passed" if not held else f"burnin: {check_ids_text(held)} passed again"
    status = {"status": {"conditions": [_condition(state, "True", REASON_PASSED, message, now)]}}
    return NodePatch(state.name, "admit", "burnin's taint removed" if state.ours() else note, spec, status)


def plan_node(decision: NodeDecision, state: NodeState, *, run_id: str = "", now: float | None = None) -> NodePatch:
    """The gate's policy for one node's decision."""
    if decision.admitted:
        return put_back(state, decision.passed, now=now)
    return reject(decision, state, run_id=run_id, now=now)


def with_version(patch: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
    """The patch with the ``resourceVersion`` it was computed at: the API server's precondition."""
    metadata = {**(patch.get("metadata") or {}), "resourceVersion": resource_version}
    return {**patch, "metadata": metadata}


def _describe(state: NodeState) -> str:
    parts = [f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in state.ours()]
    if state.condition_reason:
        parts.append(f"{CONDITION}=False {state.condition_reason}")
    return "; ".join(parts) or "no burnin taint"
