"""The site's Megatron settings: what to run, in what shape, launched how.

A site writes only what differs from the defaults in a YAML file
(``--megatron-config FILE`` or ``$BURNIN_MEGATRON_CONFIG``), e.g.::

    pretrain_script: /opt/megatron-lm/pretrain_gpt.py
    container: {image: nvcr.io/nvidia/pytorch:24.07-py3, runner: pyxis, mounts: [/opt/megatron-lm]}
    train_iters: 50
    extra_args: [--transformer-impl, transformer_engine]

The defaults are the catalog's MEG-01 recipe: NVIDIA's Llama-3-8B shape with mock
data, TP 2 on one node and TP 8 within each node of a multi-node run (DP across
nodes), 50 iterations. The file is read with the hardened YAML loader, so a mistake
is named by file, key and line (``megatron.yaml:7: model.hidden_size: ...``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from burnin.errors import ConfigError, UsageError

CONFIG_ENV = "BURNIN_MEGATRON_CONFIG"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelShape(_Model):
    """The transformer Megatron trains; also what burnin's FLOP count is computed from."""

    num_layers: Annotated[int, Field(ge=1)] = 32
    hidden_size: Annotated[int, Field(ge=1)] = 4096
    ffn_hidden_size: Annotated[int, Field(ge=1)] = 14336
    num_attention_heads: Annotated[int, Field(ge=1)] = 32
    num_query_groups: Annotated[int | None, Field(ge=1)] = 8
    """Grouped-query attention groups; None: multi-head attention (one group per head)."""
    kv_channels: Annotated[int | None, Field(ge=1)] = 128
    """Projection size per head; None: hidden_size / num_attention_heads."""
    seq_length: Annotated[int, Field(ge=1)] = 4096
    """4096 (not the recipe's 8192) and a global batch of 64: the catalog's faster smoke, ~4 s an iteration on
    8x H100 instead of ~18 s."""
    max_position_embeddings: Annotated[int | None, Field(ge=1)] = None
    """None: seq_length."""
    vocab_size: Annotated[int, Field(ge=1)] = 128256
    make_vocab_size_divisible_by: Annotated[int, Field(ge=1)] = 128
    swiglu: bool = True
    num_experts: Annotated[int | None, Field(ge=1)] = None
    moe_router_topk: Annotated[int, Field(ge=1)] = 1
    rotary_base: Annotated[int, Field(ge=1)] = 1000000

    @model_validator(mode="after")
    def _consistent(self) -> ModelShape:
        if self.kv_channels is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                             f"{self.num_attention_heads} (set kv_channels)")
        if self.num_attention_heads % self.query_groups:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                             f"num_query_groups {self.query_groups}")
        if self.num_experts is None and self.moe_router_topk != 1:
            raise ValueError("moe_router_topk applies only with num_experts")
        return self

    @property
    def query_groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_channels(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def positions(self) -> int:
        return self.max_position_embeddings or self.seq_length


class Parallelism(_Model):
    """How one run splits the model: TP within a node, PP, and the batch (DP is what is left)."""

    tensor: Annotated[int, Field(ge=1)] = 2
    pipeline: Annotated[int, Field(ge=1)] = 1
    context: Annotated[int, Field(ge=1)] = 1
    sequence_parallel: bool = True
    """Only passed with tensor > 1 (Megatron refuses it otherwise)."""
    micro_batch_size: Annotated[int, Field(ge=1)] = 1
    global_batch_size: Annotated[int, Field(ge=1)] = 64
    """Rounded up to a multiple of micro_batch_size x DP for the run's world size (see :meth:`batch_for`)."""

    def data_parallel(self, world_size: int) -> int:
        """DP for ``world_size`` ranks; ValueError when the model split does not divide it."""
        model = self.tensor * self.pipeline * self.context
        if world_size % model:
            raise ValueError(f"{world_size} ranks are not a multiple of TP {self.tensor} x PP {self.pipeline} "
                             f"x CP {self.context}")
        return world_size // model

    def batch_for(self, world_size: int) -> int:
        """The global batch for ``world_size`` ranks: ``global_batch_size`` rounded up to a multiple of
        micro_batch_size x DP (Megatron refuses any other), so a group of 3 or 5 nodes runs too."""
        step = self.micro_batch_size * self.data_parallel(world_size)
        return -(-self.global_batch_size // step) * step


class ContainerSpec(_Model):
    """A container holding Megatron-LM and its Python (NGC PyTorch, NeMo ...)."""

    image: Annotated[str, Field(min_length=1)]
    runner: Literal["pyxis", "docker", "apptainer"] = "pyxis"
    """pyxis: ``srun --container-image`` (srun form only); docker / apptainer: wrap the launcher on each node."""
    mounts: tuple[str, ...] = ()
    """``SRC[:DST]`` host paths made visible inside (pyxis --container-mounts, docker -v, apptainer --bind)."""
    workdir: str | None = None
    runner_args: tuple[str, ...] = ()


Launcher = Literal["auto", "srun", "torchrun"]
Binding = Literal["auto", "slurm", "numactl", "none"]


class MegatronSettings(_Model):
    """Everything the Megatron phase needs besides the topology and the node set."""

    # what runs
    pretrain_script: Annotated[str, Field(min_length=1)] = "pretrain_gpt.py"
    """Path of Megatron-LM's ``pretrain_gpt.py`` on the nodes (or in the container): repo root or examples/."""
    python: str | None = "python3"
    """Interpreter that runs the script; None: the script is an executable found on the PATH."""
    torchrun: Annotated[str, Field(min_length=1)] = "torchrun"
    container: ContainerSpec | None = None
    model: ModelShape = ModelShape()
    single_node: Parallelism = Parallelism()
    multi_node: Parallelism = Parallelism(tensor=8)
    multi_node_run: bool = True
    """One multi-node run per group after the single-node runs (TP within the node, DP across nodes)."""
    train_iters: Annotated[int, Field(ge=2)] = 50
    lr: Annotated[float, Field(gt=0)] = 3.0e-4
    min_lr: Annotated[float, Field(ge=0)] = 3.0e-5
    lr_warmup_iters: Annotated[int, Field(ge=0)] = 5
    log_interval: Annotated[int, Field(ge=1)] = 1
    warmup_iters: Annotated[int, Field(ge=0)] = 10
    """Iterations left out of the throughput median (start-up, compilation): the catalog's 'iterations 10..end'."""
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=lambda: {"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    nccl_ib_hca: str | None = None
    """NCCL_IB_HCA; None: ``=`` + the topology's compute HCAs (never a storage HCA)."""

    # how it is launched
    launcher: Launcher = "auto"
    """auto: srun when burnin dispatches through Slurm, torchrun otherwise."""
    binding: Binding = "auto"
    """How ranks are pinned: slurm (srun --cpu-bind/--gpu-bind), numactl (a wrapper per local rank) or none.
    auto: slurm with srun, numactl with torchrun. ``none`` makes PIN-01 fail with the fix named."""
    srun_cpu_bind: str = "ldoms"
    srun_gpu_bind: str | None = "closest"
    srun_distribution: str | None = "block:block"
    srun_args: tuple[str, ...] = ()
    numactl: str = "numactl"
    master_port: Annotated[int, Field(ge=1024, le=65535)] = 29500
    timeout_s: Annotated[float, Field(gt=0)] = 900.0
    """Every training launch is stopped after this many seconds (the catalog budgets 15 min per node group)."""

    # the placement probe (PIN)
    probe: tuple[str, ...] | None = None
    """argv of the placement probe on a node; None: ``<python> -c <burnin's probe>`` (nothing to install)."""
    probe_python: str = "python3"
    probe_timeout_s: Annotated[float, Field(gt=0)] = 120.0

    @field_validator("timeout_s", "probe_timeout_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MegatronSettings:
        if self.train_iters <= self.warmup_iters:
            raise ValueError(f"train_iters {self.train_iters} leaves no iteration after warmup_iters "
                             f"{self.warmup_iters}")
        if self.train_iters % self.log_interval:
            raise ValueError(f"train_iters {self.train_iters} is not a multiple of log_interval {self.log_interval}")
        if self.min_lr > self.lr:
            raise ValueError(f"min_lr {self.min_lr} is above lr {self.lr}")
        if self.container is not None and self.container.runner == "pyxis" and self.launcher == "torchrun":
            raise ValueError("a pyxis container needs srun (launcher: srun or auto under Slurm); "
                             "use runner: docker or apptainer with torchrun")
        if self.probe is not None and not self.probe:
            raise ValueError("probe must name a command (or be left out)")
        return self

    def launcher_for(self, slurm: bool) -> Literal["srun", "torchrun"]:
        """The launch form for a run dispatched through Slurm (``slurm``) or not."""
        if self.launcher == "auto":
            return "srun" if slurm else "torchrun"
        return self.launcher

    def binding_for(self, launcher: Literal["srun", "torchrun"]) -> Literal["slurm", "numactl", "none"]:
        if self.binding == "auto":
            return "slurm" if launcher == "srun" else "numactl"
        return self.binding


PRODUCTION = MegatronSettings()
SIMULATED = MegatronSettings(python=None, probe=("burnin-placement-probe",), timeout_s=60.0, probe_timeout_s=30.0,
                             srun_gpu_bind=None, srun_args=("--overcommit",))
"""Simulated nodes: ``pretrain_gpt.py`` and ``burnin-placement-probe`` are stand-ins on the node's PATH
(burnin.sim.megatron), ``torchrun`` too; a hung run costs a minute. The simulated Slurm cluster has no GPU
GRES and declares this machine's few CPUs per node, so srun asks for no GPUs and may overcommit CPUs."""


def load_megatron_settings(path: str | Path | None = None, *, simulated: bool = False,
                           overrides: Mapping[str, Any] | None = None) -> MegatronSettings:
    """The defaults (production or simulated), then the config file, then ``overrides``.

    Raises UsageError when the file does not exist and ConfigError (file, key, line) when it is wrong.
    """
    base = SIMULATED if simulated else PRODUCTION
    file = Path(path) if path else (Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None)
    data: dict[str, Any] = {}
    lines: dict[Any, int] = {}
    if file is not None:
        data, lines = _read(file)
    merged = {**base.model_dump(exclude_unset=True), **data, **(overrides or {})}
    try:
        return MegatronSettings.model_validate(merged)
    except ValidationError as exc:
        from burnin.topology.load import validation_to_config_error

        raise validation_to_config_error(file or Path("(megatron settings)"), exc, lines) from None


def _read(path: Path) -> tuple[dict[str, Any], dict[Any, int]]:
    from burnin.topology.load import load_yaml_document

    if not path.is_file():
        raise UsageError(f"megatron config {path} not found")
    data, lines = load_yaml_document(path)
    if data is None:
        return {}, lines
    if not isinstance(data, dict):
        raise ConfigError(str(path), "megatron settings must be a YAML mapping", line=1)
    return data, lines
