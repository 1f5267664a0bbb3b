"""The repair ladder's policy: which step a node burnin took out gets next (pure: no clock, no files).

A node's repairs are kept per **incident class** (``gpu``, ``fabric``, ``node``: from the check ids of the
drain reason, :func:`incident_class`). An *incident* opens when burnin first repairs a node for a class and
closes when the node returns to service (its acceptance passed) or is sent to the vendor. Within an
incident every *attempt* is one step of the class's ladder (default ``reset → reboot → vendor`` for a GPU,
``reboot → vendor`` otherwise) followed by a re-acceptance run:

- the re-acceptance **passed**: the node returns to service, the incident closes;
- a check **failed** again: the next attempt climbs one rung;
- it was only **incomplete** (nothing failed, something unmeasured): the same rung once more, then it climbs
  (a node that cannot be measured is not reset forever either);
- a step that could not be taken (a GPU in use, a reboot Slurm refused) counts as a failed attempt.

And across incidents: a node with ``incidents`` or more incidents of a class within ``days`` days starts the
new one a rung higher for each incident beyond ``incidents - 1`` — a node that keeps failing climbs even
when each repair seemed to hold. The last rung is always ``vendor``: terminal, the node stays out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Step = Literal["reset", "reboot", "vendor"]
RESET: Step = "reset"
REBOOT: Step = "reboot"
VENDOR: Step = "vendor"
STEPS: tuple[Step, ...] = (RESET, REBOOT, VENDOR)

Outcome = Literal["pass", "fail", "incomplete", "not-taken"]
"""What followed an attempt: the re-acceptance's verdict, or ``not-taken`` when the step itself failed."""

DAY_S = 86400.0

DEFAULT_LADDERS: dict[str, tuple[Step, ...]] = {
    "gpu": (RESET, REBOOT, VENDOR),
    "fabric": (REBOOT, VENDOR),
    "node": (REBOOT, VENDOR),
}
DEFAULT_CLASSES: dict[str, str] = {"GPU": "gpu", "NVL": "gpu", "NCCL": "gpu", "IB": "fabric", "PIN": "fabric"}
"""Check-id family -> incident class; any other family is ``node``."""
FALLBACK_CLASS = "node"
RUN_CHECK = "RUN"


@dataclass(frozen=True, slots=True)
class Ladder:
    """The site's ladder settings (:mod:`burnin.repair.settings` reads and validates them)."""

    ladders: Mapping[str, tuple[Step, ...]]
    classes: Mapping[str, str]
    incidents: int = 3
    days: float = 30.0
    incomplete_retries: int = 1

    def steps(self, klass: str) -> tuple[Step, ...]:
        return tuple(self.ladders.get(klass) or self.ladders.get(FALLBACK_CLASS) or (REBOOT, VENDOR))


DEFAULT = Ladder(DEFAULT_LADDERS, DEFAULT_CLASSES)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One step taken and what followed it."""

    at: float
    step: Step
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Incident:
    """One incident of a node and class: when it opened, its attempts, and whether it closed."""

    opened: float
    attempts: tuple[Attempt, ...] = ()
    closed: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """The next step for a node, and why (the words go to the journal and the output)."""

    step: Step
    rung: int
    why: str
    new_incident: bool


def incident_class(checks: Iterable[str], ladder: Ladder = DEFAULT) -> str:
    """The class of a drain reason's check ids: the first id whose family the site maps, else ``node``.

    ``RUN`` (the run could not vouch for the node) names no class of its own.
    """
    for check in checks:
        if check == RUN_CHECK:
            continue
        family = check.partition("-")[0]
        if family in ladder.classes:
            return ladder.classes[family]
    return FALLBACK_CLASS


def recent(incidents: Sequence[Incident], now: float, days: float) -> int:
    """How many incidents opened within ``days`` days before ``now``."""
    return sum(1 for incident in incidents if now - incident.opened <= days * DAY_S)


def start_rung(earlier: Sequence[Incident], now: float, ladder: Ladder, klass: str) -> tuple[int, str]:
    """The rung a new incident starts at, counting it with the ``earlier`` ones within the window."""
    count = recent(earlier, now, ladder.days) + 1
    over = count - ladder.incidents + 1
    if over <= 0:
        return 0, f"incident {count} of this class in {ladder.days:g} days"
    top = len(ladder.steps(klass)) - 1
    return min(over, top), (f"incident {count} of this class in {ladder.days:g} days (at least "
                            f"{ladder.incidents}): starts {min(over, top)} rung(s) up")


def climb(incident: Incident, start: int, ladder: Ladder) -> tuple[int, str]:
    """The rung after the incident's attempts: each failed or not-taken attempt climbs one; incomplete ones
    climb after ``incomplete_retries`` repeats of their rung."""
    rung, why, unmeasured = start, "first attempt", 0
    for attempt in incident.attempts:
        if attempt.outcome == "pass":
            continue
        if attempt.outcome == "incomplete" and unmeasured < ladder.incomplete_retries:
            unmeasured += 1
            why = f"the {attempt.step} was followed by an incomplete re-acceptance: once more"
            continue
        unmeasured = 0
        rung += 1
        why = (f"the {attempt.step} could not be taken" if attempt.outcome == "not-taken" else
               f"the node failed again after the {attempt.step}" if attempt.outcome == "fail" else
               f"the node stayed unmeasured after the {attempt.step}")
    return rung, why


def next_step(incidents: Sequence[Incident], now: float, klass: str, ladder: Ladder = DEFAULT) -> Decision:
    """The step a node takes now for ``klass``, given its incidents of that class (oldest first).

    The last incident is the open one when it is not closed; otherwise a new one opens now.
    """
    steps = ladder.steps(klass)
    open_incident = incidents[-1] if incidents and not incidents[-1].closed else None
    if open_incident is None:
        earlier, current, new = list(incidents), Incident(now), True
    else:
        earlier, current, new = list(incidents[:-1]), open_incident, False
    start, start_why = start_rung(earlier, current.opened, ladder, klass)
    rung, why = climb(current, start, ladder)
    rung = min(rung, len(steps) - 1)
    text = why if current.attempts else start_why
    return Decision(steps[rung], rung, text, new)


def incidents_from(entries: Iterable[Mapping[str, object]], node: str, klass: str) -> list[Incident]:
    """The incidents of ``node`` and ``klass`` in journal entries (oldest first), as :func:`next_step` reads
    them: ``open`` starts one, ``attempt`` adds to the open one, ``close`` ends it."""
    incidents: list[Incident] = []
    for entry in entries:
        if entry.get("node") != node or entry.get("class") != klass:
            continue
        at = entry.get("at")
        when = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else 0.0
        kind = entry.get("event")
        if kind == "open":
            incidents.append(Incident(when))
        elif kind == "attempt" and incidents and not incidents[-1].closed:
            step, outcome = entry.get("step"), entry.get("outcome")
            if step in STEPS and outcome in ("pass", "fail", "incomplete", "not-taken"):
                last = incidents[-1]
                incidents[-1] = Incident(last.opened, (*last.attempts, Attempt(when, step, outcome)))
        elif kind == "close" and incidents and not incidents[-1].closed:
            last = incidents[-1]
            incidents[-1] = Incident(last.opened, last.attempts, True)
    return incidents
