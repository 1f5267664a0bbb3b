"""Take the repair ladder's steps on nodes burnin drained, and return a node to service only on a pass.

For each node (:func:`repair_node`):

1. Slurm says how it is. Only a node out of service (DRAIN or DOWN) with a reason burnin set (``burnin:``,
   check ids readable) is repaired; an operator's drain or down is never touched, a node in service has
   nothing to repair, a node sent to the vendor waits for an operator;
2. the policy (:mod:`burnin.repair.policy`) names the step; the journal records it before it is taken;
3. the step: ``reset`` runs ``nvidia-smi -r -i N`` on the node for each GPU its reason names, only when
   ``nvidia-smi --query-compute-apps`` says no process holds it; ``reboot`` asks Slurm
   (``scontrol reboot ASAP nextstate=RESUME reason=...`` inside a maintenance reservation of the node: the
   site's RebootProgram does it), waits for the node to come back and drains it again; ``vendor`` writes
   the bundle (:mod:`burnin.repair.bundle`) and names it in the drain reason; the node stays out;
4. the acceptance suites run on the node again (``burnin run``'s code, the site's suites); it returns to
   service only when they admit it and every check of its drain reason was judged and passed (the gate's
   rule, :func:`burnin.gate.slurm.resume_blockers`), and only while its reason is still burnin's;
   otherwise the ladder climbs and the loop takes the next step, until a pass or the vendor.

Every command reaches the node through the launch layer (``Reach``) or Slurm's client: nothing here starts
a process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from burnin.gate.decide import VENDOR_MARK, check_ids_text, sent_to_vendor
from burnin.gate.slurm import resume_blockers
from burnin.reasons import reason_checks
from burnin.repair import bundle as bundles
from burnin.repair.journal import Journal
from burnin.repair.policy import REBOOT, RESET, VENDOR, Decision, incident_class, incidents_from, next_step
from burnin.text import printable
from burnin.transport.slurm import QUICK_TIMEOUT, SlurmRunner
from burnin.transport.slurm_jobs import REASON_LIMIT, SlurmNode, burnin_reason, drain_argv, read_nodes, resume_argv

if TYPE_CHECKING:
    from burnin.repair.settings import RepairSettings
    from burnin.session import RunResult
    from burnin.transport.base import CommandResult

REPAIR_MARK = "repair:"
GPU_IN_REASON = re.compile(r"\bgpu(\d+)\b")
REBOOTING = frozenset({"REBOOT", "REBOOT_REQUESTED", "REBOOT_ISSUED", "REBOOTING", "NOT_RESPONDING", "POWERING_UP",
                       "UNKNOWN"})
RESET_TIMEOUT_S = 120.0
BUG_REPORT_TIMEOUT_S = 600.0
MAX_ATTEMPTS = 12
"""No ladder is longer than three steps with a retry each: a bound on one node's loop whatever the journal says."""

# Its scratch folder goes whatever ends it: the report, its failure, or the limit's TERM (an SSH session's HUP).
BUG_REPORT = ("sh", "-c", 'command -v nvidia-bug-report.sh >/dev/null 2>&1 || { echo "nvidia-bug-report.sh not '
              'found on the node" >&2; exit 127; }; d=$(mktemp -d) || exit 1; trap \'rm -rf "$d"; exit 143\' TERM; '
              'trap \'rm -rf "$d"; exit 129\' HUP; nvidia-bug-report.sh --output-file '
              '"$d/nvidia-bug-report.log" >/dev/null 2>&1; gzip -dc "$d/nvidia-bug-report.log.gz" 2>/dev/null '
              '|| cat "$d/nvidia-bug-report.log"; rc=$?; rm -rf "$d"; exit $rc')
MLXLINK = ("sh", "-c", 'command -v mlxlink >/dev/null 2>&1 || { echo "mlxlink not found on the node" >&2; exit 127; }; '
           'for d in $(ibstat -l); do echo "== mlxlink -d $d -m"; mlxlink -d "$d" -m 2>&1; done')


class Reach(Protocol):
    """How the repair reaches a node: a command on it (the launch layer), and its acceptance suites."""

    def run(self, node: str, argv: Sequence[str], timeout_s: float) -> CommandResult: ...

    def accept(self, node: str, out_dir: Path) -> RunResult: ...


