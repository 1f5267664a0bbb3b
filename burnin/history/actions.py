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
