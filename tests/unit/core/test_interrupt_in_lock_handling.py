"""A signal's exception that lands inside ``threading``'s lock handling is still an interruption.

Seen in CI (the signal-while-gathering test, three workers): SIGTERM came while the collector fan-out
started a worker thread (``ThreadPoolExecutor.submit`` -> ``Thread.start`` -> ``Event.wait``); the
``with`` around the half-released condition raised ``RuntimeError: release unlocked lock`` in place of
the interruption, and the run ended "burnin run: internal error" instead of "interrupted (SIGTERM)".
"""

from __future__ import annotations

import signal
import tempfile
import types
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnin.cli import interrupt, main


@pytest.fixture(autouse=True)
def _forget_signals() -> Iterator[None]:
    interrupt.reset()
    yield
    interrupt.reset()


def _command(run: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(run=run, add_arguments=lambda parser: None)


def test_an_error_raised_while_a_signal_unwinds_is_the_interruption(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def run(args: Namespace) -> int:
        try:
            interrupt._on_signal(signal.SIGTERM, None)  # the handler, as Python runs it
        except KeyboardInterrupt:
            raise RuntimeError("release unlocked lock")  # noqa: B904 - as threading's `with` raises it
        return 0

    monkeypatch.setattr(main, "_command_module", lambda name: _command(run))
    assert main.main(["faults"]) == main.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.strip() == "burnin faults: interrupted (SIGTERM)", err


def test_the_same_error_without_a_signal_is_an_internal_error(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    def run(args: Namespace) -> int:
        raise RuntimeError("release unlocked lock")

    monkeypatch.setattr(main, "_command_module", lambda name: _command(run))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the crash file
    assert main.main(["faults"]) == main.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "burnin faults: internal error: RuntimeError: release unlocked lock" in err, err
    assert "interrupted" not in err
    assert [path.name.startswith("burnin-crash-") for path in tmp_path.iterdir()] == [True]