@dataclass
class Repair:
    """What every node's repair works with."""

    settings: RepairSettings
    reach: Reach
    client: SlurmRunner
    journal: Journal
    out_dir: Path
    bundle_dir: Path
    dry_run: bool = False
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 5.0
    timeout: float = QUICK_TIMEOUT


@dataclass
class NodeResult:
    node: str
    result: str  # resumed | vendor | left | planned | stuck
    detail: str = ""
    steps: list[str] = field(default_factory=list)
    bundle: Path | None = None


def _line(repair: Repair, node: str, text: str) -> None:
    repair.say(printable(f"burnin repair: {node}: {text}", limit=600))


def _state(repair: Repair, node: str) -> tuple[SlurmNode | None, str | None]:
    found, error = read_nodes([node], timeout=repair.timeout, client=repair.client)
    return found.get(node), error


def _out_of_service(info: SlurmNode) -> bool:
    return info.drained or "DOWN" in info.flags


def why_left(info: SlurmNode | None, error: str | None) -> str | None:
    """Why the repair leaves a node alone (None: it repairs it)."""
    if info is None:
        return f"state unknown ({error or 'not found in Slurm'}); left as it is"
    if not _out_of_service(info):
        return f"in service ({info.state}); nothing to repair"
    if not info.ours:
        return f"{info.state} by someone else ({info.reason or 'no reason'}); never touched by burnin"
    if reason_checks(info.reason) is None:
        return f"its reason's check ids cannot be read ({info.reason}); left to an operator"
    if sent_to_vendor(info.reason):
        return f"sent to the vendor ({info.reason}); an operator returns it"
    return None


def repair_node(repair: Repair, node: str) -> NodeResult:
    """Climb the ladder for ``node`` until it passes again (resumed) or goes to the vendor."""
    info, error = _state(repair, node)
    left = why_left(info, error)
    if left is not None or info is None:
        _line(repair, node, left or "")
        if not repair.dry_run:
            repair.journal.add({"at": repair.clock(), "node": node, "event": "left", "reason": left,
                                "state": info.state if info else None})
        return NodeResult(node, "left", left or "")
    checks = reason_checks(info.reason) or ()
    klass = incident_class(checks, repair.settings.ladder())
    outcome = NodeResult(node, "stuck")
    for _ in range(MAX_ATTEMPTS):
        decision = _decide(repair, node, klass)
        base = {"node": node, "class": klass, "checks": list(checks)}
        step_text = _describe(decision, repair, klass)
        if repair.dry_run:
            _line(repair, node, f"would {step_text}")
            for command in _commands(repair, node, decision, info):
                repair.say(command)
            return NodeResult(node, "planned", step_text, [decision.step])
        now = repair.clock()
        if decision.new_incident:
            repair.journal.add({**base, "at": now, "event": "open", "reason": info.reason})
        repair.journal.add({**base, "at": now, "event": "step", "step": decision.step, "rung": decision.rung,
                            "why": decision.why})
        _line(repair, node, step_text)
        outcome.steps.append(decision.step)
        if decision.step == VENDOR:
            return _vendor(repair, node, info, klass, checks, outcome)
        taken, detail = _take(repair, node, decision, info, checks)
        if not taken:
            repair.journal.add({**base, "at": repair.clock(), "event": "attempt", "step": decision.step,
                                "outcome": "not-taken", "detail": detail})
            _line(repair, node, f"the {decision.step} could not be taken: {detail}")
            continue
        verdict, detail, passed = _accept(repair, node, info, len(outcome.steps))
        repair.journal.add({**base, "at": repair.clock(), "event": "attempt", "step": decision.step,
                            "outcome": verdict, "detail": detail})
        _line(repair, node, f"re-acceptance after the {decision.step}: {verdict} ({detail})")
        if verdict == "pass":
            return _return_to_service(repair, node, klass, checks, passed, outcome)
        info = _state(repair, node)[0] or info
        if why_left(info, None) is not None:
            outcome.result, outcome.detail = "left", why_left(info, None) or ""
            _line(repair, node, f"stopped: {outcome.detail}")
            return outcome
    outcome.detail = f"no pass and no vendor after {MAX_ATTEMPTS} attempts"
    return outcome


