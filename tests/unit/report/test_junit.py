"""junit.xml validates against the Jenkins xunit plugin's junit-10.xsd and stays readable."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from burnin.report import junit
from burnin.report.junit import Case, read_cases, render_junit, write_junit

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def schema():  # type: ignore[no-untyped-def]
    import xmlschema

    path = Path(os.environ.get("BURNIN_SCHEMA_DIR", REPO.parent / "shared" / "schemas")) / "junit-10.xsd"
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"JUnit schema not found at {path} (CI must have ../shared)")
        pytest.skip(f"JUnit schema not found at {path}")
    return xmlschema.XMLSchema(str(path))


def _cases() -> list[Case]:
    return [
        Case("node", "test_nvlink_links[sim01]", "sim01", "GPU-10", "pass", "GPU-10 ok: 18/18", "18/18", "18", 0.0012),
        Case("node", "test_nvlink_links[sim03]", "sim03", "GPU-10", "fail",
             "GPU-10 gpu3 17/18 NVLink links active (down: 7) (expected 18 links active per GPU)",
             "gpu3 17/18", "18 links active per GPU", 0.002),
        Case("node", "test_ib_rate[sim03]", "sim03", "IB-02", "incomplete",
             "IB-02 could not be measured: ibstat printed \x1b[2J<script>alert(1)</script>\x00", "not measured",
             ">= 400 Gb/s", 1e-7),
        Case("fabric", "test_nccl_single[sim01]", "sim01", "NCCL-01", "not-applicable",
             "NCCL-01 not applicable: no compute fabric in this node type"),
    ]


def test_document_validates_against_junit_10_xsd(schema) -> None:  # type: ignore[no-untyped-def]
    document = render_junit(_cases(), meta={"topology": "hgx-h100-8gpu", "partial": "false"},
                            timestamp="2026-12-01T02:17:00Z")
    schema.validate(ET.fromstring(document))  # raises with the violation when invalid


def test_pytest_xunit_output_is_what_the_schema_rejects(schema, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    # The reason this writer exists: stock pytest output (file/line attributes and
    # properties inside a test case) is rejected by the same schema.
    pytester.makepyfile("import pytest\n@pytest.mark.parametrize('n', ['a'])\ndef test_x(record_property, n):\n"
                        "    record_property('node', n)\n")
    pytester.runpytest("--junitxml=out.xml", "-o", "junit_family=xunit1")
    assert not schema.is_valid(str(pytester.path / "out.xml"))


def test_node_and_check_readable_where_jenkins_and_gitlab_show_them() -> None:
    root = ET.fromstring(render_junit(_cases()))
    case = next(c for c in root.iter("testcase") if c.get("name") == "test_nvlink_links[sim03]")
    package, _, cls = case.get("classname", "").rpartition(".")
    assert (package, cls) == ("burnin.node", "GPU-10")  # Jenkins: package.class
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("GPU-10 gpu3 17/18") and "expected 18" in failure.get("message", "")


def test_verdicts_map_to_failure_error_skipped_and_counts() -> None:
    root = ET.fromstring(render_junit(_cases()))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    node = suites["burnin.node"]
    assert (node.get("tests"), node.get("failures"), node.get("errors"), node.get("skipped")) == ("3", "1", "1", "0")
    assert suites["burnin.fabric"].get("skipped") == "1"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "1")
    by_name = {c.get("name"): c for c in root.iter("testcase")}
    assert [child.tag for child in by_name["test_ib_rate[sim03]"]] == ["error", "system-out"]
    assert [child.tag for child in by_name["test_nvlink_links[sim01]"]] == ["system-out"]


def test_node_text_is_escaped_and_never_raw() -> None:
    document = render_junit(_cases())
    assert b"\x1b" not in document and b"\x00" not in document
    root = ET.fromstring(document)  # still well-formed XML
    error = next(root.iter("error"))
    assert "\\x1b[2J<script>" in error.get("message", "")


def test_times_fit_the_surefire_pattern() -> None:
    root = ET.fromstring(render_junit(_cases()))
    for element in (root, *root.iter("testsuite"), *root.iter("testcase")):
        assert element.get("time", "").count(".") == 1 and len(element.get("time", "").split(".")[1]) == 3


def test_read_back_gives_properties(tmp_path: Path) -> None:
    (path,) = write_junit(tmp_path / "junit.xml", _cases())
    cases = read_cases(path)
    assert cases["test_nvlink_links[sim03]"] == {"node": "sim03", "check": "GPU-10", "measured": "gpu3 17/18",
                                                 "expected": "18 links active per GPU", "verdict": "fail"}


def test_large_runs_split_per_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(junit, "MAX_FILE_BYTES", 1500)
    paths = write_junit(tmp_path / "junit.xml", _cases())
    assert [p.name for p in paths] == ["junit-fabric.xml", "junit-node.xml"]
    assert not (tmp_path / "junit.xml").exists()
    assert set(read_cases(paths[1])) == {"test_nvlink_links[sim01]", "test_nvlink_links[sim03]", "test_ib_rate[sim03]"}
