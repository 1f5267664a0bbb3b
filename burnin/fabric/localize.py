"""Naming the bad node of a slow multi-node group (NCCL-04): a pure planner.

The planner proposes rounds of disjoint multi-node tests; the driver runs each
round in parallel and reports, per test, whether it passed. Rounds:

1. **pass one**: random disjoint pairs over every node (an odd node out waits
   for pass two);
2. **pass two**: every suspect (a node of a failed pair) is paired with a node
   that has already passed; passing clears it;
3. **confirm** (``confirm=True``): a suspect that failed with one known-good
   partner is named only if it fails again with a different one, so one noisy
   test never names a healthy node (a node it met in pass one, cleared since,
   may be that second partner: 3-node racks have no other);
4. **bisection** settles what pairing cannot: suspects left without a free
   known-good partner are tested as groups, split in halves; a passing group
   clears all its members. Fewer than 8 such suspects, or suspects that
   bisection cannot split further, are instead paired among themselves with
   partners they have not had yet (a passing pair yields two known-good nodes).

Without noise, 1 to 3 bad nodes among 1,024 are named in 3 rounds (2 with
``confirm=False``). A suspect that can never be paired with a known-good node
(two nodes, one failing pair) stays ``unresolved``: never named, never
cleared (its checks are incomplete, not failed).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["pair", "partner", "confirm", "group"]
BISECT_MIN = 8
EXTRA_ROUNDS = 32


@dataclass(frozen=True, slots=True)
class Job:
    """One multi-node job of a round: its nodes and why it runs."""

    nodes: tuple[str, ...]
    kind: Kind
    suspect: str | None = None
    """For partner/confirm tests: the node under test (the other node is known good)."""


@dataclass
class Localizer:
    """Plans rounds; feed each round's outcomes back with :meth:`record`."""

    nodes: Sequence[str]
    seed: int = 0
    confirm: bool = True
    max_rounds: int = 0
    """0: 3 + ceil(log2 n) + 2 rounds, plus min(n, EXTRA_ROUNDS): with many bad nodes, re-pairing may need a
    round per node to find a passing pair (a rack of 5 with 3 bad), and few known-good nodes can vouch for
    only that many suspects per round. A rack with few bad nodes ends in 3 rounds whatever the cap."""
    rounds: int = 0
    good: set[str] = field(default_factory=set)
    suspects: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)
    strikes: dict[str, int] = field(default_factory=dict)
    partners: dict[str, set[str]] = field(default_factory=dict)
    vouchers: dict[str, set[str]] = field(default_factory=dict)
    """suspect -> the known-good nodes it has already been tested with (partner and confirm tests)."""
    history: list[list[tuple[Job, bool]]] = field(default_factory=list)
    _pending: list[Job] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.nodes = list(dict.fromkeys(self.nodes))
        self._rng = random.Random(self.seed)  # noqa: S311 - a reproducible plan, not a secret
        if not self.max_rounds:
            count = len(self.nodes)
            self.max_rounds = 5 + math.ceil(math.log2(max(2, count))) + min(count, EXTRA_ROUNDS)

    @property
    def needed_strikes(self) -> int:
        return 2 if self.confirm else 1

    @property
    def unresolved(self) -> set[str]:
        return set(self.suspects)

    @property
    def done(self) -> bool:
        if self.rounds == 0:
            return len(self.nodes) < 2
        return not self.suspects or self.rounds >= self.max_rounds or not self._plan(dry=True)

    def next_round(self) -> list[Job]:
        """The next round's disjoint tests (empty when :attr:`done`)."""
        if self._pending:
            raise RuntimeError("record the outcomes of the previous round first")
        if self.done:
            return []
        self._pending = self._first_round() if self.rounds == 0 else self._plan(dry=False)
        return list(self._pending)

    def record(self, outcomes: Sequence[bool]) -> None:
        """``outcomes[i]``: whether test ``i`` of the last round passed (a crash or hang is False)."""
        if len(outcomes) != len(self._pending):
            raise ValueError(f"{len(self._pending)} tests were planned, {len(outcomes)} outcomes given")
        tests, self._pending = self._pending, []
        self.rounds += 1
        self.history.append(list(zip(tests, outcomes, strict=True)))
        for test, passed in zip(tests, outcomes, strict=True):
            if len(test.nodes) == 2:  # a failed group says nothing about any one pair of its members
                for node in test.nodes:
                    self.partners.setdefault(node, set()).update(n for n in test.nodes if n != node)
            if test.kind in ("pair", "group"):
                if passed:
                    self._clear(test.nodes)
                else:
                    self.suspects.update(n for n in test.nodes if n not in self.good)
            else:
                assert test.suspect is not None
                self.vouchers.setdefault(test.suspect, set()).update(n for n in test.nodes if n != test.suspect)
                if passed:
                    self._clear((test.suspect,))
                else:
                    self.strikes[test.suspect] = self.strikes.get(test.suspect, 0) + 1
                    if self.strikes[test.suspect] >= self.needed_strikes:
                        self.suspects.discard(test.suspect)
                        self.named.add(test.suspect)

    def _clear(self, nodes: Sequence[str]) -> None:
        for node in nodes:
            self.suspects.discard(node)
            self.strikes.pop(node, None)
            if node not in self.named:
                self.good.add(node)

    def _first_round(self) -> list[Job]:
        order = list(self.nodes)
        self._rng.shuffle(order)
        tests = [Job((order[i], order[i + 1]), "pair") for i in range(0, len(order) - 1, 2)]
        if len(order) % 2:
            self.suspects.add(order[-1])  # untested: pass two pairs it with a known-good node
        return tests

    def _plan(self, *, dry: bool) -> list[Job]:
        """Partner tests for suspects while known-good nodes last; bisection groups for the rest."""
        free = sorted(self.good)
        if not dry:
            self._rng.shuffle(free)
        used: set[str] = set()
        tests: list[Job] = []
        left: list[str] = []
        # first tests before confirmations: with few known-good nodes, every suspect gets its chance to be
        # cleared before a failed one is tried again
        for suspect in sorted(self.suspects, key=lambda n: (self.strikes.get(n, 0), n)):
            kind: Kind = "confirm" if self.strikes.get(suspect) else "partner"
            if kind == "confirm":
                # a different known-good node than the one it already failed with (a pair mate of pass
                # one that was cleared later is fine: that pair was not a test of this node alone)
                vouched = self.vouchers.get(suspect, set())
                partner = next((g for g in free if g not in used and g not in vouched), None)
            else:
                tried = self.partners.get(suspect, set())
                partner = next((g for g in free if g not in used and g not in tried), None)
                partner = partner or next((g for g in free if g not in used), None)
            if partner is None:
                left.append(suspect)
                continue
            used.add(partner)
            tests.append(Job((suspect, partner), kind, suspect))
        groups = self._bisect(left) if len(left) >= BISECT_MIN else []
        # bisection stuck (every half holds a bad node): re-pairing can still find two good nodes
        tests += groups or self._repair(left, dry=dry)
        return tests

    def _repair(self, left: list[str], *, dry: bool) -> list[Job]:
        """Pair leftover suspects with suspects they were not paired with before."""
        order = list(left)
        if not dry:
            self._rng.shuffle(order)
        tests: list[Job] = []
        taken: set[str] = set()
        for node in order:
            if node in taken:
                continue
            mate = next((m for m in order if m != node and m not in taken
                         and m not in self.partners.get(node, set())), None)
            if mate is not None:
                taken.update((node, mate))
                tests.append(Job((node, mate), "pair"))
        return tests

    def _bisect(self, left: list[str]) -> list[Job]:
        """Groups of suspects that no known-good node can partner.

        The halving tree of ``left``: a group not tested yet runs; one that already
        failed is split in halves (groups of 2 or 3 that failed tell nothing more).
        """
        tests: list[Job] = []
        queue = [tuple(left)] if len(left) >= 2 else []
        while queue:
            group = queue.pop(0)
            if self._untried(group):
                tests.append(Job(group, "group"))
            elif len(group) >= 4:
                half = len(group) // 2
                queue += [group[:half], group[half:]]
        return tests

    def _untried(self, group: Sequence[str]) -> bool:
        """A group worth testing: not exactly a test that already failed."""
        wanted = frozenset(group)
        return not any(frozenset(t.nodes) == wanted and not ok for rnd in self.history for t, ok in rnd)


