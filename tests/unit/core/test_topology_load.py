"""Topology files: the shipped one loads; every mistake names file, key path and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.resources import topologies_dir
from burnin.topology.load import find_topology, list_topologies, load_topology


def test_shipped_h100_topology_matches_the_hardware() -> None:
    topo = find_topology("hgx-h100-8gpu")
    assert topo.gpus.count == 8
    assert topo.gpus.model == "NVIDIA H100 80GB HBM3"
    assert topo.gpus.nvlink is not None and topo.gpus.nvlink.links_per_gpu == 18
    assert [d.numa_node for d in topo.gpus.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len(topo.compute_hcas) == 8 and {h.link_layer for h in topo.compute_hcas} == {"InfiniBand"}
    assert len(topo.storage_hcas) == 2 and {h.link_layer for h in topo.storage_hcas} == {"Ethernet"}
    assert topo.ref("power_limit_w") is not None and topo.ref("power_limit_w").value == 700  # type: ignore[union-attr]
    assert all(ref.source for ref in topo.references.values())


def test_every_shipped_topology_validates() -> None:
    found = list_topologies()
    assert "hgx-h100-8gpu" in found
    for path in found.values():
        load_topology(path)


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert old in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_wrong_type_names_file_key_and_line(tmp_path: Path) -> None:
    path = _broken(tmp_path, "count: 8", "count: eight")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == "gpus.count"
    assert info.value.line == _line_of(path, "count: eight")
    assert str(path) in str(info.value)


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = _broken(tmp_path, "  fabric_manager: true", "  fabric_manger: true")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == "host.fabric_manger"
    assert "unknown key" in str(info.value)
    assert info.value.line == _line_of(path, "fabric_manger")


def test_nested_list_item_error_has_index(tmp_path: Path) -> None:
    path = _broken(tmp_path, 'bus_id: "0000:52:00.0", numa_node: 0', 'bus_id: "0000:52:00.0", numa_node: -4')
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == "gpus.devices[2].numa_node"
    assert info.value.line == _line_of(path, "numa_node: -4")


def test_reference_bounds_are_checked(tmp_path: Path) -> None:
    path = _broken(tmp_path, "{value: 400, lower: 400,", "{value: 400, lower: 500, upper: 100,")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == "references.ib_rate_gbps"
    assert "lower bound" in str(info.value)


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ngpus: [1, 2\nnuma: {}\n")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.line is not None and info.value.line >= 2
    assert "invalid YAML" in str(info.value)


def test_unknown_topology_name_lists_known() -> None:
    with pytest.raises(UsageError, match="hgx-h100-8gpu"):
        find_topology("dgx-b200-nonexistent")


@pytest.mark.proc
def test_cli_bad_topology_exits_2_without_traceback(tmp_path: Path) -> None:
    path = _broken(tmp_path, "count: 8", "count: eight")
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "2", "--topology", str(path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:" in proc.stderr and "gpus.count" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_many_errors_show_the_first_few_and_count_the_rest(tmp_path: Path) -> None:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    path = tmp_path / "bloated.yaml"
    path.write_text(text + "".join(f"unknown_{i:03d}: x\n" for i in range(50)))
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.key == "unknown_000" and info.value.line == _line_of(path, "unknown_000")
    for shown in range(1, 5):
        assert f"unknown_{shown:03d} (line {_line_of(path, f'unknown_{shown:03d}')}): unknown key" in message
    assert "unknown_005" not in message
    assert message.endswith("... and 45 more errors")


def test_topology_with_a_key_written_twice_is_a_config_error(tmp_path: Path) -> None:
    path = _broken(tmp_path, "  fabric_manager: true", "  fabric_manager: true\n  fabric_manager: false")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    first = _line_of(path, "fabric_manager")
    assert info.value.key == "host.fabric_manager" and info.value.line == first + 1
    assert f"lines {first} and {first + 1}" in str(info.value)


@pytest.mark.proc
def test_cli_non_utf8_topology_exits_2_naming_the_byte_offset(tmp_path: Path) -> None:
    raw = (topologies_dir() / "hgx-h100-8gpu.yaml").read_bytes()
    offset = raw.index(b"description:")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(raw[:offset] + b"\xff" + raw[offset:])
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "2", "--topology", str(path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and f"byte offset {offset}" in proc.stderr


def test_unknown_keys_are_found_everywhere_pydantic_would_find_them(tmp_path: Path) -> None:
    import yaml
    from pydantic import TypeAdapter, ValidationError

    from burnin.topology.model import Topology
    from burnin.topology.unknown import unknown_keys

    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    for old, new in [
        ('hca: mlx5_2}', 'hca: mlx5_2, colour: red}'),  # an item of a list of dataclasses
        ("    {value: 81559, lower: 81000,", "    {value: 81559, lower: 81000, typo: 1,"),  # a dict of them
        ("  nodes: 2\n", "  nodes: 2\n  sockets: 2\n"),
        ("  links_per_gpu: 18", "  links_per_gpu: 18\n    speed: fast"),
    ]:
        assert old in text, old
        text = text.replace(old, new, 1)
    text += "stray: 1\n"
    data = yaml.safe_load(text)
    try:
        TypeAdapter(Topology).validate_python(data)
        raise AssertionError("pydantic accepted unknown keys")
    except ValidationError as exc:
        by_pydantic = {tuple(e["loc"]) for e in exc.errors() if e["type"] == "unexpected_keyword_argument"}
    found, count = unknown_keys(data, Topology, limit=100)
    assert count == len(found) == len(by_pydantic) == 5
    assert {tuple(str(p) for p in loc) for loc in found} == {tuple(str(p) for p in loc) for loc in by_pydantic}
    assert found[0] == ("gpus", "nvlink", "speed")  # file order
    path = tmp_path / "stray.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == "gpus.nvlink.speed" and info.value.line == _line_of(path, "speed: fast")
    assert "gpus.devices[2].colour (line " in str(info.value) and "stray (line" in str(info.value)
