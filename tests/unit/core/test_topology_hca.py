"""The topology's HCA expectations (INV-09 hca_firmware, IB-09 ib_partitions): validated with file, key and line;
the health probe's cached copy carries them too."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.resources import topologies_dir
from burnin.topology.fast import dumps, loads
from burnin.topology.load import find_topology, load_topology
from burnin.topology.model import HcaFirmware, IbPartitions

SHIPPED_FW = 'hca_firmware:\n  version: "28.41.1000"\n'
SHIPPED_PKEYS = 'ib_partitions:\n  pkeys: ["0xffff"]\n'


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new))
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_the_shipped_topology_declares_firmware_and_partitions() -> None:
    topology = find_topology("hgx-h100-8gpu")
    assert topology.hca_firmware is not None and topology.hca_firmware.version == "28.41.1000"
    assert topology.hca_firmware.psid is None and topology.hca_firmware.source
    assert topology.ib_partitions is not None and topology.ib_partitions.pkeys == ("0xffff",)
    for key in ("hca_pcie_speed_gts", "hca_pcie_width", "ib_mtu_bytes"):
        assert topology.references[key].source


@pytest.mark.parametrize(("old", "new", "key", "needle", "message"), [
    (SHIPPED_FW, 'hca_firmware:\n  version: "v28"\n', "hca_firmware.version", 'version: "v28"', "must look like"),
    (SHIPPED_FW, 'hca_firmware:\n  psid: "MT 838"\n  version: "28.41.1000"\n', "hca_firmware.psid", "psid:",
     "PSID 'MT 838'"),
    (SHIPPED_FW, 'hca_firmware:\n  versoin: "28.41.1000"\n', "hca_firmware.versoin", "versoin", "unknown key"),
    (SHIPPED_PKEYS, 'ib_partitions:\n  pkeys: ["0xFFFF"]\n', "ib_partitions.pkeys", "0xFFFF", "lower-case hex"),
    (SHIPPED_PKEYS, 'ib_partitions:\n  pkeys: ["0xffff", "0x7fff"]\n', "ib_partitions.pkeys", "0x7fff",
     "listed twice"),
    (SHIPPED_PKEYS, 'ib_partitions:\n  pkeys: ["0x8000"]\n', "ib_partitions.pkeys", "0x8000", "invalid partition 0"),
    (SHIPPED_PKEYS, "ib_partitions:\n  pkeys: []\n", "ib_partitions.pkeys", "pkeys: []", "talks to nobody"),
])
def test_mistakes_name_file_key_and_line(tmp_path: Path, old: str, new: str, key: str, needle: str,
                                         message: str) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key, info.value
    assert info.value.line == _line_of(path, needle)
    assert message in str(info.value) and str(path) in str(info.value)


def test_a_firmware_section_naming_nothing_or_without_source_is_refused() -> None:
    with pytest.raises(ValueError, match="names nothing"):
        HcaFirmware(source="golden node")
    with pytest.raises(ValueError, match="needs a source"):
        HcaFirmware(source=" ", version="28.41.1000")
    with pytest.raises(ValueError, match="needs a source"):
        IbPartitions(pkeys=("0xffff",), source="")


def test_the_probes_cached_copy_keeps_them() -> None:
    import dataclasses

    topology = find_topology("hgx-h100-8gpu")
    rebuilt = loads(dumps(topology))
    assert rebuilt.hca_firmware == topology.hca_firmware and rebuilt.ib_partitions == topology.ib_partitions
    bare = dataclasses.replace(topology, hca_firmware=None, ib_partitions=None)
    rebuilt = loads(dumps(bare))
    assert rebuilt.hca_firmware is None and rebuilt.ib_partitions is None
