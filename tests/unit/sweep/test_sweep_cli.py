"""``burnin sweep``'s usage errors: one line, exit 2, before Slurm is asked anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.cli.main import EXIT_USAGE, main

BASE = ["sweep", "--nodes", "gpu[1-4]", "--partition", "sweep"]


@pytest.mark.parametrize(("args", "said"), [
    (["--for", "0"], "a window lasts more than 0 s"),
    (["--for", "6x"], "is not a duration"),
    (["--until", "25:00"], "is not a time of day"),
    (["--for", "6h", "--until", "06:00"], "not allowed with argument"),
    ([], "one of the arguments --until --for is required"),
    (["--for", "6h", "--max-share", "0"], "a share of the partition is above 0"),
    (["--for", "6h", "--max-share", "1.5"], "a share of the partition is above 0"),
    (["--for", "6h", "--timeout", "nan"], "seconds must be a finite number"),
    (["--for", "6h", "--fabric-group", "1"], "a fabric group is 2 to 4096 nodes"),
    (["--for", "6h", "--fabric-group", "x"], "is not a number of nodes"),
])
def test_bad_options_are_one_line_exit_2(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit (the console script's status)
        main([*BASE, *args])
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "file"
    taken.write_text("x")
    assert main([*BASE, "--for", "6h", "--out", str(taken)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "exists and is not a folder" in err and err.count("\n") == 1, err


def test_an_empty_node_set_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--nodes", "", "--partition", "p", "--for", "6h"]) == EXIT_USAGE
    assert "node set is empty" in capsys.readouterr().err


def test_a_window_too_short_for_one_job_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--for", "100", "--timeout", "60"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "the window (100 s) is shorter than one node's job needs (120 s" in err and err.count("\n") == 1, err


def test_fabric_config_needs_groups_and_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "fabric.yaml"
    settings.write_text("localize: auto\n")
    assert main([*BASE, "--for", "6h", "--fabric-config", str(settings)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--fabric-config applies to fabric groups only: add --fabric-group N" in err and err.count("\n") == 1
    assert main([*BASE, "--for", "6h", "--fabric-group", "2", "--fabric-config", str(tmp_path / "no")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no such file" in err and err.count("\n") == 1, err


def test_fabric_settings_a_group_cannot_honour_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "fabric.yaml"
    settings.write_text("launcher: mpirun\n")
    assert main([*BASE, "--for", "6h", "--fabric-group", "2", "--fabric-config", str(settings)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "launcher: mpirun" in err and err.count("\n") == 1, err
    settings.write_text("localize: [\n")
    assert main([*BASE, "--for", "6h", "--fabric-group", "2", "--fabric-config", str(settings)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "fabric.yaml" in err and err.count("\n") == 1, err
