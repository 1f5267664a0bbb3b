"""`burnin watch` and `burnin sim up --watch` mistakes: one line, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BURNIN = [sys.executable, "-m", "burnin.cli.main"]


def _burnin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BURNIN, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.proc
@pytest.mark.parametrize(("args", "message"), [
    (["watch", "--topology", "nosuch"], "unknown topology 'nosuch'"),
    (["watch", "--node", "a b"], "invalid node name 'a b'"),
    (["watch", "--probe-interval", "0"], "must be a positive number of seconds"),
    (["watch", "--dedupe-window", "nan"], "must be a positive number of seconds"),
    (["watch", "--ib-port-down", "ignore"], "invalid choice: 'ignore'"),
    (["watch", "--kernel-log-format", "journal"], "invalid choice: 'journal'"),
    (["watch", "--state-dir", "/proc/burnin-no-such-dir"], "cannot create the state folder"),
])
def test_watch_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    if "--state-dir" not in args:
        args = [*args, "--state-dir", str(tmp_path)]
    result = _burnin(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.proc
def test_sim_up_watch_needs_slurm(tmp_path: Path) -> None:
    result = _burnin("sim", "up", "--ssh", "2", "--watch", "--state", str(tmp_path / "lab"))
    assert result.returncode == 2
    assert "--watch needs --slurm" in result.stderr and "Traceback" not in result.stderr


def test_kernel_log_of_a_simulated_node_is_the_simulators(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from burnin.cli.watch_cmd import _kernel_log
    from burnin.sim.events import KMSG_FILE

    monkeypatch.delenv("BURNIN_SIM_NVML", raising=False)
    assert _kernel_log(None) == Path("/dev/kmsg")
    state = tmp_path / "node" / "nvml.state"
    monkeypatch.setenv("BURNIN_SIM_NVML", str(state))
    assert _kernel_log(None) == state.parent / KMSG_FILE  # the file burnin.sim.events appends to
    assert _kernel_log("none") is None
    assert _kernel_log("/var/log/kern.log") == Path("/var/log/kern.log")
