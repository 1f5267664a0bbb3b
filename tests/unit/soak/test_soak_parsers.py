"""The soak's tool parsers: nvidia-smi dmon on the real H100 sample, gpu_burn, STREAM, stress-ng, nvme."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnin.errors import ParseError
from burnin.parsers import parse
from burnin.parsers.dmon import parse_dmon
from burnin.parsers.gpu_burn import parse_gpu_burn
from burnin.parsers.nvme import parse_nvme_list, parse_smart_log
from burnin.parsers.stream import parse_stream, parse_stress_ng

REPO = Path(__file__).resolve().parents[3]
DMON_SAMPLE = REPO.parent / "shared" / "reference-pending" / "nvidia-smi" / "dmon-s-pucm-d2-h100-kelvin2-single-gpu.txt"


@pytest.fixture
def dmon_text() -> str:
    if not DMON_SAMPLE.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"real dmon sample missing: {DMON_SAMPLE}")
        pytest.skip("../shared not present")
    return DMON_SAMPLE.read_text(encoding="utf-8")


def test_dmon_real_h100_sample(dmon_text: str) -> None:
    report = parse("nvidia-smi-dmon", dmon_text)
    assert isinstance(report, type(parse_dmon(dmon_text)))
    assert report.columns == ("pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk",
                              "fb", "bar1", "ccpm")
    assert report.units["pwr"] == "W" and report.units["gtemp"] == "C" and report.units["pclk"] == "MHz"
    assert len(report.samples) == 18
    first, last = report.samples[0], report.samples[-1]
    assert (first.gpu, first.value("pwr"), first.value("gtemp"), first.value("mtemp")) == (0, 147, 47, 54)
    assert (last.value("pwr"), last.value("sm"), last.value("pclk"), last.value("mclk")) == (141, 44, 1980, 2619)
    assert max(s.value("gtemp") or 0 for s in report.samples) == 48
    assert report.latest()[0] is last


def test_dmon_dashes_dates_and_repeated_headers() -> None:
    text = ("#Date       Time        gpu    pwr  gtemp  mtemp\n"
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C\n"
            " 20240101   10:00:00      0    700     61      -\n"
            " 20240101   10:00:00      1    698     63     70\n"
            "#Date       Time        gpu    pwr  gtemp  mtemp\n"
            "#YYYYMMDD   HH:MM:SS    Idx      W      C      C\n"
            " 20240101   10:00:01      0    701     62     71\n")
    report = parse_dmon(text)
    assert report.columns == ("pwr", "gtemp", "mtemp")
    assert report.samples[0].value("mtemp") is None
    assert report.samples[0].stamp == "20240101 10:00:00"
    assert report.latest()[0].value("gtemp") == 62


@pytest.mark.parametrize("text", ["    0    147     47\n", "# gpu pwr\n# Idx W\n 0 1 2\n", "# gpu pwr\n x 1\n"])
def test_dmon_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ParseError):
        parse_dmon(text)


GPU_BURN = """Using compare file: compare.ptx
Burning for 600 seconds.
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)
Initialized device 0 with 81079 MB of memory (80484 MB available, using 72436 MB of it), using FLOATS
Initialized device 1 with 81079 MB of memory (80484 MB available, using 72436 MB of it), using FLOATS
10.0%  proc'd: 3472 (51234 Gflop/s) - 3400 (50012 Gflop/s)   errors: 0 - 0   temps: 55 C - 57 C \r\
20.0%  proc'd: 6944 (51301 Gflop/s) - 6800 (50100.5 Gflop/s)   errors: 0 - 12  (WARNING!)  temps: 56 C - -- \n\
\tSummary at:   Thu Mar 10 19:21:17 UTC 2022

100.0%  proc'd: 34720 (51280 Gflop/s) - -1 (0 Gflop/s)   errors: 0 - -524288000  (DIED!)  temps: 58 C - 60 C
Killing processes with SIGTERM (soft kill)
done

