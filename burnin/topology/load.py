"""Load topology YAML files into validated :class:`Topology` models.

Every mistake is reported as a :class:`ConfigError` naming the file, the key
path (``gpus.devices[3].numa_node``) and the line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from burnin.errors import ConfigError
from burnin.topology.catalog import list_topologies, resolve
from burnin.topology.model import Topology, dcgm_mismatch, storage_mismatch
from burnin.topology.unknown import unknown_keys
from burnin.topology.yamlsafe import Path_, format_key_path, load_yaml

__all__ = ["Path_", "find_topology", "format_key_path", "list_topologies", "load_topology", "load_yaml_document"]

#: Errors of one file shown in full; the rest are counted.
SHOWN_ERRORS = 5


def load_yaml_document(path: Path) -> tuple[Any, dict[Path_, int]]:
    """Read a YAML file (hardened: see :mod:`burnin.topology.yamlsafe`); return the data and a key-path → line index."""
    document = load_yaml(path)
    return document.data, document.lines


def locate(lines: dict[Path_, int], loc: Path_) -> int | None:
    """Line of the deepest prefix of ``loc`` present in the document."""
    for cut in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:cut]))
        if line is not None:
            return line
    return None


def validation_to_config_error(path: Path, exc: ValidationError, lines: dict[Path_, int]) -> ConfigError:
    """One line: the first error with its key and line, the next few by key and line, then how many more."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    return summary_error(path, [_describe(err, lines) for err in errors[:SHOWN_ERRORS]], len(errors))


def summary_error(path: Path, described: list[tuple[Path_, int | None, str]], total: int) -> ConfigError:
    """One line: the first error with its key and line, the next few by key and line, then how many more."""
    first_loc, first_line, first_msg = described[0]
    msg = first_msg
    others = [f"{format_key_path(loc) or '(top level)'}"
              + (f" (line {line})" if line is not None else "") + f": {text}"
              for loc, line, text in described[1:]]
    if others:
        msg += "; also " + "; ".join(others)
    more = total - len(described)
    if more:
        msg += f"; ... and {more} more error{'s' if more > 1 else ''}"
    return ConfigError(str(path), msg, key=format_key_path(first_loc) or "(top level)", line=first_line)


def _describe(err: Any, lines: dict[Path_, int]) -> tuple[Path_, int | None, str]:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    msg = str(err["msg"])
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        msg = "unknown key"
    elif err["type"] in ("missing", "missing_argument"):
        msg = "required key is missing"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return loc, locate(lines, loc), msg


def _key_path(text: str) -> Path_:
    """``storage.netdevs[0].hca`` -> ``("storage", "netdevs", 0, "hca")``."""
    return tuple(int(part[1:-1]) if part.startswith("[") else part
                 for part in re.findall(r"\[\d+\]|[A-Za-z_]\w*", text))


def load_topology(path: str | Path) -> Topology:
    """Validate and load one topology file."""
    file = Path(path)
    data, lines = load_yaml_document(file)
    if not isinstance(data, dict):
        raise ConfigError(str(file), "a topology must be a YAML mapping", line=1)
    unknown, count = unknown_keys(data, Topology, SHOWN_ERRORS)
    if count:  # found without pydantic, which would describe every one of them
        raise summary_error(file, [(loc, locate(lines, loc), "unknown key") for loc in unknown], count)
    try:
        topology = _adapter().validate_python(data)
    except ValidationError as exc:
        raise validation_to_config_error(file, exc, lines) from None
    mismatch = storage_mismatch(topology) or dcgm_mismatch(topology)
    if mismatch is not None:
        key, message = mismatch
        raise ConfigError(str(file), message, key=key, line=locate(lines, _key_path(key)))
    return topology


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter[Topology]:
    return TypeAdapter(Topology)


def find_topology(name_or_file: str) -> Topology:
    """Load a topology by name (``hgx-h100-8gpu``) or by path to a YAML file."""
    return load_topology(resolve(name_or_file))
