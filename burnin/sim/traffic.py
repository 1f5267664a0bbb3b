"""NVLink errors that appear only under traffic (fault ``nvlink-flaky-under-load``), standard library only.

Simulated nodes carry a copy as ``out/fabric/traffic.py``: each simulated
tool that moves data over NVLink (``*_perf``, ``nvbandwidth``,
``p2pBandwidthLatencyTest``) calls :func:`record` for every node it runs on.
A GPU whose ``flaky_link`` is set (``out/fabric/health.json``) then gains
:data:`RECOVERY_PER_RUN` DL recovery and :data:`REPLAY_PER_RUN` DL replay
errors on that link: the link retrains and comes back up, so bandwidth and
link state do not change [U].

The counters live in the node's NVML state file (``nvml.state``, read by the
simulated ``libnvidia-ml.so.1`` at every ``nvmlInit``), whose later lines win:
a run appends the grown counter lists of the flaky GPUs, written to a new file
that replaces the old one, so a reader sees either state whole. At rest
nothing changes: GPU-10 and GPU-11 see clean counters, NVL-04 sees them grow.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

RECOVERY_PER_RUN = 1
REPLAY_PER_RUN = 150
STATE_FILE = "nvml.state"


def _current(lines: Sequence[str], key: str) -> list[int]:
    """The last value of ``key`` in the state file (a comma list of counters, one per link)."""
    value = ""
    prefix = key + "="
    for line in lines:
        if line.startswith(prefix):
            value = line[len(prefix):]
    return [int(v) for v in value.split(",") if v.strip()]


def grown(lines: Sequence[str], gpus: Sequence[dict[str, Any]]) -> list[str]:
    """The lines one more run appends: each flaky GPU's recovery and replay lists, grown on its link."""
    out: list[str] = []
    for gpu in gpus:
        link = gpu.get("flaky_link")
        if link is None:
            continue
        for counter, step in (("recovery", RECOVERY_PER_RUN), ("replay", REPLAY_PER_RUN)):
            key = f"gpu.{gpu['index']}.nvlink_{counter}"
            values = _current(lines, key)
            if link < len(values):
                values[link] += step
                out.append(f"{key}={','.join(map(str, values))}")
    return out


def record(node_dir: str, gpus: Sequence[dict[str, Any]]) -> None:
    """One run with traffic on the node in ``node_dir`` (its ``health.json`` GPUs)."""
    if not any(g.get("flaky_link") is not None for g in gpus):
        return
    path = os.path.join(node_dir, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return  # not a simulated node with an NVML state: nothing to grow
    extra = grown(text.splitlines(), gpus)
    if not extra:
        return
    fd, tmp = tempfile.mkstemp(dir=node_dir, prefix=f".{STATE_FILE}.")
    os.chmod(tmp, os.stat(path).st_mode & 0o777)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
        handle.write("\n".join(extra) + "\n")
    os.replace(tmp, path)