Tested 2 GPUs:
\tGPU 0: OK
\tGPU 1: FAULTY
"""


def test_gpu_burn_progress_errors_and_verdicts() -> None:
    report = parse_gpu_burn(GPU_BURN)
    assert [d.index for d in report.devices] == [0, 1] and report.devices[1].uuid == "GPU-bbbb"
    assert (report.seconds, report.precision, report.tested, report.finished) == (600, "FLOATS", 2, True)
    assert [p.percent for p in report.progress] == [10.0, 20.0, 100.0]
    assert report.progress[1].gflops == (51301.0, 50100.5)
    assert report.progress[1].errors == (0, 12) and report.progress[1].faults == (None, "WARNING")
    assert report.progress[1].temps == (56, None)
    assert report.progress[2].processed == (34720, -1) and report.progress[2].faults == (None, "DIED")
    assert report.verdicts == {0: "OK", 1: "FAULTY"}


def test_gpu_burn_live_log_has_no_verdict_yet() -> None:
    report = parse_gpu_burn("GPU 0: X (UUID: GPU-1)\n50.0%  proc'd: 1 (2085 Gflop/s)   errors: 0   temps: 64 C \n")
    assert not report.finished and report.progress[0].gflops == (2085.0,)
    glued = ("10.0%  proc'd: 1 (7 Gflop/s)   errors: 0   temps: 38 C "
             "20.0%  proc'd: 2 (8 Gflop/s)   errors: 1   temps: 39 C")
    assert [p.gflops for p in parse_gpu_burn(glued).progress] == [(7.0,), (8.0,)]


@pytest.mark.parametrize("text", ["", "hello\n",
                                  "50.0%  proc'd: 1 (2 Gflop/s) - 2 (3 Gflop/s)   errors: 0   temps: 1 C\n"])
def test_gpu_burn_refuses_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_gpu_burn(text)


STREAM = """-------------------------------------------------------------
STREAM version $Revision: 5.10 $
-------------------------------------------------------------
Array size = 400000000 (elements), Offset = 0 (elements)
Number of Threads requested = 56
Number of Threads counted = 56
-------------------------------------------------------------
Function    Best Rate MB/s  Avg time     Min time     Max time
Copy:          301234.5     0.021300     0.021247     0.021400
Scale:         299876.1     0.021400     0.021342     0.021500
Add:           321000.0     0.030000     0.029907     0.030100
Triad:         322500.7     0.029900     0.029767     0.030050
-------------------------------------------------------------
Solution Validates: avg error less than 1.000000e-13 on all three arrays
-------------------------------------------------------------
"""


def test_stream_rows_and_validation() -> None:
    report = parse_stream(STREAM)
    assert (report.version, report.array_elements, report.threads, report.validates) == ("5.10", 400000000, 56, True)
    assert report.triad_gbs == pytest.approx(322.5007)
    assert report.kernels["Copy"].min_s == pytest.approx(0.021247)
    failed = parse_stream(STREAM.replace("Solution Validates: avg error less than 1.000000e-13 on all three arrays",
                                         "Failed Validation on array c[]"))
    assert failed.validates is False
    with pytest.raises(ParseError):
        parse_stream("STREAM version $Revision: 5.10 $\n")


STRESS_OLD = """stress-ng: info:  [2001] dispatching hogs: 112 cpu, 4 vm
stress-ng: info:  [2001] successful run completed in 600.02s (10 mins, 0.02 secs)
stress-ng: info:  [2001] stressor       bogo ops real time  usr time  sys time   bogo ops/s   bogo ops/s
stress-ng: info:  [2001]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: info:  [2001] cpu            9876543    600.00  66000.00      1.00     16460.90       149.64
stress-ng: info:  [2001] vm             1234567    600.01   2300.00     80.00      2057.57       518.72
"""
STRESS_NEW_FAIL = """stress-ng: info:  [3001] setting to a 600 secs run per stressor
stress-ng: fail:  [3007] vm: detected 1 bit errors while stressing memory
stress-ng: metrc: [3001] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [3001] vm             1234567    600.01   2300.00     80.00      2057.57       518.72
stress-ng: info:  [3001] passed: 112: cpu (112)
stress-ng: info:  [3001] failed: 1: vm (1)
"""


def test_stress_ng_both_generations() -> None:
    old = parse_stress_ng(STRESS_OLD)
    assert old.ok is True and old.outcome == "successful"
    assert [(m.stressor, m.bogo_ops) for m in old.metrics] == [("cpu", 9876543), ("vm", 1234567)]
    assert old.metrics[0].ops_per_s == pytest.approx(16460.90)
    new = parse_stress_ng(STRESS_NEW_FAIL)
    assert new.ok is False and new.counts == {"passed": 112, "failed": 1}
    assert new.failures == ("vm: detected 1 bit errors while stressing memory",)
    assert parse_stress_ng("stress-ng: info:  [1] dispatching hogs: 1 cpu\n").ok is None
    with pytest.raises(ParseError):
        parse_stress_ng("stress-ng: command not found\n")


def test_nvme_smart_log_and_list() -> None:
    smart = parse_smart_log('{"critical_warning" : 0, "temperature" : 309, "avail_spare" : 100, '
                            '"spare_thresh" : 10, "percent_used" : 1, "media_errors" : 0, "num_err_log_entries" : 3}')
    assert (smart.critical_warning, smart.media_errors, smart.error_log_entries, smart.percent_used) == (0, 0, 3, 1)
    assert smart.temperature_c == pytest.approx(35.85)
    assert parse_smart_log('{"critical_warning": {"value": 4}, "media_errors": 2}').critical_warning == 4
    assert parse_nvme_list('{"Devices": [{"DevicePath": "/dev/nvme0n1"}, {"DevicePath": "/dev/nvme1n1"}]}') == (
        "/dev/nvme0n1", "/dev/nvme1n1")
    verbose = ('{"Devices": [{"HostNQN": "x", "Subsystems": [{"Controllers": [{"Controller": "nvme0"}, '
               '{"Controller": "nvme1"}]}]}]}')
    assert parse_nvme_list(verbose) == ("/dev/nvme0", "/dev/nvme1")
    for bad in ("", "{}", "not json", '{"Devices": 3}'):
        with pytest.raises(ParseError):
            parse_nvme_list(bad) if "Devices" in bad or bad in ("", "not json") else parse_smart_log(bad)
