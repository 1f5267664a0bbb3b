"""SIGTERM, SIGHUP and SIGINT end `burnin run` like Ctrl-C: exit 3, one line, nothing left behind.

`timeout` and a cancelled Slurm job send SIGTERM. Each test waits for a marker
of the phase it interrupts (the scratch rack being built, a collector running,
a hung fabric tool), never a fixed sleep, then checks: exit 3, exactly one
stderr line naming the signal, no `/dev/shm/burnin-sim-<pid>-*` left, no
process left that runs as one of the run's simulated nodes, and nothing left
in the run's private TMPDIR.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SHM = Path("/dev/shm")
MARKER_TIMEOUT_S = 240.0
# a failure bound on the processes burnin killed as it exited ending, never a measurement (well short of the
# 60 s a hung fabric tool used to live on after the run: the bound cannot hide that one)
GONE_TIMEOUT_S = 30.0
HUNG_AFTER_S = 2.0  # a simulated all_reduce_perf alive this long is the hung one (a healthy run takes ms)


def _hangup_as_by_default() -> None:
    """In the child: a hangup ends it, even when these tests run under nohup (which burnin honours: a
    command started with SIGHUP ignored goes on)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start(args: list[str], tmp: Path, driver: str | None = None,
           env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, TMPDIR=str(tmp), **(env or {}))
    command = [sys.executable, "-c", driver, *args] if driver else [sys.executable, "-m", "burnin.cli.main", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp, preexec_fn=_hangup_as_by_default)  # one signal call


def _scratch(pid: int) -> list[Path]:
    return sorted(SHM.glob(f"burnin-sim-{pid}-*")) if SHM.is_dir() else []


def _processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose environment holds ``text`` (a simulated node's root lies in the scratch)."""
    found = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            if state == "Z":
                continue
            if needle in (entry / "environ").read_bytes():
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            continue
    return found


def _left_running(prefix: str) -> list[tuple[int, str]]:
    """The processes of the run's nodes still there once those burnin killed on its way out had time to end.

    burnin SIGKILLs each child's process group but waits only for the child itself (and for its pipes to
    close): a killed process stays in /proc until the kernel runs it again, which on a loaded machine can be
    after burnin was reaped. A process nobody stopped is still there after the bound.
    """
    deadline = time.monotonic() + GONE_TIMEOUT_S
    left = _processes_mentioning(prefix)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _processes_mentioning(prefix)
    return left


def _wait_for(what: str, proc: subprocess.Popen[str], ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + MARKER_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"burnin ended (exit {proc.returncode}) before {what}: {err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {MARKER_TIMEOUT_S:g} s")
        time.sleep(0.02)


def _interrupt_and_check(proc: subprocess.Popen[str], sig: signal.Signals, tmp: Path) -> str:
    prefix = f"/dev/shm/burnin-sim-{proc.pid}-"
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"burnin still running 120 s after {sig.name}")
    lines = err.strip().splitlines()
    assert proc.returncode == 3, err
    assert lines == [f"burnin run: interrupted ({sig.name})"], err
    assert _scratch(proc.pid) == []
    assert _left_running(prefix) == []
    assert [p.name for p in tmp.iterdir() if p.name != "out"] == []
    return err


def _collector_running(pid: int) -> Callable[[], bool]:
    prefix = f"/dev/shm/burnin-sim-{pid}-"
    return lambda: any("burnin.collector" in cmd for _, cmd in _processes_mentioning(prefix))


@contextlib.contextmanager
def _sdc_workload_held(cache: Path) -> Iterator[dict[str, str]]:
    """Every simulated node's SDC workload waits on its rack's SDC cache lock (burnin.sim.sdc.CACHE_ENV) while
    this holds it: the gathering cannot end before the signal lands (on a loaded machine it once did, and the
    run exited 0 before it was interrupted). The cache is this test's own: the suite's, which every xdist
    worker's racks share (tests/conftest.py), held here would stall the other worker's runs."""
    with open(f"{cache}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield {"BURNIN_SIM_SDC_CACHE": str(cache)}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_while_gathering_stops_collectors_and_removes_the_rack(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, sig: signal.Signals) -> None:
    with _sdc_workload_held(tmp_path_factory.mktemp("sdc") / "sdc-cache.json") as env:  # not in the run's TMPDIR
        proc = _start(["run", "--sim", "16", "--out", str(tmp_path / "out")], tmp_path, env=env)
        _wait_for("collector running", proc, _collector_running(proc.pid))
        _interrupt_and_check(proc, sig, tmp_path)


def test_sigterm_while_the_rack_is_built_removes_it(tmp_path: Path) -> None:
    proc = _start(["run", "--sim", "16", "--out", str(tmp_path / "out")], tmp_path)
    _wait_for("scratch rack", proc, lambda: any((p / "nodes").is_dir() for p in _scratch(proc.pid)))
    _interrupt_and_check(proc, signal.SIGTERM, tmp_path)


# Runs `burnin run` in-process (main with argv) and sends itself SIGTERM once pytest has judged
# a few tests: pytest runs inside burnin, so the signal lands in the middle of the suite.
JUDGING_DRIVER = """
import os, signal, sys
import burnin.cli.progress as progress
from burnin.cli.main import main

done = progress.Progress.test_done

def test_done(self):
    done(self)
    if self._tests == 3:
        os.kill(os.getpid(), signal.SIGTERM)

progress.Progress.test_done = test_done
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_pytest_judges_exits_3_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _start(["run", "--sim", "2", "--out", str(out)], tmp_path, driver=JUDGING_DRIVER)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err
    assert err.strip().splitlines() == ["burnin run: interrupted (SIGTERM)"], err
    assert (out / "facts").is_dir()  # the signal came after gathering, while judging
    assert _scratch(proc.pid) == []
    assert not (out / "report.html").exists()  # nothing rendered from a cut-short run


def test_sigterm_stops_a_hung_fabric_tool_at_once(tmp_path: Path) -> None:
    """all_reduce_perf hangs on sim01: SIGTERM must take it down with the run (it used to live on 60 s)."""
    proc = _start(["run", "--sim", "2", "--suite", "fabric", "--fault", "sim01:nccl-hang",
                   "--out", str(tmp_path / "out")], tmp_path)
    prefix = f"/dev/shm/burnin-sim-{proc.pid}-"
    first_seen: dict[int, float] = {}

    def hung_tools() -> list[int]:
        """The all_reduce_perf processes seen running for HUNG_AFTER_S (sim02's own run is over in ms:
        the first one seen may be that one, and SIGTERM would then come before sim01's tool hangs)."""
        now = time.monotonic()
        running = [pid for pid, cmd in _processes_mentioning(prefix) if "perf all_reduce" in cmd]
        for pid in running:
            first_seen.setdefault(pid, now)
        return [pid for pid in running if now - first_seen[pid] >= HUNG_AFTER_S]

    _wait_for("all_reduce_perf hung", proc, lambda: bool(hung_tools()))
    tools = hung_tools()
    _interrupt_and_check(proc, signal.SIGTERM, tmp_path)
    alive = [pid for pid, cmd in _processes_mentioning(prefix) if pid in tools and "perf all_reduce" in cmd]
    assert alive == []
