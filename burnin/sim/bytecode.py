"""Bytecode for the simulator's Python tools, so that a simulated tool costs what a real one does.

A simulated node's model tools (``out/fabric/model.py`` for nccl-tests, ib_write_bw, nvbandwidth and the
p2p test; ``out/megatron/model.py``; ``out/soak/tools.py``) are Python files the node's shims start. Run as a
script, a file is compiled on every start and its bytecode never kept (machines like these set
``PYTHONDONTWRITEBYTECODE``): the fabric model alone is 12.7 ms of compiling per ``ib_write_bw`` run, more than
the rest of its work. So each rendered ``.py`` gets a checked hash-based ``.pyc`` in its ``__pycache__`` (PEP
552: the interpreter compares it with the source's hash at every import, so a file changed by hand is compiled
again, and a node directory may move), and the shims import their tool as a module, which uses it.

The ``__pycache__`` folders are not part of a node's rendered tree (:mod:`burnin.sim.writer` leaves them alone);
one compile per source serves every node a process renders.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from functools import cache
from pathlib import Path

from burnin.sim.writer import replace_file
from burnin.transport.payload import bytecode


@cache
def _pyc(source: str) -> bytes:
    # the name is the import's to fix: a module loaded from a .pyc is named after its source file
    return bytecode("<burnin simulator tool>", source.encode("utf-8"), checked=True)


def write_caches(folder: Path, files: dict[str, str]) -> None:
    """For each ``.py`` among ``files`` (path below ``folder`` -> text, as rendered), its bytecode where the
    import system looks for it; a file already holding the same bytes is left alone (a live node re-rendered)."""
    for name in files:
        if not name.endswith(".py"):
            continue
        target = importlib.util.cache_from_source(str(folder / name))
        data = _pyc(files[name])
        try:
            with open(target, "rb") as existing:
                if existing.read() == data:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(target), exist_ok=True)
        replace_file(Path(target), data)


def launch(folder: str, module: str, tool: str) -> str:
    """A shim's closing lines: ``module`` imported from ``folder`` (a shell word, e.g. ``"${0%/*}/../out/fabric"``)
    and its ``main`` run with ``tool`` and the shim's arguments, by this python (``python3`` where a node cannot
    run it: a lab's node user)."""
    code = (f"import sys; sys.path.insert(0, sys.argv[1]); import {module}; "
            f"raise SystemExit({module}.main(sys.argv[2:]))")
    return (f"py={shlex.quote(sys.executable)}\n[ -x \"$py\" ] || py=python3\n"
            f"exec \"$py\" -S -c '{code}' {folder} {tool} \"$@\"\n")
