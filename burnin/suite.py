"""Helpers for suite tests (ours and a site's own).

A node-parametrized test ends in exactly one of four ways: ``pass``, ``fail``,
``incomplete`` (it could not be measured) or ``not-applicable``. The last one
is an explicit decision with its reason, made through :func:`not_applicable`;
a plain ``pytest.skip``, an ``xfail`` or a test that never reported is
``incomplete``, so it never lets a node into the pool.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

from burnin.evaluate.verdict import Status, Verdict


class CheckIncomplete(Exception):
    """Raised during test setup when a check could not be measured.

    pytest reports it as an *error* (not a failure), so JUnit consumers see
    "could not measure" apart from "broken".
    """


class NotApplicable(pytest.skip.Exception):  # type: ignore[name-defined,misc]  # the documented Skipped
    """The check does not apply to this node, for the reason given (see :func:`not_applicable`).

    pytest reports it as *skipped* (a JUnit ``<skipped message=...>``); the
    burnin plugin records it as ``not-applicable`` with its reason, which the
    gate accepts in place of a verdict. Any other skip is ``incomplete``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(msg=reason, pytrace=False)
        self.reason = reason


def not_applicable(reason: str) -> NoReturn:
    """Declare that the test's check does not apply to this node, and why.

    The reason is required: it is what gate.json and JUnit show in place of a
    verdict (e.g. ``"a single node: no multi-node run"``).
    """
    __tracebackhide__ = True
    if not str(reason).strip():
        raise CheckIncomplete("not_applicable() was called without a reason; a check needs one to stand aside")
    raise NotApplicable(str(reason).strip())


def assert_passed(verdict: Verdict) -> None:
    """Fail the test with the verdict's measured-vs-expected reason unless it passed."""
    __tracebackhide__ = True
    if verdict.status is Status.INCOMPLETE:
        raise CheckIncomplete(verdict.reason)
    if verdict.status is not Status.PASS:
        pytest.fail(verdict.reason, pytrace=False)
