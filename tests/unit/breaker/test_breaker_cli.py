"""``burnin breaker set`` and ``allow``: the site's settings and an operator's allowance, written atomically."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from burnin.breaker import state
from burnin.breaker.budget import Settings
from burnin.cli.main import main


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path))
    return tmp_path


def test_set_keeps_what_it_is_not_told_and_allow_lasts_one_window_from_now(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["breaker", "set", "--nodes", "4", "--window", "15m"]) == 0
    assert main(["breaker", "set", "--percent", "2.5", "--record", "IB-01, GPU-03"]) == 0
    assert "record mode: GPU-03,IB-01" in capsys.readouterr().out
    before = time.time()
    assert main(["breaker", "allow", "10"]) == 0
    settings, allowance = state.load()
    assert settings == Settings(4, 2.5, 900.0, frozenset({"IB-01", "GPU-03"}))
    assert allowance is not None and allowance.extra == 10
    assert before <= allowance.granted <= time.time() and allowance.until == allowance.granted + 900.0
    assert main(["breaker", "set", "--record", ""]) == 0
    assert state.load()[0].record == frozenset()


@pytest.mark.parametrize("argv", [["allow", "-1"], ["allow", "two"], ["set", "--percent", "101"],
                                  ["set", "--window", "0"], ["set", "--window", "10d"], ["frob"]])
def test_bad_input_is_one_line_and_exit_2(folder: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["breaker", *argv])
    assert stopped.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (folder / state.SETTINGS_FILE).exists()


def test_a_broken_settings_file_is_exit_2_naming_it(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / state.SETTINGS_FILE).write_text("{")
    assert main(["breaker", "allow", "1"]) == 2
    assert "breaker.json: not a breaker settings file" in capsys.readouterr().err
