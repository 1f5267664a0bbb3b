"""Run the collector's sources, each bounded by a timeout, into one facts document."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from burnin.collector import commands, hca, node_env, nvml, sdc, software, storage, sysfs, telemetry
from burnin.collector import dcgm as dcgm_facts
from burnin.collector import host as host_facts

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every collector start
if TYPE_CHECKING:
    from typing import Any, NoReturn

SCHEMA_VERSION = 1

Source = Callable[[str, float], "Any"]

SOURCES: dict[str, tuple[str, Source]] = {
    # name: (facts key, function(root, timeout) -> value)
    "nvml": ("nvml", lambda root, timeout: nvml.collect_nvml()),
    "pci": ("pci", lambda root, timeout: sysfs.collect_pci(root)),
    "infiniband": ("infiniband", lambda root, timeout: sysfs.collect_infiniband(root)),
    "numa": ("numa", lambda root, timeout: sysfs.collect_numa(root)),
    "kernel": ("kernel", lambda root, timeout: sysfs.collect_kernel(root)),
    "nvidia-smi-topo": ("commands", commands.nvidia_smi_topo),
    "ibstat": ("commands", commands.ibstat),
    "dmesg": ("commands", commands.dmesg),
    "lspci": ("commands", commands.lspci),
    "fabricmanager": ("commands", commands.fabricmanager),
    "storage": ("storage", storage.collect_storage),
    "storage-nic": ("storage_nic", storage.collect_storage_nic),
    "ib-pkeys": ("ib_pkeys", lambda root, timeout: hca.collect_ib_pkeys(root)),
    "ibv-devinfo": ("commands", hca.ibv_devinfo),
    "host": ("host", lambda root, timeout: host_facts.collect_host(root)),
    "pci-census": ("pci_census", lambda root, timeout: host_facts.collect_pci_census(root)),
    "software": ("software", software.collect_software),
    "sdc": ("sdc", lambda root, timeout: sdc.collect_sdc(sdc.DEFAULT_SIZE, timeout)),  # GPU-14: torch on every GPU
}
SOURCES.update(dcgm_facts.SOURCES)  # GPU-12, GPU-13: dcgmi health -c, dcgmi diag -r 1

ALL_SOURCES: tuple[str, ...] = tuple(SOURCES)
# Asked for by name only (burnin soak samples them every interval): not part of "all".
SOURCES.update(telemetry.SOAK_SOURCES)
# Read-only and cheap: what the health probe gathers every few minutes.
FAST_SOURCES: tuple[str, ...] = (
    "nvml", "pci", "infiniband", "numa", "kernel", "dmesg", "fabricmanager", "storage", "host", "pci-census",
    "software",
)
FAST_SOURCES += dcgm_facts.FAST  # dcgmi health -c only: the probe never runs a diag


FILE_LANE: tuple[str, ...] = ("numa", "kernel", "host", "pci-census", "infiniband", "pci")
"""Sources that only read files: asked for together, they run one after the other in one thread (one
thread each costs the probe ~3 ms of CPU in thread starts and lock hand-offs between the readers). One
that hangs there stops those after it, which are then reported not run: incomplete, as a hung one is."""

Outcome = tuple["Any", "str | None", float]
"""A source's value, why it failed (None: it did not), and how long it took."""


