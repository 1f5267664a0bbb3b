"""Test tiers: every test belongs to exactly one, named by a marker (README.md, "Test tiers").

- ``fast``: pure units (parsers, checks, judges, gate, report writers): no child process, no simulated
  node rendered on disk. Every test without another tier marker is in it; run it after each change
  with ``pytest -m fast -n 2``. A session-scoped fixture may gather one input once per worker (the
  healthy facts document the check tests read): its cost is paid once, not per test.
- ``fuzz``: property-based fuzzing and scale runs of pure code (thousands of generated inputs).
- ``proc``: starts child processes (the CLI, shims, compilers, the local transport) or waits on real time.
- ``rack``: renders simulated nodes on disk (and usually runs their tools or collector).
- ``daemon``: long-running real daemons (the watch loop, sshd, slurmctld/slurmd): tests/sim_* folders.
- ``e2e``: whole runs of the CLI on simulated racks: tests/e2e.

The fast tier keeps itself honest: while a fast test sets up or runs (session fixtures aside), starting a
process or rendering a simulated node fails it with the marker to give it. ``.ci/run`` runs every tier,
so a test that drifts out of the fast tier fails in CI instead of slowing the tier down.

Scheduling (for ``-n 2``): modules go longest tier first (``slow``-marked ones before all), each module
kept whole and in order; the non-fast tests of a module that use a module-scoped fixture (a lab, a rack,
a run) are one xdist group (``--dist loadgroup``, as .ci/run runs), so one worker builds it instead of both;
the tests of a folder whose conftest holds a lab for the session are one group too, and the lab ends with
them (tests/folder_labs.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
from folder_labs import held_folder

TESTS = Path(__file__).resolve().parent

FAST = "fast"
# The tiers that are not fast, in scheduling order (longest first).
SLOW_TIERS = ("daemon", "e2e", "rack", "proc", "fuzz")
TIER_HELP = {
    "fast": "pure units, no process and no simulated rack: pytest -m fast -n 2 (the default tier)",
    "fuzz": "property-based fuzzing and scale runs of pure code",
    "proc": "starts child processes or waits on real time",
    "rack": "renders simulated nodes on disk",
    "daemon": "long-running real daemons (watch loop, sshd, Slurm)",
    "e2e": "whole CLI runs on simulated racks (tests/e2e)",
    "slow(minutes=N)": "takes minutes on its own: scheduled first, longest first, so the xdist workers end together",
}
# Folders that are one tier whole: tests/e2e, and tests/sim_* (SSH and Slurm labs) the daemon tier.
FOLDER_TIERS = {"e2e": "e2e", "sim_": "daemon"}


def tier_of(item: pytest.Item) -> str:
    for tier in SLOW_TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    return FAST


def _folder_tier(item: pytest.Item) -> str | None:
    try:
        parts = Path(str(item.path)).relative_to(TESTS).parts
    except ValueError:
        return None
    if len(parts) < 2:
        return None
    return next((tier for prefix, tier in FOLDER_TIERS.items()
                 if parts[0] == prefix or (prefix.endswith("_") and parts[0].startswith(prefix))), None)


def _has_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs[-1].scope in ("module", "class", "package")
               for defs in info.name2fixturedefs.values() if defs)


def _rank(item: pytest.Item) -> tuple[int, float]:
    """Sort key: ``slow`` tests first, longest first (``minutes``, a scheduling hint, never asserted), then tiers."""
    slow = item.get_closest_marker("slow")
    if slow is not None:
        return 0, -float(slow.kwargs.get("minutes", 1))
    tier = tier_of(item)
    return 1 + (SLOW_TIERS.index(tier) if tier in SLOW_TIERS else len(SLOW_TIERS)), 0.0


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = _folder_tier(item)
        if folder is not None and item.get_closest_marker(folder) is None:
            item.add_marker(folder)
        if tier_of(item) == FAST:
            item.add_marker(FAST)
    modules: dict[Any, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.parent, []).append(item)
    grouped: dict[Any, int] = {}
    for module, module_items in modules.items():
        for item in module_items:
            if tier_of(item) == FAST or item.get_closest_marker("xdist_group") is not None:
                continue
            folder = held_folder(item)  # a folder's lab, shared by its modules (tests/folder_labs.py)
            if folder is not None:
                item.add_marker(pytest.mark.xdist_group(f"folder:{folder}"))
            elif _has_module_fixture(item):
                item.add_marker(pytest.mark.xdist_group(f"module:{item.nodeid.split('::')[0]}"))
            else:
                continue
            grouped[module] = grouped.get(module, 0) + 1
    # Within a tier, the modules with the biggest group (one worker's unit of work) first.
    order = sorted(modules, key=lambda module: (min(_rank(item) for item in modules[module]), -grouped.get(module, 0)))
    items[:] = [item for module in order for item in modules[module]]


class GroupNodeIds:
    """``--dist loadgroup``: each grouped test's node id ends in ``@<group>``, which is how xdist's scheduler
    keeps a group on one worker. xdist 3.8 writes ``item._nodeid``, which pytest 9.2 no longer reads (its node
    ids are ``NodeId`` objects): without this, a module's lab was built on both workers and its tests split."""

    @pytest.hookimpl(trylast=True)  # after xdist's own
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not config.getoption("loadgroup", default=False):
            return
        from _pytest.nodeid import NodeId

        for item in items:
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                            for m in item.iter_markers("xdist_group")})
            suffix = f"@{'_'.join(names)}"
            # A parameter id may hold an "@" too (``[pcie-x8@gpu3]``): xdist reads the group after the last "@"
            # past the last "]", so the suffix goes on whatever the id holds.
            if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
                item._id = NodeId.parse(f"{item.nodeid}{suffix}")


