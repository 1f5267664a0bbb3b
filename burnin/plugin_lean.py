"""The lean protocol: ``burnin run`` judges a node test without pytest's per-test machinery.

pytest runs each test through three phases (setup, call, teardown), each with
its hooks, fixture bookkeeping, output capture and report: about 1 ms per test
on a 2-core controller, a minute for 1,024 nodes x 60 checks, where the checks
themselves cost a third of it. With ``--burnin-lean`` (which ``burnin run``
passes) the plugin judges a node test itself, but only where nothing in the
session could tell the difference (:func:`lean_session`):

- every collected test is a node test (a function parametrized over ``node``
  alone) whose fixtures are the plugin's (``node``, ``facts``, ``topology``,
  ``verdict``, ``declared_applicable``) and whose only marks are ``check`` and
  ``parametrize``;
- the hooks around a test run are implemented by pytest's own plugins and
  burnin's only: no site conftest or plugin watches a test run (no xdist
  worker, junitxml, terminal reporter, logging), but for report readers that
  say two reports of each test are enough for them (:data:`LEAN_REPORTS`:
  the history's recorder);
- no option changes how tests run (``-x``/``--maxfail``, ``--pdb``,
  ``--setup-only``/``--setup-plan``/``--setup-show``).

A test is then judged as pytest's phases would judge it (:func:`judge_lean`):
the plugin's fixtures set up in pytest's order, the test function called, and
the outcome mapped exactly as :func:`burnin.outcomes.judge_phase` maps the
reports pytest would have made. Whatever else happens (a site test's failed
assertion, a skip, an xfail, an error, a test that passed over its own
check's failure) is not mapped here: the test is run again through pytest's
full protocol, whose reports are the reference (checks are pure, so the
second run judges the same facts the same way).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from burnin.evaluate.verdict import Unmeasurable
from burnin.gate.decide import FAIL, INCOMPLETE, NOT_APPLICABLE, PASS
from burnin.suite import CheckIncomplete, NotApplicable

LEAN_OPTION = "--burnin-lean"
RUNTEST_HOOKS = (
    "pytest_runtest_protocol", "pytest_runtest_logstart", "pytest_runtest_logfinish", "pytest_runtest_setup",
    "pytest_runtest_call", "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
    "pytest_fixture_setup", "pytest_fixture_post_finalizer", "pytest_pyfunc_call", "pytest_exception_interact",
    "pytest_report_teststatus", "pytest_assertion_pass",
)
"""The hooks pytest calls around one test: the lean protocol calls none of them."""
KNOWN_PLUGINS = frozenset({
    # pytest's own, as `burnin run` loads them (its lean arguments leave out logging and the terminal)
    "main", "session", "runner", "fixtures", "python", "skipping", "capturemanager", "assertion", "unittest",
    "tmpdir", "faulthandler", "setuponly", "setupplan", "subtests",
    "hypothesispytest",  # hypothesis' plugin, when installed: it acts on @given tests only (none qualify)
    "burnin", "burnin-state",
})
"""Plugins whose hooks around a test have nothing to do for a lean test (their option checks aside)."""
LEAN_MARKS = frozenset({"check", "parametrize"})
LEAN_REPORTS = "burnin_lean_reports"
"""A plugin object with this attribute true reads only ``when``, ``nodeid``, ``outcome`` and ``user_properties``
of test reports: the two reports the lean protocol makes of each test (its setup, before it is judged, and its
teardown, with the final properties and the outcome) are enough for it (the history's recorder)."""

FixtureValues = Mapping[str, Callable[[str], object]]


def lean_session(session: pytest.Session, fixture_module: str) -> bool:
    """Whether every collected test may be judged by :func:`judge_lean` (see the module docstring)."""
    config = session.config
    if not config.getoption(LEAN_OPTION, False) or not session.items:
        return False
    option = config.option
    if any(getattr(option, name, None) for name in ("maxfail", "usepdb", "setuponly", "setupplan", "setupshow",
                                                     "stepwise", "trace")):
        return False
    hooks_seen: set[object] = set()
    functions: dict[int, tuple[object, bool]] = {}  # a test function's fixture info -> whether it may be lean
    in_class: dict[int, tuple[object, bool]] = {}  # a test's parent -> whether a class holds it
    for item in session.items:
        if not _lean_item(item, fixture_module, functions, in_class):
            return False
        if item.path not in hooks_seen:
            hooks_seen.add(item.path)
            for hook in RUNTEST_HOOKS:
                caller = getattr(item.ihook, hook, None)
                if caller is not None and any(not _known(impl, hook) for impl in caller.get_hookimpls()):
                    return False
    return True


def _known(impl: Any, hook: str) -> bool:
    """A hook implementation the lean protocol leaves nothing to: pytest's, burnin's, or a report reader that
    says it reads only ``when``, ``nodeid``, ``outcome`` and ``user_properties`` (``burnin_lean_reports``)."""
    return impl.plugin_name in KNOWN_PLUGINS or (
        hook == "pytest_runtest_logreport" and getattr(impl.plugin, LEAN_REPORTS, False) is True)


def _lean_item(item: pytest.Item, fixture_module: str, functions: dict[int, tuple[object, bool]],
               in_class: dict[int, tuple[object, bool]]) -> bool:
    """Whether one test may be lean: a node test (see the module docstring); what its function decides (its
    fixtures, its marks and its module's) is looked at once per function, through ``functions``, and whether
    a class holds it once per parent, through ``in_class``."""
    if not isinstance(item, pytest.Function):
        return False
    parent = item.parent
    held = in_class.get(id(parent))
    if held is None or held[0] is not parent:
        held = in_class[id(parent)] = (parent, item.cls is not None)
    if held[1]:
        return False
    callspec = getattr(item, "callspec", None)
    info = getattr(item, "_fixtureinfo", None)
    if callspec is None or len(callspec.params) != 1 or "node" not in callspec.params or info is None:
        return False
    if any(mark.name not in LEAN_MARKS for mark in item.own_markers):  # a parameter's marks are its own
        return False
    seen = functions.get(id(info))
    if seen is None or seen[0] is not info:
        seen = functions[id(info)] = (info, _lean_function(item, info, fixture_module))
    return seen[1]


def _lean_function(item: pytest.Function, info: Any, fixture_module: str) -> bool:
    """What every test of ``item``'s function shares: a plain function, the plugin's fixtures, lean marks."""
    function = item.obj
    if not inspect.isfunction(function) or inspect.iscoroutinefunction(function) \
            or inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
        return False
    for name in item.fixturenames:
        if name == "node":
            continue
        defs = info.name2fixturedefs.get(name)
        func = defs[-1].func if defs else None
        if getattr(func, "__module__", None) != fixture_module or getattr(func, "__name__", None) != name:
            return False
    return all(mark.name in LEAN_MARKS for mark in item.iter_markers())


def judge_lean(item: pytest.Function, node: str, check: str, values: FixtureValues) -> tuple[str, str] | None:
    """The (status, reason) pytest's reports of the test would have given, through ``judge_phase``; None
    when the test did something else, for pytest's full protocol to judge."""
    args: dict[str, object] = {"node": node}
    in_setup = True
    try:
        for name in item.fixturenames:
            if name not in args:
                args[name] = values[name](node)
        in_setup = False
        item.obj(**{name: args[name] for name in item._fixtureinfo.argnames})
    except (KeyboardInterrupt, pytest.exit.Exception):
        raise
    except NotApplicable as exc:
        status, reason = _verdict(item)
        if status in (FAIL, INCOMPLETE):  # the check's own verdict was in before the test stood aside
            return status, reason or f"{check} verdict {status}"
        return (NOT_APPLICABLE, f"{check} not applicable: {exc.reason}") if exc.reason.strip() else None
    except (Unmeasurable, CheckIncomplete) as exc:
        status, reason = _verdict(item)
        cause = exc.reason if isinstance(exc, Unmeasurable) else str(exc)
        return INCOMPLETE, reason if status == INCOMPLETE and reason else f"{check} could not be measured: {cause}"
    except pytest.fail.Exception:
        status, reason = _verdict(item)
        return (FAIL, reason) if not in_setup and status == FAIL and reason else None
    except BaseException:  # noqa: BLE001  # anything else: pytest's reports say what it is
        return None
    status, reason = _verdict(item)
    if status in (FAIL, INCOMPLETE):  # the test passed over its own check's verdict
        return status, reason or f"{check} verdict {status}"
    return PASS, reason


def _verdict(item: pytest.Item) -> tuple[str | None, str]:
    """The verdict and reason the ``verdict`` fixture recorded (None: it did not run)."""
    props = dict(item.user_properties)
    status = props.get("verdict")
    return (str(status) if status is not None else None), str(props.get("reason") or "")