def _decide(repair: Repair, node: str, klass: str) -> Decision:
    incidents = incidents_from(repair.journal.entries(), node, klass)
    return next_step(incidents, repair.clock(), klass, repair.settings.ladder())


def _describe(decision: Decision, repair: Repair, klass: str) -> str:
    steps = repair.settings.ladder().steps(klass)
    return (f"{decision.step} (the {klass} ladder {' -> '.join(steps)}, step {decision.rung + 1} of {len(steps)}: "
            f"{decision.why})")


def _gpus(reason: str) -> list[int]:
    return sorted({int(n) for n in GPU_IN_REASON.findall(reason)})


def reset_argv(index: int) -> list[str]:
    return ["nvidia-smi", "-r", "-i", str(index)]


def in_use_argv(index: int) -> list[str]:
    return ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader", "-i", str(index)]


def reboot_argv(node: str, reason: str, nextstate: str) -> list[str]:
    return ["scontrol", "reboot", "ASAP", f"nextstate={nextstate}", f"reason={burnin_reason(reason)}", node]


def _reboot_reason(info: SlurmNode, klass: str) -> str:
    ids = check_ids_text(reason_checks(info.reason) or ())
    return f"{ids} {REPAIR_MARK} reboot ({klass} ladder), then acceptance"


def _commands(repair: Repair, node: str, decision: Decision, info: SlurmNode) -> list[str]:
    import shlex

    if decision.step == RESET:
        gpus = _gpus(info.reason)
        if not gpus:
            return ["# no GPU named in the reason: the reset cannot be taken (the ladder climbs)"]
        return [f"# on {node}: " + shlex.join(argv) for i in gpus for argv in (in_use_argv(i), reset_argv(i))]
    if decision.step == REBOOT:
        from burnin.transport.slurm import create_reservation_argv, delete_reservation_argv

        reason = _reboot_reason(info, incident_class(reason_checks(info.reason) or ()))
        name = reservation_name(node)
        return [shlex.join(create_reservation_argv(name, [node], "<you>")),
                shlex.join(reboot_argv(node, reason, repair.settings.reboot.nextstate)),
                f"# wait until {node} is back, then:", shlex.join(drain_argv(node, reason)),
                shlex.join(delete_reservation_argv(name))]
    return [f"# write the vendor bundle in {repair.bundle_dir} and drain {node} naming it"]


def _take(repair: Repair, node: str, decision: Decision, info: SlurmNode, checks: Sequence[str]
          ) -> tuple[bool, str]:
    if decision.step == RESET:
        return _reset(repair, node, info)
    return _reboot(repair, node, info, incident_class(checks, repair.settings.ladder()))


def _reset(repair: Repair, node: str, info: SlurmNode) -> tuple[bool, str]:
    gpus = _gpus(info.reason)
    if not gpus:
        return False, "its drain reason names no GPU (gpuN) to reset"
    done: list[str] = []
    for index in gpus:
        users = repair.reach.run(node, in_use_argv(index), RESET_TIMEOUT_S)
        if not users.ok:
            return False, f"cannot tell whether gpu{index} is in use: {users.describe_failure()}"
        if users.stdout.strip():
            pids = ", ".join(users.stdout.split())
            return False, f"gpu{index} is in use (pid {pids}); not reset"
        result = repair.reach.run(node, reset_argv(index), RESET_TIMEOUT_S)
        if not result.ok:
            return False, f"nvidia-smi -r -i {index} failed: {result.describe_failure()} {result.tail(2)}".strip()
        done.append(f"gpu{index}")
    return True, f"reset {', '.join(done)}"


def reservation_name(node: str) -> str:
    return f"burnin-repair-{node}"


