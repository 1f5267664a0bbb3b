"""The site's repair settings: defaults, a site's ladders over them, and one clear line for a bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ConfigError
from burnin.repair.settings import CONFIG_ENV, load


def test_no_file_gives_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv("BURNIN_STATE_DIR", str(tmp_path))
    settings = load()
    assert settings.ladder().steps("gpu") == ("reset", "reboot", "vendor")
    assert settings.acceptance.suites == ("node",)
    assert (settings.incidents, settings.days, settings.reboot.nextstate) == (3, 30.0, "RESUME")


def test_a_site_ladder_replaces_its_class_only(tmp_path: Path) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text("incidents: 2\nladders:\n  gpu: [reboot, vendor]\nacceptance:\n  suites: [node, fabric]\n")
    settings = load(path)
    assert settings.ladder().steps("gpu") == ("reboot", "vendor")
    assert settings.ladder().steps("fabric") == ("reboot", "vendor")
    assert settings.ladder().incidents == 2
    assert settings.acceptance.suites == ("node", "fabric")


@pytest.mark.parametrize(("text", "where", "words"), [
    ("ladders:\n  gpu: [reset, reboot]\n", ":2: ladders.gpu", "must end with vendor"),
    ("ladders:\n  gpu: [reboot, reset, vendor]\n", ":2: ladders.gpu", "in the order reset -> reboot -> vendor"),
    ("days: 30\nincidents: 0\n", ":2: incidents", "greater than or equal to 1"),
    ("acceptance:\n  suites: [node, nope]\n", "acceptance.suites", "unknown suite(s) nope"),
    ("reboot:\n  nextstate: IDLE\n", "reboot.nextstate", "'DOWN' or 'RESUME'"),
    ("laders: {}\n", ":1: laders", "unknown key"),
    ("classes:\n  GPU: gpu2\n", "(top level)", "ladder(s) gpu2 that ladders does not define"),
    ("- a\n", ":1", "must be a YAML mapping"),
])
def test_a_bad_file_is_one_line_naming_file_line_and_key(tmp_path: Path, text: str, where: str, words: str) -> None:
    path = tmp_path / "repair.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and where in message and words in message, message
    assert "\n" not in message


def test_a_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such repair settings file"):
        load(tmp_path / "missing.yaml")
