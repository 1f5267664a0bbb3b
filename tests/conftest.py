"""Shared fixtures: the reference folder, topologies, and simulated nodes."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from tmpfs_root import tmpfs_temproot

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester", "tiers", "folder_labs"]  # tiers: the test tiers (markers), their order and the
# fast tier's guard; folder_labs: a folder's session lab ends with its tests

# Hypothesis' default 200 ms deadline per example is a wall-clock assertion: on a loaded 2-core CI
# machine it fails tests whose code is correct. Speed is measured in bench/, never asserted here.
settings.register_profile("burnin", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("burnin")

# The tests' temporary trees (pytest's tmp_path: simulated racks of thousands of small files each, created and
# deleted all run long) live on tmpfs when the machine has room. On a disk they cost tens of times more kernel
# time: measured on this project's CI machines (ext4 without a journal), building an 8-node rack (30,000 files)
# took 1 s of system CPU, and 34 s when another tree had been deleted in the 30 s before (the kernel skips the
# recently freed inodes one by one: `recently_deleted` in ext4's inode allocator); and every passed test's
# folder is removed as it ends (pyproject.toml: tmp_path_retention_policy). The sessions the tests start nest
# inside (nested_pytest_temproot, below). TMPDIR likewise, unless set: the folders tests and the processes they
# start make with tempfile.
USER_TMPDIR = os.environ.get("TMPDIR")
if (_TMPFS := tmpfs_temproot()) is not None:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", _TMPFS)
    if "TMPDIR" not in os.environ:
        os.environ["TMPDIR"] = _TMPFS
        tempfile.tempdir = None  # read again from TMPDIR

# Every burnin run records into its history database (burnin.history.store): the tests' runs, and the
# subprocesses they start, record into one of this test process's own, never the machine's state folder.
# Likewise burnin's state directory (counter baselines, the breaker's budget and lock): this test
# process's own, never /var/lib/burnin, so no two test processes share a baseline or a claim.
_STATE = tempfile.mkdtemp(prefix="burnin-test-state-")
atexit.register(shutil.rmtree, _STATE, True)
if "BURNIN_HISTORY" not in os.environ:
    os.environ["BURNIN_HISTORY"] = str(Path(_STATE) / "history.sqlite")
os.environ.setdefault("BURNIN_STATE_DIR", str(Path(_STATE) / "state"))
# Simulated GPUs are this machine's CPU: the SDC workload's answers (torch, seconds of CPU to import) are
# the same for every rack, so the racks of one test process share one cache (burnin.sim.sdc.CACHE_ENV), in
# a folder a lab's node user can reach. tests/unit/sdc runs the workload itself, uncached.
_SDC = tempfile.mkdtemp(prefix="burnin-test-sdc-")
os.chmod(_SDC, 0o755)
atexit.register(shutil.rmtree, _SDC, True)
os.environ.setdefault("BURNIN_SIM_SDC_CACHE", str(Path(_SDC) / "sdc-cache.json"))


@pytest.fixture(scope="session")
def user_tmpdir() -> str | None:
    """TMPDIR as the user set it before this conftest ran (None: unset, so the tests' is on tmpfs when it can)."""
    return USER_TMPDIR


@pytest.fixture(scope="session", autouse=True)
def nested_pytest_temproot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary root of the pytest sessions the tests start (a nested ``pytest -n 2``, burnin's own
    session): a folder in this worker's own temporary tree (``PYTEST_DEBUG_TEMPROOT``, read by every pytest).

    In the machine's shared ``/tmp/pytest-of-USER`` a session that starts keeps the three newest numbered
    folders and deletes the rest, whoever made them: a nested session inside a test deleted a whole earlier
    run's tree there (hundreds of thousands of files, minutes of unlinking on a loaded machine) and ran past its
    timeout. This session's own folder was made before the variable is set, so only the sessions it starts
    move."""
    root = tmp_path_factory.getbasetemp() / "nested-pytest"
    root.mkdir(exist_ok=True)
    os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)
    return root


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """../shared/reference: real tool outputs. Missing is a failure in CI, a skip elsewhere."""
    path = Path(os.environ.get("BURNIN_REFERENCE_DIR", REPO.parent / "shared" / "reference"))
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"reference outputs not found at {path} (CI must have ../shared)")
        pytest.skip(f"reference outputs not found at {path}")
    return path


@pytest.fixture(scope="session")
def h100_topology():  # type: ignore[no-untyped-def]
    from burnin.topology.load import find_topology

    return find_topology("hgx-h100-8gpu")
