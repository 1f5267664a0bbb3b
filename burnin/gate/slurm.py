"""The Slurm gate: drain rejected nodes, resume the ones burnin drained.

Policy (DESIGN.md, "Contracts"): a drain reason burnin sets starts with
``burnin:`` followed by the check ids. burnin resumes a node only when its
current reason starts with ``burnin:`` and every check it names was judged and
passed by the decision at hand (``NodeDecision.passed``): a node drained for
IB-01 stays drained until something that judged IB-01 found it passing, and a
reason whose ids cannot be read is never resumed from. A node drained again
keeps the ids of its earlier burnin reason that this decision did not clear. A
node drained or downed by anyone else is left exactly as it is, whatever burnin
found. Every ``scontrol`` call has a timeout, and a failing one is reported
without stopping the run.

:func:`plan` and :func:`drain_action` are pure; the rest talks to scontrol.
:class:`SlurmGate` is this policy as a registered gate (:mod:`burnin.gate.registry`):
``burnin run --gate slurm`` applies it, ``burnin probe --drain/--undrain`` drain
and resume through it. Reading node states and the scontrol argv are Slurm's job
layer (:mod:`burnin.transport.slurm_jobs`), shared with the dispatcher.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from burnin.breaker.guard import Admission, guard
from burnin.gate.decide import check_ids_text, sent_to_vendor, unjudged
from burnin.history.actions import TakenAction, record_actions
from burnin.nodes import fold, validate_name
from burnin.reasons import reason_checks
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmClient, SlurmRunner
from burnin.transport.slurm_jobs import (
    BURNIN_PREFIX,
    REASON_LIMIT,
    SlurmNode,
    burnin_reason,
    drain_argv,
    parse_show_node,
    read_nodes,
    resume_argv,
    unknown_nodes,
)

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision

__all__ = [
    "BURNIN_PREFIX", "DEFAULT_TIMEOUT", "REASON_LIMIT", "GateAction", "SlurmGate", "SlurmNode", "apply_gate",
    "burnin_reason", "drain", "drain_action", "drain_argv", "execute", "node_state", "parse_show_node", "plan",
    "read_nodes", "resume_argv", "resume_blockers", "resume_if_ours", "unknown_nodes",
]

DEFAULT_TIMEOUT = QUICK_TIMEOUT
VENDOR_HOLD = "sent to the vendor by burnin repair; left as it is until an operator returns it"
REBOOT_FLAGS = frozenset({"REBOOT", "REBOOT_REQUESTED", "REBOOT_ISSUED"})
"""A node Slurm is rebooting (``scontrol reboot``: the repair ladder, an operator) is not drained meanwhile: a
drain sent during the reboot kept slurmctld from seeing it done until ResumeTimeout (the lab showed it); after
the reboot it is judged again."""


def node_state(node: str, *, timeout: float = DEFAULT_TIMEOUT,
               client: SlurmClient | None = None) -> tuple[str, str] | None:
    """``(state, reason)`` of one node, or None when scontrol could not tell."""
    found, _ = read_nodes([validate_name(node)], timeout=timeout, client=client)
    info = found.get(node)
    return (info.state, info.reason) if info else None


@dataclass(frozen=True, slots=True)
class GateAction:
    """What the gate does to one node (or a folded set sharing the same reason)."""

    nodes: tuple[str, ...]
    action: str  # drain | resume | keep
    note: str
    argv: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return fold(self.nodes)

    def command(self) -> str:
        return shlex.join(self.argv)


def plan(decisions: Mapping[str, NodeDecision], current: Mapping[str, SlurmNode],
         *, read_error: str | None = None) -> list[GateAction]:
    """The gate's policy, without side effects.

    - rejected: drain with ``burnin: <ids> <cause>``, unless the node is held
      by someone else (operator drain, down); a node burnin drained before keeps
      its reason when this run found no failure, only incomplete checks, and its
      earlier ids that this run did not pass stay in the new reason;
    - admitted: resume a node drained with a ``burnin:`` reason only when every
      check that reason names is among the checks this decision judged and passed;
      otherwise it stays drained, with a note naming the checks it was not judged for;
    - a node whose state could not be read is left alone (and reported).
    """
    drains: dict[str, list[str]] = {}
    resumes: list[str] = []
    keeps: list[GateAction] = []
    for node, decision in sorted(decisions.items()):
        info = current.get(node)
        if info is None:
            why = read_error or "not found in Slurm"
            keeps.append(GateAction((node,), "keep", f"state unknown ({why}); left as it is"))
            continue
        if decision.admitted:
            if info.drained and info.ours:
                held = resume_blockers(info.reason, decision.passed)
                if held:
                    keeps.append(GateAction((node,), "keep", f"admitted, but {held}; left drained ({info.reason})"))
                else:
                    resumes.append(node)
            elif info.held_by_others:
                keeps.append(GateAction((node,), "keep", f"admitted, but {info.state} by someone "
                                                         f"else ({info.reason}); left as it is"))
            continue
        if info.held_by_others:
            keeps.append(GateAction((node,), "keep",
                                    f"{info.state} by someone else ({info.reason}); left as it is"))
            continue
        if info.drained and info.ours and sent_to_vendor(info.reason):
            keeps.append(GateAction((node,), "keep", f"{VENDOR_HOLD} ({info.reason})"))
            continue
        if info.flags & REBOOT_FLAGS:
            keeps.append(GateAction((node,), "keep", f"being rebooted ({info.state}); left as it is"))
            continue
        earlier = reason_checks(info.reason) if info.drained and info.ours else ()
        if earlier is None:
            keeps.append(GateAction((node,), "keep", f"already drained ({info.reason}; its check ids cannot "
                                                     "be read, so burnin leaves it to an operator)"))
            continue
        judged = {*decision.failed, *decision.incomplete, *decision.passed}
        reason = burnin_reason(decision.short_reason(carry=[c for c in earlier if c not in judged]))
        if info.drained and info.ours and (not decision.failed or info.reason == reason):
            keeps.append(GateAction((node,), "keep", f"already drained ({info.reason})"))
        else:
            drains.setdefault(reason, []).append(node)
    actions = [
        GateAction(tuple(nodes), "drain", reason, tuple(drain_argv(fold(nodes), reason)))
        for reason, nodes in drains.items()
    ]
    if resumes:
        actions.append(GateAction(tuple(resumes), "resume", "drained by burnin, now admitted",
                                  tuple(resume_argv(fold(resumes)))))
    return actions + keeps


def resume_blockers(reason: str, passed: Collection[str]) -> str:
    """Why a node drained with burnin's ``reason`` may not be resumed on ``passed`` ("" when it may)."""
    if sent_to_vendor(reason):
        return "it was sent to the vendor (an operator returns it)"
    missing = unjudged(reason, passed)
    if missing is None:
        return "its drain reason names no check ids burnin can read"
    if missing:
        return f"drained for {check_ids_text(missing)}, which this run did not judge and pass"
    return ""


