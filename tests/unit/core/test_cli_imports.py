"""What a help page or a usage error imports: its modules read from sys.modules when the command is done.

The test suite, the lab's nodes and operators start ``burnin`` thousands of times; a mistyped option or
``--help`` must cost the interpreter's start and argparse, not the layers a run uses (pydantic, YAML,
pytest, the launchers, the simulator). Each verb's options are declared by modules that import their
machinery inside the functions that use it (burnin.dispatch.registry, burnin.phases).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.proc

HEAVY = ("pydantic", "yaml", "pytest", "_pytest", "jinja2", "paramiko", "ClusterShell", "concurrent.futures",
         "sqlite3")
LAYERS = ("burnin.topology", "burnin.facts", "burnin.launch", "burnin.transport", "burnin.sim", "burnin.session",
          "burnin.plugin", "burnin.checks", "burnin.parsers", "burnin.report", "burnin.history", "burnin.megatron",
          "burnin.fabric", "burnin.storage", "burnin.soak", "burnin.watch", "burnin.collector", "burnin.dispatch.base")

_MARK = "MODULES "
# The console script's own code, then sys.modules once the command is done (json is imported after it).
_COMMAND = ("import sys\nfrom burnin.cli.main import main\ncode = main(sys.argv[1:])\nimport json\n"
            f"print({_MARK!r} + json.dumps(sorted(sys.modules)))\nsys.exit(code)\n")


def _modules(argv: list[str]) -> tuple[int, set[str]]:
    # argparse's --help and usage errors exit through SystemExit: catch it to read sys.modules afterwards
    code = _COMMAND.replace("code = main(sys.argv[1:])",
                            "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code")
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=os.environ, capture_output=True, text=True,
                          timeout=120, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(_MARK)), None)
    assert line is not None, proc.stdout + proc.stderr
    return proc.returncode, set(json.loads(line[len(_MARK):]))


@pytest.mark.parametrize(("argv", "exit_code"), [
    (["--help"], 0), (["bogus"], 2), ([], 2),
    (["run", "--help"], 0), (["run", "--bogus"], 2), (["run", "--sim", "two"], 2), (["run", "--via", "pigeon"], 2),
    (["soak", "--help"], 0), (["soak", "--hours"], 2),
    (["sweep", "--help"], 0), (["history", "--help"], 0), (["diff", "--help"], 0), (["diff", "7"], 2),
    (["reliability", "--help"], 0), (["probe", "--help"], 0), (["probe", "--bogus"], 2),
])
def test_help_and_usage_errors_import_no_layer(argv: list[str], exit_code: int) -> None:
    code, modules = _modules(argv)
    assert code == exit_code
    assert not [m for m in HEAVY if m in modules]
    assert not [m for m in modules if m.startswith(LAYERS)]


def test_the_guard_sees_a_run_import_its_layers() -> None:
    """The same reading of sys.modules after a command that does use them (`burnin faults` lists the simulator's)."""
    code, modules = _modules(["faults"])
    assert code == 0
    assert "burnin.sim" in modules or "burnin.sim.faults" in modules


_BEFORE_THE_GATHER = """
import json, sys
import burnin.cli.run_cmd, burnin.session, burnin.dispatch.ssh, burnin.dispatch.sim, burnin.dispatch.slurm
before = sorted(sys.modules)
burnin.session.prepare_judging()
print(json.dumps([before, sorted(sys.modules)]))
"""


def test_a_run_imports_judging_while_it_gathers_not_before() -> None:
    """What `burnin run` has imported when its gather starts (the session, the dispatchers) holds no pytest and
    no report machinery: those come in while the nodes' facts are on their way (prepare_judging, called as the
    first node's come in), not in the serial start before the first connection."""
    proc = subprocess.run([sys.executable, "-c", _BEFORE_THE_GATHER], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = (set(names) for names in json.loads(proc.stdout.strip().splitlines()[-1]))
    judging = {"pytest", "_pytest", "burnin.plugin", "jinja2", "burnin.checks.gpu", "burnin.checks.hca",
               "burnin.report.junit", "burnin.report.metrics"}
    assert not judging & before
    assert judging <= after
