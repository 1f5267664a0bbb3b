"""``ofed_info -s`` (MLNX_OFED, DOCA-OFED): the installed OFED release, on one line.

MLNX_OFED prints ``MLNX_OFED_LINUX-23.10-1.1.9.0:``; DOCA's host packages print the
same shape under their own package name (``OFED-internal-24.10-1.1.4:``). These are
the documented shapes: the reference set holds no real capture of this tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, is_elision, is_prompt, iter_lines, require_text

TOOL = "ofed_info"
_MAX_LINE = 200
# Package words start with a letter, the version with a digit: each '-' is decided by the character after it.
_RELEASE = re.compile(r"^(?P<package>[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*)"
                      r"-(?P<version>[0-9][0-9A-Za-z._-]*):?$")


@dataclass(frozen=True, slots=True)
class OfedRelease:
    release: str
    """As printed, without the colon: ``MLNX_OFED_LINUX-23.10-1.1.9.0`` (what a topology's ``software.ofed`` names)."""
    package: str
    """``MLNX_OFED_LINUX``."""
    version: str
    """``23.10-1.1.9.0``."""


def parse_ofed_info(text: str) -> OfedRelease:
    """The release line of ``ofed_info -s``; a ParseError when no line has that shape."""
    require_text(TOOL, text)
    for raw in iter_lines(text):
        line = raw.strip()
        if not line or len(line) > _MAX_LINE or is_elision(line) or is_prompt(line):
            continue
        match = _RELEASE.match(line)
        if match is not None:
            return OfedRelease(line.removesuffix(":"), match.group("package"), match.group("version"))
    fail(TOOL, "no release line like 'MLNX_OFED_LINUX-23.10-1.1.9.0:' found", head_excerpt(text))
