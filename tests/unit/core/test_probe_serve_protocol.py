"""The resident probe's pieces: its request line, its stale-code and topology checks."""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from burnin.cli.probe_serve import CodeStamp, TopologyFile, parse_request
from burnin.resources import topologies_dir

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(("line", "expected"), [
    (f"burnin-probe/1 {TOKEN}".encode(), ()),
    (f"burnin-probe/1 {TOKEN} drain".encode(), ("drain",)),
    (f"burnin-probe/1 {TOKEN} drain undrain".encode(), ("drain", "undrain")),
    (f"burnin-probe/1 {TOKEN[:-1]}x drain".encode(), "wrong token"),
    (b"burnin-probe/1", "not a burnin-probe/1 request"),
    (f"burnin-probe/2 {TOKEN}".encode(), "not a burnin-probe/1 request"),
    (f"burnin-probe/1 {TOKEN} json".encode(), "unknown flag 'json'"),
    (b"burnin-probe/1 \xff\xfe", "not ASCII"),
    (b"", "not a burnin-probe/1 request"),
])
def test_a_request_is_served_only_whole_and_with_the_token(line: bytes, expected: tuple[str, ...] | str) -> None:
    assert parse_request(line, TOKEN) == expected


def test_the_code_stamp_sees_a_module_changed_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "upgraded.py"
    source.write_text("X = 1\n", encoding="utf-8")
    module = types.ModuleType("burnin._stamp_probe")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, "burnin._stamp_probe", module)
    stamp = CodeStamp()
    assert str(source) in stamp.files and not stamp.changed()
    source.write_text("X = 22\n", encoding="utf-8")  # a new size (and time): what an upgrade writes
    assert stamp.changed()
    os.unlink(source)
    assert stamp.changed()


def test_the_topology_is_read_again_when_its_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "node.yaml"
    shutil.copy(topologies_dir() / "hgx-h100-8gpu.yaml", path)
    served = TopologyFile(str(path))
    first = served.current()
    assert served.current() is first  # unchanged file: the same object, not read again
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("name: hgx-h100-8gpu", "name: hgx-h100-8gpu-site", 1), encoding="utf-8")
    assert served.current().name == "hgx-h100-8gpu-site"
