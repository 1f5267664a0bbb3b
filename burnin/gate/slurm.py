"""The gate that acts: drain rejected nodes, resume the ones burnin drained.

Policy (DESIGN.md, "Contracts"): a drain reason burnin sets starts with
``burnin:`` followed by the check ids. burnin resumes a node only when its
current reason starts with ``burnin:``; a node drained or downed by anyone
else is left exactly as it is, whatever burnin found. Every ``scontrol`` call
has a timeout, and a failing one is reported without stopping the run.

The argv builders and :func:`plan` are pure; the rest talks to scontrol.
``burnin probe --drain/--undrain`` uses :func:`drain` and :func:`resume_if_ours`.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from burnin.nodes import fold, validate_name
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmClient, SlurmRunner, show_node_argv

if TYPE_CHECKING:
    from burnin.gate.decide import NodeDecision

BURNIN_PREFIX = "burnin:"
REASON_LIMIT = 200
DEFAULT_TIMEOUT = QUICK_TIMEOUT

_STATE_RE = re.compile(r"(?:^|\s)State=(\S+)")
# Slurm prints ``Reason=<text> [user@time]``; the text itself may hold spaces and '='.
_REASON_RE = re.compile(r"(?:^|\s)Reason=(.*?) \[[^\]\s]*@[^\]\s]*\](?=\s|$)")
_REASON_TAIL_RE = re.compile(r"(?:^|\s)Reason=(.*)$")
_NAME_RE = re.compile(r"^NodeName=(\S+)")
_NOT_FOUND_RE = re.compile(r"Node (\S+) not found")
# Base states and flags under which Slurm starts no new job on a node.
_UNAVAILABLE = frozenset({"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN",
                          "POWERING_DOWN", "POWERING_UP", "REBOOT_ISSUED", "UNKNOWN"})
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """A node as ``scontrol show node`` reports it: ``State=IDLE+DRAIN``, its reason."""

    name: str
    state: str
    reason: str = ""

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(part.rstrip("*") for part in self.state.upper().split("+") if part)

    @property
    def drained(self) -> bool:
        """Drained or draining (DRAIN flag, with or without jobs still running)."""
        return "DRAIN" in self.flags

    @property
    def busy(self) -> bool:
        return bool(self.flags & _BUSY)

    @property
    def ours(self) -> bool:
        return self.reason.startswith(BURNIN_PREFIX)

    @property
    def held_by_others(self) -> bool:
        """Out of the pool for a reason burnin did not set (operator drain, down, fail)."""
        return bool(self.reason) and not self.ours and bool(self.flags & _UNAVAILABLE)

    @property
    def schedulable(self) -> bool:
        return not self.flags & _UNAVAILABLE


def burnin_reason(text: str, limit: int = REASON_LIMIT) -> str:
    """``burnin: <text>`` on one line, at most ``limit`` characters.

    The text carries what a node printed: line breaks become spaces and every
    other control character is shown escaped (``\\x1b``), never passed to Slurm raw.
    """
    text = printable(" ".join(text.split()))
    if not text.startswith(BURNIN_PREFIX):
        text = f"{BURNIN_PREFIX} {text}".rstrip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drain_argv(node: str, reason: str) -> list[str]:
    """``scontrol update`` draining ``node`` (a name or a folded set) with a burnin reason."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={burnin_reason(reason)}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """``scontrol --oneliner show node`` output -> nodes by name (unknown names omitted)."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        name = _NAME_RE.match(line.strip())
        if name is None:
            continue
        state = _STATE_RE.search(line)
        reason = _REASON_RE.search(line) or _REASON_TAIL_RE.search(line)
        nodes[name.group(1)] = SlurmNode(
            name.group(1), state.group(1) if state else "UNKNOWN",
            reason.group(1).strip() if reason else "",
        )
    return nodes


def unknown_nodes(text: str) -> list[str]:
    """Names scontrol said it does not know (``Node X not found``)."""
    return _NOT_FOUND_RE.findall(text)