@dataclass(frozen=True, slots=True)
class Trial:
    """One simulated localisation (see :func:`simulate`)."""

    named: frozenset[str]
    unresolved: frozenset[str]
    rounds: int
    tests: int
    planning_s: float


def simulate(nodes: Sequence[str], health: dict[str, float], *, noise: float = 0.0, tolerance: float = 0.10,
             seed: int = 0, confirm: bool = True) -> Trial:
    """Localise against a pure model (no processes): a test's bandwidth is its slowest member's
    health (1.0 healthy) times ``1 + noise * N(0, 1)``; it passes at or above ``1 - tolerance``
    times the median of pass one, as the fabric phase judges pairs.
    """
    import time

    rng = random.Random(seed ^ 0x5EED)  # noqa: S311 - simulated noise
    planner = Localizer(nodes, seed=seed, confirm=confirm)
    minimum: float | None = None
    planning = 0.0
    tests = 0
    while True:
        started = time.perf_counter()
        round_tests = planner.next_round()
        planning += time.perf_counter() - started
        if not round_tests:
            break
        values = [min(health.get(n, 1.0) for n in t.nodes) * (1.0 + noise * rng.gauss(0.0, 1.0))
                  for t in round_tests]
        if minimum is None:
            ordered = sorted(values)
            mid = len(ordered) // 2
            median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
            minimum = (1.0 - tolerance) * median
        tests += len(round_tests)
        planner.record([v >= minimum for v in values])
    return Trial(frozenset(planner.named), frozenset(planner.unresolved), planner.rounds, tests, planning)
