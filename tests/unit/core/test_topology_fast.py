"""The health probe's cached topology: derived from the model's dataclasses, used only while it is current."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from burnin.resources import topologies_dir
from burnin.topology import fast, model
from burnin.topology.load import list_topologies, load_topology
from burnin.topology.model import Topology


@pytest.mark.parametrize("name", sorted(list_topologies()))
def test_every_shipped_topology_comes_back_equal_from_its_cached_form(name: str) -> None:
    topology = load_topology(list_topologies()[name])
    rebuilt = fast.loads(fast.dumps(topology))
    assert rebuilt == topology
    assert type(rebuilt.gpus.devices) is tuple and type(rebuilt.numa.cpulists) is dict
    assert all(type(node) is int for node in rebuilt.numa.cpulists)  # JSON would have made them strings


def _dataclasses_in(hint: object, seen: set[type]) -> None:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if hint not in seen:
            seen.add(hint)
            for child in typing.get_type_hints(hint, vars(model), include_extras=True).values():
                _dataclasses_in(child, seen)
        return
    for arg in typing.get_args(hint):
        _dataclasses_in(arg, seen)


def test_every_section_the_model_can_hold_is_a_class_the_cache_rebuilds() -> None:
    reachable: set[type] = set()
    _dataclasses_in(Topology, reachable)
    assert len(reachable) > 10
    assert {cls.__name__: cls for cls in reachable}.items() <= fast._CLASSES.items()


def test_a_value_the_model_does_not_define_is_refused_not_cached_half() -> None:
    @dataclasses.dataclass(frozen=True)
    class Foreign:
        x: int

    with pytest.raises(TypeError, match="not a topology model class"):
        fast.encode(Foreign(1))
    with pytest.raises(TypeError, match="cannot hold a set"):
        fast.encode({1, 2})


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "site" / "node.yaml"
    path.parent.mkdir()
    path.write_text((topologies_dir() / "hgx-h100-8gpu.yaml").read_text())
    return path


def _cache_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "burnin" / "topology").glob("*.json"))


def test_an_edited_file_is_validated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _copy(tmp_path)
    assert fast.load_cached(path) == load_topology(path)
    (cached,) = _cache_files(tmp_path)
    path.write_text(path.read_text().replace('driver_version: "', 'driver_version: "9', 1))
    assert fast.load_cached(path).host.driver_version.startswith("9")
    assert fast.load_cached(path).host.driver_version.startswith("9")  # and from the rewritten cache
    assert _cache_files(tmp_path) == [cached]


def test_a_cache_other_code_wrote_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _copy(tmp_path)
    fast.load_cached(path)
    (cached,) = _cache_files(tmp_path)
    header, body = cached.read_text().splitlines()
    entry = json.loads(header)
    doctored = json.loads(body)
    doctored["description"] = "written by another version of burnin"
    cached.write_text(json.dumps({**entry, "code": "0-00000000"}) + "\n" + json.dumps(doctored) + "\n")
    assert fast.load_cached(path).description != "written by another version of burnin"
    # The same doctored body under this code's fingerprint is trusted: what makes it current is the pair.
    cached.write_text(header + "\n" + json.dumps(doctored) + "\n")
    assert fast.load_cached(path).description == "written by another version of burnin"


@pytest.mark.parametrize("body", ["", "not json", "[]", "{}", '{"$class": "Nope"}', '{"$class": "Topology"}',
                                  '{"$class": "Reference", "value": 1, "source": "s"}'])
def test_a_current_cache_this_code_cannot_read_is_validated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  body: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _copy(tmp_path)
    fast.load_cached(path)
    (cached,) = _cache_files(tmp_path)
    header = cached.read_text().splitlines()[0]
    cached.write_text(header + "\n" + body + "\n")
    assert fast.load_cached(path) == load_topology(path)
    assert cached.read_text().splitlines() == [header, fast.dumps(load_topology(path))]
