"""Keys a file writes that its dataclass model does not define, counted before pydantic runs.

pydantic reports every unknown key of a ``extra: forbid`` model, and a bloated
file (300,000 stray keys) would cost seconds and hundreds of MB of error
records only to show the first few. This walk follows the model's type hints
through the data, keeps the key paths of the first ``limit`` unknown keys and
counts the rest; the loader reports them and stops there.
"""

from __future__ import annotations

import dataclasses
import types
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from burnin.topology.yamlsafe import Path_

__all__ = ["unknown_keys"]


def unknown_keys(data: Any, model: type, limit: int) -> tuple[list[Path_], int]:
    """(key paths of the first ``limit`` unknown keys, in file order; how many there are in all)."""
    found: list[Path_] = []
    count = _walk(data, model, (), found, limit)
    return found, count


@cache
def _fields(model: type) -> tuple[dict[str, Any], bool]:
    """The model's field types by name, and whether it forbids other keys."""
    hints = get_type_hints(model, include_extras=True)
    forbid = getattr(model, "__pydantic_config__", {}).get("extra") == "forbid"
    return {f.name: hints[f.name] for f in dataclasses.fields(model)}, forbid


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the shape (mapping or list) that ``hint`` reads."""
    origin = get_origin(hint) or hint
    if dataclasses.is_dataclass(hint) or origin is dict:
        return isinstance(value, dict)
    return origin in (tuple, list) and isinstance(value, list)


def _walk(value: Any, hint: Any, path: Path_, found: list[Path_], limit: int) -> int:
    origin = get_origin(hint)
    if origin is Annotated:
        return _walk(value, get_args(hint)[0], path, found, limit)
    if origin is Union or origin is types.UnionType:
        for option in get_args(hint):
            if _fits(value, option):
                return _walk(value, option, path, found, limit)
        return 0
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        fields, forbid = _fields(hint)
        count = 0
        for key, item in value.items():
            if key in fields:
                count += _walk(item, fields[key], (*path, key), found, limit)
            elif forbid:
                count += 1
                if len(found) < limit:
                    found.append((*path, key))
        return count
    args = get_args(hint)
    if origin in (tuple, list) and args and isinstance(value, list):
        return sum(_walk(item, args[0], (*path, i), found, limit) for i, item in enumerate(value))
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return sum(_walk(item, args[1], (*path, key), found, limit) for key, item in value.items())
    return 0
