"""NVIDIA DCGM through ``dcgmi`` (check-catalog GPU-12, GPU-13): raw text, read by the controller's parsers.

Two sources, apart because they cost differently:

- ``dcgmi-health``: ``dcgmi health -c``, a query of the passive health watches the host engine keeps
  (set once at boot with ``dcgmi health -s a``; this collector never sets them: it only reads). Cheap,
  among the health probe's fast sources.
- ``dcgmi-diag``: ``dcgmi diag -r 1``, DCGM's level-1 deployment tests. Seconds, and it wants idle GPUs:
  ``burnin run`` gathers it, the probe never does.

A node without ``dcgmi`` costs one ``PATH`` lookup: the record says ``command not found``. Standard library
only: this module travels in the collector zipapp.
"""

from __future__ import annotations

from burnin.collector.commands import run_tool

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any

HEALTH_ARGV = ("dcgmi", "health", "-c")
DIAG_ARGV = ("dcgmi", "diag", "-r", "1")


def health_check(root: str, timeout: float) -> dict[str, Any]:
    """``dcgmi health -c``: the host engine's passive health report (GPU-12)."""
    return run_tool(list(HEALTH_ARGV), timeout)


def quick_diag(root: str, timeout: float) -> dict[str, Any]:
    """``dcgmi diag -r 1``: DCGM's level-1 (deployment) diagnostic (GPU-13)."""
    return run_tool(list(DIAG_ARGV), timeout)


#: name -> (facts key, function(root, timeout)), as burnin.collector.core.SOURCES holds them.
SOURCES = {
    "dcgmi-health": ("commands", health_check),
    "dcgmi-diag": ("commands", quick_diag),
}
FAST = ("dcgmi-health",)