def execute(actions: Sequence[GateAction], *, dry_run: bool, timeout: float = DEFAULT_TIMEOUT,
            client: SlurmRunner | None = None, out: TextIO | None = None,
            err: TextIO | None = None) -> bool:
    """Run (or, with ``dry_run``, print) the actions; False when a command failed.

    Without ``out`` only failures (on ``err``) and dry-run commands (on stdout)
    are written: the probe prints exactly one line of its own.
    """
    err = err or sys.stderr
    ok = True
    taken: list[TakenAction] = []
    for action in actions:
        if dry_run:
            text = f"# {action.target}: {action.note}" if action.action == "keep" else action.command()
            (out or sys.stdout).write(printable(text) + "\n")
            continue
        if action.action == "keep":
            if out is not None:
                out.write(printable(f"burnin gate: {action.target}: {action.note}") + "\n")
            continue
        result = (client or SlurmClient()).run(action.argv, timeout=timeout)
        if result.ok:
            if out is not None:
                detail = f": {action.note}" if action.action == "drain" else ""
                out.write(printable(f"burnin gate: {action.action} {action.target}{detail}") + "\n")
            ids = tuple(reason_checks(action.note) or ()) if action.action == "drain" else ()
            taken += [TakenAction(node, action.action, ids, action.note) for node in action.nodes]
        else:
            ok = False
            err.write(printable(f"burnin gate: could not {action.action} {action.target}: "
                                f"{result.describe_failure()}") + "\n")
    record_actions(taken, warn=lambda line: err.write(line + "\n"))  # the fleet's memory (docs/history.md)
    return ok


