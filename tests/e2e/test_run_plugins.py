"""`burnin run` judges with burnin's own pytest plugin only: an installed third-party plugin never joins.

A plugin installed beside burnin (pytest-rerunfailures retrying a failed check until it passes, a plugin
that skips or reorders tests) would change verdicts silently: fail open. The internal session disables
pytest's plugin autoload (burnin.session.PLUGIN_ARGS) and names burnin's plugin itself. The plugin here is
installed the way pip installs one: a module and a dist-info folder whose entry point is in ``pytest11``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = '''
import os
from pathlib import Path

Path(os.environ["MARK_FILE"]).write_text("imported")


def pytest_configure(config):
    Path(os.environ["MARK_FILE"]).write_text("configured")
'''


def _install_plugin(site: Path) -> None:
    (site / "sneaky_plugin.py").write_text(PLUGIN)
    dist = site / "sneaky_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sneaky-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nsneaky = sneaky_plugin\n")


def test_an_installed_pytest_plugin_does_not_join_the_run(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    mark = tmp_path / "mark"
    env = {**os.environ, "MARK_FILE": str(mark),
           "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}

    # The plugin is installed: a plain pytest session (autoload on) imports and configures it.
    (tmp_path / "empty").mkdir()
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "empty")],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert mark.read_text() == "configured", plain.stdout + plain.stderr
    mark.unlink()

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "run", "--sim", "1", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "gate.json").read_text())["admitted"] == "sim01"
    assert not mark.exists()
