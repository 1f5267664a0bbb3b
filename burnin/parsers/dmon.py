"""``nvidia-smi dmon``: one line per GPU per sampling interval, under ``#`` header lines.

Two header lines name the columns and their units::

    # gpu    pwr  gtemp  mtemp     sm    mem ...   mclk   pclk     fb   bar1   ccpm
    # Idx      W      C      C      %      % ...    MHz    MHz     MB     MB     MB
        0    147     47     54     37      0 ...   2619   1980   3953   3952      0

The columns depend on ``-s`` (``p`` power/temperatures, ``u`` utilisation,
``c`` clocks, ``m`` memory, ...) and ``-o DT`` adds ``Date``/``Time`` columns;
dmon repeats the headers now and then, and may change nothing else. A value
dmon cannot read is ``-`` (kept as ``None``). Column names are kept as
printed (``gtemp``, ``mtemp``, ``pwr``, ``sm``, ``pclk``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, iter_lines, parse_float, parse_int, require_text

TOOL = "nvidia-smi-dmon"
_TEXT_COLUMNS = frozenset({"Date", "Time"})


@dataclass(frozen=True, slots=True)
class DmonSample:
    gpu: int
    values: dict[str, float | None]  # column -> number (None where dmon printed "-")
    stamp: str | None  # "Date Time" when dmon printed them (-o DT), else None
    line: int  # 1-based line number in the input

    def value(self, column: str) -> float | None:
        return self.values.get(column)


@dataclass(frozen=True, slots=True)
class DmonReport:
    columns: tuple[str, ...]  # numeric columns after "gpu", as printed
    units: dict[str, str]  # column -> unit from the second header line ("W", "C", "%", "MHz", "MB")
    samples: tuple[DmonSample, ...]

    def latest(self) -> dict[int, DmonSample]:
        """The last sample of each GPU."""
        latest: dict[int, DmonSample] = {}
        for sample in self.samples:
            latest[sample.gpu] = sample
        return latest


def _header(line: str) -> list[str]:
    return line.lstrip("#").split()


def parse_dmon(text: str) -> DmonReport:
    """Parse ``nvidia-smi dmon`` output (any ``-s`` selection, with or without ``-o DT``)."""
    require_text(TOOL, text)
    names: list[str] | None = None
    units: dict[str, str] = {}
    pending_units = False
    samples: list[DmonSample] = []
    for number, raw in enumerate(iter_lines(text), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            fields = _header(line)
            if pending_units and names is not None:
                units = dict(zip(names, fields, strict=False))
                pending_units = False
            elif "gpu" in fields:
                names = fields
                pending_units = True
            continue
        if names is None:
            fail(TOOL, f"line {number}: a value line before the '# gpu ...' header", head_excerpt(text))
        tokens = line.split()
        if len(tokens) != len(names):
            fail(TOOL, f"line {number}: {len(tokens)} values under {len(names)} columns", line[:200])
        row = dict(zip(names, tokens, strict=True))
        gpu = parse_int(row.pop("gpu"))
        if gpu is None or gpu < 0:
            fail(TOOL, f"line {number}: GPU index {tokens[names.index('gpu')]!r} is not a number", line[:200])
        stamp = " ".join(row.pop(c) for c in names if c in _TEXT_COLUMNS) or None
        samples.append(DmonSample(gpu, {c: parse_float(v) for c, v in row.items()}, stamp, number))
    if names is None:
        fail(TOOL, "no '# gpu ...' header line", head_excerpt(text))
    columns = tuple(c for c in names if c != "gpu" and c not in _TEXT_COLUMNS)
    return DmonReport(columns, {c: u for c, u in units.items() if c in columns}, tuple(samples))
