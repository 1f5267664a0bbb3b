"""The plugins of `burnin run`'s pytest session: burnin's own, under the name the lean protocol knows it by.

The session turns pytest's plugin autoload off (burnin.session.PLUGIN_ARGS, tests/e2e/test_run_plugins.py)
and registers burnin's plugin itself. Under another name (``burnin.plugin``, as ``pytest.main(plugins=[module])``
or ``-p burnin.plugin`` would register it) the lean protocol sees an unknown plugin's hooks around every test
and judges each through pytest's three phases: the same verdicts, slower, and no test would notice.
"""

from __future__ import annotations

from typing import Any

import pytest

import burnin.plugin
from burnin.plugin_lean import KNOWN_PLUGINS
from burnin.session import PLUGIN_ARGS, _BurninPlugin


class _Names:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.burnin: object = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.names = {name for name, _ in config.pluginmanager.list_name_plugin()}
        self.burnin = config.pluginmanager.get_plugin("burnin")


def test_burnins_plugin_is_registered_under_the_name_the_lean_protocol_knows(pytester: pytest.Pytester) -> None:
    names = _Names()
    plugins: list[Any] = [names, _BurninPlugin()]
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "--collect-only", plugins=plugins)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert names.burnin is burnin.plugin
    assert "burnin" in KNOWN_PLUGINS
    assert not [name for name in names.names if name != "burnin" and "burnin" in name and name != "burnin-state"]
