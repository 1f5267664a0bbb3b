"""``dcgmi --version`` (``dcgmi -v``): the DCGM version of dcgmi and, when it answers, of its host engine.

The shape is the documented one (the reference set holds no real capture of it):
``Key : Value`` lines, ``Version : 3.3.1`` first, then ``Build ID``, ``Build Date``,
``Build Type``, ``Commit ID``, ``Branch Name``, ``CPU Arch``, ``Build Platform``,
``CRC``; when nv-hostengine answers, a ``Hostengine build info:`` line and the same
keys for the host engine follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, require_text

TOOL = "dcgmi-version"
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+~-]{0,31}$")
_HOSTENGINE = "hostengine build info"


@dataclass(frozen=True, slots=True)
class DcgmiVersion:
    version: str
    """dcgmi's own ``Version``, e.g. ``3.3.1``."""
    hostengine_version: str | None
    """The host engine's ``Version`` under ``Hostengine build info:``; None when it did not answer."""


def parse_dcgmi_version(text: str) -> DcgmiVersion:
    """The versions ``dcgmi --version`` printed; a ParseError without dcgmi's own ``Version`` line."""
    require_text(TOOL, text)
    found: dict[bool, str] = {}  # host engine? -> its version
    hostengine = False
    for raw in iter_lines(text):
        key, sep, value = raw.strip().partition(":")  # other lines (blank, a prompt, [...]) name no key here
        if key.strip().lower() == _HOSTENGINE and not value.strip():
            hostengine = True
            continue
        if not sep or key.strip().lower() != "version" or hostengine in found:
            continue
        value = value.strip()
        if not _VERSION.match(value):
            fail(TOOL, f"Version {value[:40]!r} is not a version", raw)
        found[hostengine] = value
    if False not in found:
        fail(TOOL, "no 'Version : X.Y.Z' line of dcgmi itself found", head_excerpt(text))
    return DcgmiVersion(found[False], found.get(True))
