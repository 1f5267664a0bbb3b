"""A lab that a folder's conftest holds for the whole session belongs to that folder (:func:`folder_lab`).

Such fixtures are the labs of real daemons (sshd, slurmctld and slurmd, a kube-apiserver and its etcd,
PostgreSQL): starting one is slow, so every test of the folder shares it. But a session-scoped fixture
lives to the session's end, and a lab left running goes on working: the Slurm lab's slurmd runs its
HealthCheckProgram (``burnin probe --drain``) on every node every few seconds. Kept alive after its
folder's tests, on each worker that had used it, that was a fifth of a whole ``.ci/run``'s CPU
(process accounting of a full run: 2,640 ``burnin`` processes, most of them probes, 821 s of CPU).

So, on each worker:

- the tests of a folder that use such a fixture are one xdist group (``tests/tiers.py`` marks them,
  ``--dist loadgroup`` hands the group to one worker in a row): one lab per folder and run, not one per
  worker;
- once a test ends and the worker's next test is outside the folder, the fixture is finished then (its
  teardown runs, as at the session's end); a later test of the folder on that worker would start it again.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

import pytest

ROOT_BASEIDS = frozenset({"", "tests"})
"""Where the whole suite's own session fixtures are defined (tests/conftest.py): those live to the end."""
LABS: set[str] = set()
"""The names of the fixtures declared with :func:`folder_lab`."""

F = TypeVar("F", bound=Callable[..., Any])


def folder_lab(function: F) -> F:
    """A session fixture of a folder's conftest that is a lab: it ends with the folder's tests on a worker.

    Only labs: a folder's cheap session inputs (a topology, a parsed reference file) stay to the end, so
    that the fast tests using them, wherever xdist runs them, never build them twice.
    """
    LABS.add(function.__name__)
    return pytest.fixture(scope="session")(function)  # type: ignore[return-value]


def folder_of(fixturedef: Any) -> str | None:
    """The folder (node id prefix) that owns ``fixturedef``, a lab of a sub-folder's conftest; None otherwise."""
    baseid = str(getattr(fixturedef, "baseid", ""))
    if (getattr(fixturedef, "scope", None) != "session" or getattr(fixturedef, "argname", None) not in LABS
            or baseid in ROOT_BASEIDS):
        return None
    return baseid


def held_folder(item: pytest.Item) -> str | None:
    """The folder whose lab ``item`` uses (the closest definition of each fixture name), if any."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    folders = sorted({folder for defs in info.name2fixturedefs.values() if defs
                      for folder in [folder_of(defs[-1])] if folder is not None})
    return folders[-1] if folders else None


def within(item: pytest.Item, folder: str) -> bool:
    return str(item.nodeid).startswith(folder + "/")


class FolderFixtures:
    """Finishes a folder's session fixtures once the worker's next test is outside that folder."""

    def __init__(self) -> None:
        self.active: dict[int, tuple[Any, Any, str]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, Any]:
        result = yield
        folder = folder_of(fixturedef)
        if folder is not None:
            self.active[id(fixturedef)] = (fixturedef, request, folder)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        result = yield  # the item's own teardown first: its module's fixtures, which may use the folder's
        if nextitem is None:  # the worker's last test: the session's end finishes everything, as always
            return result
        for key, (fixturedef, request, folder) in list(self.active.items()):
            if not within(nextitem, folder):
                del self.active[key]
                fixturedef.finish(request)
        return result


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("burnin-folder-fixtures"):
        config.pluginmanager.register(FolderFixtures(), "burnin-folder-fixtures")
