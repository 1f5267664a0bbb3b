"""The collector's ``software`` source (INV-10): kernel release, NCCL libraries below the root, the two tools.

Built on a temporary root: the kernel's ``osrelease`` file, NCCL's files as its packages lay them out
(``libnccl.so.2.18.5`` with the ``libnccl.so.2`` and ``libnccl.so`` links), and PATH without the tools.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnin.collector.core import ALL_SOURCES, FAST_SOURCES, SOURCES, collect
from burnin.collector.software import NCCL_LIBRARY_DIRS, collect_nccl_libraries, collect_software


def _library(root: Path, folder: str, version: str, *, links: tuple[str, ...] = ("libnccl.so.2", "libnccl.so")) -> None:
    base = root / folder.lstrip("/")
    base.mkdir(parents=True, exist_ok=True)
    (base / f"libnccl.so.{version}").write_text("not a library")
    for link in links:
        (base / link).symlink_to(f"libnccl.so.{version}")


def test_the_source_is_fast_and_collected_by_default() -> None:
    assert "software" in FAST_SOURCES and "software" in ALL_SOURCES
    assert SOURCES["software"][0] == "software"


def test_one_install_is_listed_once_under_its_versioned_name(tmp_path: Path) -> None:
    _library(tmp_path, "/usr/lib/x86_64-linux-gnu", "2.18.5")
    (tmp_path / "usr/lib/x86_64-linux-gnu/libnccl_static.a").write_text("")
    (tmp_path / "usr/lib/x86_64-linux-gnu/libnccl-net.so").write_text("")
    found = collect_nccl_libraries(str(tmp_path))
    assert found == {"searched": list(NCCL_LIBRARY_DIRS), "libraries": [
        {"path": "/usr/lib/x86_64-linux-gnu/libnccl.so", "file": "libnccl.so.2.18.5",
         "real_path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5"}]}


def test_a_folder_linked_to_another_is_not_listed_twice(tmp_path: Path) -> None:
    _library(tmp_path, "/usr/lib64", "2.21.5", links=())
    (tmp_path / "usr/local").mkdir(parents=True)
    (tmp_path / "usr/local/lib").symlink_to("../lib64")
    libraries = collect_nccl_libraries(str(tmp_path))["libraries"]
    assert [lib["real_path"] for lib in libraries] == ["/usr/lib64/libnccl.so.2.21.5"]


def test_two_installs_are_both_listed(tmp_path: Path) -> None:
    _library(tmp_path, "/usr/lib/x86_64-linux-gnu", "2.18.5")
    _library(tmp_path, "/usr/local/cuda/lib64", "2.21.5", links=("libnccl.so.2",))
    files = [(lib["path"], lib["file"]) for lib in collect_nccl_libraries(str(tmp_path))["libraries"]]
    assert files == [("/usr/lib/x86_64-linux-gnu/libnccl.so", "libnccl.so.2.18.5"),
                     ("/usr/local/cuda/lib64/libnccl.so.2", "libnccl.so.2.21.5")]


def test_no_install_lists_nothing(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/libc.so.6").write_text("")
    assert collect_nccl_libraries(str(tmp_path))["libraries"] == []


def test_a_dangling_link_names_its_target(tmp_path: Path) -> None:
    base = tmp_path / "usr/lib"
    base.mkdir(parents=True)
    (base / "libnccl.so.2").symlink_to("libnccl.so.2.19.3")
    (library,) = collect_nccl_libraries(str(tmp_path))["libraries"]
    assert library["file"] == "libnccl.so.2.19.3"


def test_the_root_slash_is_read_as_itself() -> None:
    found = collect_nccl_libraries("/")
    assert all(lib["real_path"].startswith("/") for lib in found["libraries"])


def test_the_source_reads_the_kernel_and_records_missing_tools(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("5.15.0-105-generic\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    section = collect_software(str(tmp_path), 2.0)
    assert section["kernel_release"] == "5.15.0-105-generic"
    assert section["ofed_info"]["error"] == "ofed_info: command not found"
    assert section["dcgmi"]["error"] == "dcgmi: command not found"
    assert section["ofed_info"]["argv"] == ["ofed_info", "-s"] and section["dcgmi"]["argv"] == ["dcgmi", "--version"]
    assert section["nccl"]["libraries"] == []


@pytest.mark.proc
def test_the_tools_run_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ofed_info", 'echo "MLNX_OFED_LINUX-23.10-1.1.9.0:"'), ("dcgmi", 'echo "Version : 3.3.1"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n[ \"$1\" ] || exit 9\n{text}\n")
        os.chmod(bin_dir / name, 0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    data = collect(str(tmp_path), ("software",), 5.0)
    assert data["sources"]["software"]["ok"] is True
    section = data["software"]
    assert section["kernel_release"] is None  # no osrelease below this root
    assert (section["ofed_info"]["exit_status"], section["ofed_info"]["stdout"]) == (
        0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n")
    assert section["dcgmi"]["stdout"] == "Version : 3.3.1\n"
