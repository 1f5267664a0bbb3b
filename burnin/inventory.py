"""Inventory files: the nodes of a rack that no scheduler knows yet.

```yaml
ssh_config: ssh_config          # optional, relative to this file
defaults:                       # optional, for every node
  user: ops
  topology: hgx-h100-8gpu
nodes:
  rack12-n01: {address: 10.1.12.1}
  rack12-n[02-32]: {}           # node sets expand (ClusterShell syntax)
  spare7: {address: 10.1.99.7, user: admin, port: 2222}
  gpu-a1: {kubernetes: gpu-a1.cluster.example}  # its Node's name, where it differs (--gate kubernetes)
groups:
  rack12: rack12-n[01-32]       # a node set or a list of names
```

Loading validates everything and names the file, key path and line of any
mistake, like topologies. ``--hosts`` selects from an inventory by name, node
set or ``@group``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from burnin.errors import ConfigError, UsageError
from burnin.nodes import expand, validate_name
from burnin.topology.load import (
    Path_,
    format_key_path,
    load_yaml_document,
    locate,
    validation_to_config_error,
)

_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?$")
_ADDRESS = re.compile(r"^[A-Za-z0-9_.:%-]{1,253}$")
_GROUP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# A valid node name (burnin.nodes) holds none of the node-set operators ([ ] , @ ! & ^ *): it is itself.
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_NODE_OBJECT = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NodeSettings(_Model):
    """Per-node values; each overrides ``defaults`` and the ssh_config."""

    address: str | None = None
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    topology: str | None = None
    kubernetes: str | None = None  # the node's Node name in Kubernetes, where it is not burnin's (--gate kubernetes)

    @field_validator("kubernetes")
    @classmethod
    def _kubernetes(cls, value: str | None) -> str | None:
        if value is not None and not _NODE_OBJECT.match(value):
            raise ValueError(f"not a Kubernetes Node name (lower-case DNS name): {value!r}")
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not _ADDRESS.match(value):
            raise ValueError(f"not a host name or IP address: {value!r}")
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        return _check_user(value)

    @field_validator("topology")
    @classmethod
    def _topology(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value


class Defaults(_Model):
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    topology: str | None = None

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        return _check_user(value)


def _check_user(value: str | None) -> str | None:
    if value is not None and not _USER.match(value):
        raise ValueError(f"not a valid user name: {value!r}")
    return value


class InventoryFile(_Model):
    """The YAML document as written."""

    ssh_config: str | None = None
    defaults: Defaults = Defaults()
    nodes: dict[str, NodeSettings | None]
    groups: dict[str, str | list[str]] = {}


@dataclass(frozen=True, slots=True)
class InventoryNode:
    name: str
    address: str | None = None
    user: str | None = None
    port: int | None = None
    topology: str | None = None
    kubernetes: str | None = None


@dataclass(frozen=True)
class Inventory:
    path: Path
    nodes: dict[str, InventoryNode]
    groups: dict[str, list[str]]
    ssh_config: Path | None = None

    def select(self, hosts: str | None = None) -> list[str]:
        """All nodes (file order), or those named by ``hosts``: names, node sets, ``@group``."""
        if not hosts:
            return list(self.nodes)
        chosen: dict[str, None] = {}  # ordered, and membership in O(1) for racks of 100k nodes
        for token in split_nodeset(hosts):
            if token.startswith("@"):
                group = token[1:]
                if group not in self.groups:
                    known = ", ".join(sorted(self.groups)) or "none"
                    raise UsageError(f"--hosts {hosts!r}: no group {group!r} in {self.path} (groups: {known})")
                names = self.groups[group]
            else:
                names = expand(token)
            for name in names:
                if name not in self.nodes:
                    raise UsageError(f"--hosts {hosts!r}: {name} is not in inventory {self.path}")
                chosen[name] = None
        if not chosen:
            raise UsageError(f"--hosts {hosts!r} selects no node")
        return list(chosen)


def split_nodeset(text: str) -> list[str]:
    """Split at commas outside brackets: ``a[1-2,4],@rack`` → ``["a[1-2,4]", "@rack"]``."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


