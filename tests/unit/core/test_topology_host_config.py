"""The topology's host settings for TOP-06/07/09/10: loaded, cached for the probe, mistakes named by key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.resources import topologies_dir
from burnin.topology.fast import dumps, loads
from burnin.topology.load import find_topology, load_topology


def _broken(tmp_path: Path, old: str, new: str) -> tuple[Path, int]:
    text = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    assert text.count(old) == 1
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new))
    line = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if new.strip() in line)
    return path, line


def test_the_shipped_topology_says_what_a_dgx_h100_host_is() -> None:
    topo = find_topology("hgx-h100-8gpu")
    assert topo.host.cpu_governor == "performance" and topo.host.transparent_hugepage == ("always", "madvise")
    refs = topo.references
    assert refs["cpus_online"].admits(224) and not refs["cpus_online"].admits(223)
    assert refs["host_memory_gib"].admits(2015) and not refs["host_memory_gib"].admits(2015 - 64)
    assert refs["nvswitch_count"].admits(4) and refs["hugepages_gib"].admits(0) and refs["nvme_count"].admits(10)
    for key in ("cpus_online", "host_memory_gib", "numa_memory_spread", "hugepages_gib", "nvswitch_count",
                "nvme_count"):
        assert "check-catalog TOP-" in refs[key].source, key


def test_the_probes_cached_copy_keeps_the_host_settings() -> None:
    topo = find_topology("hgx-h100-8gpu")
    rebuilt = loads(dumps(topo))
    assert rebuilt.host == topo.host and isinstance(rebuilt.host.transparent_hugepage, tuple)


@pytest.mark.parametrize(("old", "new", "key"), [
    ("  cpu_governor: performance", "  cpu_governor: turbo", "host.cpu_governor"),
    ("  transparent_hugepage: [always, madvise]", "  transparent_hugepage: [always, sometimes]",
     "host.transparent_hugepage[1]"),
])
def test_a_mistake_names_file_key_and_line(tmp_path: Path, old: str, new: str, key: str) -> None:
    path, line = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    assert info.value.key == key and info.value.line == line and str(path) in str(info.value)


def test_no_accepted_thp_mode_is_a_mistake(tmp_path: Path) -> None:
    path, line = _broken(tmp_path, "  transparent_hugepage: [always, madvise]", "  transparent_hugepage: []")
    with pytest.raises(ConfigError, match="transparent_hugepage names no mode") as info:
        load_topology(path)
    assert info.value.line is not None and info.value.line <= line


def test_the_bios_may_own_p_states(tmp_path: Path) -> None:
    path, _ = _broken(tmp_path, "  cpu_governor: performance", "  cpu_governor: null")
    assert load_topology(path).host.cpu_governor is None
