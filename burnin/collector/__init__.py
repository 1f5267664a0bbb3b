"""The node-side collector: gathers a node's facts into one JSON document.

It runs ON the node (shipped as a zipapp over SSH, with sbcast under Slurm, or
run in place), so it depends on the standard library and pynvml only, and
imports nothing else from burnin. Every source is bounded by a timeout; a source
that fails records why instead of crashing the collector.
"""

from burnin.collector.core import ALL_SOURCES, FAST_SOURCES, collect

__all__ = ["ALL_SOURCES", "FAST_SOURCES", "collect"]
