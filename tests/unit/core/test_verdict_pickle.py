"""Verdicts cross process boundaries (the judging workers send each node's back): a pickled verdict is the
same verdict, every field of it and of its findings (a field added to the class and not to its ``__reduce__``
would be lost here)."""

from __future__ import annotations

import dataclasses
import pickle

from burnin.evaluate.verdict import Finding, Status, Verdict, bad, roll_up, unknown


def test_a_pickled_verdict_is_the_same_verdict_field_by_field() -> None:
    findings = [bad("GPU0", "82 C", "<= 80 C"), unknown("GPU1", "NVML: timed out", "<= 80 C"),
                Finding("GPU2", Status.PASS, "40 C", "<= 80 C", "a note")]
    verdict = roll_up("GPU-07", "gpu0001", findings, expected="<= 80 C", healthy="cool")
    assert all(getattr(verdict, f.name) != f.default for f in dataclasses.fields(Verdict))
    assert all(getattr(findings[2], f.name) != f.default for f in dataclasses.fields(Finding))
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps({"GPU-07": verdict}, protocol=protocol))["GPU-07"]
        assert again == verdict
        assert [dataclasses.astuple(f) for f in again.findings] == [dataclasses.astuple(f) for f in findings]
        assert again.status is Status.FAIL and again.findings[1].status is Status.INCOMPLETE