def _reboot(repair: Repair, node: str, info: SlurmNode, klass: str) -> tuple[bool, str]:
    """Reboot through Slurm inside a maintenance reservation of the node, and drain it again once back.

    Slurm clears a drain at the reboot, and a site with ``ReturnToService=2`` returns even a node left DOWN
    to service as it registers: the reservation keeps every job off it until burnin's drain is back on it
    (a drain that fails keeps the reservation: the node stays out either way)."""
    import os
    import pwd

    from burnin.transport.slurm import create_reservation_argv, delete_reservation_argv

    reason = _reboot_reason(info, klass)
    name = reservation_name(node)
    held = repair.client.run(create_reservation_argv(name, [node], pwd.getpwuid(os.getuid()).pw_name),
                             timeout=repair.timeout)
    if not held.ok:
        return False, f"cannot reserve the node for its reboot: {held.describe_failure()}"
    back, detail = _reboot_and_wait(repair, node, reason)
    drained = repair.client.run(drain_argv(node, reason), timeout=repair.timeout)
    if not drained.ok:
        return False, (f"{detail}; cannot drain it again ({drained.describe_failure()}): reservation {name} "
                       "kept, so it takes no job")
    repair.client.run(delete_reservation_argv(name), timeout=repair.timeout)
    return back, detail


def _reboot_and_wait(repair: Repair, node: str, reason: str) -> tuple[bool, str]:
    argv = reboot_argv(node, reason, repair.settings.reboot.nextstate)
    result = repair.client.run(argv, timeout=repair.timeout)
    if not result.ok:
        return False, f"scontrol reboot failed: {result.describe_failure()}"
    deadline = repair.clock() + repair.settings.reboot.wait_s
    while True:
        current, error = _state(repair, node)
        if current is not None and not current.flags & REBOOTING:
            return True, f"rebooted through Slurm (back {current.state})"
        if repair.clock() >= deadline:
            state = current.state if current else f"unreadable: {error}"
            return False, f"not back {repair.settings.reboot.wait_s:g} s after the reboot ({state})"
        repair.sleep(repair.poll_s)


def _accept(repair: Repair, node: str, info: SlurmNode, attempt: int) -> tuple[str, str, tuple[str, ...]]:
    """Run the acceptance suites on the node: ``pass`` | ``fail`` | ``incomplete``, why, the checks passed."""
    from burnin.errors import BurninError

    out = repair.out_dir / node / f"attempt-{attempt}"
    try:
        result = repair.reach.accept(node, out)
    except BurninError as exc:
        return "incomplete", f"the acceptance could not run: {exc}", ()
    decision = result.decisions.get(node)
    if decision is None:
        return "incomplete", "the acceptance judged nothing on the node", ()
    if result.gate.get("partial"):
        return "incomplete", f"the acceptance did not judge every check ({result.gate.get('partial_reasons')})", ()
    if decision.failed:
        return "fail", f"failed {check_ids_text(decision.failed)}; results in {out}", ()
    if not decision.admitted:
        return "incomplete", f"unmeasured {check_ids_text(decision.incomplete)}; results in {out}", ()
    blockers = resume_blockers(info.reason, decision.passed)
    if blockers:
        return "incomplete", f"admitted, but {blockers}", ()
    return "pass", f"every check passed; results in {out}", decision.passed


def _return_to_service(repair: Repair, node: str, klass: str, checks: Sequence[str], passed: tuple[str, ...],
                       outcome: NodeResult) -> NodeResult:
    base = {"node": node, "class": klass, "checks": list(checks)}
    info, error = _state(repair, node)
    left = why_left(info, error)
    if left is not None or info is None:  # an operator took it meanwhile: theirs now
        outcome.result, outcome.detail = "left", f"passed, but {left}"
        repair.journal.add({**base, "at": repair.clock(), "event": "left", "reason": outcome.detail})
        _line(repair, node, outcome.detail)
        return outcome
    blockers = resume_blockers(info.reason, passed)
    if blockers:
        outcome.result, outcome.detail = "stuck", f"passed, but {blockers}; left drained"
        _line(repair, node, outcome.detail)
        return outcome
    result = repair.client.run(resume_argv(node), timeout=repair.timeout)
    if not result.ok:
        outcome.detail = f"passed, but the resume failed: {result.describe_failure()}"
        _line(repair, node, outcome.detail)
        return outcome
    repair.journal.add({**base, "at": repair.clock(), "event": "close", "how": "resumed"})
    outcome.result, outcome.detail = "resumed", "passed its acceptance again; back in service"
    _line(repair, node, outcome.detail)
    return outcome