class _Bounded:
    """Sources running one after the other in a daemon thread, abandoned if they outlive the timeout.

    A hung driver call (a GPU that fell off the bus) cannot be interrupted, but
    it can be abandoned: the thread is a daemon and the collector goes on.
    """

    def __init__(self, funcs: dict[str, Source], root: str, timeout: float) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self._current = ""
        self._timeout = timeout
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._target, args=(funcs, root, timeout), daemon=True)
        self._thread.start()

    def _target(self, funcs: dict[str, Source], root: str, timeout: float) -> None:
        with sysfs.one_pass():  # sources in one lane read a file they share once
            self._run(funcs, root, timeout)

    def _run(self, funcs: dict[str, Source], root: str, timeout: float) -> None:
        for name, func in funcs.items():
            self._current = name
            started = time.monotonic()
            try:
                outcome: Outcome = (func(root, timeout), None, time.monotonic() - started)
            except Exception as exc:  # noqa: BLE001 - a source must never crash the collector
                outcome = (None, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
            self.outcomes[name] = outcome

    def wait(self, name: str) -> Outcome:
        self._thread.join(max(0.0, self._started + self._timeout - time.monotonic()))
        if name in self.outcomes:
            return self.outcomes[name]
        spent = time.monotonic() - self._started
        current = self._current  # every source before it has its outcome
        if name == current or not current:
            return None, f"timed out after {self._timeout:g} s", spent
        return None, f"not run: {current} before it timed out after {self._timeout:g} s", spent


def collect(root: str = "/", sources: tuple[str, ...] = ALL_SOURCES, timeout: float = 20.0) -> dict[str, Any]:
    """Gather the named sources below ``root`` into a facts document.

    ``storage-route=ADDR`` / ``storage-vrf=NAME`` items among ``sources`` are the storage source's targets.
    """
    started = time.monotonic()
    sources, storage_targets, storage_vrf = storage.split_items(sources)
    sources, sdc_size = sdc.split_items(sources)
    facts: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "hostname": node_env.host_name(),
        "root": root,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sources": {},
        "commands": {},
    }
    # Sources run side by side (the file readers in one lane): tool processes and sysfs reads overlap NVML's calls.
    funcs = {name: SOURCES[name][1] for name in sources if name in SOURCES}
    if "storage" in funcs:
        funcs["storage"] = storage.bind_storage(storage_targets, storage_vrf)
    if "sdc" in funcs:
        funcs["sdc"] = lambda root, timeout: sdc.collect_sdc(sdc_size, timeout)
    lane = {name: funcs.pop(name) for name in FILE_LANE if name in funcs}
    running = {name: _Bounded({name: func}, root, timeout) for name, func in funcs.items()}
    if lane:
        files = _Bounded(lane, root, timeout)
        running.update(dict.fromkeys(lane, files))
    for name in sources:
        if name not in SOURCES:
            facts["sources"][name] = {"ok": False, "error": "unknown source", "duration_s": 0.0}
            continue
        key = SOURCES[name][0]
        value, error, duration = running[name].wait(name)
        if key == "commands":
            if value is not None:
                facts["commands"][name] = value
                if value.get("error"):
                    error = error or value["error"]
        elif value is not None:
            facts[key] = value
        facts["sources"][name] = {
            "ok": error is None,
            "error": error,
            "duration_s": round(duration, 4),
        }
    facts["duration_s"] = round(time.monotonic() - started, 4)
    return facts


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="burnin-collect", description=__doc__)
    parser.add_argument("--root", default=node_env.root(),
                        help="read sysfs/procfs below this directory (default: $BURNIN_ROOT or /)")
    parser.add_argument("--timeout", type=float, default=20.0, help="per-source timeout in seconds")
    parser.add_argument("--sources", default="all", help="comma-separated sources, 'all' or 'fast'")
    args = parser.parse_args(argv)
    if args.sources == "all":
        sources = ALL_SOURCES
    elif args.sources == "fast":
        sources = FAST_SOURCES
    else:
        groups = {"all": ALL_SOURCES, "fast": FAST_SOURCES}
        sources = tuple(s for item in args.sources.split(",") if item for s in groups.get(item, (item,)))
    facts = collect(args.root, sources, args.timeout)
    json.dump(facts, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


def run(argv: list[str] | None = None) -> NoReturn:
    """:func:`main`, then out at once, as every way of starting the collector does (``python -m``, the zipapp,
    the stdin bootstrap). The facts are written and flushed by then, and nothing is left to clean up: the
    interpreter's teardown of the modules a gathering loaded is skipped (a fifth of a soak sample's CPU on a
    simulated node, 82 ms against 65, measured), and so is any wait on a source thread a hung driver call left."""
    import os
    import sys

    code = main(argv)
    sys.stderr.flush()
    os._exit(code)
