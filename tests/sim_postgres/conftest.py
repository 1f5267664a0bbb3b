"""A real PostgreSQL server (Debian's postgresql, started by the tests on 127.0.0.1) for the history's
PostgreSQL tier. Missing PostgreSQL skips the tier, except under CI where it fails."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from folder_labs import folder_lab

from burnin_lab import postgres

_NUMBERS = itertools.count(1)


@folder_lab
def pg_server() -> Iterator[postgres.Server]:
    why = postgres.missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tier: {why}")
        pytest.skip(f"PostgreSQL tier: {why}")
    folder = Path(tempfile.mkdtemp(prefix="burnin-pg-"))  # reachable by the postgres user (not pytest's 0700 tree)
    server = postgres.up(folder)
    try:
        yield server
    finally:
        postgres.down(server)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: postgres.Server) -> str:
    """A fresh, empty database owned by ``burnin``: its URL with the password."""
    return postgres.create_database(pg_server, f"history_{os.getpid()}_{next(_NUMBERS)}")
