"""Gate actions into the history as they are taken: each drain, resume, taint or eviction burnin sent.

Called by a gate after its scheduler accepted the action (never for a dry run, never for a ``keep``). The
source is the burnin command that acted (``burnin run``, ``burnin probe``, ``burnin watch``...). Like a run's
verdicts, the history never costs an action: a history that cannot be opened or written is one warning line
on stderr, and the action stands.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from burnin.text import printable


@dataclass(frozen=True)
class TakenAction:
    node: str
    action: str  # drain | resume | evict | taint | untaint ...
    check_ids: tuple[str, ...] = ()
    reason: str = ""


def _warn(line: str) -> None:
    print(printable(line, limit=400), file=sys.stderr)


def command_name(argv: Sequence[str] | None = None) -> str:
    """``burnin <subcommand>`` of this process (``burnin`` when there is none)."""
    args = list(sys.argv if argv is None else argv)
    sub = next((a for a in args[1:] if not a.startswith("-")), "")
    return printable(f"burnin {sub}".strip(), limit=60)


def record_actions(taken: Sequence[TakenAction], *, source: str | None = None,
                   warn: Callable[[str], object] = _warn) -> int:
    """Add ``taken`` to the history (``$BURNIN_HISTORY`` or the state directory's; nothing when ``off``);
    how many were recorded. Never raises."""
    if not taken:
        return 0
    try:
        from burnin.history.store import Store, default_path

        target = default_path()
        if target is None:
            return 0
        at = time.time()
        with Store(target) as store:
            for item in taken:
                store.add_action(at=at, node=item.node, action=item.action, check_ids=item.check_ids,
                                 reason=item.reason, source=source or command_name())
    except Exception as exc:  # noqa: BLE001 - the history never costs an action
        warn(f"burnin: history: {len(taken)} gate action(s) not recorded: {exc}")
        return 0
    return len(taken)


def record_probe(node: str, rows: Sequence[tuple[str, str, str, str, str]], *, started: float, finished: float,
                 warn: Callable[[str], object] = _warn) -> bool:
    """A probe's verdicts (``burnin probe --record``) as a one-node run of kind ``probe``: rows are ``(check,
    status, measured, expected, reason)``. Reliability leaves probe runs out (they repeat every few minutes);
    a node's timeline shows them. Never raises: one warning line when the history cannot be written."""
    try:
        from burnin.history.recorder import verdict_row
        from burnin.history.store import Store, default_path

        target = default_path()
        if target is None:
            return False
        verdicts = [row for check, status, measured, expected, reason in rows
                    if (row := verdict_row({"node": node, "check": check, "verdict": status, "measured": measured,
                                            "expected": expected, "reason": reason})) is not None]
        failed = [check for check, status, *_ in rows if status == "fail"]
        incomplete = [check for check, status, *_ in rows if status == "incomplete"]
        first = next((reason for _, status, _, _, reason in rows if status in ("fail", "incomplete")), "")
        with Store(target) as store:
            run = store.add_run(kind="probe", started=started, nodes=1, host=node)
            store.add_verdicts(run, verdicts)
            store.finish_run(run, finished=finished, decisions=[(node, not failed and not incomplete, failed,
                                                                 incomplete, first)])
    except Exception as exc:  # noqa: BLE001 - the history never costs the probe its verdict
        warn(f"burnin: history: probe not recorded: {exc}")
        return False
    return True
