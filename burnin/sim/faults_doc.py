"""docs/faults.md's table of faults, written from the registry (``burnin faults --markdown``).

The page's prose is written by hand; its table lies between :data:`BEGIN` and
:data:`END` and is what :func:`table` writes, so a fault declared with its spec
(burnin.sim.faults) is documented by regenerating, never by editing the page
(``burnin faults --markdown --update docs/faults.md``; a test compares).
"""

from __future__ import annotations

from collections.abc import Iterable

from burnin.errors import UsageError
from burnin.sim.faults import FaultSpec

BEGIN = "<!-- the table below is `burnin faults --markdown`: do not edit it by hand -->"
END = "<!-- end of the table -->"
SUITES = ("node", "fabric", "storage", "megatron", "soak")
"""The table's order of suites (then of checks, then the registry's)."""
HEADER = ("| Fault | Check | Suite | Default target | What it simulates "
          "| What changes (in the sources the check reads) |\n|---|---|---|---|---|---|\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _order(specs: list[FaultSpec]) -> list[FaultSpec]:
    """By suite, then by check (its area where the registry first names it, then its number), then as registered."""
    areas: list[str] = []
    for spec in specs:
        area = spec.check_id.partition("-")[0]
        if area not in areas:
            areas.append(area)

    def key(item: tuple[int, FaultSpec]) -> tuple[int, int, int, int]:
        position, spec = item
        area, _, number = spec.check_id.partition("-")
        return (SUITES.index(spec.suite) if spec.suite in SUITES else len(SUITES), areas.index(area),
                int(number) if number.isdigit() else 0, position)

    return [spec for _, spec in sorted(enumerate(specs), key=key)]


def table(specs: Iterable[FaultSpec]) -> str:
    """One row per fault: its name, the check that catches it (and how, when not by failing), its suite,
    its default target, what it simulates and what changes."""
    rows = []
    for spec in _order(list(specs)):
        check = spec.check_id if spec.outcome == "fail" else f"{spec.check_id} ({spec.outcome})"
        target = f"`{spec.default_target}`" if spec.default_target else "node"
        rows.append(f"| `{spec.name}` | {check} | {spec.suite} | {target} | {_cell(spec.description)} "
                    f"| {_cell(spec.changes)} |\n")
    return HEADER + "".join(rows)


def update(page: str, specs: Iterable[FaultSpec]) -> str:
    """``page`` with the text between its markers replaced by :func:`table`; UsageError without the markers."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise UsageError(f"the page has no generated table: its markers are {BEGIN!r} and {END!r}")
    return page[: start + len(BEGIN)] + "\n\n" + table(specs) + "\n" + page[end:]


def generated(page: str) -> str:
    """The text between the page's markers (what :func:`update` writes there); empty without them."""
    start, end = page.find(BEGIN), page.find(END)
    return page[start + len(BEGIN): end].strip("\n") + "\n" if 0 <= start < end else ""
