"""``burnin topologies`` tells which checks a topology cannot judge (issue 11 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.cli.main import main
from burnin.resources import topologies_dir


def _without_reference(tmp_path: Path, key: str) -> Path:
    lines = (topologies_dir() / "hgx-h100-8gpu.yaml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    path = tmp_path / "partial.yaml"
    path.write_text("\n".join(lines[:start] + lines[end:]) + "\n", encoding="utf-8")
    return path


def test_the_shipped_topology_judges_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topologies", "--check", "hgx-h100-8gpu"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(": ok\n") and "cannot judge" not in out


def test_a_missing_reference_names_the_checks_it_leaves_unjudged(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _without_reference(tmp_path, "ib_rate_gbps")
    assert main(["topologies", "--check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == ["  cannot judge IB-02: topology hgx-h100-8gpu defines no ib_rate_gbps (it will be incomplete)"]
