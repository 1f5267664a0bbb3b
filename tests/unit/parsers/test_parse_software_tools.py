"""``ofed_info -s`` and ``dcgmi --version`` (INV-10).

No real capture of either tool is in ../shared: these tests use the documented shapes
(``MLNX_OFED_LINUX-23.10-1.1.9.0:``; ``Version : 3.3.1`` and the build lines, then
``Hostengine build info:`` and the host engine's) and the simulator's shims, which print them.
"""

from __future__ import annotations

import pytest

from burnin.errors import ParseError
from burnin.parsers.dcgmi_version import DcgmiVersion, parse_dcgmi_version
from burnin.parsers.ofed_info import OfedRelease, parse_ofed_info

DCGMI = """Version : 3.3.1
Build ID : 14
Build Date : 2023-10-12
Build Type : Release
Commit ID : 2e7b8f2e3bc0c3fd1a8c1a1c3c4e5a9d2f1b6c7d
Branch Name : rel_dcgm_3_3
CPU Arch : x86_64
Build Platform : Linux 4.15.0-180-generic #189-Ubuntu SMP Wed May 18 14:13:57 UTC 2022 x86_64
CRC : 08a0d9624b562be0e4b1dc1c2bd55e6e
"""
HOSTENGINE = """
Hostengine build info:
Version : 3.3.0
Build ID : 12
Build Date : 2023-09-01
"""


@pytest.mark.parametrize(("text", "expected"), [
    ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", OfedRelease("MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX",
                                                      "23.10-1.1.9.0")),
    ("MLNX_OFED_LINUX-5.8-3.0.7.0:", OfedRelease("MLNX_OFED_LINUX-5.8-3.0.7.0", "MLNX_OFED_LINUX", "5.8-3.0.7.0")),
    ("OFED-internal-24.10-1.1.4:\n", OfedRelease("OFED-internal-24.10-1.1.4", "OFED-internal", "24.10-1.1.4")),
    ("MLNX_OFED_LINUX-24.04-0.6.6.0", OfedRelease("MLNX_OFED_LINUX-24.04-0.6.6.0", "MLNX_OFED_LINUX",
                                                  "24.04-0.6.6.0")),
    ("\n  MLNX_OFED_LINUX-23.10-1.1.9.0:  \r\n\n", OfedRelease("MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX",
                                                               "23.10-1.1.9.0")),
    ("$ ofed_info -s\nMLNX_OFED_LINUX-23.10-1.1.9.0:\n", OfedRelease("MLNX_OFED_LINUX-23.10-1.1.9.0",
                                                                     "MLNX_OFED_LINUX", "23.10-1.1.9.0")),
    ("warning: something\nMLNX_OFED_LINUX-23.10-1.1.9.0:\nOTHER-1.0:\n",
     OfedRelease("MLNX_OFED_LINUX-23.10-1.1.9.0", "MLNX_OFED_LINUX", "23.10-1.1.9.0")),
])
def test_ofed_info_release(text: str, expected: OfedRelease) -> None:
    assert parse_ofed_info(text) == expected


@pytest.mark.parametrize("text", [
    "", "   \n", "23.10-1.1.9.0\n", "MLNX_OFED_LINUX:\n", "bash: ofed_info: command not found\n",
    "MLNX_OFED_LINUX-:\n", "-23.10:\n", "MLNX OFED-23.10:\n", "MLNX_OFED_LINUX-23.10-1.1.9.0::\n",
    "MLNX_OFED_LINUX-" + "1" * 300 + ":\n", "[...]\n",
])
def test_ofed_info_refuses_what_is_no_release(text: str) -> None:
    with pytest.raises(ParseError, match=r"^ofed_info: "):
        parse_ofed_info(text)


def test_ofed_info_refuses_what_is_not_text() -> None:
    with pytest.raises(ParseError, match="expected text"):
        parse_ofed_info(b"MLNX_OFED_LINUX-23.10-1.1.9.0:")  # type: ignore[arg-type]


def test_dcgmi_version_alone() -> None:
    assert parse_dcgmi_version(DCGMI) == DcgmiVersion("3.3.1", None)


def test_dcgmi_version_and_its_hostengine() -> None:
    assert parse_dcgmi_version(DCGMI + HOSTENGINE) == DcgmiVersion("3.3.1", "3.3.0")


def test_dcgmi_version_keys_are_read_loosely() -> None:
    text = "version:3.3.5\r\nBuild ID: 1\n\nHOSTENGINE BUILD INFO :\n  Version   :   3.3.5  \nVersion : 9.9.9\n"
    assert parse_dcgmi_version(text) == DcgmiVersion("3.3.5", "3.3.5")


def test_the_first_version_of_each_part_counts() -> None:
    assert parse_dcgmi_version("Version : 3.3.1\nVersion : 1.0.0\n") == DcgmiVersion("3.3.1", None)


def test_a_hostengine_that_did_not_answer_has_no_version() -> None:
    text = DCGMI + "\nHostengine build info:\nError: unable to establish a connection to the specified host\n"
    assert parse_dcgmi_version(text) == DcgmiVersion("3.3.1", None)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty input"),
    ("Build ID : 14\n", "no 'Version : X.Y.Z' line of dcgmi itself found"),
    ("Hostengine build info:\nVersion : 3.3.1\n", "no 'Version : X.Y.Z' line of dcgmi itself found"),
    ("Version : unknown\n", "Version 'unknown' is not a version"),
    ("Version :\n", "Version '' is not a version"),
    ("Version : 3.3.1 (beta)\n", "is not a version"),
    ("Error: unable to establish a connection\n", "no 'Version"),
    ("Hostengine build info: yes\nVersion : 3.3.1\n", None),  # not the section line: dcgmi's own version
])
def test_dcgmi_version_refuses_what_names_no_version(text: str, message: str | None) -> None:
    if message is None:
        assert parse_dcgmi_version(text) == DcgmiVersion("3.3.1", None)
        return
    with pytest.raises(ParseError, match=f"^dcgmi-version: {message}" if message != "is not a version" else message):
        parse_dcgmi_version(text)


@pytest.mark.parametrize(("length", "parses"), [(200, True), (201, False)])
def test_ofed_info_reads_lines_up_to_200_characters(length: int, parses: bool) -> None:
    line = "MLNX_OFED_LINUX-23.10-" + "1" * (length - len("MLNX_OFED_LINUX-23.10-") - 1) + ":"
    assert len(line) == length
    if parses:
        assert parse_ofed_info(line + "\n").release == line[:-1]
    else:
        with pytest.raises(ParseError, match="no release line"):
            parse_ofed_info(line + "\n")


def test_dcgmi_version_quotes_the_line_it_cannot_read() -> None:
    with pytest.raises(ParseError) as info:
        parse_dcgmi_version("$ dcgmi --version\n[...]\nVersion : not-a-version!\n")
    assert info.value.excerpt == "Version : not-a-version!"


def test_dcgmi_version_after_a_prompt_and_an_elision() -> None:
    assert parse_dcgmi_version("$ dcgmi -v\n[...]\n\nVersion : 3.3.1\n") == DcgmiVersion("3.3.1", None)
