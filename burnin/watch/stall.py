"""The stall detector: a pure state machine over samples of the GPUs and the compute HCAs' traffic counters.

A collective that stops progressing (a flapping link, a stuck rank) leaves the job running with no error
anywhere; the tell is GPUs "100% utilised" (a spinning NCCL kernel) at near-idle power while the compute
HCAs move no bytes. :class:`StallDetector` is fed one :class:`Sample` at a time (the daemon's sampling loop
gives each its time; no clock is read here) and answers a :class:`Stall` once such a state has lasted
``after_s`` seconds, and :class:`StallEnded` when it ends.

A job runs on the node when any GPU lists a compute process; where NVML cannot list processes on any GPU
(``None``: containers, old drivers), when any GPU is busy. A stall needs, on consecutive samples for
``after_s`` seconds:

- a job, at least one busy GPU (utilisation >= the threshold), and every busy GPU near idle power;
- the compute HCAs' traffic counters unchanged.

Fail closed, never blame: a reading NVML or sysfs could not give (``None``) proves nothing, so the state is
not a stall; samples further apart than ``max_gap_s`` (the watch stopped, the host froze) start the watching
again (what happened in the gap is unknown). The time of the last counter change seen (and the sample before
it: the change happened in between) is kept for ``burnin stalls``, which names the node whose counters
stopped first across nodes; ``None`` when the counters never moved while watched.
"""

from __future__ import annotations

from dataclasses import dataclass

from burnin.watch.settings import StallSettings


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    utilisation_pct: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None = None
    processes: int | None = None  # compute processes; None: NVML could not list them


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    gpus: tuple[GpuSample, ...]
    counters: tuple[tuple[str, int], ...] | None  # (counter, value) of the compute HCAs; None: unreadable
    why_not: str = ""  # what could not be read


@dataclass(frozen=True, slots=True)
class Observation:
    """What one sample shows: a job, and the busy GPUs near idle power (the GPUs' half of a stall)."""

    job: bool
    quiet: tuple[int, ...]  # busy GPUs near idle power, when every busy GPU is; else ()
    busy: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Stall:
    at: float  # the sample that found it
    since: float  # when the stall began (GPUs quiet and counters unchanged from then on)
    counters_changed_at: float | None  # the sample that last saw the counters change; None: never, while watched
    counters_changed_after: float | None  # the sample before it: the change happened in between
    watched_since: float  # the first sample of this unbroken watching
    gpus: tuple[GpuSample, ...]  # the busy GPUs near idle power

    def describe(self) -> str:
        names = ",".join(f"gpu{g.index}" for g in self.gpus) if len(self.gpus) <= 3 else f"{len(self.gpus)} GPUs"
        utilisation = [g.utilisation_pct for g in self.gpus if g.utilisation_pct is not None]
        power = [g.power_w for g in self.gpus if g.power_w is not None]
        lowest = f"{min(utilisation):.0f}" if utilisation else "?"
        most = f"{max(power):.0f}" if power else "?"
        return (f"collective stalled: {names} at {lowest}% utilisation and idle power (<= {most} W), "
                f"no IB traffic for {self.at - self.since:.0f} s")


@dataclass(frozen=True, slots=True)
class StallEnded:
    at: float
    stall: Stall
    why: str


class StallDetector:
    def __init__(self, settings: StallSettings) -> None:
        self.settings = settings
        self.samples = 0
        self.stalls = 0
        self.last_at: float | None = None
        self.watched_since: float | None = None
        self.last_observation: Observation | None = None
        self._counters: tuple[tuple[str, int], ...] | None = None
        self._quiet_since: float | None = None  # the GPUs' half of a stall, held since
        self._unchanged_since: float | None = None  # counters known unchanged since (None: unreadable now)
        self.counters_changed_at: float | None = None
        self.counters_changed_after: float | None = None
        self.stall: Stall | None = None

    def observe(self, sample: Sample) -> Observation:
        """A job on the node, and the GPUs' half of a stall (pure: this sample alone)."""
        settings = self.settings
        listed = [g.processes for g in sample.gpus if g.processes is not None]
        busy = tuple(g.index for g in sample.gpus
                     if g.utilisation_pct is not None and g.utilisation_pct >= settings.utilisation_pct)
        job = any(count > 0 for count in listed) if listed else bool(busy)
        if not job or not busy:
            return Observation(job, (), busy)
        for gpu in sample.gpus:
            if gpu.utilisation_pct is None:
                return Observation(job, (), busy)  # a GPU that could be busy and working: cannot tell
            if gpu.index not in busy:
                continue
            idle = settings.idle_power_w(gpu.power_limit_w)
            if gpu.power_w is None or idle is None or gpu.power_w > idle:
                return Observation(job, (), busy)  # working (or unknown): not a stall
        return Observation(job, busy, busy)

    def feed(self, sample: Sample) -> Stall | StallEnded | None:
        """Take one sample; a Stall when one is found, StallEnded when the one found is over, else None."""
        self.samples += 1
        at = sample.at
        gap = self.last_at is None or at <= self.last_at or at - self.last_at > self.settings.max_gap_s
        previous_at = self.last_at
        self.last_at = at
        observation = self.observe(sample)
        self.last_observation = observation
        ended: StallEnded | None = None
        if gap:
            if self.stall is not None:
                ended = StallEnded(at, self.stall, "the samples broke off (the watch was not sampling)")
                self.stall = None
            self.watched_since = at
            self.counters_changed_at = self.counters_changed_after = None
            self._unchanged_since = at if sample.counters is not None else None
            self._quiet_since = at if observation.quiet else None
            self._counters = sample.counters
            return ended
        if sample.counters is None:
            self._unchanged_since = None
        elif self._counters is None:
            self._unchanged_since = at  # readable again: unchanged from now on, as far as anyone knows
        elif sample.counters != self._counters:
            self._unchanged_since = at
            self.counters_changed_at, self.counters_changed_after = at, previous_at
        self._counters = sample.counters
        self._quiet_since = (self._quiet_since or at) if observation.quiet else None
        if self.stall is not None:
            if self._quiet_since is None or self._unchanged_since is None or self._unchanged_since > self.stall.since:
                why = self._why_ended(sample, observation)
                ended, self.stall = StallEnded(at, self.stall, why), None
            return ended
        if self._quiet_since is None or self._unchanged_since is None:
            return None
        since = max(self._quiet_since, self._unchanged_since)
        if at - since < self.settings.after_s:
            return None
        assert self.watched_since is not None
        quiet = tuple(g for g in sample.gpus if g.index in observation.quiet)
        self.stall = Stall(at, since, self.counters_changed_at, self.counters_changed_after, self.watched_since, quiet)
        self.stalls += 1
        return self.stall

    def _why_ended(self, sample: Sample, observation: Observation) -> str:
        if sample.counters is None:
            return f"the counters could not be read ({sample.why_not or 'unreadable'})"
        if self._unchanged_since == sample.at:
            return "IB traffic again"
        if not observation.job:
            return "no job on the node any more"
        return "the GPUs are working (or idle) again"
