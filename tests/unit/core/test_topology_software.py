"""The topology's software manifest (INV-10 ``software``): validated with file, key and line; the health
probe's cached copy carries it (the draft from a golden node: tests/unit/checks/test_software_golden.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.resources import topologies_dir
from burnin.topology.fast import dumps, loads
from burnin.topology.load import find_topology, load_topology
from burnin.topology.model import SoftwareManifest

SHIPPED = 'software:\n  kernel: "5.15.0-112-generic"'


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new))
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(("new", "key", "needle", "message"), [
    ('software:\n  kernel: "5.15 generic"', "software.kernel", "5.15 generic", "must look like 5.15.0-105-generic"),
    ('software:\n  kernel: 5.15', "software.kernel", "kernel: 5.15", "valid string"),
    ('software:\n  kernal: "5.15.0-112-generic"', "software.kernal", "kernal", "unknown key"),
])
def test_kernel_mistakes_name_file_key_and_line(tmp_path: Path, new: str, key: str, needle: str,
                                                message: str) -> None:
    path = _broken(tmp_path, SHIPPED, new)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key, info.value
    assert info.value.line == _line_of(path, needle)
    assert message in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(("old", "new", "key", "message"), [
    ('ofed: "MLNX_OFED_LINUX-24.04-0.6.6.0"', 'ofed: "24.04-0.6.6.0"', "software.ofed", "MLNX_OFED_LINUX-23.10"),
    ('ofed: "MLNX_OFED_LINUX-24.04-0.6.6.0"', 'ofed: "MLNX_OFED_LINUX-24.04-0.6.6.0:"', "software.ofed",
     "without the colon"),
    ('nccl: "2.21.5"', 'nccl: "2.21"', "software.nccl", "must look like 2.18.5"),
    ('nccl: "2.21.5"', 'nccl: "v2.21.5"', "software.nccl", "must look like 2.18.5"),
    ('dcgm: "3.3.5"', 'dcgm: "3"', "software.dcgm", "must look like 3.3.1"),
    ('dcgm: "3.3.5"', 'dcgm: "3.3.5-beta"', "software.dcgm", "must look like 3.3.1"),
    ('  source: "example stack', '  sauce: "example stack', "software.sauce", "unknown key"),
])
def test_component_mistakes_name_their_key_and_line(tmp_path: Path, old: str, new: str, key: str,
                                                    message: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key, info.value
    assert info.value.line == _line_of(path, new)
    assert message in str(info.value)


def test_a_manifest_naming_nothing_or_without_source_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="software names nothing"):
        SoftwareManifest(source="golden node")
    with pytest.raises(ValueError, match="needs a source"):
        SoftwareManifest(source=" ", kernel="5.15.0-112-generic")
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    start = text.index("software:\n")
    end = text.index("numa:\n")
    path = tmp_path / "empty.yaml"
    path.write_text(text[:start] + 'software:\n  source: "nothing named"\n' + text[end:])
    with pytest.raises(ConfigError, match="software names nothing") as info:
        load_topology(path)
    assert info.value.key == "software"


@pytest.mark.parametrize("kernel", ["5.15.0-105-generic", "6.8.0-1015-nvidia-64k", "4.18.0-513.5.1.el8_9.x86_64",
                                    "6.1.0-18-amd64", "5.14.0-362.24.1.el9_3.x86_64+rt"])
def test_real_kernel_releases_are_accepted(kernel: str) -> None:
    assert SoftwareManifest(source="x", kernel=kernel).kernel == kernel


@pytest.mark.parametrize("ofed", ["MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX-5.8-3.0.7.0",
                                  "OFED-internal-24.10-1.1.4"])
def test_real_ofed_releases_are_accepted(ofed: str) -> None:
    assert SoftwareManifest(source="x", ofed=ofed).ofed == ofed


def test_a_topology_may_leave_the_manifest_out(tmp_path: Path) -> None:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    path = tmp_path / "bare.yaml"
    path.write_text(text[:text.index("software:\n")] + text[text.index("numa:\n"):])
    assert load_topology(path).software is None


def test_the_probes_cached_copy_keeps_it() -> None:
    topology = find_topology("hgx-h100-8gpu")
    rebuilt = loads(dumps(topology))
    assert rebuilt.software == topology.software is not None
    bare = dataclasses.replace(topology, software=None)
    assert loads(dumps(bare)).software is None
