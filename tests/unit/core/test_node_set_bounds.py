"""Node sets too large for one run are a usage error, found before anything is expanded (issue 10).

ClusterShell builds the whole set when it parses one: ``n[1-100000000]`` took
minutes and gigabytes. Every entry point that takes a node set or a rack size
must refuse more than MAX_NODES with one line, exit 2. The sets used here name
10^12 nodes: a run that expanded them would never return (the subprocesses run
under a memory limit, so a regression fails instead of filling the machine).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

import burnin.nodes
from burnin.errors import UsageError
from burnin.nodes import MAX_NODES, check_size, count_nodes, expand, sim_names

HUGE = "n[1-1000000000000]"
MEMORY_LIMIT = 2 << 30


@pytest.mark.parametrize("nodeset", ["gpu1", "gpu[001-128,130]", "n[1-10/3]", "n[1-4]c[1-3]", "a,b,c",
                                     "n[1-5]&n[3-9]", "n[1-3]^n[2-5]", "n[1-9]!n[2-3]", "r[1-2]n[01-03],x[5-6]"])
def test_count_is_an_upper_bound_of_the_expansion(nodeset: str) -> None:
    exact = len(NodeSet(nodeset))
    assert count_nodes(nodeset) >= exact
    if not any(op in nodeset for op in "&^!"):
        assert count_nodes(nodeset) == exact


def test_the_bound_is_inclusive() -> None:
    assert check_size(f"n[1-{MAX_NODES}]") == MAX_NODES
    with pytest.raises(UsageError, match=f"names {MAX_NODES + 1:,} nodes: at most {MAX_NODES:,} per run"):
        check_size(f"n[1-{MAX_NODES + 1}]")
    with pytest.raises(UsageError, match="names 160,000 nodes"):
        check_size("n[1-400]c[1-400]")  # each range is small; the product is not
    with pytest.raises(UsageError, match="more than 1e"):
        check_size("n[1-" + "9" * 5000 + "]")  # beyond int()'s digit limit: still one clear line


def test_expand_refuses_before_ClusterShell_sees_the_set(monkeypatch: pytest.MonkeyPatch) -> None:
    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("the node set was handed to ClusterShell")

    monkeypatch.setattr(burnin.nodes, "NodeSet", tripwire)
    with pytest.raises(UsageError) as caught:
        expand(HUGE)
    assert str(caught.value) == f"node set '{HUGE}' names 1,000,000,000,000 nodes: at most 100,000 per run"


def test_small_sets_still_expand() -> None:
    assert expand("gpu[01-03],spare") == ["gpu01", "gpu02", "gpu03", "spare"]
    with pytest.raises(UsageError, match="invalid node set"):
        expand("n[3-1]")


def test_rack_sizes_are_bounded_before_names_are_made() -> None:
    # one over the bound (10^12 would exhaust memory here if the check ever went; the CLI tests use it)
    with pytest.raises(UsageError, match="100,001 simulated nodes asked for: at most 100,000 per run"):
        sim_names(MAX_NODES + 1)
    assert sim_names(3) == ["sim01", "sim02", "sim03"]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _burnin(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnin.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300, check=False, preexec_fn=_limit_memory)


def _inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


ENTRY_POINTS = {
    "run --via ssh --hosts": (["run", "--via", "ssh", "--hosts", HUGE], HUGE),
    "inventory node key": (["run", "--via", "ssh", "--inventory", "KEY"], HUGE),
    "inventory group": (["run", "--via", "ssh", "--inventory", "GROUP"], HUGE),
    "run --via slurm --nodes": (["run", "--via", "slurm", "--nodes", HUGE], HUGE),
    "run --sim": (["run", "--sim", str(10**12)], "simulated nodes"),
    "sim up --ssh": (["sim", "up", "--ssh", str(10**12), "--state", "state"], "simulated nodes"),
    "sim up --slurm": (["sim", "up", "--slurm", str(10**12), "--state", "state"], "simulated nodes"),
    "soak --sim": (["soak", "--sim", str(10**12), "--duration", "1h"], "simulated nodes"),
}


@pytest.mark.proc
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_refuses_a_huge_set_with_one_line(entry: str, tmp_path: Path) -> None:
    args, named = ENTRY_POINTS[entry]
    args = list(args)
    if "KEY" in args:
        args[args.index("KEY")] = str(_inventory(tmp_path, f"nodes:\n  {HUGE}: {{}}\n"))
    if "GROUP" in args:
        args[args.index("GROUP")] = str(_inventory(tmp_path, f"nodes:\n  n1: {{}}\ngroups:\n  all: {HUGE}\n"))
    env = None
    if "slurm" in args and "run" in args:  # --via slurm looks for srun first: a stand-in that must never run
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "srun").write_text("#!/bin/sh\nexit 99\n")
        (fake / "srun").chmod(0o755)
        env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    proc = _burnin([*args, *(["--out", str(tmp_path / "out")] if args[0] == "run" else [])], tmp_path, env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert named in lines[0] and "at most 100,000 per run" in lines[0], lines[0]
