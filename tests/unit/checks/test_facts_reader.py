"""Facts have one typed reader (burnin.facts): every reader sees the same value, or the same absence of one.

The checks measure a reading (the value inside what the hardware can show, or
incomplete), the report, metrics.prom, a soak's samples and the probe's baseline
read it (the value, or nothing). A value that is no measurement (absent, NaN,
text where a number belongs, an entry that is no object) is never a pass and
never a number shown as if it were one, whichever reader meets it.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import pytest
from checks_support import COMPUTE_HCAS, INCOMPLETE, NODE, TOPOLOGY, assert_status, gpu, judge, port

from burnin import counters
from burnin.checks import load_all
from burnin.evaluate.verdict import Unmeasurable
from burnin.facts import Facts, GpuFacts
from burnin.facts import gpu as gpu_readings
from burnin.facts.values import Count, Flag, Number, Reading
from burnin.report.metrics import exposition
from burnin.report.node_facts import summarize
from burnin.soak.signals import read_sample

Doc = dict[str, Any]
REPO = Path(__file__).resolve().parents[3]

READINGS: dict[str, Reading[object]] = {name: value for name, value in vars(gpu_readings).items()
                                        if isinstance(value, Reading)}
# What no reading accepts, whatever its kind; then what a kind refuses besides.
NO_VALUE: list[object] = [None, "12", math.nan, math.inf, -math.inf, [1], {"value": 1}]
REFUSED_BY: dict[type, list[object]] = {Count: [True, 2.5, -1], Number: [True, False], Flag: [1, 0, "true"]}


def _gpu_with(reading: Reading[object], value: object) -> GpuFacts:
    entry: dict[str, Any] = {"index": 0, "errors": {}}
    *parents, last = reading.path
    where = entry
    for key in parents:
        where = where.setdefault(key, {})
    where[last] = value
    return GpuFacts(entry)


@pytest.mark.parametrize("name", sorted(READINGS))
def test_a_value_that_is_no_reading_reads_as_none_and_measures_as_unmeasurable(name: str) -> None:
    reading = READINGS[name]
    for value in [*NO_VALUE, *REFUSED_BY[type(reading)]]:
        facts = _gpu_with(reading, value)
        assert facts.read(reading) is None, (name, value)
        with pytest.raises(Unmeasurable) as refused:
            facts.measured(reading, "gpu0")
        assert reading.what in refused.value.reason or "not reported" in refused.value.reason, refused.value.reason
    if isinstance(reading, Count | Number):  # read is the value as sent; measured, what the hardware can show
        beyond = _gpu_with(reading, int(reading.valid.hi) + 1)
        assert beyond.read(reading) == reading.valid.hi + 1
        with pytest.raises(Unmeasurable, match="outside its physical range"):
            beyond.measured(reading, "gpu0")


def test_every_gpu_reading_names_a_path_the_collector_writes(healthy_facts: Doc) -> None:
    """The readings are the collector's own paths: on a healthy node each one is there and measures."""
    healthy = GpuFacts(healthy_facts["nvml"]["gpus"][0])
    for name, reading in READINGS.items():
        assert healthy.read(reading) is not None, name
        healthy.measured(reading, "gpu0")


def _readers(data: Doc) -> tuple[Any, str, Any, Any]:
    """(the check facts, metrics.prom, the report's node summary, a soak sample) of one document."""
    return (Facts(NODE, data), exposition({"nodes": {}}, [], {NODE: data}), summarize(NODE, data),
            read_sample(Facts(NODE, data), t=0.0, stage="", attempt=0))


@pytest.mark.parametrize("value", [math.nan, "hot", None, True, [61]], ids=repr)
def test_a_temperature_that_is_no_number_is_unmeasured_by_every_reader(facts: Doc, value: object) -> None:
    temperatures = [g["temperature_c"] for g in facts["nvml"]["gpus"]]
    gpu(facts, 3)["temperature_c"] = value
    index = gpu(facts, 3)["index"]
    node, metrics, summary, sample = _readers(facts)
    assert_status(judge("GPU-06", facts), INCOMPLETE, "gpu3")
    assert f'burnin_gpu_temperature_celsius{{node="{NODE}",gpu="{index}"}}' not in metrics
    others = [t for i, t in enumerate(temperatures) if i != index]
    assert summary.readings["gpu.temperature_max"] == max(others)
    assert sample.gpus[index].temperature_c is None
    assert [g.temperature_c for g in sample.gpus if g.index != index] == others
    assert node.gpus()[index].read(gpu_readings.TEMPERATURE) is None