def read_nodes(nodes: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT,
               client: SlurmRunner | None = None) -> tuple[dict[str, SlurmNode], str | None]:
    """Current state of ``nodes`` in one scontrol call; the error line when it failed."""
    if not nodes:
        return {}, None
    result = (client or SlurmClient()).run(show_node_argv(fold(nodes)), timeout=timeout)
    found = parse_show_node(result.stdout)
    if result.error or result.timed_out or (not found and result.exit_status != 0):
        return found, result.describe_failure()
    return found, None


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
      its reason when this run found no failure, only incomplete checks.
    - admitted: resume only a node drained with a ``burnin:`` reason.
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
                resumes.append(node)
            elif info.held_by_others:
                keeps.append(GateAction((node,), "keep", f"admitted, but {info.state} by someone "
                                                         f"else ({info.reason}); left as it is"))
            continue
        reason = burnin_reason(decision.short_reason())
        if info.held_by_others:
            keeps.append(GateAction((node,), "keep",
                                    f"{info.state} by someone else ({info.reason}); left as it is"))
        elif info.drained and info.ours and (not decision.failed or info.reason == reason):
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


def execute(actions: Sequence[GateAction], *, dry_run: bool, timeout: float = DEFAULT_TIMEOUT,
            client: SlurmClient | None = None, out: TextIO | None = None,
            err: TextIO | None = None) -> bool:
    """Run (or, with ``dry_run``, print) the actions; False when a command failed.

    Without ``out`` only failures (on ``err``) and dry-run commands (on stdout)
    are written: the probe prints exactly one line of its own.
    """
    err = err or sys.stderr
    ok = True
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
        else:
            ok = False
            err.write(printable(f"burnin gate: could not {action.action} {action.target}: "
                                f"{result.describe_failure()}") + "\n")
    return ok


def apply_gate(decisions: Mapping[str, NodeDecision], *, dry_run: bool,
               timeout: float = DEFAULT_TIMEOUT, client: SlurmClient | None = None,
               out: TextIO | None = None, err: TextIO | None = None) -> list[GateAction]:
    """Read the nodes' states, plan, and drain/resume (or print with ``dry_run``)."""
    client = client or SlurmClient()
    current, read_error = read_nodes(list(decisions), timeout=timeout, client=client)
    if read_error:
        (err or sys.stderr).write(printable(f"burnin gate: cannot read node states: {read_error}") + "\n")
    actions = plan(decisions, current, read_error=read_error)
    execute(actions, dry_run=dry_run, timeout=timeout, client=client, out=out or sys.stdout, err=err)
    return actions


def drain(node: str, reason: str, *, dry_run: bool = False, timeout: float = DEFAULT_TIMEOUT,
          client: SlurmClient | None = None, out: TextIO | None = None,
          err: TextIO | None = None) -> bool:
    """Drain ``node`` with a burnin reason, unless someone else holds it; True if drained."""
    client = client or SlurmClient()
    found, read_error = read_nodes([validate_name(node)], timeout=timeout, client=client)
    info = found.get(node)
    if info is None:
        (err or sys.stderr).write(printable(f"burnin: cannot read the state of {node}: "
                                            f"{read_error or 'not found in Slurm'}; not drained") + "\n")
        return False
    if info.held_by_others:
        return False
    action = GateAction((node,), "drain", burnin_reason(reason), tuple(drain_argv(node, reason)))
    if info.drained and info.reason == action.note:
        return True
    return execute([action], dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)


def resume_if_ours(node: str, *, dry_run: bool = False, timeout: float = DEFAULT_TIMEOUT,
                   client: SlurmClient | None = None, out: TextIO | None = None,
                   err: TextIO | None = None) -> bool:
    """Resume ``node`` only if it is drained with a ``burnin:`` reason; True if resumed."""
    client = client or SlurmClient()
    found, _ = read_nodes([validate_name(node)], timeout=timeout, client=client)
    info = found.get(node)
    if info is None or not (info.drained and info.ours):
        return False
    action = GateAction((node,), "resume", "drained by burnin, now healthy", tuple(resume_argv(node)))
    return execute([action], dry_run=dry_run, timeout=timeout, client=client, out=out, err=err)
