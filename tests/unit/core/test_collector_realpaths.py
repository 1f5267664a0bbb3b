"""RealPaths answers what os.path.realpath answers, on the link shapes sysfs has and the odd ones it
could; read_file reads a file whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnin.collector.sysfs import RealPaths, read_file


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A sysfs-like tree: bus entries linking into devices, chains, absolute and dangling links, a loop."""
    devices = tmp_path / "sys" / "devices" / "pci0000:00" / "0000:00:01.0"
    (devices / "0000:01:00.0" / "net").mkdir(parents=True)
    (devices / "0000:02:00.0").mkdir(parents=True)
    bus = tmp_path / "sys" / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)
    for bdf in ("0000:01:00.0", "0000:02:00.0"):
        os.symlink(f"../../../devices/pci0000:00/0000:00:01.0/{bdf}", bus / bdf)
    os.symlink(bus / "0000:01:00.0", tmp_path / "absolute")  # an absolute target
    os.symlink("absolute", tmp_path / "chain")  # a link to a link
    os.symlink("sys/bus/pci/devices/0000:02:00.0/../0000:01:00.0", tmp_path / "dotdot")  # .. after a link
    os.symlink("nowhere/at/all", tmp_path / "dangling")
    os.symlink("loop-b", tmp_path / "loop-a")
    os.symlink("loop-a", tmp_path / "loop-b")
    os.symlink(tmp_path / "sys", tmp_path / "sys-link")  # a linked folder above the links
    return tmp_path


CASES = ("sys/bus/pci/devices/0000:01:00.0", "sys/bus/pci/devices/0000:02:00.0",
         "sys/bus/pci/devices/0000:01:00.0/net", "sys/bus/pci/devices/0000:01:00.0/..",
         "sys-link/bus/pci/devices/0000:02:00.0/./", "absolute", "chain/net", "dotdot", "dangling",
         "dangling/deeper", "missing/../sys", "loop-a", "loop-b/x", "sys//bus/../bus/pci", "")


@pytest.mark.parametrize("relative", CASES)
def test_realpaths_agrees_with_realpath(tree: Path, relative: str) -> None:
    realpath = RealPaths()
    for case in CASES:  # answers already known must not change the next one's
        realpath(str(tree / case))
    path = f"{tree}/{relative}"
    assert realpath(path) == os.path.realpath(path)
    assert RealPaths()(path) == os.path.realpath(path)


def test_a_relative_path_is_resolved_from_the_working_folder(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "sys" / "bus")
    assert RealPaths()("pci/devices/0000:02:00.0") == os.path.realpath("pci/devices/0000:02:00.0")


def test_read_file_reads_a_file_longer_than_its_first_read_whole(tmp_path: Path) -> None:
    text = "".join(f"line {n}\n" for n in range(5000))  # ~44 kB: many reads' worth
    path = tmp_path / "sys" / "long"
    path.parent.mkdir()
    path.write_text(text)
    assert read_file(str(path)) == text.strip()


@pytest.mark.skipif(not os.access("/proc/kallsyms", os.R_OK), reason="no readable /proc/kallsyms here")
def test_read_file_reads_a_procfs_file_past_a_short_first_read() -> None:
    # procfs hands a long file out about a page per read: a short first read is not its end there
    whole = Path("/proc/kallsyms").read_bytes().decode("utf-8", "replace").strip()
    fd = os.open("/proc/kallsyms", os.O_RDONLY)
    try:
        assert len(os.read(fd, 65536)) < 65536  # the premise: this file does come short
    finally:
        os.close(fd)
    assert len(read_file("/proc/kallsyms")) == len(whole)