def load_inventory(path: str | Path) -> Inventory:
    """Validate and load an inventory file (ConfigError names file, key and line)."""
    file = Path(path)
    data, lines = load_yaml_document(file)
    if not isinstance(data, dict):
        raise ConfigError(str(file), "an inventory must be a YAML mapping with a 'nodes' key", line=1)
    try:
        doc = InventoryFile.model_validate(data)
    except ValidationError as exc:
        raise validation_to_config_error(file, exc, lines) from None
    base = file.resolve().parent

    def fail(loc: Path_, message: str) -> ConfigError:
        return ConfigError(str(file), message, key=format_key_path(loc), line=locate(lines, loc))

    nodes: dict[str, InventoryNode] = {}
    for key, settings in doc.nodes.items():
        names = _expand_key(key, fail)
        values = settings or NodeSettings()
        if values.address is not None and len(names) > 1:
            raise fail(("nodes", key, "address"), "an address cannot be shared by a node set")
        if values.kubernetes is not None and len(names) > 1:
            raise fail(("nodes", key, "kubernetes"), "a Node name cannot be shared by a node set")
        for name in names:
            if name in nodes:
                raise fail(("nodes", key), f"node {name} is listed twice")
            nodes[name] = InventoryNode(
                name, values.address, values.user or doc.defaults.user,
                values.port or doc.defaults.port,
                _topology_ref(values.topology or doc.defaults.topology, base), values.kubernetes,
            )
    if not nodes:
        raise fail(("nodes",), "the inventory lists no nodes")
    groups: dict[str, list[str]] = {}
    for group, members in doc.groups.items():
        if not _GROUP.match(group):
            raise fail(("groups", group), f"invalid group name {group!r}")
        items = [members] if isinstance(members, str) else members
        resolved: dict[str, None] = {}
        for i, item in enumerate(items):
            loc: Path_ = ("groups", group) if isinstance(members, str) else ("groups", group, i)
            for name in _expand_key(item, fail, loc):
                if name not in nodes:
                    raise fail(loc, f"{name} is not a node of this inventory")
                resolved[name] = None
        groups[group] = list(resolved)
    ssh_config: Path | None = None
    if doc.ssh_config is not None:
        ssh_config = (base / Path(doc.ssh_config).expanduser()).resolve()
        if not ssh_config.is_file():
            raise fail(("ssh_config",), f"file not found: {ssh_config}")
    _check_topologies(nodes, lines, file, doc)
    return Inventory(file, nodes, groups, ssh_config)


def _expand_key(key: str, fail: Callable[[Path_, str], ConfigError], loc: Path_ | None = None) -> list[str]:
    where: Path_ = loc if loc is not None else ("nodes", key)
    if _PLAIN_NAME.match(key):  # one node: no node-set syntax to expand (the common case, and fast)
        return [key]
    try:
        names = expand(key)
    except UsageError as exc:
        raise fail(where, str(exc)) from None
    for name in names:
        try:
            validate_name(name)
        except UsageError as exc:
            raise fail(where, str(exc)) from None
    if not names:
        raise fail(where, f"{key!r} names no node")
    return names


def _topology_ref(ref: str | None, base: Path) -> str | None:
    """Topology names stay names; file paths are taken relative to the inventory."""
    if ref is None:
        return None
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        return str((base / Path(ref).expanduser()).resolve())
    return ref


def _check_topologies(nodes: dict[str, InventoryNode], lines: dict[Path_, int], file: Path,
                      doc: InventoryFile) -> None:
    """Every topology named must exist (the error points at where it was named)."""
    from burnin.topology import find_topology

    seen: set[str] = set()
    for node in nodes.values():
        if node.topology is None or node.topology in seen:
            continue
        seen.add(node.topology)
        try:
            find_topology(node.topology)
        except (UsageError, ConfigError) as exc:
            loc: Path_ = ("defaults", "topology")
            for key, settings in doc.nodes.items():
                if settings is not None and settings.topology and \
                        _topology_ref(settings.topology, file.resolve().parent) == node.topology:
                    loc = ("nodes", key, "topology")
                    break
            raise ConfigError(str(file), str(exc), key=format_key_path(loc),
                              line=locate(lines, loc)) from None
