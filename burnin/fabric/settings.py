"""Site settings for the fabric phase: where the tools are, how jobs are launched, what is measured.

A site writes only what differs from the defaults in a YAML file
(``burnin run --fabric-config FILE`` or ``$BURNIN_FABRIC_CONFIG``), e.g.::

    nccl_tests_dir: /opt/nccl-tests/build
    mpi: pmix
    socket_ifname: "=bond0"
    max_bytes: 16G

Defaults follow check-catalog.md section 6 (production: 8 ranks per node, one
GPU each, ``srun --mpi=pmix``). Simulated nodes (their facts say the collector
read a root other than ``/``) start from :data:`SIMULATED` instead: the
simulated Slurm cluster offers PMI-2 but no PMIx library and no GPU GRES, and
its nodes declare this machine's few CPUs, so one rank drives the 8 GPUs
(``-g 8``, a valid nccl-tests layout). A config file always wins.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from burnin.errors import ConfigError, UsageError

CONFIG_ENV = "BURNIN_FABRIC_CONFIG"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
NVB_TESTCASES = (
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
)
_SIZE = re.compile(r"^(\d+)([KMGkmg]?)$")
_FORBID: Any = {"extra": "forbid"}
GIB = 1 << 30


def size_bytes(text: str) -> int:
    """nccl-tests size syntax: ``8``, ``64K``, ``8M``, ``8G`` (powers of 1024)."""
    match = _SIZE.match(str(text).strip())
    if match is None:
        raise ValueError(f"size {text!r}: expected a number with an optional K, M or G suffix")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


@dataclass(frozen=True, slots=True)
class FabricSettings:
    """Everything the fabric phase needs besides the topology and the node set."""

    __pydantic_config__ = _FORBID

    # where the tools are on the nodes
    nccl_tests_dir: str | None = None
    """Folder of the ``*_perf`` binaries on the nodes; None: found on the nodes' PATH."""
    nvbandwidth: str = "nvbandwidth"
    p2p_bandwidth: str = "p2pBandwidthLatencyTest"
    """Path of the CUDA sample on the nodes (NVL-03), run without options: every matrix it prints."""
    container: str | None = None
    """srun ``--container-image`` (pyxis/enroot) holding nccl-tests and nvbandwidth."""

    # launching multi-node jobs
    launcher: Literal["auto", "srun", "mpirun"] = "auto"
    """auto: srun under Slurm dispatch, mpirun otherwise (simulated racks run a simulated job)."""
    mpi: str | None = "pmix"
    """srun ``--mpi`` for multi-node jobs (None: the cluster's MpiDefault)."""
    ranks_per_node: int = 8
    gpus_per_rank: int = 1
    srun_gpus_per_node: int | None = 8
    """srun ``--gpus-per-node`` (None when the cluster has no GPU GRES)."""
    srun_args: tuple[str, ...] = ()
    mpirun: str = "mpirun"
    mpirun_args: tuple[str, ...] = ("--bind-to", "numa")

    # NCCL environment (check-catalog 6: exact compute HCA list, never storage)
    nvls: bool = True
    ib_hca: str | None = None
    """NCCL_IB_HCA; None: ``=`` + the topology's compute HCAs (``mlx5_0:1,...``)."""
    socket_ifname: str | None = None
    """NCCL_SOCKET_IFNAME; None: ``^docker,lo,`` + the storage HCAs' netdevs."""
    debug: str = "WARN"
    extra_env: dict[str, str] = field(default_factory=dict)
    nccl_evidence: Literal["full", "group", "off"] = "full"
    """STO-02 runtime evidence, where the topology has a storage fabric: ``group`` runs the multi-node
    all_reduce with ``NCCL_DEBUG=INFO`` and records the devices NCCL opened on each node; ``full`` adds one
    short run that leaves ``NCCL_IB_HCA`` to each node's own NCCL configuration; ``off``: neither."""
    nccl_evidence_timeout_s: float = 180.0
    """The short node-configuration run is killed after this many seconds (at most ``timeout_s``)."""

    # what is measured
    collectives: tuple[str, ...] = ("all_reduce",)
    min_bytes: str = "8"
    max_bytes: str = "8G"
    step_factor: int = 2
    iters: int = 20
    warmup: int = 5
    judge_min_bytes: str = "1G"
    """busbw is judged at the largest size measured, which must be at least this."""
    nvbandwidth_testcases: tuple[str, ...] = NVB_TESTCASES
    nvbandwidth_iters: int = 10
    timeout_s: float = 600.0
    """Every launch (single-node, multi-node, nvbandwidth, p2pBandwidthLatencyTest, ib_write_bw) is killed after
    this many seconds."""
    nvlink_recollect_timeout_s: float = 120.0
    """NVL-04: the collector's ``nvml`` source, gathered again after the single-node traffic, within this long."""

    # IB-08: perftest ib_write_bw loopback through each compute HCA, GPU memory and host memory
    ib_write_bw: str = "ib_write_bw"
    """Path of perftest's ib_write_bw on the nodes."""
    ib_write_bw_size: int = 1 << 20
    ib_write_bw_iters: int = 5000
    ib_write_bw_qps: int = 4
    ib_write_bw_port: int = 18515
    """TCP port of the first run's out-of-band exchange; each HCA and memory kind uses the next ones."""

    # multi-node and localisation
    multi_node: bool = True
    localize: Literal["auto", "always", "never"] = "auto"
    """auto: localise when the multi-node result fails; always: also when it passes (--localize)."""
    confirm: bool = True
    """A suspect is named only after failing with two different known-good partners."""
    rail_isolation: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("min_bytes", "max_bytes", "judge_min_bytes"):
            size_bytes(getattr(self, name))
        if size_bytes(self.min_bytes) > size_bytes(self.max_bytes):
            raise ValueError(f"min_bytes {self.min_bytes} is above max_bytes {self.max_bytes}")
        unknown = [c for c in self.collectives if c not in COLLECTIVES]
        if unknown or not self.collectives:
            raise ValueError(f"collectives must be among {', '.join(COLLECTIVES)} (got {list(self.collectives)})")
        if "all_reduce" not in self.collectives:
            raise ValueError("collectives must include all_reduce (NCCL-01/03/04 judge it)")
        for name in ("ranks_per_node", "gpus_per_rank", "step_factor", "iters", "nvbandwidth_iters",
                     "ib_write_bw_size", "ib_write_bw_iters", "ib_write_bw_qps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 1024 <= self.ib_write_bw_port <= 65535 - 64:
            raise ValueError(f"ib_write_bw_port must be within 1024..{65535 - 64}")
        if self.warmup < 0 or not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ValueError("warmup must be >= 0 and timeout_s a finite number > 0")
        for name in ("nccl_evidence_timeout_s", "nvlink_recollect_timeout_s"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be a finite number > 0")

    @property
    def gpus_per_node(self) -> int:
        return self.ranks_per_node * self.gpus_per_rank

    def replace(self, **changes: Any) -> FabricSettings:
        return dataclasses.replace(self, **changes)


PRODUCTION = FabricSettings()
SIMULATED = FabricSettings(mpi="pmi2", ranks_per_node=1, gpus_per_rank=8, srun_gpus_per_node=None,
                           timeout_s=60.0)


def load_settings(path: str | Path | None = None, *, simulated: bool = False,
                  overrides: Mapping[str, Any] | None = None) -> FabricSettings:
    """The defaults (production or simulated), then the config file, then ``overrides``."""
    base = SIMULATED if simulated else PRODUCTION
    file = path or os.environ.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    if file:
        data = _read(Path(file))
    merged = {**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **data, **(overrides or {})}
    if not file:
        return _validate(merged, None, {})
    return _validate(merged, Path(file), _lines(Path(file)))


def _read(path: Path) -> dict[str, Any]:
    from burnin.topology.load import load_yaml_document

    if not path.is_file():
        raise UsageError(f"fabric config {path} not found")
    data, _ = load_yaml_document(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "fabric settings must be a YAML mapping", line=1)
    return data


def _lines(path: Path) -> dict[Any, int]:
    from burnin.topology.load import load_yaml_document

    return load_yaml_document(path)[1]


def _validate(data: dict[str, Any], path: Path | None, lines: dict[Any, int]) -> FabricSettings:
    from pydantic import TypeAdapter, ValidationError

    from burnin.topology.load import validation_to_config_error

    try:
        return TypeAdapter(FabricSettings).validate_python(data)
    except ValidationError as exc:
        raise validation_to_config_error(path or Path("(fabric settings)"), exc, lines) from None