def apply_gate(decisions: Mapping[str, NodeDecision], *, dry_run: bool,
               timeout: float = DEFAULT_TIMEOUT, client: SlurmRunner | None = None,
               out: TextIO | None = None, err: TextIO | None = None) -> list[GateAction]:
    """Read the nodes' states, plan, and drain/resume (or print with ``dry_run``)."""
    actions, _ = _apply(decisions, dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)
    return actions


def _apply(decisions: Mapping[str, NodeDecision], *, dry_run: bool, timeout: float, client: SlurmRunner | None,
           out: TextIO | None, err: TextIO | None) -> tuple[list[GateAction], bool]:
    client = client or SlurmClient()
    current, read_error = read_nodes(list(decisions), timeout=timeout, client=client)
    if read_error:
        (err or sys.stderr).write(printable(f"burnin gate: cannot read node states: {read_error}") + "\n")
    actions = plan(decisions, current, read_error=read_error)
    out = out or sys.stdout
    with _breaker(actions, dry_run=dry_run, timeout=timeout, client=client, err=err) as (actions, admission):
        ok = execute(actions, dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)
    if admission.held:
        out.write(printable(f"burnin gate: the breaker held {len(admission.held)} of "
                            f"{len(admission.withheld()) + len(admission.allowed)} drain(s) "
                            f"({fold(admission.held)}): their verdicts stand, only the drain was withheld; "
                            "`burnin breaker allow N` widens the budget") + "\n")
    if admission.recorded:
        out.write(printable(f"burnin gate: record mode: {fold(admission.recorded)} not drained, only recorded; "
                            "their verdicts stand") + "\n")
    return actions, ok and read_error is None


@contextlib.contextmanager
def _breaker(actions: Sequence[GateAction], *, dry_run: bool, timeout: float, client: SlurmRunner,
             err: TextIO | None) -> Iterator[tuple[list[GateAction], Admission]]:
    """The actions with every drain the breaker holds turned into a keep (docs/breaker.md); the claim file
    is held until the caller has sent the drains."""
    reasons = {node: action.note for action in actions if action.action == "drain" for node in action.nodes}
    checks = {node: reason_checks(reason) for node, reason in reasons.items()}
    # A budget too small for every drain goes first to nodes a check found broken, then to those held
    # for what the run could not measure (RUN: a dry or partial run, unreadable ids), each by name.
    first = sorted(reasons, key=lambda node: (not any(c != "RUN" for c in checks[node] or ()), node))
    with guard(first, by="gate", reasons=reasons, checks=checks, client=client, timeout=timeout,
               dry_run=dry_run) as admission:
        for note in admission.notes:
            (err or sys.stderr).write(printable(note) + "\n")
        guarded: list[GateAction] = []
        for action in actions:
            withheld = admission.withheld()
            if action.action != "drain" or not withheld.keys() & set(action.nodes):
                guarded.append(action)
                continue
            allowed = [node for node in action.nodes if node not in withheld]
            if allowed:
                guarded.append(GateAction(tuple(allowed), "drain", action.note,
                                          tuple(drain_argv(fold(allowed), action.note))))
            guarded += [GateAction((node,), "keep", admission.line(node).removeprefix(f"{node}: "))
                        for node in action.nodes if node in withheld]
        yield guarded, admission


