"""The site's repair settings: ``repair.yaml`` in burnin's state directory, or ``$BURNIN_REPAIR_CONFIG``.

Every key is optional (docs/repair.md)::

    incidents: 3            # K: a node with K incidents of a class in D days starts the next one a rung up
    days: 30                # D
    incomplete_retries: 1   # an incomplete re-acceptance repeats its rung this often before climbing
    ladders:                # per incident class, in order; each ends with vendor
      gpu: [reset, reboot, vendor]
      fabric: [reboot, vendor]
      node: [reboot, vendor]
    classes: {GPU: gpu, NVL: gpu, NCCL: gpu, IB: fabric, PIN: fabric}   # check-id family -> class
    acceptance:
      suites: [node]        # what must pass again before a node returns (add fabric for its loopback checks)
      keyword: null         # a pytest -k expression narrowing them, e.g. "not multinode"
    reboot:
      nextstate: RESUME     # what Slurm makes of the node after its reboot (inside burnin's reservation, drained again)
      wait_s: 1800          # how long burnin waits for a rebooting node to come back

A file that cannot be used is one line naming the file, the key and its line (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from burnin.errors import ConfigError
from burnin.repair.policy import DEFAULT_CLASSES, DEFAULT_LADDERS, STEPS, VENDOR, Ladder, Step

CONFIG_ENV = "BURNIN_REPAIR_CONFIG"
SETTINGS_FILE = "repair.yaml"
SUITES = ("node", "fabric", "megatron", "storage")


def _ladder_steps(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    if not steps or steps[-1] != VENDOR:
        raise ValueError("a ladder must end with vendor (a node that keeps failing leaves)")
    if list(steps) != sorted(set(steps), key=STEPS.index):
        raise ValueError(f"a ladder names each step once, in the order {' -> '.join(STEPS)}")
    return steps


LadderSteps = Annotated[tuple[Step, ...], AfterValidator(_ladder_steps)]


class Acceptance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: tuple[str, ...] = ("node",)
    keyword: str | None = None

    @field_validator("suites")
    @classmethod
    def _known(cls, suites: tuple[str, ...]) -> tuple[str, ...]:
        if not suites:
            raise ValueError("name at least one suite (node)")
        unknown = [s for s in suites if s not in SUITES]
        if unknown:
            raise ValueError(f"unknown suite(s) {', '.join(unknown)}; suites are {', '.join(SUITES)}")
        return tuple(dict.fromkeys(suites))


class Reboot(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    nextstate: Literal["DOWN", "RESUME"] = "RESUME"
    wait_s: float = Field(default=1800.0, gt=0, allow_inf_nan=False)


class RepairSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    incidents: int = Field(default=3, ge=1)
    days: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    incomplete_retries: int = Field(default=1, ge=0)
    ladders: dict[str, LadderSteps] = Field(default_factory=lambda: dict(DEFAULT_LADDERS))
    classes: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_CLASSES))
    acceptance: Acceptance = Acceptance()
    reboot: Reboot = Reboot()

    @field_validator("ladders")
    @classmethod
    def _defaults_kept(cls, ladders: dict[str, LadderSteps]) -> dict[str, LadderSteps]:
        return {**DEFAULT_LADDERS, **ladders}  # a site's ladders replace the defaults by class

    @model_validator(mode="after")
    def _classes_have_ladders(self) -> RepairSettings:
        missing = sorted({c for c in self.classes.values() if c not in self.ladders})
        if missing:
            raise ValueError(f"classes name ladder(s) {', '.join(missing)} that ladders does not define")
        return self

    def ladder(self) -> Ladder:
        return Ladder(self.ladders, self.classes, self.incidents, self.days, self.incomplete_retries)


def settings_path() -> Path:
    from burnin.counters import state_dir

    configured = os.environ.get(CONFIG_ENV, "").strip()
    return Path(configured) if configured else state_dir() / SETTINGS_FILE


def load(path: Path | None = None) -> RepairSettings:
    """The settings in ``path`` (default :func:`settings_path`); the defaults when that file does not exist
    (unless it was named: then it must)."""
    from burnin.topology.load import load_yaml_document, validation_to_config_error

    named = path is not None or bool(os.environ.get(CONFIG_ENV, "").strip())
    path = path or settings_path()
    if not path.is_file():
        if named:
            raise ConfigError(str(path), "no such repair settings file")
        return RepairSettings()
    data, lines = load_yaml_document(path)
    if data is None:
        return RepairSettings()
    if not isinstance(data, dict):
        raise ConfigError(str(path), "repair settings must be a YAML mapping", line=1)
    try:
        return RepairSettings.model_validate(data)
    except ValidationError as exc:
        raise validation_to_config_error(path, exc, lines) from None

