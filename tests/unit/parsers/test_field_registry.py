"""tests/field holds what SOURCES.md says, every parser has a real capture from outside ../shared, and each
capture reads as its tool (or is refused where a careful reader could not tell the values either)."""

from __future__ import annotations

import pytest
from field_samples import captures, field_text, sources

from burnin.errors import ParseError
from burnin.parsers import PARSERS, parse

# Parsers no public capture was found for (searches named in tests/field/SOURCES.md's "Not found" list).
NO_FIELD_SAMPLE = frozenset({"dcgmi-health", "sysctl"})
# Captures a careful reader could not read either: the parser must refuse them (ParseError -> incomplete).
REFUSED = frozenset({
    "nvidia-smi-topo-dgx-h100-12nic-tabs-lost-vllm-issue13855.txt",  # tabs lost between columns
    "lspci-vvv-4090-riser-lnksta-downgraded-no-device-line-jan-issue183.txt",  # no device line
})


def test_every_capture_is_listed_and_every_listed_file_exists() -> None:
    assert sorted(sources()) == captures()


def test_every_listed_tool_is_a_parser() -> None:
    tools = {tool for names in sources().values() for tool in names}
    assert tools <= set(PARSERS), tools - set(PARSERS)
    assert all(names for names in sources().values())


def test_every_parser_has_a_field_capture_unless_none_was_found() -> None:
    covered = {tool for names in sources().values() for tool in names}
    assert set(PARSERS) - covered == NO_FIELD_SAMPLE
    assert not NO_FIELD_SAMPLE & covered


# A CSV printed with noheader needs the command's --columns: test_field_gpu.py reads it so.
NEEDS_COLUMNS = "nvidia-smi-query-csv-noheader-nounits-4x-rtx-pro-6000-candy-top.txt"


@pytest.mark.parametrize("name", sorted(set(sources()) - {NEEDS_COLUMNS}))
def test_every_capture_reads_or_is_refused(name: str) -> None:
    for tool in sources()[name]:
        if name in REFUSED:
            with pytest.raises(ParseError):
                parse(tool, field_text(name))
        else:
            parse(tool, field_text(name))
