"""The Prometheus textfile writer meets values it cannot write as they are: it escapes or drops them, never fails.

A node's HCA name comes from a directory listing (a byte that is not UTF-8 arrives as a lone surrogate),
its port rate and counters from sysfs text; none of them may stop the textfile, and what is written must
parse with prometheus_client's own parser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burnin.report.metrics import exposition, write_textfile


def _samples(text: str, name: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    families = {family.name: family for family in text_string_to_metric_families(text)}
    return list(families[name].samples) if name in families else []


def _ib_facts(hca: str, rate: str, counters: dict[str, object] | None = None) -> dict[str, Any]:
    port = {"state": "4: ACTIVE", "rate": rate, "counters": counters or {}}
    return {"infiniband": {"hcas": {hca: {"ports": {"1": port}}}}}


def test_an_hca_name_that_is_not_utf8_is_written_escaped(tmp_path: Path) -> None:
    odd = "mlx5_\udcff0"  # os.listdir's name for the bytes b"mlx5_\xff0"
    text = exposition({"nodes": {"n1": {"admitted": False}}}, [], {"n1": _ib_facts(odd, "400 Gb/sec (4X NDR)")})
    target = write_textfile(tmp_path / "burnin.prom", text)
    written = target.read_text(encoding="utf-8")
    (rate,) = _samples(written, "burnin_ib_port_rate_bytes_per_second")
    assert rate.labels["hca"] == "mlx5_\\xff0" and rate.value == 50e9
    (active,) = _samples(written, "burnin_ib_port_active")
    assert active.labels["hca"] == "mlx5_\\xff0" and active.value == 1


def test_label_text_keeps_what_utf8_carries_and_escapes_lone_surrogates() -> None:
    from burnin.report.metrics import label_text

    assert label_text("we\"ird\\node\n") == "we\"ird\\node\n"  # escaped later, as the format wants
    assert label_text("mlx5_\udc800") == "mlx5_\\x800"
    assert label_text("a\ud800b\udc7fc") == "a\\ud800b\\udc7fc"  # not a byte surrogateescape makes
    assert label_text(7) == "7"


def test_a_rate_that_is_no_number_is_dropped_and_the_rest_is_written() -> None:
    for rate in ("1.2.3 Gb/sec", ". Gb/sec", "1. Gb/sec", "fast Gb/sec"):
        text = exposition({"nodes": {}}, [], {"n1": _ib_facts("mlx5_0", rate)})
        assert _samples(text, "burnin_ib_port_rate_bytes_per_second") == [], rate
        assert [s.value for s in _samples(text, "burnin_ib_port_active")] == [1.0], rate
    text = exposition({"nodes": {}}, [], {"n1": _ib_facts("mlx5_0", " 12.5 Gb/sec")})
    assert [s.value for s in _samples(text, "burnin_ib_port_rate_bytes_per_second")] == [12.5e9 / 8]


def test_a_number_too_large_for_a_float_is_dropped() -> None:
    counters: dict[str, object] = {"symbol_error": 10**400, "link_downed": 3}
    text = exposition({"nodes": {}}, [], {"n1": _ib_facts("mlx5_0", "400 Gb/sec", counters)})
    errors = {s.labels["counter"]: s.value for s in _samples(text, "burnin_ib_port_errors")}
    assert errors == {"link_downed": 3.0}
    nvml = {"nvml": {"gpus": [{"index": 0, "temperature_c": 10**400, "power": {"enforced_limit_mw": 10**309}}]}}
    text = exposition({"nodes": {}}, [], {"n1": nvml})
    assert _samples(text, "burnin_gpu_temperature_celsius") == []
    assert _samples(text, "burnin_gpu_power_limit_watts") == []


def test_a_verdict_whose_check_is_no_text_is_still_one_parsable_sample() -> None:
    outcomes: list[dict[str, Any]] = [{"node": "n1", "check": 5, "status": "fail"},
                                      {"node": "n1", "check": None, "status": "pass"}]
    text = exposition({"nodes": {"n1": {"admitted": False}}}, outcomes, {})
    states = {s.labels["check"]: s.labels["state"] for s in _samples(text, "burnin_check_state")}
    assert states == {"5": "fail", "None": "pass"}
