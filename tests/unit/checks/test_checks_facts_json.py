"""A node's facts JSON with NaN or infinities is refused; counter baselines never hide new errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from checks_support import FAIL, INCOMPLETE, PASS, TOPOLOGY, gpu, judge, port

from burnin import counters
from burnin.checks import load_all
from burnin.facts import Facts, NonFiniteNumber, loads_facts
from burnin.facts.gpu import TEMPERATURE
from burnin.launch.gather import facts_from_result
from burnin.transport.base import CommandResult

FactsDoc = dict[str, Any]


def _result(stdout: str) -> CommandResult:
    return CommandResult(node="sim01", argv=("python3", "-"), exit_status=0, stdout=stdout, stderr="",
                         duration_s=0.1)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_collector_output_with_a_non_finite_number_is_refused(healthy_facts: FactsDoc, constant: str) -> None:
    text = json.dumps(healthy_facts).replace('"temperature_c": 36', f'"temperature_c": {constant}', 1)
    assert constant in text
    facts = facts_from_result(_result(text))
    assert facts.unreachable is not None and constant in facts.unreachable
    for check_id in ("GPU-06", "GPU-01", "IB-04"):
        verdict = load_all()[check_id].func(facts, TOPOLOGY)
        assert verdict.status is INCOMPLETE and constant in verdict.reason


def test_collector_output_without_non_finite_numbers_is_accepted(healthy_facts: FactsDoc) -> None:
    facts = facts_from_result(_result("noise before the document\n" + json.dumps(healthy_facts)))
    assert facts.unreachable is None
    assert facts.gpus()[0].read(TEMPERATURE) == healthy_facts["nvml"]["gpus"][0]["temperature_c"]


def test_facts_file_with_nan_loads_as_an_unmeasured_node(tmp_path: Path, healthy_facts: FactsDoc) -> None:
    doc = copy.deepcopy(healthy_facts)
    doc["infiniband"]["hcas"]["mlx5_0"]["ports"]["1"]["counters"]["link_downed"] = float("nan")
    path = tmp_path / "sim04.json"
    path.write_text(json.dumps(doc))  # Python writes NaN unless told not to
    facts = Facts.load(path)
    assert facts.node == "sim04" and facts.unreachable is not None and "NaN" in facts.unreachable
    (tmp_path / "sim05.json").write_text(json.dumps(healthy_facts))
    assert Facts.load(tmp_path / "sim05.json").unreachable is None


def test_loads_facts_refuses_each_constant() -> None:
    assert loads_facts('{"a": 1.5e3, "b": -0.0}') == {"a": 1500.0, "b": -0.0}
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(NonFiniteNumber):
            loads_facts(f'{{"a": [1, {constant}]}}')
    with pytest.raises(ValueError):  # NonFiniteNumber is a ValueError, like json's own errors
        loads_facts('{"a": NaN}')


# ------------------------------------------------------------------ counter baselines


@pytest.mark.parametrize(("now", "before", "growth"), [
    (10, 4, 6), (4, 4, 0), (0, 0, 0),
    (3, 50, 3),  # below the baseline: the counter was reset, all 3 are new (used to be 0)
    (7, None, 7), (7, -1, 7), (7, "x", 7), (7, 2.5, 7),  # a baseline that is no count is ignored
])
def test_growth(now: int, before: object, growth: int) -> None:
    assert counters.growth(now, before) == growth


@pytest.mark.parametrize("now", [None, float("nan"), -4, "12", True])
def test_growth_leaves_non_counts_for_the_check_to_refuse(now: object) -> None:
    assert counters.growth(now, 3) is now


def test_reset_ib_counter_is_judged_from_zero(facts: FactsDoc) -> None:
    baseline = counters.extract(facts)
    baseline["ib"]["mlx5_3"]["1"]["link_downed"] = 9
    baseline["created"] = "2026-01-01T00:00:00Z"
    port(facts, "mlx5_3")["counters"]["link_downed"] = 2  # driver reloaded: 9 -> 0, then 2 new
    counters.subtract(facts, baseline)
    verdict = judge("IB-04", facts)
    assert verdict.status is FAIL and "link_downed=2 since baseline 2026-01-01T00:00:00Z" in verdict.reason


def test_reset_nvlink_counter_is_judged_from_zero(facts: FactsDoc) -> None:
    baseline = counters.extract(facts)
    bus = gpu(facts, 6)["bus_id"]
    baseline["nvlink"][bus]["2"]["recovery"] = 5
    gpu(facts, 6)["nvlink"][2]["recovery"] = 1
    counters.subtract(facts, baseline)
    assert judge("GPU-11", facts).status is FAIL


def test_growth_within_limits_passes_after_a_burst_before_the_baseline(facts: FactsDoc) -> None:
    port(facts, "mlx5_1")["counters"]["symbol_error"] = 5000
    baseline = counters.extract(facts)
    port(facts, "mlx5_1")["counters"]["symbol_error"] = 5040
    counters.subtract(facts, baseline)
    assert judge("IB-04", facts).status is PASS


def test_non_finite_counter_survives_the_baseline_as_unmeasured(facts: FactsDoc) -> None:
    baseline = counters.extract(facts)
    port(facts, "mlx5_4")["counters"]["port_rcv_errors"] = float("nan")
    gpu(facts, 0)["nvlink"][0]["replay"] = None
    counters.subtract(facts, baseline)
    assert judge("IB-04", facts).status is INCOMPLETE
    assert judge("GPU-11", facts).status is INCOMPLETE
