"""A simulated rank of an mpirun job writes its output in flushed pieces that each end a line.

mpirun forwards each rank's output in the pieces the rank wrote, beside the other ranks' pieces: a line
that stdout's buffer cut in two came out with another rank's NCCL INFO lines inside it (the SSH lab's
mpirun test counted 63 of its 64 rank lines on a loaded machine).
"""

from __future__ import annotations

import io

import pytest

from burnin.sim import fabric_model


class _Pieces(io.StringIO):
    """stdout that records what each flush handed on."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[str] = []
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.pieces.append(self.pending)
            self.pending = ""


@pytest.mark.parametrize("count", [1, 7, 64, 300])
def test_every_flushed_piece_ends_a_line_and_stays_small(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    out = _Pieces()
    monkeypatch.setattr("sys.stdout", out)
    lines = [f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on sim{rank % 8 + 1:02d} device {rank % 8:2d} "
             f"[0000:{rank:02x}:00.0] NVIDIA H100 80GB HBM3\n" for rank in range(count)]
    fabric_model.write_lines(lines)
    assert not out.pending
    assert "".join(out.pieces) == "".join(lines)
    assert all(piece.endswith("\n") and len(piece) <= fabric_model.WHOLE_LINES_BYTES for piece in out.pieces)
    size = len("".join(lines))
    assert len(out.pieces) == 1 if size <= fabric_model.WHOLE_LINES_BYTES else 1 < len(out.pieces) < count
