"""Hostile configuration files: YAML bombs, deep nesting, duplicate keys, bytes that are not UTF-8.

Every one is a one-line ConfigError (exit 2 on the command line) found early,
with either YAML engine (libyaml's parser when PyYAML has it, the pure-Python
one otherwise); ordinary files read exactly as ``yaml.safe_load`` reads them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from burnin.errors import ConfigError
from burnin.resources import topologies_dir
from burnin.topology import yamlsafe
from burnin.topology.load import load_topology
from burnin.topology.yamlsafe import MAX_DEPTH, load_yaml

ENGINES = [yaml.SafeLoader] + ([yaml.CSafeLoader] if yaml.__with_libyaml__ else [])


@pytest.fixture(params=ENGINES, ids=lambda loader: loader.__name__)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    monkeypatch.setattr(yamlsafe, "_LOADER", request.param)
    yield request.param


def laughs(levels: int, key: str = "lol") -> str:
    """A "billion laughs" document: each level a list of nine aliases to the level before."""
    text = f'{key}0: &{key}0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for level in range(1, levels + 1):
        items = ", ".join([f"*{key}{level - 1}"] * 9)
        text += f"{key}{level}: &{key}{level} [{items}]\n"
    return text


def write(tmp_path: Path, text: str | bytes, name: str = "file.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_billion_laughs_is_rejected_as_aliases(engine: type, tmp_path: Path) -> None:
    # 9**6 = 531,441 nodes if expanded: past the budget, found before expanding anything.
    path = write(tmp_path, laughs(6))
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert "aliases expand to more than" in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_billion_laughs_topology_is_a_config_error(tmp_path: Path) -> None:
    shipped = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    path = write(tmp_path, shipped + laughs(6))
    with pytest.raises(ConfigError, match="aliases expand"):
        load_topology(path)


def test_modest_aliases_and_merge_keys_still_work(engine: type, tmp_path: Path) -> None:
    text = ("base: &base {user: ops, port: 22}\n"
            "a:\n  <<: *base\n  port: 2222\n"
            "b:\n  <<: [*base, {user: root, extra: 1}]\n"
            "same: *base\n" + laughs(3))  # 9**3 = 729 expanded nodes: well within the budget
    data = load_yaml(write(tmp_path, text)).data
    expected = yaml.safe_load(text)
    assert {k: v for k, v in data.items() if k != "b"} == {k: v for k, v in expected.items() if k != "b"}
    assert list(data["a"]) == list(expected["a"])  # merged keys first, as safe_load
    assert data["a"] == {"user": "ops", "port": 2222}
    # The YAML merge spec: mappings earlier in the list win (PyYAML lets the later one win).
    assert data["b"] == {"user": "ops", "port": 22, "extra": 1}


@pytest.mark.parametrize("text", [
    "a: &a [1, *a]\n",
    "a: &a {b: {c: *a}}\n",
], ids=["sequence", "mapping"])
def test_self_referencing_alias_is_a_config_error(engine: type, tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="refers to itself"):
        load_yaml(write(tmp_path, text))


def test_undefined_alias_and_twice_defined_anchor(engine: type, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"alias \*nope names no anchor"):
        load_yaml(write(tmp_path, "a: *nope\n"))
    with pytest.raises(ConfigError, match="anchor &x is defined twice"):
        load_yaml(write(tmp_path, "a: &x 1\nb: &x 2\n"))


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    "{a: " * 100_000 + "1" + "}" * 100_000,
    "- " * 100_000 + "x\n",
], ids=["flow-sequences", "flow-mappings", "block-sequences"])
def test_deep_nesting_is_a_config_error_not_a_recursion_error(engine: type, tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels") as info:
        load_yaml(write(tmp_path, text))
    assert len(str(info.value)) < 300  # the key path is cut, the message stays one short line


def test_nesting_up_to_the_limit_is_fine(engine: type, tmp_path: Path) -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_yaml(write(tmp_path, text)).data == yaml.safe_load(text)


def test_duplicate_key_names_both_lines(engine: type, tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nhost:\n  mig: false\n  ecc: true\n  mig: true\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert info.value.key == "host.mig" and info.value.line == 5
    assert "lines 3 and 5" in str(info.value)


def test_not_utf8_names_file_and_byte_offset(engine: type, tmp_path: Path) -> None:
    path = write(tmp_path, b"name: x\ndescription: caf\xe9 latin-1\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    message = str(info.value)
    assert str(path) in message and "not UTF-8" in message
    assert "byte offset 24" in message and "0xe9" in message and info.value.line == 2


def test_control_characters_and_unreadable_files(engine: type, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="U\\+0000 at character offset 3") as info:
        load_yaml(write(tmp_path, "a: \x00\n"))
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("text", "message"), [
    ("a: 1\n---\nb: 2\n", "one YAML document"),
    ("? [a, b]\n: 1\n", "mapping key must be a plain value"),
    ("a: !!python/object:os.system x\n", "unsupported YAML tag"),
    ("a: !!set {x: null}\n", "unsupported YAML tag"),
])
def test_other_structures_a_config_file_cannot_hold(engine: type, tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_yaml(write(tmp_path, text))


SAME_AS_SAFE_LOAD = [
    "a: 1\nb: [1, 2.5, .inf, null, ~, yes, No, on, 0x1f, 0o17, 017, 1_000, '1', \"x\", 2024-01-02]\n",
    "c: [2024-01-02T03:04:05Z, !!str 5, !!int '7', !!float 3, !!binary aGVsbG8=, '', \"\", ' ']\n",
    "- a\n- - b\n  - c\n- {k: v}\n",
    "",
    "# only a comment\n",
    "just a scalar\n",
    "1: a\n2: b\n'3': c\nfalse: f\n",
    "x: &x 5\ny: *x\nempty:\n",
]


@pytest.mark.parametrize("text", SAME_AS_SAFE_LOAD)
def test_ordinary_documents_read_as_safe_load_reads_them(engine: type, tmp_path: Path, text: str) -> None:
    assert load_yaml(write(tmp_path, text)).data == yaml.safe_load(text)


def test_shipped_topologies_read_as_safe_load_reads_them(engine: type) -> None:
    for path in sorted(topologies_dir().glob("*.yaml")):
        assert load_yaml(path).data == yaml.safe_load(path.read_text())


def test_line_index_points_at_keys_and_items(engine: type, tmp_path: Path) -> None:
    lines = load_yaml(write(tmp_path, "a:\n  b: 1\n  c:\n    - x\n    - {d: 2}\n0: z\n")).lines
    assert lines[("a",)] == 1 and lines[("a", "b")] == 2 and lines[("a", "c")] == 3
    assert lines[("a", "c", 0)] == 4 and lines[("a", "c", 1)] == 5 and lines[("a", "c", 1, "d")] == 5
    assert lines[(0,)] == 6 and lines[("0",)] == 6


@pytest.mark.proc
def test_cli_run_with_a_bomb_topology_exits_2_with_one_line(tmp_path: Path) -> None:
    shipped = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text()
    path = write(tmp_path, shipped + laughs(20), "bomb.yaml")  # 9**20 nodes if expanded
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--sim", "2", "--topology", str(path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(path) in proc.stderr and "aliases expand" in proc.stderr


def test_fabric_settings_are_read_with_the_same_guards(tmp_path: Path) -> None:
    from burnin.fabric.settings import load_settings

    with pytest.raises(ConfigError, match="aliases expand"):
        load_settings(write(tmp_path, "mpi: pmix\n" + laughs(6), "bomb.yaml"))
    with pytest.raises(ConfigError, match="lines 1 and 2"):
        load_settings(write(tmp_path, "mpi: pmix\nmpi: pmi2\n", "twice.yaml"))
    with pytest.raises(ConfigError, match="byte offset 5"):
        load_settings(write(tmp_path, b"mpi: \xff\n", "latin1.yaml"))


def test_text_from_the_file_is_shown_escaped(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml(write(tmp_path, "top:\n  k\u202ey: 1\n  k\u202ey: 2\n"))
    assert "\u202e" not in str(info.value) and "\\u202e" in str(info.value)
    assert info.value.key == "top.k\\u202ey"
    with pytest.raises(ConfigError) as info:
        load_yaml(write(tmp_path, '"k\\e[2J": 1\n"k\\e[2J": 2\n'))
    assert "\x1b" not in str(info.value) and "lines 1 and 2" in str(info.value)
