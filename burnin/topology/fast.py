"""Topology loading for the health probe: a validated copy cached as JSON.

The first load of a file validates it fully (PyYAML + pydantic, :mod:`burnin.topology.load`)
and caches the result; later loads rebuild the same frozen dataclasses from that JSON
without importing yaml or pydantic.

The JSON form is derived from the dataclasses of :mod:`burnin.topology.model` themselves:
every field of every instance, tagged with its class (``{"$class": "GpuSpec", ...}``),
tuples and dicts tagged so that they come back as tuples and dicts with their key types.
A section added to the model is cached and rebuilt with no change here.

A cache entry holds the topology file's text and a fingerprint of the code that
validated it (this package's sources); it is used only when both still match, so an
edited file or an upgraded burnin is validated again, never read from a stale copy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib
from pathlib import Path
from typing import Any

from burnin import resources
from burnin.topology import model
from burnin.topology.catalog import resolve
from burnin.topology.model import Topology

CACHE_FORMAT = 1
_CLASS, _TUPLE, _DICT = "$class", "$tuple", "$dict"
#: Every dataclass of the model, by name: what a cached ``$class`` may name.
_CLASSES: dict[str, type] = {name: obj for name, obj in vars(model).items()
                             if isinstance(obj, type) and dataclasses.is_dataclass(obj)
                             and obj.__module__ == model.__name__}


def cache_dir() -> Path:
    return resources.cache_dir("topology")


def encode(value: Any) -> Any:
    """``value`` (a model dataclass and what its fields hold) as plain JSON data, tagged to come back as it was."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise TypeError(f"{type(value).__module__}.{name} is not a topology model class")
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {_CLASS: name, **fields}
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {_DICT: [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"a topology cannot hold a {type(value).__name__}: {value!r}")


def _decode_object(obj: dict[str, Any]) -> Any:
    if _CLASS in obj:
        cls = _CLASSES[obj.pop(_CLASS)]
        return cls(**obj)
    if _TUPLE in obj:
        return tuple(obj[_TUPLE])
    if _DICT in obj:
        return dict(obj[_DICT])
    raise ValueError(f"untagged object in a cached topology: {sorted(obj)}")


def dumps(topology: Topology) -> str:
    """The cached form of a validated topology."""
    return json.dumps(encode(topology), separators=(",", ":"))


def loads(text: str) -> Topology:
    """The topology :func:`dumps` wrote, rebuilt as the same dataclasses (their own checks run again)."""
    topology = json.loads(text, object_hook=_decode_object)
    if not isinstance(topology, Topology):
        raise ValueError(f"a cached topology holds a {type(topology).__name__}")
    return topology


def code_fingerprint() -> str:
    """CRC-32 of the sources that validate a topology (this package): a cache written by other code is not used."""
    crc = 0
    package = os.path.dirname(model.__file__)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), "rb") as handle:
                crc = zlib.crc32(name.encode() + handle.read(), crc)
    return f"{CACHE_FORMAT}-{crc:08x}"


def _cache_file(path: Path) -> Path:
    resolved = str(path.resolve())
    return cache_dir() / f"{path.stem}-{zlib.crc32(resolved.encode()):08x}.json"


def load_cached(path: Path) -> Topology:
    """The topology in ``path``: from the cache when it holds this very text, validated (and cached) otherwise.

    A cache file is two lines: ``{"code": <fingerprint>, "source": <the file's text>}``, then :func:`dumps`.
    """
    source = path.read_text(encoding="utf-8")
    fingerprint = code_fingerprint()
    cached = _cache_file(path)
    try:
        header, _, body = cached.read_text(encoding="utf-8").partition("\n")
        entry = json.loads(header)
        if entry.get("code") == fingerprint and entry.get("source") == source:
            return loads(body)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache, or one this code cannot read: validate again
    from burnin.topology.load import load_topology

    topology = load_topology(path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"code": fingerprint, "source": source}) + "\n" + dumps(topology) + "\n",
                       encoding="utf-8")
        tmp.replace(cached)
    except OSError:
        pass  # a read-only home only costs speed
    return topology


def find_topology_fast(name_or_file: str) -> Topology:
    return load_cached(resolve(name_or_file))
