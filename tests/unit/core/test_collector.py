"""The collector never crashes: each source is bounded and records why it failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnin.collector import commands
from burnin.collector.commands import _KERNEL_LOG_KEEP as KERNEL_LOG_KEEP
from burnin.collector.core import collect


def _shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.proc
def test_hung_tool_times_out_and_others_still_run(tmp_path: Path, monkeypatch: object) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _shim(bin_dir, "dmesg", "sleep 30")
    _shim(bin_dir, "ibstat", "echo \"CA 'mlx5_0'\"")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.collector", "--root", str(tmp_path), "--timeout", "1",
         "--sources", "dmesg,ibstat,numa"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )
    facts = json.loads(proc.stdout)
    assert facts["sources"]["dmesg"]["ok"] is False
    assert "timed out" in facts["sources"]["dmesg"]["error"]
    assert facts["sources"]["ibstat"]["ok"] is True
    assert facts["commands"]["ibstat"]["stdout"].startswith("CA 'mlx5_0'")
    assert facts["sources"]["numa"]["ok"] is True  # an empty root is data, not a crash


def test_missing_tool_and_missing_nvml_are_recorded(tmp_path: Path) -> None:
    env_path = os.environ["PATH"]
    try:
        os.environ["PATH"] = str(tmp_path)  # no tools at all
        os.environ.pop("LD_LIBRARY_PATH", None)
        facts = collect(str(tmp_path), ("ibstat", "nvml", "pci", "bogus"), timeout=5)
    finally:
        os.environ["PATH"] = env_path
    assert facts["sources"]["ibstat"]["error"] == "ibstat: command not found"
    assert facts["sources"]["nvml"]["ok"] is False
    assert "nvmlInit failed" in facts["sources"]["nvml"]["error"]
    assert facts["sources"]["pci"]["ok"] is False  # no /sys/bus/pci below this root
    assert facts["sources"]["bogus"]["error"] == "unknown source"


@pytest.mark.parametrize("word", [*KERNEL_LOG_KEEP, ""])
def test_the_kernel_log_keeps_a_line_with_any_of_its_words_and_no_other(word: str) -> None:
    line = f"[ 12.345678] mlx4 0000:1b:00.0: {word}: something happened"
    assert commands._kept(line) is bool(word)


def test_a_hung_file_source_stops_its_lane_and_the_rest_is_not_run_never_passed(tmp_path: Path) -> None:
    # The file readers share one thread (burnin.collector.core.FILE_LANE): numa, then kernel, which blocks
    # here opening a FIFO nobody writes; what comes after it in the lane is reported not run (incomplete).
    (tmp_path / "sys/devices/system/node/node0").mkdir(parents=True)
    (tmp_path / "sys/devices/system/node/online").write_text("0\n")
    fifo = tmp_path / "proc/sys/kernel/numa_balancing"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    try:
        facts = collect(str(tmp_path), ("numa", "kernel", "host", "pci-census", "bogus"), timeout=0.5)
    finally:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the reader gets its end of file: the thread ends
    assert facts["sources"]["numa"] == {"ok": True, "error": None, "duration_s": facts["sources"]["numa"]["duration_s"]}
    assert facts["numa"]["online"] == "0"
    assert facts["sources"]["kernel"]["error"] == "timed out after 0.5 s"
    for name in ("host", "pci-census"):
        assert facts["sources"][name]["ok"] is False
        assert facts["sources"][name]["error"] == "not run: kernel before it timed out after 0.5 s"
        assert name.replace("-", "_") not in facts


def _pci_function(root: Path, bdf: str, vendor: str) -> None:
    folder = root / "sys/bus/pci/devices" / bdf
    folder.mkdir(parents=True)
    for name, text in (("vendor", vendor), ("device", "0x2330"), ("class", "0x030200"), ("numa_node", "0")):
        (folder / name).write_text(f"{text}\n")


def test_the_census_and_the_pci_source_read_a_shared_attribute_once(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Both read every function's vendor, device and class; in one gathering each file is read once."""
    from burnin.collector import sysfs

    _pci_function(tmp_path, "0000:1b:00.0", "0x10de")
    _pci_function(tmp_path, "0000:00:14.0", "0x8086")
    reads: list[str] = []
    real = sysfs._read_file
    monkeypatch.setattr(sysfs, "_read_file", lambda path: reads.append(path) or real(path))
    facts = collect(str(tmp_path), ("pci-census", "pci"), timeout=30)
    assert facts["pci_census"]["functions"]["0000:00:14.0"] == ["0x8086", "0x2330", "0x030200"]
    assert facts["pci"]["devices"]["0000:1b:00.0"]["vendor"] == "0x10de", facts["pci"]
    assert sorted(set(reads)) == sorted(reads), reads  # none twice
    assert any(path.endswith("0000:1b:00.0/vendor") for path in reads)
    reads.clear()
    collect(str(tmp_path), ("pci-census", "pci"), timeout=30)  # the next gathering reads them again
    assert sum(path.endswith("/vendor") for path in reads) == 2


def test_one_pass_keeps_what_it_read_and_what_failed_until_it_ends(tmp_path: Path) -> None:
    from burnin.collector.sysfs import one_pass, read_file

    path = tmp_path / "attr"
    path.write_text("first\n")
    with one_pass():
        assert read_file(str(path)) == "first"
        path.write_text("second\n")
        assert read_file(str(path)) == "first"  # one gathering sees one value
        with pytest.raises(FileNotFoundError):
            read_file(str(tmp_path / "absent"))
        (tmp_path / "absent").write_text("late\n")
        with pytest.raises(FileNotFoundError):
            read_file(str(tmp_path / "absent"))
    assert read_file(str(path)) == "second"
    assert read_file(str(tmp_path / "absent")) == "late"


@pytest.mark.proc
@pytest.mark.parametrize("how", ["module", "stdin", "zipapp"])
def test_every_way_of_starting_the_collector_writes_its_facts_and_skips_the_teardown(how: str,
                                                                                   tmp_path: Path) -> None:
    """``python -m burnin.collector``, the stdin bootstrap (SSH) and the zipapp (Slurm) all end through
    ``collector.core.run``: the facts whole on stdout, exit 0, and no interpreter teardown (an exit handler
    never runs: a fifth of a soak sample's CPU on a simulated node)."""
    from burnin.transport.payload import BOOTSTRAP, collector_zipapp

    marker = "import atexit; atexit.register(lambda: print('TEARDOWN', flush=True))\n"
    args = ["--root", str(tmp_path), "--sources", "numa", "--timeout", "5"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if how == "module":
        code = marker + "import runpy, sys; sys.argv[0] = 'burnin.collector'; " \
                        "runpy.run_module('burnin.collector', run_name='__main__')"
        argv, stdin = [sys.executable, "-c", code, *args], None
    elif how == "stdin":
        argv, stdin = [sys.executable, "-c", marker + BOOTSTRAP, *args], collector_zipapp()
    else:
        (tmp_path / "collector.pyz").write_bytes(collector_zipapp())
        code = marker + f"import runpy, sys; sys.argv[1:] = {args!r}; " \
                        f"runpy.run_path({str(tmp_path / 'collector.pyz')!r}, run_name='__main__')"
        argv, stdin = [sys.executable, "-c", code], None
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.decode()
    assert "TEARDOWN" not in out
    facts = json.loads(out)
    assert facts["sources"]["numa"]["ok"] is not None and "duration_s" in facts
