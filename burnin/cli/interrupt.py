"""SIGINT, SIGTERM and SIGHUP end a command the same way: children stopped, scratch removed, exit 3.

``timeout`` and a cancelled Slurm job send SIGTERM, a closed terminal SIGHUP.
The handler stops every child process group at once (SIGTERM, then SIGKILL
after a grace period), has every command running over SSH stopped on its node
(burnin.transport.ssh: the same signals, sent through the connection), and
raises :class:`Interrupted`, a ``KeyboardInterrupt``, so every ``finally`` and
``with`` on the way out runs, and pytest judging in this process unwinds as it
does on Ctrl-C. A second signal while the command
cleans up kills the children outright and lets the cleanup finish.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A signal asked the command to stop."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


_received: list[str] = []


Handlers = dict[signal.Signals, object]


def install() -> Handlers:
    """Route SIGINT, SIGTERM and SIGHUP to :func:`_on_signal`; returns the handlers it replaced.

    Does nothing outside the main thread (Python delivers signals only there).
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: Handlers = {}
    for sig in SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue  # started under nohup: the user asked to outlive the terminal
        previous[sig] = signal.signal(sig, _on_signal)
    return previous


def restore(previous: Handlers) -> None:
    """Put back the handlers :func:`install` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def received() -> str | None:
    """Name of the first signal received (``SIGTERM``), or None."""
    return _received[0] if _received else None


def raise_if_received() -> None:
    """Raise :class:`Interrupted` when a signal came (for code that caught the first one, as pytest does)."""
    name = received()
    if name is not None:
        raise Interrupted(name)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    first = not _received
    _received.append(name)
    # Only a transport that was imported can have started children (and importing
    # inside a signal handler could wait on the import lock).
    stop_children = _loaded("burnin.transport.local", "stop_children")
    if stop_children is not None:
        stop_children(force=not first)
    stop_commands = _loaded("burnin.transport.ssh", "stop_commands")
    if stop_commands is not None:  # sets a flag: each command's own thread signals its remote process group
        stop_commands()
    if first:
        raise Interrupted(name)


def reset() -> None:
    """Forget received signals (tests calling ``main`` more than once in a process)."""
    _received.clear()
    for module, name in (("burnin.transport.local", "allow_children"), ("burnin.transport.ssh", "allow_commands")):
        allow = _loaded(module, name)
        if allow is not None:
            allow()


def _loaded(module: str, name: str) -> Callable[..., None] | None:
    """``module.name`` when ``module`` is imported and has it. A signal can come while the module is being
    imported (it is in ``sys.modules`` before its body has run): then nothing of it has run, no child of it
    can exist, and its function may not be defined yet."""
    found = getattr(sys.modules.get(module), name, None)
    return found if callable(found) else None
