"""The 'send to vendor' bundle: one tarball with what a vendor asks for about a node that keeps failing.

``<node>-<UTC time>.tar.gz`` holds, under ``<node>-<time>/``:

- ``summary.json``: the node, its drain reason, the incident class, the check ids, the steps taken;
- ``facts.json``: the node's facts from its last acceptance run (what burnin measured);
- ``failing-checks.json``: every verdict of that run on the node that did not pass (measured, expected, reason);
- ``kernel-log.txt``: the kernel log's GPU, NIC, PCIe and error lines (an excerpt);
- ``nvidia-bug-report.log`` when ``nvidia-bug-report.sh`` exists on the node, else ``nvidia-bug-report.missing``
  saying why;
- ``ibstat.txt`` and ``mlxlink.txt`` for a fabric (IB) incident;
- ``incident-history.json``: the node's repair journal and, when there is a history database, its timeline.

Pure apart from writing the one file: the caller gathers the texts (:mod:`burnin.repair.executor`).
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KERNEL_LINES = re.compile(r"(?i)nvrm|xid|nvidia|nvswitch|mlx5|infiniband|pcie|aer|error|fail|fault")
KERNEL_LIMIT = 2000


def kernel_excerpt(text: str, limit: int = KERNEL_LIMIT) -> str:
    """The kernel log's lines about GPUs, NICs, PCIe and errors, the last ``limit`` of them."""
    lines = [line for line in text.splitlines() if KERNEL_LINES.search(line)]
    dropped = len(lines) - limit
    head = [f"# {dropped} earlier matching line(s) left out"] if dropped > 0 else []
    return "\n".join([*head, *lines[-limit:]]) + "\n"


def bundle_name(node: str, now: float) -> str:
    return f"{node}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}"


def write_bundle(folder: Path, node: str, now: float, files: Mapping[str, str | Mapping[str, Any] | list[Any]]
                 ) -> Path:
    """Write ``files`` (name -> text, or a JSON document) as ``folder/<node>-<time>.tar.gz``; its path."""
    name = bundle_name(node, now)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for file_name, content in sorted(files.items()):
            text = content if isinstance(content, str) else json.dumps(content, indent=1, sort_keys=True,
                                                                        default=str) + "\n"
            data = text.encode("utf-8", errors="replace")
            info = tarfile.TarInfo(f"{name}/{file_name}")
            info.size = len(data)
            info.mtime = int(now)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    path = folder / f"{name}.tar.gz"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.tar.gz.partial"
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)  # a reader sees the whole bundle or none
    return path
