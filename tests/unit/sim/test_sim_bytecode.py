"""The simulator's Python tools start from bytecode (burnin.sim.bytecode), and a node's re-render keeps it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from burnin.sim import SimNode, apply_fault, build_rack
from burnin.sim.sysfs import Tree
from burnin.sim.writer import sync_tree
from burnin.topology import Topology

pytestmark = pytest.mark.rack

TOOLS = ("fabric/model.py", "fabric/perftest_format.py", "megatron/model.py", "soak/tools.py")


def _node(sim_dir: Callable[[str], Path], topology: Topology) -> SimNode:
    node, = build_rack(sim_dir("bytecode"), topology, ["sim01"], {})
    return node


def run_tool(node: SimNode, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env={**os.environ, **node.environment(), "LC_ALL": "C"}, capture_output=True,
                          text=True, timeout=60, check=False)


def _imported_from(node: SimNode, *argv: str) -> str:
    """What the interpreter said of where it took the tool's ``model``/``tools`` module from (``-v``)."""
    proc = subprocess.run(list(argv), env={**os.environ, **node.environment(), "LC_ALL": "C", "PYTHONVERBOSE": "1"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return "\n".join(line for line in proc.stderr.splitlines() if "code object from" in line)


def test_every_rendered_tool_has_bytecode_matching_its_source(sim_dir: Callable[[str], Path],
                                                              sim_topology: Topology) -> None:
    out = _node(sim_dir, sim_topology).dir / "out"
    for name in TOOLS:
        source = (out / name).read_bytes()
        compiled = Path(importlib.util.cache_from_source(str(out / name))).read_bytes()
        assert compiled[:4] == importlib.util.MAGIC_NUMBER, name
        assert compiled[4:8] == (0b11).to_bytes(4, "little"), name  # checked: a source changed later is compiled
        assert compiled[8:16] == importlib.util.source_hash(source), name


def test_the_shims_run_their_tool_from_bytecode_and_a_hand_edit_is_compiled_again(
        sim_dir: Callable[[str], Path], sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology)
    said = _imported_from(node, "ib_write_bw", "-d", "mlx5_0", "-F", "--report_gbits", "localhost")
    assert "fabric/__pycache__/model." in said and "fabric/__pycache__/perftest_format." in said, said
    assert "soak/__pycache__/tools." in _imported_from(node, "gpu_burn", "-tc", "5")
    assert "megatron/__pycache__/model." in _imported_from(node, "burnin-placement-probe")
    model = node.dir / "out" / "fabric" / "model.py"
    model.write_text(model.read_text() + "\n# edited by hand\n")
    said = _imported_from(node, "ib_write_bw", "-d", "mlx5_0", "-F", "--report_gbits", "localhost")
    assert "fabric/model.py" in said and "fabric/__pycache__/model." not in said, said


def test_a_re_render_keeps_the_bytecode_and_the_tools_answer_the_new_state(sim_dir: Callable[[str], Path],
                                                                           sim_topology: Topology) -> None:
    node = _node(sim_dir, sim_topology)
    cache = Path(importlib.util.cache_from_source(str(node.dir / "out" / "fabric" / "model.py")))
    before = cache.stat().st_ino
    healthy = run_tool(node, "ib_write_bw", "-d", "mlx5_0", "-F", "--report_gbits", "localhost")
    apply_fault(node.dir, "slow-hca@mlx5_0")
    assert cache.stat().st_ino == before  # the same source: the same file, not written again
    slow = run_tool(node, "ib_write_bw", "-d", "mlx5_0", "-F", "--report_gbits", "localhost")
    assert healthy.returncode == slow.returncode == 0 and slow.stdout != healthy.stdout


def test_the_writer_neither_lists_nor_removes_a_bytecode_folder(tmp_path: Path) -> None:
    sync_tree(tmp_path, "out", Tree(files={"tool/model.py": "x = 1\n"}))
    pycache = tmp_path / "out" / "tool" / "__pycache__"
    pycache.mkdir()
    (pycache / "model.cpython-311.pyc").write_bytes(b"bytes")
    sync_tree(tmp_path, "out", Tree(files={"tool/model.py": "x = 2\n", "other.txt": "y\n"}))
    assert (pycache / "model.cpython-311.pyc").read_bytes() == b"bytes"
    assert (tmp_path / "out" / "tool" / "model.py").read_text() == "x = 2\n"
    sync_tree(tmp_path, "out", Tree(files={"other.txt": "y\n"}))
    assert not (tmp_path / "out" / "tool").exists()  # a folder the tree dropped goes, bytecode and all
