"""Load topology YAML files into validated :class:`Topology` models.

Every mistake is reported as a :class:`ConfigError` naming the file, the key
path (``gpus.devices[3].numa_node``) and the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from burnin.errors import ConfigError
from burnin.topology.catalog import list_topologies, resolve
from burnin.topology.model import Topology

__all__ = ["find_topology", "list_topologies", "load_topology"]

Path_ = tuple[str | int, ...]


def _line_index(node: yaml.Node, path: Path_ = ()) -> Iterator[tuple[Path_, int]]:
    """Yield (key path, 1-based line) for every node of a composed YAML tree."""
    yield path, node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key: str | int = key_node.value
            if isinstance(key, str) and key.isdigit():
                yield (*path, int(key)), key_node.start_mark.line + 1
            yield (*path, key), key_node.start_mark.line + 1
            for sub_path, line in _line_index(value_node, (*path, key)):
                if sub_path != (*path, key):
                    yield sub_path, line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _line_index(item, (*path, i))


def format_key_path(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_yaml_document(path: Path) -> tuple[Any, dict[Path_, int]]:
    """Read a YAML file; return the data and a key-path → line index."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(str(path), f"invalid YAML: {problem}", line=line) from None
    lines = dict(_line_index(node)) if node is not None else {}
    return data, lines


def locate(lines: dict[Path_, int], loc: Path_) -> int | None:
    """Line of the deepest prefix of ``loc`` present in the document."""
    for cut in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:cut]))
        if line is not None:
            return line
    return None


def validation_to_config_error(path: Path, exc: ValidationError, lines: dict[Path_, int]) -> ConfigError:
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    msg = err["msg"]
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        msg = "unknown key"
    elif err["type"] in ("missing", "missing_argument"):
        msg = "required key is missing"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more error{'s' if more > 1 else ''})"
    return ConfigError(str(path), msg, key=format_key_path(loc) or "(top level)", line=locate(lines, loc))


def load_topology(path: str | Path) -> Topology:
    """Validate and load one topology file."""
    file = Path(path)
    data, lines = load_yaml_document(file)
    if not isinstance(data, dict):
        raise ConfigError(str(file), "a topology must be a YAML mapping", line=1)
    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise validation_to_config_error(file, exc, lines) from None


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter[Topology]:
    return TypeAdapter(Topology)


def find_topology(name_or_file: str) -> Topology:
    """Load a topology by name (``hgx-h100-8gpu``) or by path to a YAML file."""
    return load_topology(resolve(name_or_file))