@pytest.mark.parametrize("value", [math.nan, "7", -1, 2.5, None], ids=repr)
def test_an_ib_counter_that_is_no_count_is_unmeasured_by_every_reader(facts: Doc, value: object) -> None:
    hca = COMPUTE_HCAS[-1]
    port(facts, hca)["counters"]["symbol_error"] = value
    _, metrics, summary, sample = _readers(facts)
    assert_status(judge("IB-04", facts), INCOMPLETE, hca)
    assert f'hca="{hca}",port="1",counter="symbol_error"' not in metrics
    assert f'hca="{COMPUTE_HCAS[0]}",port="1",counter="symbol_error"' in metrics
    assert "symbol_error" not in sample.ib[hca] and sample.ib[COMPUTE_HCAS[0]]["symbol_error"] == 0
    assert summary.readings["ib.error_counter_max"] == 0


@pytest.mark.parametrize("source", ["nvml", "infiniband", "pci", "numa", "kernel", "host", "pci-census"])
@pytest.mark.parametrize("garbage", [["a", "list"], "text", 7], ids=repr)
def test_a_source_section_that_is_no_object_makes_its_checks_incomplete(healthy_facts: Doc, source: str,
                                                                         garbage: object) -> None:
    data = copy.deepcopy(healthy_facts)
    data[source.replace("-", "_")] = garbage
    facts = Facts(NODE, data)
    readers = [spec for spec in load_all().values() if source in spec.sources]
    assert readers, source
    for spec in readers:
        verdict = spec.func(facts, TOPOLOGY)
        assert verdict.status is INCOMPLETE, (spec.check_id, verdict.reason)


def test_entries_that_are_no_objects_are_skipped_by_every_reader(facts: Doc) -> None:
    """A GPU, link, HCA or port entry that is no object: the readers show the rest, none of them fails."""
    facts["nvml"]["gpus"][0]["nvlink"][5] = "link 5"
    facts["nvml"]["gpus"].append(5)
    facts["infiniband"]["hcas"]["mlx5_99"] = "gone"
    facts["infiniband"]["hcas"][COMPUTE_HCAS[0]]["ports"]["2"] = 3
    node, metrics, summary, sample = _readers(facts)
    assert [g.index for g in node.gpus_reported()] == list(range(8))
    assert 'burnin_gpu_nvlink_links_active{node="sim01",gpu="0"} 17' in metrics
    assert 'counter="replay"} 0' in metrics and 'gpu="0",counter="replay"' not in metrics
    assert summary.readings["gpu.nvlink_active_min"] == 17 and len(sample.gpus) == 8
    assert sample.gpus[0].nvlink_replay is None and sample.gpus[1].nvlink_replay == 0
    assert "mlx5_99" not in sample.ib and "mlx5_99" not in metrics
    baseline = counters.extract(facts)
    assert set(baseline["ib"]) == {h.name for h in TOPOLOGY.hcas} and len(baseline["nvlink"]["0000:1b:00.0"]) == 17
    readers = _readers({"nvml": "text", "infiniband": [1], "sources": [], "commands": "none"})
    assert "burnin_gpu_" not in readers[1] and "burnin_ib_" not in readers[1]
    assert readers[2].readings == {} and readers[3].gpus == () and readers[3].ib == {}


# The reader modules the issue named, and the helpers beside them: none walks from the document's root
# into its records (GPU entries, HCA ports, counters, source states) or reaches past Facts into .data.
READERS = ("burnin/checks/gpu.py", "burnin/checks/base.py", "burnin/checks/infiniband.py", "burnin/soak/signals.py",
           "burnin/report/metrics.py", "burnin/report/node_facts.py")
RECORD_KEYS = ("nvml", "infiniband", "hcas", "ports", "counters", "ecc_errors", "remapped_rows", "temperature_c",
               "temperature_thresholds", "power", "pcie", "nvlink", "sources", "commands", "counter_baseline")
WALK = re.compile(r'(?:\.get\(|\[)\s*"(' + "|".join(RECORD_KEYS) + r')"|\.data\b')


@pytest.mark.parametrize("module", READERS)
def test_a_reader_walks_the_document_only_through_burnin_facts(module: str) -> None:
    source = (REPO / module).read_text(encoding="utf-8")
    walks = [f"{module}:{source.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in WALK.finditer(source)]
    assert not walks, "read these through burnin.facts (GpuFacts, HcaFacts, Facts' accessors): " + "; ".join(walks)
