"""The local transport: argv only, timeouts kill the whole process group."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from burnin.transport.local import LocalTransport

pytestmark = pytest.mark.proc


def test_runs_argv_and_captures_output() -> None:
    result = LocalTransport().run("n1", [sys.executable, "-c", "print('hi; echo no-shell')"], timeout=10)
    assert result.ok and result.stdout.strip() == "hi; echo no-shell"


def test_timeout_is_reported_and_bounded() -> None:
    result = LocalTransport().run("n1", ["sh", "-c", "sleep 30.4171 & sleep 30.4171"], timeout=0.5)
    assert result.timed_out and not result.ok and result.exit_status is None
    assert "timed out" in result.describe_failure()
    # the whole process group went with it, the background child too (nothing keeps the run waiting)
    left = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _reads(p) and "30.4171" in _reads(p)]
    assert left == [], left


def _reads(path: Path) -> str:
    try:
        return path.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_missing_program_is_an_error_not_an_exception() -> None:
    result = LocalTransport().run("n1", ["/nonexistent/tool"], timeout=5)
    assert not result.ok and result.error is not None and "cannot start" in result.error


def test_node_environment_is_applied() -> None:
    transport = LocalTransport(node_env=lambda node: {"BURNIN_SIM_NODE": node})
    result = transport.run("sim07", [sys.executable, "-c", "import os; print(os.environ['BURNIN_SIM_NODE'])"],
                           timeout=10)
    assert result.stdout.strip() == "sim07"