# ----------------------------------------------------------------- the fast tier's guard


class _Guard:
    """What the fast test now running did that a fast test must not do, and which shared fixtures did it."""

    def __init__(self) -> None:
        self.active = False
        self.seen: list[str] = []
        # Module- and class-scoped fixtures being set up now, and those that started a process or rendered
        # a node (by fixture definition): every fast test that uses one is told, not only the first to ask.
        self.frames: list[list[str]] = []
        self.impure: dict[str, str] = {}

    def note(self, what: str) -> None:
        for frame in self.frames:
            frame.append(what)
        if self.active and len(self.seen) < 3:
            self.seen.append(what)


def _fixture_key(fixturedef: Any) -> str:
    return f"{fixturedef.baseid}::{fixturedef.argname}"


def _impure_fixtures(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    found = []
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if defs and _fixture_key(defs[-1]) in GUARD.impure:
            found.append(f"uses fixture {name!r}, which {GUARD.impure[_fixture_key(defs[-1])]}")
    return found


GUARD = _Guard()


def _wrap(owner: Any, name: str, describe: Callable[..., str]) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_tier_guarded", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> Any:
        GUARD.note(describe(*args, **kwargs))
        return original(*args, **kwargs)

    guarded._tier_guarded = True  # type: ignore[attr-defined]
    setattr(owner, name, guarded)


def _argv(args: Any) -> str:
    if isinstance(args, (str, bytes)):
        return str(args)[:80]
    try:
        return " ".join(str(a) for a in list(args)[:4])[:80]
    except TypeError:
        return repr(args)[:80]


def _install_process_guard() -> None:
    _wrap(subprocess.Popen, "__init__", lambda _self, args, *_a, **_k: f"starts a process ({_argv(args)})")
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        _wrap(os, name, lambda *a, _n=name, **_k: f"starts a process (os.{_n})")


def _install_render_guard() -> None:
    writer = sys.modules.get("burnin.sim.writer")
    if writer is not None:
        for name in ("_materialize", "_sync"):
            _wrap(writer, name, lambda base, *_a, **_k: f"renders a simulated node ({Path(str(base)).name})")


def pytest_configure(config: pytest.Config) -> None:
    for tier, text in TIER_HELP.items():
        config.addinivalue_line("markers", f"{tier}: {text}")
    _install_process_guard()
    if not config.pluginmanager.has_plugin("burnin-group-node-ids"):
        config.pluginmanager.register(GroupNodeIds(), "burnin-group-node-ids")


def _guarded_phase(item: pytest.Item, phase: str) -> Generator[None, Any, Any]:
    if item.get_closest_marker(FAST) is None:
        return (yield)
    _install_render_guard()
    GUARD.active, GUARD.seen = True, []
    try:
        result = yield
    finally:
        GUARD.active = False
    if phase == "setup" and not GUARD.seen:
        GUARD.seen.extend(_impure_fixtures(item))
    if GUARD.seen:
        pytest.fail(f"a fast-tier test {'; '.join(GUARD.seen)} during {phase}: give it the tier it belongs to "
                    "(@pytest.mark.rack if it renders simulated nodes, @pytest.mark.proc if it starts "
                    "processes; tests/tiers.py)", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _guarded_phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _guarded_phase(item, "the test"))


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any],
                         request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
    """A session fixture is built once per worker: what it does is not charged to the tests that use it.

    A module- or class-scoped one is: what it does is remembered, whichever test (of any tier) asked first.
    """
    if fixturedef.scope == "function":
        return (yield)
    if fixturedef.scope == "session":
        active, GUARD.active = GUARD.active, False
        try:
            return (yield)
        finally:
            GUARD.active = active
    frame: list[str] = []
    GUARD.frames.append(frame)
    try:
        return (yield)
    finally:
        GUARD.frames.remove(frame)
        if frame:
            GUARD.impure[_fixture_key(fixturedef)] = frame[0]
