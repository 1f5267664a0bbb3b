"""The stall detector as a state machine over samples (no clock), its settings file and its classification."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from burnin.errors import ConfigError, UsageError
from burnin.watch.events import Action, Kind, Policy, WatchEvent, classify
from burnin.watch.settings import StallSettings, load_settings
from burnin.watch.stall import GpuSample, Sample, Stall, StallDetector, StallEnded

SETTINGS = StallSettings(interval_s=10, after_s=60)  # a stall: 60 s; samples 10 s apart, 60 s at most
T0 = 1_800_000_000.0


def gpus(utilisation: float | None = 100, power: float | None = 70, processes: int | None = 1,
         count: int = 8) -> tuple[GpuSample, ...]:
    return tuple(GpuSample(i, utilisation, power, 700.0, 1980, processes) for i in range(count))


STALLED = gpus()
WORKING = gpus(power=620)
NO_JOB = gpus(utilisation=0, processes=0)


def sample(at: float, state: tuple[GpuSample, ...] = STALLED, counter: int | None = 5) -> Sample:
    counters = None if counter is None else (("mlx5_0/1/port_xmit_data", counter),)
    return Sample(at, state, counters)


def run(detector: StallDetector, samples: list[Sample]) -> list[Stall | StallEnded]:
    return [r for r in (detector.feed(s) for s in samples) if r is not None]


def test_a_stall_is_found_once_the_counters_have_been_frozen_for_the_configured_time() -> None:
    detector = StallDetector(SETTINGS)
    moving = [sample(T0 + 10 * i, counter=i) for i in range(3)]  # traffic until T0 + 20
    frozen = [sample(T0 + 30 + 10 * i, counter=2) for i in range(7)]  # T0 + 30 .. T0 + 90
    results = run(detector, moving + frozen)
    assert len(results) == 1 and isinstance(results[0], Stall)
    stall = results[0]
    assert stall.at == T0 + 80  # 60 s after the last change (seen at T0 + 20): not a sample earlier
    assert (stall.counters_changed_after, stall.counters_changed_at) == (T0 + 10, T0 + 20)
    assert stall.since == T0 + 20 and stall.watched_since == T0
    assert [g.index for g in stall.gpus] == list(range(8))
    assert "8 GPUs at 100% utilisation and idle power (<= 70 W), no IB traffic for 60 s" in stall.describe()


def test_traffic_again_ends_the_stall_and_a_new_one_is_found_later() -> None:
    detector = StallDetector(SETTINGS)
    first = run(detector, [sample(T0 + 10 * i) for i in range(7)])
    assert [type(r) for r in first] == [Stall]
    ended = detector.feed(sample(T0 + 70, counter=6))
    assert isinstance(ended, StallEnded) and ended.why == "IB traffic again"
    later = run(detector, [sample(T0 + 80 + 10 * i, counter=6) for i in range(6)])
    assert [type(r) for r in later] == [Stall] and isinstance(later[0], Stall) and later[0].since == T0 + 70


@pytest.mark.parametrize(("state", "why"), [
    (NO_JOB, "no job: no GPU lists a compute process, none is busy"),
    (WORKING, "a healthy job: busy GPUs at working power"),
    (gpus(utilisation=40), "a job at low utilisation (waiting on I/O)"),
    (gpus(power=None), "power unreadable: not proven idle"),
    (gpus(utilisation=None), "utilisation unreadable"),
    (gpus(processes=0), "GPUs busy with no compute process listed: not a job"),
    (gpus()[:7] + gpus(power=620)[7:], "one busy GPU still working"),
])
def test_nothing_is_flagged(state: tuple[GpuSample, ...], why: str) -> None:
    detector = StallDetector(SETTINGS)
    assert run(detector, [sample(T0 + 10 * i, state) for i in range(20)]) == [], why


def test_no_process_listing_anywhere_falls_back_to_utilisation() -> None:
    detector = StallDetector(SETTINGS)
    assert [type(r) for r in run(detector, [sample(T0 + 10 * i, gpus(processes=None)) for i in range(7)])] == [Stall]
    assert detector.observe(sample(T0, gpus(utilisation=0, processes=None))).job is False


def test_unreadable_counters_prove_nothing_and_restart_the_clock_when_readable_again() -> None:
    detector = StallDetector(SETTINGS)
    samples = [sample(T0 + 10 * i, counter=None if i == 4 else 5) for i in range(12)]
    results = run(detector, samples)
    assert [r.at for r in results if isinstance(r, Stall)] == [T0 + 110]  # 60 s from the first readable again


def test_a_gap_in_the_samples_starts_the_watching_again() -> None:
    detector = StallDetector(SETTINGS)
    assert run(detector, [sample(T0), sample(T0 + 10), sample(T0 + 200)]) == []  # 190 s without a sample
    assert detector.watched_since == T0 + 200
    assert run(detector, [sample(T0 + 200 + 10 * i) for i in range(1, 7)])[0].at == T0 + 260
    assert isinstance(detector.feed(sample(T0 + 100)), StallEnded)  # time going back: a gap too


# ------------------------------------------------------------------ properties

STATES = st.sampled_from([STALLED, WORKING, NO_JOB, gpus(power=None)])


@st.composite
def histories(draw: st.DrawFn) -> list[Sample]:
    """Samples 1 to 80 s apart (sometimes a gap), each in a drawn GPU state, counters moving or not."""
    at, counter, samples = T0, 0, []
    for _ in range(draw(st.integers(1, 60))):
        at += draw(st.floats(1, 80))
        counter += draw(st.sampled_from([0, 0, 0, 1]))
        samples.append(sample(at, draw(STATES), draw(st.sampled_from([counter, counter, None]))))
    return samples


@given(histories())
def test_a_stall_is_only_ever_found_after_the_configured_time_of_stalled_samples(samples: list[Sample]) -> None:
    detector = StallDetector(SETTINGS)
    found = 0
    for index, current in enumerate(samples):
        result = detector.feed(current)
        if isinstance(result, Stall):
            found += 1
            window = [s for s in samples[:index + 1] if s.at >= result.since]
            assert current.at - result.since >= SETTINGS.after_s
            assert all(s.gpus == STALLED and s.counters == current.counters for s in window)
            assert all(b.at - a.at <= SETTINGS.max_gap_s for a, b in itertools.pairwise(window))
    assert found == detector.stalls


@given(histories())
def test_one_stall_is_reported_once_and_ends_before_the_next(samples: list[Sample]) -> None:
    detector = StallDetector(SETTINGS)
    open_stall = False
    for current in samples:
        result = detector.feed(current)
        if isinstance(result, Stall):
            assert not open_stall
            open_stall = True
        elif isinstance(result, StallEnded):
            assert open_stall
            open_stall = False
    assert open_stall == (detector.stall is not None)


@given(st.lists(st.floats(1, 20), min_size=1, max_size=40))
def test_regular_samples_of_a_stall_find_it_within_one_interval_of_the_configured_time(steps: list[float]) -> None:
    detector = StallDetector(StallSettings(interval_s=20, after_s=60))
    at, found = T0, detector.feed(sample(T0))
    for step in steps * 60:
        at += step
        result = detector.feed(sample(at))
        if isinstance(result, Stall):
            found = result
            break
    assert found is not None and T0 + 60 <= found.at <= T0 + 60 + max(steps)


@given(histories())
def test_without_a_job_nothing_is_ever_flagged(samples: list[Sample]) -> None:
    detector = StallDetector(SETTINGS)
    assert all(detector.feed(Sample(s.at, NO_JOB, s.counters)) is None for s in samples)


# ------------------------------------------------------------------ settings and policy


def test_settings_default_to_alert_and_a_mistake_names_file_key_and_line(tmp_path: Path) -> None:
    assert load_settings(None).stall == StallSettings() and StallSettings().policy == "alert"
    good = tmp_path / "watch.yaml"
    good.write_text("stall:\n  after_s: 120\n  policy: drain\n  power_w: 150\n")
    stall = load_settings(good).stall
    assert (stall.after_s, stall.policy, stall.idle_power_w(700.0), stall.max_gap_s) == (120, "drain", 150, 60)
    assert StallSettings().idle_power_w(700.0) == 140 and StallSettings().idle_power_w(None) is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("stall:\n  after_s: 120\n  policy: evict\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: stall.policy: .*'alert' or 'drain'"):
        load_settings(bad)
    bad.write_text("stall:\n  after: 120\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:2: stall.after"):
        load_settings(bad)
    bad.write_text("- stall\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_settings(bad)
    with pytest.raises(UsageError, match="no such file"):
        load_settings(tmp_path / "missing.yaml")


def test_a_stall_alerts_by_default_and_drains_by_policy_as_check_nccl_05() -> None:
    event = WatchEvent("sampler", Kind.STALL, "", None, "collective stalled: ...", T0, details={"since": T0 - 60})
    alert = classify(event)
    assert (alert.action, alert.check_id) == (Action.RECORD, "NCCL-05")
    assert alert.key == ("NCCL-05", "stall", "", str(T0 - 60))  # one incident per stall
    drain = classify(event, Policy(stall=Action.DRAIN))
    assert drain.action is Action.DRAIN and drain.reason() == "burnin: NCCL-05 collective stalled: ..."
    ended = WatchEvent("sampler", Kind.STALL_ENDED, "", None, "stall over", T0, details={"since": T0 - 60})
    assert classify(ended, Policy(stall=Action.DRAIN)).action is Action.RECORD


def test_the_boundaries_idle_power_at_the_threshold_and_a_gap_at_its_limit() -> None:
    at_threshold = StallDetector(StallSettings(interval_s=10, after_s=60))  # idle: <= 20% of 700 W = 140 W
    assert [type(r) for r in run(at_threshold, [sample(T0 + 10 * i, gpus(power=140)) for i in range(7)])] == [Stall]
    above = StallDetector(StallSettings(interval_s=10, after_s=60))
    assert run(above, [sample(T0 + 10 * i, gpus(power=140.5)) for i in range(7)]) == []
    spaced = StallDetector(SETTINGS)  # samples exactly max_gap_s (60 s) apart: still one unbroken watching
    assert [r.at for r in run(spaced, [sample(T0 + 60 * i) for i in range(3)])] == [T0 + 60]
    again = StallDetector(SETTINGS)  # a sample at the time of the last one: the clock did not move, start again
    run(again, [sample(T0), sample(T0 + 10)])
    again.feed(sample(T0 + 10))
    assert again.watched_since == T0 + 10


@pytest.mark.parametrize(("after", "why"), [
    (sample(T0 + 70, NO_JOB), "no job on the node any more"),
    (sample(T0 + 70, WORKING), "the GPUs are working (or idle) again"),
    (sample(T0 + 70, counter=None), "the counters could not be read (unreadable)"),
    (sample(T0 + 70, counter=6), "IB traffic again"),
    (sample(T0 + 500), "the samples broke off (the watch was not sampling)"),
])
def test_a_stall_ends_with_its_reason(after: Sample, why: str) -> None:
    detector = StallDetector(SETTINGS)
    assert [type(r) for r in run(detector, [sample(T0 + 10 * i) for i in range(7)])] == [Stall]
    ended = detector.feed(after)
    assert isinstance(ended, StallEnded) and ended.why == why and detector.stall is None


def test_one_gpu_with_a_process_is_a_job_and_busy_means_at_the_threshold_or_above() -> None:
    mixed = tuple(GpuSample(i, 90.0, 70.0, 700.0, 1980, 1 if i == 0 else 0) for i in range(8))
    detector = StallDetector(SETTINGS)  # utilisation_pct 90: exactly 90 is busy
    results = run(detector, [sample(T0 + 10 * i, mixed) for i in range(7)])
    assert [type(r) for r in results] == [Stall]
    assert isinstance(results[0], Stall) and "8 GPUs at 90% utilisation" in results[0].describe()
    few = StallDetector(SETTINGS)
    (stall,) = run(few, [sample(T0 + 10 * i, gpus(count=3)) for i in range(7)])
    assert isinstance(stall, Stall) and "stalled: gpu0,gpu1,gpu2 at 100%" in stall.describe()
    four = StallDetector(SETTINGS)
    (stall,) = run(four, [sample(T0 + 10 * i, gpus(count=4)) for i in range(7)])
    assert isinstance(stall, Stall) and "stalled: 4 GPUs at" in stall.describe()
