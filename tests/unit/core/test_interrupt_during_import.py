"""A signal that comes while a transport module is still being imported (``burnin sim up`` imports
burnin.transport.local late, while its daemons start) is an interruption, never an internal error.

A module is in ``sys.modules`` before its body has run: the handler found it there without its
``stop_children`` and raised AttributeError (seen in CI: "burnin sim: internal error: AttributeError:
partially initialized module 'burnin.transport.local' has no attribute 'stop_children'").
"""

from __future__ import annotations

import signal
import sys
import types

import pytest

from burnin.cli import interrupt


@pytest.fixture(autouse=True)
def _forget_signals() -> None:
    interrupt.reset()


@pytest.mark.parametrize("module", ["burnin.transport.local", "burnin.transport.ssh"])
def test_a_signal_during_a_transports_import_interrupts(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, types.ModuleType(module))  # its body not run yet
    with pytest.raises(interrupt.Interrupted) as raised:
        interrupt._on_signal(signal.SIGTERM, None)
    assert raised.value.signal_name == "SIGTERM"
    assert interrupt.received() == "SIGTERM"
    interrupt._on_signal(signal.SIGTERM, None)  # a second one: no raise, nothing to stop yet
    interrupt.reset()
    assert interrupt.received() is None


def test_a_loaded_transport_is_still_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    module = types.ModuleType("burnin.transport.local")
    module.stop_children = lambda force: calls.append(("stop", force))  # type: ignore[attr-defined]
    module.allow_children = lambda: calls.append("allow")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "burnin.transport.local", module)
    with pytest.raises(interrupt.Interrupted):
        interrupt._on_signal(signal.SIGTERM, None)
    interrupt._on_signal(signal.SIGINT, None)
    interrupt.reset()
    assert calls == [("stop", False), ("stop", True), "allow"]
