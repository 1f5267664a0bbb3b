"""The watch's site settings file (``burnin watch --config FILE``, YAML): the stall detector's thresholds and policy.

```yaml
stall:
  enabled: true             # sample the GPUs and the compute HCAs' counters (default true)
  interval_s: 10            # one sample every 10 s
  after_s: 300              # GPUs busy at idle power and no IB traffic for 5 minutes: a stall
  utilisation_pct: 90       # a GPU is busy at >= 90% utilisation
  power_pct_of_limit: 20    # ... and near idle at <= 20% of its enforced power limit (140 W on an H100) ...
  power_w: null             # ... or at <= this many watts, when set (instead of the share)
  policy: alert             # alert (record, print, metric) or drain (through Slurm and the breaker)
```

Loading validates everything; a mistake is one line naming the file, the key and its line (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from burnin.errors import UsageError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StallSettings(_Model):
    enabled: bool = Field(default=True, strict=True)
    interval_s: float = Field(default=10.0, gt=0, le=3600)
    after_s: float = Field(default=300.0, gt=0, le=86400)
    utilisation_pct: float = Field(default=90.0, gt=0, le=100)
    power_pct_of_limit: float = Field(default=20.0, gt=0, lt=100)
    power_w: float | None = Field(default=None, gt=0, le=5000)
    policy: Literal["alert", "drain"] = "alert"

    @property
    def max_gap_s(self) -> float:
        """Samples further apart than this (the watch stopped, the host froze) start the watching again.

        Counters are cumulative: unchanged across a gap, they moved nothing in it; the gap only hides the GPUs'
        state. So a late sample (a loaded host) does not restart the watching; a stopped watch does.
        """
        return max(3 * self.interval_s, 60.0)

    def idle_power_w(self, limit_w: float | None) -> float | None:
        """The most a GPU with enforced limit ``limit_w`` may draw to count as idle (None: cannot tell)."""
        if self.power_w is not None:
            return self.power_w
        return None if limit_w is None or limit_w <= 0 else limit_w * self.power_pct_of_limit / 100

    def describe_power(self) -> str:
        return f"<= {self.power_w:g} W" if self.power_w is not None else f"<= {self.power_pct_of_limit:g}% of the limit"


class WatchSettings(_Model):
    stall: StallSettings = StallSettings()


def load_settings(path: Path | None) -> WatchSettings:
    """The defaults, or the site file's settings (a mistake names the file, the key and its line)."""
    if path is None:
        return WatchSettings()
    from burnin.errors import ConfigError
    from burnin.topology.load import load_yaml_document, validation_to_config_error

    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    data, lines = load_yaml_document(path)
    if data is not None and not isinstance(data, dict):
        raise ConfigError(str(path), "the watch's settings must be a YAML mapping (a 'stall' key)", line=1)
    try:
        return WatchSettings.model_validate(data or {})
    except ValidationError as exc:
        raise validation_to_config_error(path, exc, lines) from None
