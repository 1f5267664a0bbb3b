"""The topology's ``dcgm`` section: DCGM expected unless declared absent, validated with file, key and line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.resources import topologies_dir
from burnin.topology.fast import dumps, loads
from burnin.topology.load import find_topology, load_topology
from burnin.topology.model import DcgmSpec

SHIPPED = "dcgm:\n  required: true\n"


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert old in text
    path = tmp_path / "variant.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_the_shipped_node_type_expects_dcgm_and_says_why() -> None:
    dcgm = find_topology("hgx-h100-8gpu").dcgm
    assert dcgm.required is True and "DGX OS ships DCGM" in dcgm.source


def test_left_out_dcgm_is_expected(tmp_path: Path) -> None:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    start = text.index("dcgm:\n")
    end = text.index("numa:\n", start)
    path = tmp_path / "no-section.yaml"
    path.write_text(text[:start] + text[end:])
    assert load_topology(path).dcgm == DcgmSpec(required=True, source="")


def _without_dcgm(tmp_path: Path, *, keep_version: bool) -> Path:
    path = _variant(tmp_path, SHIPPED, "dcgm:\n  required: false\n")
    if not keep_version:
        text = path.read_text()
        version = next(line for line in text.splitlines() if line.startswith("  dcgm: "))
        path.write_text(text.replace(version + "\n", "", 1))
    return path


def test_a_site_without_dcgm_declares_it(tmp_path: Path) -> None:
    topology = load_topology(_without_dcgm(tmp_path, keep_version=False))
    assert topology.dcgm.required is False
    assert topology.software is not None and topology.software.dcgm is None


def test_a_dcgm_version_on_a_node_type_without_dcgm_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _without_dcgm(tmp_path, keep_version=True)
    with pytest.raises(ConfigError, match=r"names DCGM 3\.3\.5, but dcgm\.required is false") as info:
        load_topology(path)
    assert info.value.key == "software.dcgm"
    assert info.value.line == next(n for n, line in enumerate(path.read_text().splitlines(), 1)
                                   if line.startswith("  dcgm: "))


@pytest.mark.parametrize(("new", "key", "needle", "message"), [
    ("dcgm:\n  required: maybe\n", "dcgm.required", "required: maybe", "valid boolean"),
    ("dcgm:\n  requird: false\n", "dcgm.requird", "requird: false", "unknown key"),
    ("dcgm: absent\n  #", "dcgm", "dcgm: absent", "should be a dictionary"),
])
def test_a_bad_section_names_file_key_and_line(tmp_path: Path, new: str, key: str, needle: str,
                                               message: str) -> None:
    path = _variant(tmp_path, SHIPPED, new)
    with pytest.raises(ConfigError, match=message) as info:
        load_topology(path)
    assert info.value.key == key
    assert info.value.line == _line_of(path, needle)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("required", [True, False])
def test_the_probes_cached_copy_keeps_the_declaration(required: bool) -> None:
    topology = dataclasses.replace(find_topology("hgx-h100-8gpu"), dcgm=DcgmSpec(required=required, source="s"))
    built = loads(dumps(topology))
    assert built.dcgm == DcgmSpec(required=required, source="s")
    data = json.loads(dumps(topology))  # a cache written before the model had a dcgm section
    del data["dcgm"]
    assert loads(json.dumps(data)).dcgm == DcgmSpec()
