"""Helpers for suite tests (ours and a site's own)."""

from __future__ import annotations

import pytest

from burnin.evaluate.verdict import Status, Verdict


class CheckIncomplete(Exception):
    """Raised during test setup when a check could not be measured.

    pytest reports it as an *error* (not a failure), so JUnit consumers see
    "could not measure" apart from "broken".
    """


def assert_passed(verdict: Verdict) -> None:
    """Fail the test with the verdict's measured-vs-expected reason unless it passed."""
    __tracebackhide__ = True
    if verdict.status is Status.INCOMPLETE:
        raise CheckIncomplete(verdict.reason)
    if verdict.status is not Status.PASS:
        pytest.fail(verdict.reason, pytrace=False)