def drain_action(node: str, reason: str, info: SlurmNode) -> GateAction:
    """What draining ``node`` for ``reason`` means now: keep it (someone else holds it, or burnin
    drained it already for that reason, or for one whose check ids cannot be read) or drain it. A node
    burnin drained before for other checks keeps their ids in the new reason: nothing judged them since."""
    if info.held_by_others:
        return GateAction((node,), "keep", f"{info.state} by someone else ({info.reason}); left as it is")
    if info.drained and info.ours and sent_to_vendor(info.reason):
        return GateAction((node,), "keep", f"{VENDOR_HOLD} ({info.reason})")
    if info.flags & REBOOT_FLAGS:
        return GateAction((node,), "keep", f"being rebooted ({info.state}); left as it is")
    earlier = reason_checks(info.reason) if info.drained and info.ours else ()
    if earlier is None:
        return GateAction((node,), "keep", f"already drained ({info.reason})")
    wanted = burnin_reason(reason)
    ids = reason_checks(wanted)
    if ids is not None and (extra := [c for c in earlier if c not in ids]):
        cause = wanted[len(BURNIN_PREFIX):].split(maxsplit=1)[1:]
        wanted = burnin_reason(" ".join([check_ids_text((*ids, *extra)), *cause]))
    if info.drained and info.reason == wanted:
        return GateAction((node,), "keep", f"already drained ({info.reason})")
    return GateAction((node,), "drain", wanted, tuple(drain_argv(node, wanted)))


def drain(node: str, reason: str, *, dry_run: bool = False, timeout: float = DEFAULT_TIMEOUT,
          client: SlurmRunner | None = None, out: TextIO | None = None,
          err: TextIO | None = None) -> bool:
    """Drain ``node`` with a burnin reason, unless someone else holds it; True if drained."""
    client = client or SlurmClient()
    found, read_error = read_nodes([validate_name(node)], timeout=timeout, client=client)
    info = found.get(node)
    if info is None:
        (err or sys.stderr).write(printable(f"burnin: cannot read the state of {node}: "
                                            f"{read_error or 'not found in Slurm'}; not drained") + "\n")
        return False
    action = drain_action(node, reason, info)
    if action.action == "keep":
        return info.drained and info.ours
    with _breaker([action], dry_run=dry_run, timeout=timeout, client=client, err=err) as (_, admission):
        if admission.withheld():
            (err or sys.stderr).write(printable(f"burnin: {admission.line(node)}") + "\n")
            return False
        return execute([action], dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)


def resume_if_ours(node: str, *, passed: Collection[str], dry_run: bool = False,
                   timeout: float = DEFAULT_TIMEOUT, client: SlurmRunner | None = None, out: TextIO | None = None,
                   err: TextIO | None = None) -> bool:
    """Resume ``node`` only if it is drained with a ``burnin:`` reason every check of which is among
    ``passed`` (the checks the caller judged and passed on it); True if resumed."""
    client = client or SlurmClient()
    found, _ = read_nodes([validate_name(node)], timeout=timeout, client=client)
    info = found.get(node)
    if info is None or not (info.drained and info.ours) or resume_blockers(info.reason, passed):
        return False
    action = GateAction((node,), "resume", "drained by burnin, now healthy", tuple(resume_argv(node)))
    return execute([action], dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)


class SlurmGate:
    """The Slurm gate as a registered gate (:class:`burnin.gate.registry.Gate`)."""

    name = "slurm"

    def __init__(self, *, client: SlurmRunner | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._client = client
        self._timeout = timeout

    def apply(self, decisions: Mapping[str, NodeDecision], *, dry_run: bool, out: TextIO | None = None,
              err: TextIO | None = None) -> bool:
        _, ok = _apply(decisions, dry_run=dry_run, timeout=self._timeout, client=self._client, out=out, err=err)
        return ok

    def drain(self, node: str, reason: str, *, dry_run: bool = False) -> bool:
        return drain(node, reason, dry_run=dry_run, timeout=self._timeout, client=self._client)

    def resume(self, node: str, *, passed: Collection[str], dry_run: bool = False) -> bool:
        return resume_if_ours(node, passed=passed, dry_run=dry_run, timeout=self._timeout, client=self._client)
