"""Inventory files: nodes, node sets, groups, defaults; every mistake names file, key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError, UsageError
from burnin.inventory import load_inventory, split_nodeset

GOOD = """\
ssh_config: cfg/ssh_config
defaults:
  user: ops
  port: 2200
nodes:
  rack12-n01:
    address: 10.1.12.1
  rack12-n[02-04]: {}
  spare7:
    address: 10.1.99.7
    user: admin
    port: 2222
    topology: hgx-h100-8gpu
  bare:
groups:
  rack12: rack12-n[01-04]
  misc: [spare7, bare]
"""


def _write(tmp_path: Path, text: str, *, config: bool = True) -> Path:
    if config:
        (tmp_path / "cfg").mkdir(exist_ok=True)
        (tmp_path / "cfg" / "ssh_config").write_text("Host *\n  User x\n")
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_valid_inventory_expands_node_sets_and_applies_defaults(tmp_path: Path) -> None:
    inv = load_inventory(_write(tmp_path, GOOD))
    assert list(inv.nodes) == ["rack12-n01", "rack12-n02", "rack12-n03", "rack12-n04", "spare7", "bare"]
    assert inv.nodes["rack12-n01"].address == "10.1.12.1"
    assert inv.nodes["rack12-n01"].user == "ops" and inv.nodes["rack12-n01"].port == 2200
    assert inv.nodes["spare7"].user == "admin" and inv.nodes["spare7"].port == 2222
    assert inv.nodes["spare7"].topology == "hgx-h100-8gpu"
    assert inv.nodes["bare"].address is None
    assert inv.groups == {"rack12": ["rack12-n01", "rack12-n02", "rack12-n03", "rack12-n04"],
                          "misc": ["spare7", "bare"]}
    assert inv.ssh_config == (tmp_path / "cfg" / "ssh_config").resolve()


def test_select_by_name_nodeset_and_group(tmp_path: Path) -> None:
    inv = load_inventory(_write(tmp_path, GOOD))
    assert inv.select(None) == list(inv.nodes)
    assert inv.select("rack12-n[02-03],spare7") == ["rack12-n02", "rack12-n03", "spare7"]
    assert inv.select("@misc,rack12-n01,bare") == ["spare7", "bare", "rack12-n01"]
    with pytest.raises(UsageError, match="not in inventory"):
        inv.select("rack12-n09")
    with pytest.raises(UsageError, match="no group 'nope'"):
        inv.select("@nope")


def test_split_nodeset_keeps_bracket_commas() -> None:
    assert split_nodeset("a[1-2,4],@rack, b") == ["a[1-2,4]", "@rack", "b"]


@pytest.mark.parametrize(("old", "new", "key", "needle", "message"), [
    ("  port: 2200", "  port: 70000", "defaults.port", "port: 70000", "less than or equal"),
    ("    port: 2222", "    port: '2222'", "nodes.spare7.port", "port: '2222'", "valid integer"),
    ("    user: admin", "    user: 'ad min'", "nodes.spare7.user", "ad min", "not a valid user name"),
    ("    address: 10.1.99.7", "    address: '10.1.99.7; rm -rf /'", "nodes.spare7.address", "rm -rf",
     "not a host name"),
    ("    user: admin", "    usr: admin", "nodes.spare7.usr", "usr: admin", "unknown key"),
    ("  bare:", "  'bad;name':", "nodes.bad;name", "bad;name", "invalid node name"),
    ("  misc: [spare7, bare]", "  misc: [spare7, ghost]", "groups.misc[1]", "ghost", "not a node"),
    ("ssh_config: cfg/ssh_config", "ssh_config: cfg/missing", "ssh_config", "cfg/missing",
     "file not found"),
    ("    topology: hgx-h100-8gpu", "    topology: no-such-node-type", "nodes.spare7.topology",
     "no-such-node-type", "unknown topology"),
    ("  bare:", "  rack12-n03:", "nodes.rack12-n03", "  rack12-n03:", "listed twice"),
])
def test_mistakes_name_file_key_and_line(tmp_path: Path, old: str, new: str, key: str, needle: str,
                                         message: str) -> None:
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    err = info.value
    assert err.path == str(path)
    assert err.key == key, str(err)
    assert err.line == _line_of(path, needle), str(err)
    assert message in str(err)


def test_shared_address_for_a_node_set_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes:\n  n[1-2]:\n    address: 10.0.0.1\n")
    with pytest.raises(ConfigError, match="cannot be shared") as info:
        load_inventory(path)
    assert info.value.line == 3


@pytest.mark.parametrize("text", ["[]\n", "nodes: {}\n", "groups: {}\n"])
def test_empty_or_wrong_shape(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError):
        load_inventory(_write(tmp_path, text, config=False))


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid YAML") as info:
        load_inventory(_write(tmp_path, "nodes:\n  a: {\n  b: [\n", config=False))
    assert info.value.line is not None


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_inventory(tmp_path / "nope.yaml")


def test_node_listed_twice_by_a_repeated_key_names_both_lines(tmp_path: Path) -> None:
    # YAML itself would keep only the last spare7, and the "listed twice" check would never see the first.
    path = _write(tmp_path, GOOD.replace("  bare:\n", "  bare:\n  spare7: {address: 10.1.99.8}\n", 1))
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    first, second = _line_of(path, "  spare7:"), _line_of(path, "spare7: {address")
    assert info.value.key == "nodes.spare7" and info.value.line == second
    assert f"lines {first} and {second}" in str(info.value)


def test_billion_laughs_inventory_is_a_config_error(tmp_path: Path) -> None:
    levels = "lol0: &lol0 [a, a, a, a, a, a, a, a, a]\n" + "".join(
        f"lol{n}: &lol{n} [{', '.join([f'*lol{n - 1}'] * 9)}]\n" for n in range(1, 7))
    path = _write(tmp_path, GOOD + levels)
    with pytest.raises(ConfigError, match="aliases expand to more than") as info:
        load_inventory(path)
    assert info.value.path == str(path)


def test_self_referencing_alias_in_an_inventory_is_a_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes: &n\n  a: {}\n  b: *n\n", config=False)
    with pytest.raises(ConfigError, match="refers to itself"):
        load_inventory(path)


def test_inventory_that_is_not_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_bytes(b"nodes:\n  caf\xe9: {}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    assert str(path) in str(info.value) and "byte offset 12" in str(info.value) and info.value.line == 2


def test_many_nodes_and_a_big_group_keep_order_without_duplicates(tmp_path: Path) -> None:
    names = [f"n{i:05d}" for i in range(3000)]
    text = "nodes:\n" + "".join(f"  {n}: {{}}\n" for n in names) + \
        "groups:\n  all: ['n[00000-02999]', n00001, 'n[00002-00010]']\n"
    inv = load_inventory(_write(tmp_path, text, config=False))
    assert list(inv.nodes) == names and inv.groups["all"] == names
    assert inv.select("n00002,n[00001-00003],@all") == ["n00002", "n00001", "n00003", *names[:1], *names[4:]]


@pytest.mark.proc
def test_cli_run_with_a_bomb_inventory_exits_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    levels = "lol0: &lol0 [a, a, a, a, a, a, a, a, a]\n" + "".join(
        f"lol{n}: &lol{n} [{', '.join([f'*lol{n - 1}'] * 9)}]\n" for n in range(1, 21))  # 9**20 if expanded
    path = _write(tmp_path, "nodes:\n  a: {}\n" + levels, config=False)
    proc = subprocess.run(
        [sys.executable, "-m", "burnin.cli.main", "run", "--via", "ssh", "--inventory", str(path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and "aliases expand" in proc.stderr
