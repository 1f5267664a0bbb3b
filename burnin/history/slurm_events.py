"""Slurm's node events (``sacctmgr show event``, from its accounting) folded into ``burnin reliability``.

Each node event whose state takes the node out of the pool (down, drained, failing) is a failure of the node from
its start to its end (open: still out), with its reason:

- a burnin reason (``burnin: GPU-04,IB-02 <cause>``) is a failure of its first check: the category is the check's
  (:func:`burnin.history.reliability.category`);
- any other reason is the site's or slurmctld's: slurmctld's own reasons about the host (``Not responding``,
  ``Node unexpectedly rebooted``, ``Kill task failed``...) are ``host``, anything else (an operator's
  ``fan replaced``) is ``other``.

A drain burnin took and recorded itself (a gate action in the history: same node, a start within
:data:`MATCH_WINDOW_S` of the recorded action, the same reason or the same check ids) is not counted a second
time: only its end (when Slurm saw the node back) is folded in, which the history may not know when an operator
resumed the node. Reading the events (:func:`read_events`) runs ``sacctmgr`` through the transport; the folding
(:func:`fold_events`) is pure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from burnin.errors import ParseError
from burnin.gate.decide import reason_checks
from burnin.history.records import Observation
from burnin.parsers.sacctmgr import EVENT_FORMAT, SlurmEvent, parse_sacctmgr_events
from burnin.text import printable
from burnin.transport.slurm import SlurmRunner, sacctmgr_events_argv

MATCH_WINDOW_S = 300.0
"""A Slurm event starting this close to a drain burnin recorded on the node, with its reason, is that drain."""
SACCTMGR_TIMEOUT_S = 60.0
"""A bound on one ``sacctmgr show event`` (slurmdbd answers from its database; a failure limit)."""
EVENTS_ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
"""sacctmgr prints local times: read in UTC, in the one format the parser reads."""
SLURM_HOST = "SLURM-host"
"""The failed 'check' of an event slurmctld set about the node's host (category host)."""
SLURM_OTHER = "SLURM-other"
"""The failed 'check' of an event with a reason that is neither burnin's nor slurmctld's (category other)."""
HOST_REASONS = ("Not responding", "Node unexpectedly rebooted", "Kill task failed", "Prolog error", "Epilog error",
                "Low RealMemory", "Low socket*core*thread count", "Low TmpDisk", "NO NETWORK ADDRESS FOUND",
                "batch job complete failure", "Duplicate jobid", "Node silently failed and came back",
                "reboot timed out")
OUT_OF_POOL_STATES = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})
CONFIG_PATHS = (Path("/etc/slurm/slurm.conf"), Path("/run/slurm/conf/slurm.conf"))
"""Where Slurm's clients find their configuration without ``SLURM_CONF`` (Debian's; configless slurmd's copy)."""


class EventsUnavailable(Exception):
    """The Slurm events could not be read; the message says why (one line)."""


@dataclass(frozen=True)
class RecordedDrain:
    """A drain (eviction, taint) burnin recorded in the history as a gate action."""

    node: str
    at: float
    check_ids: tuple[str, ...]
    reason: str


@dataclass
class Folded:
    observations: list[Observation] = field(default_factory=list)
    read: int = 0
    """Node events sacctmgr gave."""
    folded: int = 0
    """Counted as failures."""
    known: int = 0
    """Drains burnin had recorded itself (only their end folded in)."""
    ignored: int = 0
    """Events of a state that does not take a node out of the pool, or that started before the period."""


def out_of_pool(state: str) -> bool:
    """Whether a node event's state (``DRAIN``, ``IDLE+DRAIN``, ``DOWN*``) takes the node out of the pool."""
    return any(word.rstrip("*~#!%$@^-") in OUT_OF_POOL_STATES for word in state.split("+"))


def failed_checks(reason: str) -> tuple[str, ...]:
    """What an event failed: the check ids of a burnin reason, else :data:`SLURM_HOST` or :data:`SLURM_OTHER`."""
    ids = [c for c in reason_checks(reason) or () if c != "RUN"]
    if ids:
        return tuple(ids)
    return (SLURM_HOST,) if reason.strip().startswith(HOST_REASONS) else (SLURM_OTHER,)


def _is_recorded(event: SlurmEvent, start: float, drains: Sequence[RecordedDrain]) -> bool:
    ids = reason_checks(event.reason)
    for drain in drains:
        if drain.node != event.node or abs(drain.at - start) > MATCH_WINDOW_S:
            continue
        if drain.reason == event.reason or (ids is not None and set(ids) == set(drain.check_ids)):
            return True
    return False


def fold_events(events: Iterable[SlurmEvent], drains: Sequence[RecordedDrain], since: float) -> Folded:
    """The observations Slurm's node events add (pure; see the module's docstring)."""
    folded = Folded()
    by_node: dict[str, list[RecordedDrain]] = {}
    for drain in drains:
        by_node.setdefault(drain.node, []).append(drain)
    for event in events:
        if event.kind != "Node":
            continue
        folded.read += 1
        start = event.start.timestamp()
        end = None if event.end is None else event.end.timestamp()
        if not out_of_pool(event.state) or start < since:
            folded.ignored += 1
            if end is not None and start < since <= end and out_of_pool(event.state):
                folded.observations.append(_back(event, end))
            continue
        reason = printable(event.reason, limit=2000)
        if _is_recorded(event, start, by_node.get(event.node, [])):
            folded.known += 1
        else:
            folded.folded += 1
            folded.observations.append(Observation(event.node, start, False, failed_checks(event.reason), (),
                                                   reason, "sacctmgr", "slurm"))
        if end is not None:
            folded.observations.append(_back(event, end))
    return folded


def _back(event: SlurmEvent, end: float) -> Observation:
    return Observation(event.node, end, True, (), (), "", "sacctmgr", "slurm")


def config_found(environ: Mapping[str, str] | None = None) -> str | None:
    """Why Slurm's clients would find no configuration here (None: they would). Without one, sacctmgr
    retries for a minute before it gives up."""
    env = os.environ if environ is None else environ
    conf = env.get("SLURM_CONF")
    if conf:
        return None if Path(conf).is_file() else f"SLURM_CONF={conf} is not a file"
    if any(path.is_file() for path in CONFIG_PATHS):
        return None
    return f"no Slurm configuration ({' or '.join(str(p) for p in CONFIG_PATHS)}; set SLURM_CONF)"


def read_events(client: SlurmRunner, since: float, *, environ: Mapping[str, str] | None = None) -> list[SlurmEvent]:
    """Slurm's node events since ``since`` (``sacctmgr``, in UTC); :class:`EventsUnavailable` says why not."""
    env = os.environ if environ is None else environ
    if shutil.which("sacctmgr", path=env.get("PATH")) is None:
        raise EventsUnavailable("sacctmgr is not on PATH")
    missing = config_found(env)
    if missing is not None:
        raise EventsUnavailable(missing)
    start = datetime.fromtimestamp(since, timezone.utc)
    result = client.run(sacctmgr_events_argv(start, EVENT_FORMAT), timeout=SACCTMGR_TIMEOUT_S)
    if not result.ok:
        said = " ".join(line.strip() for line in f"{result.stderr}\n{result.stdout}".splitlines() if line.strip())
        raise EventsUnavailable(printable(said or result.describe_failure(), limit=300))
    try:
        return parse_sacctmgr_events(result.stdout).node_events()
    except ParseError as exc:
        raise EventsUnavailable(f"its output did not read: {printable(str(exc), limit=300)}") from exc
