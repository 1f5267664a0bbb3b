"""Topology loading for the health probe: a validated copy cached as JSON.

The first load of a file validates it fully (PyYAML + pydantic) and caches the
result keyed by the file's content hash; later loads build the frozen
dataclasses straight from that JSON, without importing yaml or pydantic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from burnin.topology.catalog import resolve
from burnin.topology.model import (
    DcgmSpec,
    GpuDevice,
    GpuFirmware,
    GpuSpec,
    Hca,
    HcaFirmware,
    HostSpec,
    IbPartitions,
    NumaSpec,
    NvlinkSpec,
    Reference,
    SoftwareManifest,
    Topology,
    storage_from_dict,
)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "burnin" / "topology"


def _build(data: dict[str, Any]) -> Topology:
    gpus = data["gpus"]
    nvlink = gpus.get("nvlink")
    return Topology(
        name=data["name"],
        description=data.get("description", ""),
        gpus=GpuSpec(
            count=gpus["count"], model=gpus["model"],
            devices=tuple(GpuDevice(**d) for d in gpus["devices"]),
            nvlink=NvlinkSpec(**nvlink) if nvlink else None,
            firmware=GpuFirmware(**gpus["firmware"]) if gpus.get("firmware") else None,
        ),
        hcas=tuple(Hca(**h) for h in data.get("hcas", ())),
        numa=NumaSpec(nodes=data["numa"]["nodes"],
                      cpulists={int(k): v for k, v in data["numa"]["cpulists"].items()}),
        host=HostSpec(**data["host"]),
        references={k: Reference(**v) for k, v in data["references"].items()},
        storage=storage_from_dict(data.get("storage")),
        hca_firmware=HcaFirmware(**data["hca_firmware"]) if data.get("hca_firmware") else None,
        ib_partitions=(IbPartitions(pkeys=tuple(data["ib_partitions"]["pkeys"]), source=data["ib_partitions"]["source"])
                       if data.get("ib_partitions") else None),
        software=SoftwareManifest(**data["software"]) if data.get("software") else None,
        dcgm=DcgmSpec(**data["dcgm"]) if data.get("dcgm") else DcgmSpec(),
    )


def load_cached(path: Path) -> Topology:
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:24]
    cached = cache_dir() / f"{digest}.json"
    try:
        return _build(json.loads(cached.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from burnin.topology.load import load_topology

    topology = load_topology(path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(topology)), encoding="utf-8")
        tmp.replace(cached)
    except OSError:
        pass  # a read-only home only costs speed
    return topology


def find_topology_fast(name_or_file: str) -> Topology:
    return load_cached(resolve(name_or_file))
