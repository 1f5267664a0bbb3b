"""The host software stack (INV-10): kernel release, OFED release, NCCL library, DCGM version.

Read below the root like the rest of the collector: ``proc/sys/kernel/osrelease``,
and the names of ``libnccl.so*`` in the standard library folders (NCCL's version is
in its file name, ``libnccl.so.2.18.5``: no library is loaded, no CUDA needed).
``ofed_info -s`` and ``dcgmi --version`` run through the collector's command runner
when they are on PATH; the controller's pure parsers read what they printed.
"""

from __future__ import annotations

import os

from burnin.collector.commands import run_tools, tools_time
from burnin.collector.sysfs import read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

# Where distributions, NVIDIA's packages and the CUDA toolkit put libnccl.so (Debian/Ubuntu multiarch, RHEL lib64,
# a local build, the toolkit's folder). A folder that does not exist is skipped.
NCCL_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
)
NCCL_PREFIX = "libnccl.so"


def _below(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _shown(root: str, real: str) -> str:
    """A real path as the node names it (the root cut off)."""
    base = os.path.realpath(root)
    if base != "/" and (real == base or real.startswith(base + os.sep)):
        return real[len(base):] or "/"
    return real


def collect_nccl_libraries(root: str) -> dict[str, Any]:
    """Every ``libnccl.so*`` file in NCCL_LIBRARY_DIRS, once per real file, with the name it resolves to."""
    libraries: list[dict[str, str]] = []
    seen: set[str] = set()
    for folder in NCCL_LIBRARY_DIRS:
        full = _below(root, folder)
        try:
            names = sorted(os.listdir(full))
        except OSError:
            continue
        for name in names:
            if not name.startswith(NCCL_PREFIX):
                continue
            real = os.path.realpath(os.path.join(full, name))
            if real in seen:
                continue
            seen.add(real)
            libraries.append({"path": f"{folder}/{name}", "file": os.path.basename(real),
                              "real_path": _shown(root, real)})
    return {"searched": list(NCCL_LIBRARY_DIRS), "libraries": libraries}


def collect_software(root: str, timeout: float) -> dict[str, Any]:
    """The software source: the kernel release, the two tools' records and the NCCL libraries found."""
    tools = run_tools({"ofed_info": ["ofed_info", "-s"], "dcgmi": ["dcgmi", "--version"]}, tools_time(timeout))
    return {
        "kernel_release": read_text(_below(root, "proc/sys/kernel/osrelease")),
        "ofed_info": tools["ofed_info"],
        "nccl": collect_nccl_libraries(root),
        "dcgmi": tools["dcgmi"],
    }