def _vendor(repair: Repair, node: str, info: SlurmNode, klass: str, checks: Sequence[str],
            outcome: NodeResult) -> NodeResult:
    now = repair.clock()
    base = {"node": node, "class": klass, "checks": list(checks)}
    files = gather_bundle(repair, node, info, klass, checks, now)
    path = bundles.write_bundle(repair.bundle_dir, node, now, files)
    reason = f"burnin: {check_ids_text(checks)} {VENDOR_MARK}: {path}"
    if len(printable(reason)) > REASON_LIMIT:  # a cut path names no file: the bundle's name, in the state folder
        reason = f"burnin: {check_ids_text(checks)} {VENDOR_MARK}: {path.name}"
    reason = burnin_reason(reason)
    result = repair.client.run(drain_argv(node, reason), timeout=repair.timeout)
    note = "" if result.ok else f" (the reason could not be set: {result.describe_failure()})"
    repair.journal.add({**base, "at": repair.clock(), "event": "close", "how": "vendor", "bundle": str(path),
                        "reason": reason + note})
    outcome.result, outcome.detail, outcome.bundle = "vendor", f"sent to the vendor: {path}{note}", path
    _line(repair, node, f"{outcome.detail}; it stays out of service")
    return outcome


def _last_run(repair: Repair, node: str) -> Path | None:
    runs = sorted((repair.out_dir / node).glob("attempt-*"), key=lambda p: int(p.name.rpartition("-")[2]))
    return runs[-1] if runs else None


def _read_json(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"unreadable": f"{path}: {exc}"}


def gather_bundle(repair: Repair, node: str, info: SlurmNode, klass: str, checks: Sequence[str], now: float
                  ) -> dict[str, Any]:
    """What goes into the vendor bundle (file name -> text or JSON document)."""
    run = _last_run(repair, node)
    entries = [e for e in repair.journal.entries() if e.get("node") == node]
    files: dict[str, Any] = {
        "summary.json": {"node": node, "reason": info.reason, "class": klass, "checks": list(checks), "at": now,
                         "steps": [e.get("step") for e in entries if e.get("event") == "step"],
                         "acceptance_run": str(run) if run else None},
        "incident-history.json": {"journal": entries, "history": _history(node)},
    }
    if run is not None:
        files["facts.json"] = _read_json(run / "facts" / f"{node}.json")
        verdicts = _read_json(run / "verdicts.json")
        files["failing-checks.json"] = [v for v in verdicts if isinstance(v, dict) and v.get("node") == node
                                        and v.get("status") != "pass"] if isinstance(verdicts, list) else verdicts
    else:
        files["facts.missing"] = "no acceptance run of this repair on the node\n"
    kernel = repair.reach.run(node, ["dmesg"], RESET_TIMEOUT_S)
    files["kernel-log.txt"] = (bundles.kernel_excerpt(kernel.stdout) if kernel.ok
                               else f"# dmesg failed: {kernel.describe_failure()}\n")
    report = repair.reach.run(node, BUG_REPORT, BUG_REPORT_TIMEOUT_S)
    if report.ok:
        files["nvidia-bug-report.log"] = report.stdout
    else:
        files["nvidia-bug-report.missing"] = f"{report.describe_failure()}\n{report.tail(3)}\n"
    if klass == "fabric":
        for name, argv in (("ibstat.txt", ("ibstat",)), ("mlxlink.txt", MLXLINK)):
            result = repair.reach.run(node, argv, RESET_TIMEOUT_S)
            files[name] = result.stdout if result.ok else f"# {argv[0]} failed: {result.describe_failure()}\n" \
                                                          f"{result.tail(3)}\n"
    return files


def _history(node: str) -> Any:
    """The node's timeline in the history database, as plain data (None when there is none)."""
    import dataclasses
    import sqlite3

    from burnin.history.query import timeline
    from burnin.history.store import HistoryError, default_path, open_history

    if default_path() is None:
        return None
    try:
        with open_history() as store:
            return dataclasses.asdict(timeline(store, node))
    except (HistoryError, OSError, sqlite3.Error) as exc:
        return {"unavailable": str(exc)}
