"""paramiko, imported without invoke: the one way burnin's transport imports it.

paramiko's ``config`` module imports invoke, a task runner, for one purpose: running the commands
of ``Match exec`` criteria in an ssh_config. burnin does not run commands from an ssh_config (a
``Match exec`` it reaches is a usage error, :class:`burnin.transport.ssh_config.SshConfigResolver`),
and invoke, with the YAML parser it carries, is half of paramiko's import: some 70 ms of every
``burnin run --via ssh`` before its first connection. While paramiko is first imported here, invoke
is marked as absent (``sys.modules[name] = None``, Python's documented way to make an import fail),
so paramiko takes the path it has for a machine without it; the mark is removed at once, and
anything that imports invoke afterwards gets it. Where paramiko was imported before (by another
module of the same process), it is used as it is.
"""

from __future__ import annotations

import sys

_ABSENT = "invoke"

_block = _ABSENT not in sys.modules
if _block:
    sys.modules[_ABSENT] = None  # type: ignore[assignment]
try:
    import paramiko
    import paramiko.common
    import paramiko.hostkeys
finally:
    if _block and sys.modules.get(_ABSENT, False) is None:
        del sys.modules[_ABSENT]

__all__ = ["paramiko"]
