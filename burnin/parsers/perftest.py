"""perftest (linux-rdma): ``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw`` and the ``*_lat`` tests.

One text may hold several reports (a terminal session, or the server and the
client of one run); each starts at its title line (``RDMA_Write BW Test``,
``Send Latency Test``) between dashed lines, then ``Key : value`` settings
(two per line, tab-separated; in tickets and chats the tabs often arrive as
spaces, so a right-hand key perftest prints, ``Device``, ``Transport type``,
``Using SRQ``, ``Lock-free``, ``Using Enhanced Reorder`` or ``TOS``, also starts
a new pair after spaces), the local and remote addresses, and the result
table: a header line starting ``#bytes`` and one row of numbers per message
size, closed by a dashed line. Lines inside the table that are not rows
(``Conflicting CPU frequency values detected ...``) are kept as warnings.

With ``--use_cuda=N`` perftest first prints its CUDA set-up lines; ``Picking
device No. N`` (or ``Picking GPU number N`` with ``--use_cuda_bus_id``) gives
:attr:`PerftestReport.cuda_device`, the proof that the buffers were in GPU
memory. Bandwidth columns are in ``Gb/sec`` (``--report_gbits``: 10^9 bits)
or ``MiB/sec`` (``MB/sec`` in old versions; 2^20 bytes); see
:meth:`PerftestReport.average_gbps`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnin.parsers._common import fail, head_excerpt, is_elision, parse_float, require_text, split_colon, split_lines

TOOL = "perftest"
KINDS = {"BW": "bw", "Latency": "lat"}
# bytes per second in one unit of each bandwidth column
_BYTES_PER_S = {"Gb/sec": 125_000_000.0, "MiB/sec": float(1 << 20), "MB/sec": float(1 << 20)}
_PICK = re.compile(r"^Picking (?:device No\.|GPU number) (\d{1,4})$")
_DASHES = "---------"
# The keys perftest prints in the right-hand column of its settings (perftest_parameters.c ctx_print_test_info).
_RIGHT_KEY = re.compile(r"\s(Device|Transport type|Using SRQ|Lock-free|Using Enhanced Reorder|TOS)\s*:(?=\s|$)")


@dataclass(frozen=True, slots=True)
class PerftestRow:
    size_bytes: int
    iterations: int
    values: tuple[float, ...]
    """One value per column of :attr:`PerftestReport.columns` (``#bytes`` and ``#iterations`` included)."""


@dataclass(frozen=True, slots=True)
class PerftestReport:
    test: str
    """The title without ``Test``: ``RDMA_Write BW``, ``Send Latency``."""
    kind: str
    """``bw`` or ``lat``."""
    device: str | None
    """``Device`` of the settings block (``mlx5_0``)."""
    settings: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    """The result table's columns, e.g. ``#bytes``, ``#iterations``, ``BW peak[Gb/sec]``, ``BW average[Gb/sec]``."""
    rows: tuple[PerftestRow, ...]
    cuda_device: int | None
    """The GPU perftest picked for its buffers (``--use_cuda``); None: host memory."""
    warnings: tuple[str, ...]
    complete: bool
    """The result table was closed by its dashed line (the tool ran to its end)."""

    def setting(self, key: str) -> str | None:
        return next((value for name, value in self.settings if name == key), None)

    @property
    def bw_unit(self) -> str | None:
        """``Gb/sec``, ``MiB/sec`` or ``MB/sec`` (None for a latency test)."""
        column = next((c for c in self.columns if c.startswith("BW average[")), None)
        return column[len("BW average["):-1] if column else None

    def value(self, row: PerftestRow, column_start: str) -> float | None:
        """The row's value in the first column whose name starts with ``column_start``."""
        index = next((i for i, c in enumerate(self.columns) if c.startswith(column_start)), None)
        return row.values[index] if index is not None and index < len(row.values) else None

    def average_gbps(self, row: PerftestRow) -> float | None:
        """``BW average`` of the row in Gb/s (10^9 bits per second), whatever unit was printed."""
        return self._gbps(self.value(row, "BW average["))

    def peak_gbps(self, row: PerftestRow) -> float | None:
        return self._gbps(self.value(row, "BW peak["))

    def _gbps(self, value: float | None) -> float | None:
        scale = _BYTES_PER_S.get(self.bw_unit or "")
        return None if value is None or scale is None else value * scale * 8 / 1e9


@dataclass(frozen=True, slots=True)
class PerftestOutput:
    reports: tuple[PerftestReport, ...]


def _title(line: str) -> tuple[str, str] | None:
    """``RDMA_Write BW Test`` -> (``RDMA_Write BW``, ``bw``)."""
    words = line.split()
    if len(words) >= 3 and words[-1] == "Test" and words[-2] in KINDS and not line.lstrip().startswith("#"):
        return " ".join(words[:-1]), KINDS[words[-2]]
    return None


def _columns(line: str) -> tuple[str, ...]:
    """Column names of a result header: ``#x`` words, and ``name[unit]`` with the word before it."""
    columns: list[str] = []
    pending: list[str] = []
    for word in line.split():
        if word.startswith("#"):
            if pending:
                columns.append(" ".join(pending))
                pending = []
            columns.append(word)
        elif "[" in word:
            columns.append(" ".join([*pending, word]))
            pending = []
        else:
            pending.append(word)
    if pending:
        columns.append(" ".join(pending))
    return tuple(columns)


def _settings(line: str) -> list[tuple[str, str]]:
    """`` Dual-port       : OFF\\t\\tDevice         : mlx5_0`` -> two pairs (a key may sit before a tab)."""
    pairs: list[tuple[str, str]] = []
    key_alone: str | None = None
    for chunk in line.split("\t"):
        text = chunk.strip()
        if not text:
            continue
        if text.startswith(":") and key_alone is not None:
            text = f"{key_alone} {text}"
        pair = split_colon(text)
        if pair is None:
            key_alone = text
            continue
        key_alone = None
        pairs += _split_right(*pair)
    return pairs


def _split_right(key: str, value: str) -> list[tuple[str, str]]:
    """``Dual-port``, ``OFF          Device         : mlx5_0`` (tabs lost) -> two pairs."""
    match = _RIGHT_KEY.search(value)
    if match is None:
        return [(key, value)]
    return [(key, value[: match.start()].strip()), (match.group(1), value[match.end():].strip())]


class _Builder:
    def __init__(self, test: str, kind: str, cuda_device: int | None) -> None:
        self.test = test
        self.kind = kind
        self.cuda_device = cuda_device
        self.settings: list[tuple[str, str]] = []
        self.columns: tuple[str, ...] = ()
        self.rows: list[PerftestRow] = []
        self.warnings: list[str] = []
        self.complete = False
        self.in_table = False

    def row(self, line: str) -> bool:
        words = line.split()
        if len(words) < max(2, len(self.columns)) or not self.columns:
            return False
        values = [parse_float(w) for w in words[: len(self.columns)]]
        if any(v is None for v in values):
            return False
        numbers = [v for v in values if v is not None]
        size = self._int(numbers, "#bytes")
        iterations = self._int(numbers, "#iterations")
        if size is None or iterations is None:
            return False
        self.rows.append(PerftestRow(size, iterations, tuple(numbers)))
        return True

    def _int(self, numbers: list[float], column: str) -> int | None:
        if column not in self.columns:
            return None
        value = numbers[self.columns.index(column)]
        return int(value) if value == value and abs(value) < 1e18 and float(value).is_integer() else None

    def build(self) -> PerftestReport:
        device = next((value for key, value in self.settings if key == "Device"), None)
        return PerftestReport(self.test, self.kind, device, tuple(self.settings), self.columns, tuple(self.rows),
                              self.cuda_device, tuple(self.warnings), self.complete)


def parse_perftest(text: str) -> PerftestOutput:
    """Every perftest report in ``text``, in order; ParseError when there is none."""
    require_text(TOOL, text)
    reports: list[PerftestReport] = []
    current: _Builder | None = None
    cuda_device: int | None = None
    for raw in split_lines(text):
        line = raw.strip()
        if not line or is_elision(line):
            continue
        title = _title(line)
        if title is not None:
            if current is not None:
                reports.append(current.build())
            current = _Builder(title[0], title[1], cuda_device)
            cuda_device = None
            continue
        pick = _PICK.match(line)
        if pick is not None:
            cuda_device = int(pick.group(1))
            continue
        if current is None:
            continue
        if line.startswith(_DASHES) and set(line) == {"-"}:
            if current.in_table:
                current.in_table = False
                current.complete = True
            continue
        if line.startswith("#bytes"):
            current.columns = _columns(line)
            current.in_table = True
            current.complete = False
            continue
        if current.in_table:
            if not current.row(line):
                current.warnings.append(line[:200])
            continue
        if not current.columns:
            if line.upper().startswith("WARNING"):
                current.warnings.append(line[:200])
            else:
                current.settings += _settings(raw)
    if current is not None:
        reports.append(current.build())
    if not reports:
        fail(TOOL, "no perftest report (no '... BW Test' or '... Latency Test' title line)", head_excerpt(text))
    return PerftestOutput(tuple(reports))
