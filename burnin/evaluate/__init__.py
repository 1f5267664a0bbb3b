"""Judging: measured facts against topology references → verdicts. Pure, no I/O."""

from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict

__all__ = ["Finding", "Status", "Unmeasurable", "Verdict"]
