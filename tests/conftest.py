"""Shared fixtures: the reference folder, topologies, and simulated nodes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]

# Hypothesis' default 200 ms deadline per example is a wall-clock assertion: on a loaded 2-core CI
# machine it fails tests whose code is correct. Speed is measured in bench/, never asserted here.
settings.register_profile("burnin", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("burnin")


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
