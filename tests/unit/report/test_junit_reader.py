"""What CI servers show of junit.xml: a skip's reason as element text (GitLab shows nothing else), and
every error saying what was expected, even where the verdict left ``expected`` empty."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from burnin.report.catalog import expectations
from burnin.report.junit import Case, read_cases, render_junit, with_expectations, write_junit

NOT_MEASURED = "NCCL-03 could not be measured: left out of multi-node runs: IB-08 failed on this node"


def _nccl_cases() -> list[Case]:
    cases = [Case("fabric", f"test_nccl_multi_node_all_reduce[sim0{i}]", f"sim0{i}", "NCCL-03", "pass", "",
                  "group sim[01-04] 358.4 GB/s", ">= 300 GB/s") for i in range(1, 5)]
    cases.append(Case("fabric", "test_nccl_multi_node_all_reduce[sim05]", "sim05", "NCCL-03", "incomplete",
                      NOT_MEASURED, "not measured", ""))
    return cases


def test_a_skip_carries_its_reason_as_element_text() -> None:
    reason = "STO-05 not applicable: topology hgx-h100-8gpu declares no RoCE storage"
    root = ET.fromstring(render_junit([Case("node", "test_roce_qos[sim01]", "sim01", "STO-05", "not-applicable",
                                            reason)]))
    skipped = next(root.iter("skipped"))
    assert skipped.text == reason and skipped.get("message") == reason


def test_an_error_whose_verdict_left_expected_empty_says_what_the_run_expected_of_its_check() -> None:
    root = ET.fromstring(render_junit(_nccl_cases()))
    case = next(c for c in root.iter("testcase") if c.get("name") == "test_nccl_multi_node_all_reduce[sim05]")
    out = case.find("system-out")
    assert out is not None and "expected: >= 300 GB/s" in (out.text or "").splitlines()
    error = case.find("error")
    assert error is not None and error.get("message") == NOT_MEASURED


def test_a_check_incomplete_everywhere_takes_the_topologys_thresholds(tmp_path: Path) -> None:
    cases = [Case("fabric", f"test_nccl_bad_node_localisation[sim0{i}]", f"sim0{i}", "NCCL-04", "incomplete",
                  "NCCL-04 could not be measured: dry run", "not measured", "") for i in (1, 2)]
    (path,) = write_junit(tmp_path / "junit.xml", cases, meta={"topology": "hgx-h100-8gpu"})
    expected = {fields["expected"] for fields in read_cases(path).values()}
    assert expected == {expectations("hgx-h100-8gpu")["NCCL-04"]}
    (text,) = expected
    assert "nccl_multi_busbw_gbps >= 300 GB/s" in text and "nccl_rail_busbw_gbps" in text


def test_expectations_never_replace_what_a_verdict_said() -> None:
    cases = [Case("node", "t[a]", "a", "GPU-10", "fail", "r", "17/18", "18 links"),
             Case("node", "t[b]", "b", "GPU-10", "incomplete", "r", "not measured", "")]
    filled = with_expectations(cases, {"GPU-10": "from the catalog"})
    assert [c.expected for c in filled] == ["18 links", "18 links"]
    assert with_expectations([cases[1]], {"GPU-10": "from the catalog"})[0].expected == "from the catalog"
    assert with_expectations([cases[1]])[0].expected == ""


def test_an_unknown_topology_still_gives_each_check_its_title() -> None:
    titles = expectations("no-such-node-type")
    assert titles["GPU-10"] == "NVLink links active on every GPU"
    assert expectations(None)["IB-02"] == "Compute HCA port rate"


def test_only_the_checks_no_verdict_says_it_for_take_the_topologys(tmp_path: Path) -> None:
    cases = [Case("node", "test_nvlink_links[a]", "a", "GPU-10", "pass", "", "18/18", "18 links active per GPU"),
             Case("fabric", "test_nccl_bad_node_localisation[a]", "a", "NCCL-04", "incomplete", "NCCL-04 dry run",
                  "not measured", "")]
    (path,) = write_junit(tmp_path / "junit.xml", cases, meta={"topology": "hgx-h100-8gpu"})
    read = read_cases(path)
    assert read["test_nvlink_links[a]"]["expected"] == "18 links active per GPU"
    assert read["test_nccl_bad_node_localisation[a]"]["expected"] == expectations("hgx-h100-8gpu")["NCCL-04"]


def test_a_topology_name_that_is_no_text_gives_titles() -> None:
    assert expectations(5) == expectations("") == expectations(None)


def test_a_verdict_record_with_only_node_check_and_status_is_a_case() -> None:
    case = Case.from_outcome({"node": "n1", "check": "GPU-10", "status": "pass"})
    assert case == Case("burnin", "GPU-10[n1]", "n1", "GPU-10", "pass", "", "", "", 0.0)
    full = Case.from_outcome({"node": "n1", "check": "GPU-10", "status": "fail", "suite": "node", "test": "t[n1]",
                              "reason": "r", "measured": "m", "expected": "e", "duration_s": 1.5})
    assert full == Case("node", "t[n1]", "n1", "GPU-10", "fail", "r", "m", "e", 1.5)
