"""``sysctl -a`` / ``sysctl NAME...``: ``key = value`` lines (``net.ipv4.conf.all.arp_ignore = 1``).

Only keys made of letters, digits, ``_``, ``-``, ``.`` and ``/`` (interface
names such as ``enp41s0f0np0`` or VLANs ``bond0.100``, written ``bond0/100``
by sysctl) are read; other lines are skipped. Values stay text: most are
integers (:meth:`SysctlValues.integer`), some are lists or words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_int, require_text

TOOL = "sysctl"
MAX_LINE = 4096

_LINE = re.compile(r"^(?P<key>[a-z][A-Za-z0-9_.:/-]{0,255}?)\s*=\s?(?P<value>.*?)\s*$")


@dataclass(frozen=True, slots=True)
class SysctlValues:
    values: dict[str, str]
    """Key -> value as printed (the first one when a key repeats)."""

    def integer(self, key: str) -> int | None:
        return parse_int(self.values.get(key))

    def interface_values(self, setting: str, family: str = "ipv4") -> dict[str, int]:
        """``net.<family>.conf.<iface>.<setting>`` for every interface (``all`` and ``default`` included)."""
        prefix, suffix = f"net.{family}.conf.", f".{setting}"
        out: dict[str, int] = {}
        for key, value in self.values.items():
            if key.startswith(prefix) and key.endswith(suffix):
                number = parse_int(value)
                if number is not None:
                    out[key[len(prefix):-len(suffix)].replace("/", ".")] = number
        return out


def parse_sysctl(text: str) -> SysctlValues:
    """Parse ``sysctl`` output (``key = value`` per line)."""
    require_text(TOOL, text)
    values: dict[str, str] = {}
    for line in iter_lines(text):
        if len(line) > MAX_LINE or "=" not in line:
            continue
        match = _LINE.match(line.strip())
        if match is not None and "." in match.group("key"):
            values.setdefault(match.group("key"), match.group("value"))
    if not values:
        fail(TOOL, "no 'key.name = value' line", head_excerpt(text))
    return SysctlValues(values)
