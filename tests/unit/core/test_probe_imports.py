"""What `burnin probe` imports: its modules read from sys.modules when it is done, on simulated nodes.

The probe runs every few minutes on every node (Slurm's HealthCheckProgram, a
prolog), so it imports only the collector, the checks it judges, their parsers
and the cached topology: never pydantic or YAML (the topology cache is built
from the validated model once), never a parser that none of its sources feeds,
never another layer's machinery. bench/probe measures what that costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.sim import build_rack
from burnin.topology.model import Topology

pytestmark = pytest.mark.rack

#: The parsers of what the probe's sources gather (burnin.collector.core.FAST_SOURCES), each with its source.
PROBE_PARSERS = {
    "burnin.parsers", "burnin.parsers._common",
    "burnin.parsers.dmesg",          # dmesg: Xids (GPU-04), NVSwitch SXids (INV-04)
    "burnin.parsers.dcgmi_health",   # dcgmi-health: GPU-12
    "burnin.parsers.dcgmi_errors",   # dcgmi-health: dcgmi's own "Error:" lines
    "burnin.parsers.hostmem",        # host: meminfo, hugepages, THP (TOP-07, TOP-09, TOP-10)
    "burnin.parsers.sysfs_values",   # infiniband, pci: link speeds, pkeys
    "burnin.parsers.iproute",        # storage: ip -j route get (STO-01), ip -j addr (STO-07)
    "burnin.parsers.ofed_info",      # software: ofed_info -s (INV-10)
    "burnin.parsers.dcgmi_version",  # software: dcgmi --version (INV-10)
}
HEAVY = ("pydantic", "pydantic_core", "yaml", "rich", "pytest", "hypothesis", "jinja2", "paramiko", "ClusterShell",
         "concurrent.futures")
OTHER_LAYERS = ("burnin.topology.load", "burnin.topology.yamlsafe", "burnin.topology.unknown", "burnin.report",
                "burnin.fabric", "burnin.storage", "burnin.megatron", "burnin.soak", "burnin.dispatch",
                "burnin.transport", "burnin.launch", "burnin.gate", "burnin.sim", "burnin.watch")
WORKLOAD_JUDGES = {"burnin.storage", "burnin.storage.nccl_runtime", "burnin.storage.pathmtu_judge"}
"""The storage package's pure judges that STO-02 and STO-04 read (a workload package owns its judging)."""

_MARK = "MODULES "
# The console script's own code, then sys.modules once the probe is done (json is imported after it).
_PROBE = ("import sys\nfrom burnin.cli.main import main\ncode = main(sys.argv[1:])\nimport json\n"
          f"print({_MARK!r} + json.dumps(sorted(sys.modules)))\nsys.exit(code)\n")


def _probe_modules(env: dict[str, str]) -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, "probe", "--timeout", "60"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(_MARK)), None)
    assert line is not None, proc.stdout + proc.stderr
    return proc.returncode, set(json.loads(line[len(_MARK):]))


@pytest.mark.parametrize(("fault", "exit_code"), [(None, 0), ("xid:79@gpu2", 1), ("dcgm-health-fail", 1),
                                                  ("storage-route-via-ib", 1)])
def test_the_probe_imports_only_what_its_checks_read(tmp_path: Path, h100_topology: Topology, fault: str | None,
                                                     exit_code: int) -> None:
    node = build_rack(tmp_path / "rack", h100_topology, ["sim01"], {"sim01": [fault]} if fault else {})[0]
    env = {**os.environ, **node.environment(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first_code, first = _probe_modules(env)  # no cached topology yet: this one validates the file
    assert "pydantic" in first and first_code == exit_code
    code, modules = _probe_modules(env)
    assert code == exit_code
    assert not [m for m in HEAVY if m in modules]
    assert not [m for m in modules if m.startswith(OTHER_LAYERS) and m not in WORKLOAD_JUDGES]
    assert {m for m in modules if m.startswith("burnin.parsers")} <= PROBE_PARSERS
    assert "pynvml" in modules and "burnin.checks.gpu" in modules  # the probe did run its checks


def test_a_cache_the_probe_cannot_write_costs_speed_not_the_verdict(tmp_path: Path, h100_topology: Topology) -> None:
    node = build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")
    env = {**os.environ, **node.environment(), "XDG_CACHE_HOME": str(cache)}
    for _ in range(2):
        code, modules = _probe_modules(env)
        assert code == 0 and "pydantic" in modules  # validated every time, judged the same
