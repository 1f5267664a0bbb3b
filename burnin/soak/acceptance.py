"""The node suite before the soak: a node that fails acceptance is not soaked, and the soak's gate judges both.

``burnin soak`` first runs the node suite (``burnin run``'s checks, :func:`burnin.session.execute`)
on every node through the soak's own dispatcher, into ``OUT/acceptance/`` (its gate.json,
verdicts.json, junit.xml and facts, as ``burnin run`` writes them). A node it does not admit
is *held*: it takes no part in the soak and every soak check is incomplete there with that
cause. At the end the soak's decision takes the acceptance verdicts and the soak's together
(:func:`burnin.soak.verdicts.write_outputs`), so a gate resumes a node only for checks that
were judged and passed, the node suite's included.

The checkpoint holds a digest of ``acceptance/verdicts.json``; a file that no longer matches
it is refused (exit 2), never judged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from burnin.errors import UsageError
from burnin.gate.decide import CheckOutcome, NodeDecision
from burnin.soak.state import HELD, NodeProgress, SoakState

ACCEPTANCE_DIR = "acceptance"
SUITE = "node"  # the suite a node must pass before it is soaked
VERDICTS = "verdicts.json"
_FIELDS = tuple(f.name for f in dataclasses.fields(CheckOutcome))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def held_reason(decision: NodeDecision | None) -> str:
    """Why a node acceptance did not admit is not soaked (its failed and incomplete checks)."""
    if decision is None:
        return "the node was not soaked: the node suite did not judge it"
    parts = [f"failed {','.join(decision.failed)}"] if decision.failed else []
    parts += [f"incomplete {','.join(decision.incomplete)}"] if decision.incomplete else []
    return f"the node was not soaked: acceptance rejected it ({'; '.join(parts) or 'not admitted'})"


def admit(state: SoakState, nodes: Sequence[str], decisions: Mapping[str, NodeDecision], out_dir: Path) -> list[str]:
    """Record acceptance in the state: every node, the ones not admitted held; returns the held ones."""
    state.acceptance = digest(out_dir / ACCEPTANCE_DIR / VERDICTS)
    state.nodes = {}
    held: list[str] = []
    for name in nodes:
        decision = decisions.get(name)
        if decision is not None and decision.admitted:
            state.nodes[name] = NodeProgress(name)
        else:
            state.nodes[name] = NodeProgress(name, status=HELD, held=held_reason(decision))
            held.append(name)
    return held


def outcomes(state: SoakState, out_dir: Path) -> list[CheckOutcome]:
    """The acceptance verdicts the checkpoint vouches for (none when acceptance did not run)."""
    if state.acceptance is None:
        return []
    path = out_dir / ACCEPTANCE_DIR / VERDICTS
    try:
        matches = digest(path) == state.acceptance
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror or exc}); the soak's acceptance verdicts are "
                         "gone") from None
    if not matches:
        raise UsageError(f"{path} does not match the soak's checkpoint (changed since the node suite wrote it): "
                         "refused")
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [CheckOutcome(**{k: row[k] for k in _FIELDS if k in row}) for row in rows]
