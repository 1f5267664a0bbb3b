"""p2pBandwidthLatencyTest (NVL-03): the real H100 and A100 samples, the whole output, cut and garbled outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnin.errors import ParseError
from burnin.parsers import parse, to_jsonable
from burnin.parsers.p2p_bandwidth import describe_title, parse_p2p_bandwidth

H100 = "p2pBandwidthLatencyTest/p2p-unidir-writes-matrix-h100-8gpu.txt"
A100 = "p2pBandwidthLatencyTest/p2p-unidir-writes-matrix-a100-8gpu.txt"


def _off_diagonal(matrix: tuple[tuple[float | None, ...], ...]) -> list[float]:
    return [v for r, row in enumerate(matrix) for c, v in enumerate(row) if r != c and v is not None]


def test_real_h100_sample(reference_dir: Path) -> None:
    report = parse_p2p_bandwidth((reference_dir / H100).read_text())
    (m,) = report.matrices
    assert (m.kind, m.p2p_enabled, m.bidirectional, m.unit, m.axis, m.transfer) == (
        "bandwidth", True, False, "GB/s", "D\\D", "writes")
    assert m.columns == m.rows == tuple(range(8))
    assert m.matrix[0][0] == 2494.51 and m.matrix[2][0] == 363.43 and m.matrix[3][2] == 393.63
    off = _off_diagonal(m.matrix)
    assert len(off) == 56 and min(off) == 363.43 and max(off) == 393.63
    assert m.cell(2, 0) == 363.43 and m.cell(0, 8) is None and m.cell(9, 0) is None
    assert report.devices == () and report.peer_access == ()
    assert report.find("bandwidth", p2p_enabled=True, bidirectional=False) is m
    assert report.find("bandwidth", p2p_enabled=False) is None and report.find("latency") is None


def test_real_a100_sample(reference_dir: Path) -> None:
    (m,) = parse_p2p_bandwidth((reference_dir / A100).read_text()).matrices
    assert m.title == "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"
    assert m.matrix[2][2] == 1594.39 and m.matrix[5][3] == 270.84
    assert min(_off_diagonal(m.matrix)) == 270.84


def full_output(gpus: int = 2, *, access: bool = True) -> str:
    """Every section the real tool prints, in its order and spacing (cuda-samples' printf formats)."""
    lines = ["[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"]
    lines += [f"Device: {d}, NVIDIA H100 80GB HBM3, pciBusID: {0x18 + 0x20 * d:x}, pciDeviceID: 0, pciDomainID:0"
              for d in range(gpus)]
    lines += [f"Device={d} {'CAN' if access or 1 not in (d, p) else 'CANNOT'} Access Peer Device={p}"
              for d in range(gpus) for p in range(gpus) if d != p]
    lines += ["", "***NOTE: In case a device doesn't have P2P access to other one, it falls back to normal memcopy "
              "procedure.", "So you can see lesser Bandwidth (GB/s) and unstable Latency (us) in those cases.", ""]
    lines += ["P2P Connectivity Matrix", "     D\\D" + "".join(f"{j:6d}" for j in range(gpus))]
    lines += [f"{i:6d}\t" + "".join(f"{1 if access or i == j or 1 not in (i, j) else 0:6d}" for j in range(gpus))
              for i in range(gpus)]

    def table(axis: str, diag: float, off: float) -> list[str]:
        out = [f"   {axis}" + "".join(f"{j:6d} " for j in range(gpus))]
        out += [f"{i:6d} " + "".join(f"{diag if i == j else off + i:6.02f} " for j in range(gpus)) for i in range(gpus)]
        return out

    for title, diag, off in (("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", 1580.0, 40.0),
                             ("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", 2500.0, 376.0),
                             ("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", 1600.0, 56.0),
                             ("Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)", 2520.0, 742.0)):
        lines += [title, *table("D\\D", diag, off)]
    for title, gpu, cpu in (("P2P=Disabled Latency Matrix (us)", 14.0, 12.0),
                            ("P2P=Enabled Latency (P2P Writes) Matrix (us)", 2.5, 2.2)):
        lines += [title, *table("GPU", 2.1, gpu), "", *table("CPU", 2.0, cpu)]
    lines += ["", "NOTE: The CUDA Samples are not meant for performance measurements. Results may vary when GPU Boost "
              "is enabled."]
    return "\n".join(lines) + "\n"


def test_the_whole_output() -> None:
    report = parse_p2p_bandwidth(full_output(3))
    assert [(d.index, d.name, d.pci_bus_id) for d in report.devices] == [
        (0, "NVIDIA H100 80GB HBM3", "18"), (1, "NVIDIA H100 80GB HBM3", "38"), (2, "NVIDIA H100 80GB HBM3", "58")]
    assert len(report.peer_access) == 6 and all(p.can_access for p in report.peer_access)
    shapes = [(m.kind, m.p2p_enabled, m.bidirectional, m.axis, m.unit, m.transfer) for m in report.matrices]
    assert shapes == [
        ("connectivity", None, None, "D\\D", None, None),
        ("bandwidth", False, False, "D\\D", "GB/s", None),
        ("bandwidth", True, False, "D\\D", "GB/s", "writes"),
        ("bandwidth", False, True, "D\\D", "GB/s", None),
        ("bandwidth", True, True, "D\\D", "GB/s", None),
        ("latency", False, None, "GPU", "us", None),
        ("latency", False, None, "CPU", "us", None),
        ("latency", True, None, "GPU", "us", "writes"),
        ("latency", True, None, "CPU", "us", "writes"),
    ]
    connectivity = report.find("connectivity")
    assert connectivity is not None and connectivity.matrix == ((1.0,) * 3,) * 3
    enabled = report.find("bandwidth", p2p_enabled=True, bidirectional=False)
    assert enabled is not None and enabled.cell(1, 2) == 377.0 and enabled.cell(2, 2) == 2500.0
    latency = report.find("latency", p2p_enabled=True, axis="GPU")
    assert latency is not None and latency.cell(0, 1) == 2.5 and latency.cell(1, 1) == 2.1
    cpu = report.find("latency", p2p_enabled=True, axis="CPU")
    assert cpu is not None and cpu.cell(2, 0) == 4.2
    assert report.find("latency", p2p_enabled=False, axis="CPU") is report.matrices[6]


def test_peer_access_refused() -> None:
    report = parse_p2p_bandwidth(full_output(3, access=False))
    refused = sorted((p.device, p.peer) for p in report.peer_access if not p.can_access)
    assert refused == [(0, 1), (1, 0), (1, 2), (2, 1)]
    connectivity = report.find("connectivity")
    assert connectivity is not None and connectivity.matrix[1] == (0.0, 1.0, 0.0)
    assert connectivity.matrix[0] == (1.0, 0.0, 1.0)


def test_burnin_parse_json_carries_every_section() -> None:
    data = to_jsonable(parse("p2p-bandwidth", full_output(2)))
    assert isinstance(data, dict) and {"devices", "matrices", "peer_access"} <= set(data)
    assert data["peer_access"][0] == {"device": 0, "peer": 1, "can_access": True}
    assert data["matrices"][2]["transfer"] == "writes" and data["matrices"][2]["matrix"][0][1] == 376.0


@pytest.mark.parametrize(("title", "expected"), [
    ("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", ("bandwidth", True, False, "GB/s", "writes")),
    ("Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)", ("bandwidth", True, False, "GB/s", "reads")),
    ("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", ("bandwidth", False, True, "GB/s", None)),
    ("P2P=Enabled Latency (P2P Reads) Matrix (us)", ("latency", True, None, "us", "reads")),
    ("P2P Connectivity Matrix", ("connectivity", None, None, None, None)),
    ("Some Matrix (furlongs)", ("bandwidth", None, None, None, None)),
    ("Matrix (GB/s", ("bandwidth", None, None, None, None)),
])
def test_titles(title: str, expected: tuple[object, ...]) -> None:
    assert describe_title(title) == expected


def test_quoted_and_elided_snippets_parse() -> None:
    text = ("> Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n>    D\\D     0      1\n"
            ">      0 2494.51 364.13\n>      1 375.18 2533.95\n[...]\n")
    (m,) = parse_p2p_bandwidth(text).matrices
    assert m.matrix == ((2494.51, 364.13), (375.18, 2533.95))


def test_a_na_cell_is_none() -> None:
    text = ("P2P=Enabled Latency (P2P Writes) Matrix (us)\n   GPU     0      1\n"
            "     0   2.10    N/A\n     1   2.50   2.10\n")
    (m,) = parse_p2p_bandwidth(text).matrices
    assert m.matrix == ((2.10, None), (2.50, 2.10))


# ---------------------------------------------------------------- outputs that must not parse


def _cut(text: str, marker: str, keep: int) -> str:
    """``text`` up to ``keep`` lines after the first line containing ``marker``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if marker in line)
    return "\n".join(lines[: at + keep + 1]) + "\n"


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty input"),
    ("   \n\t\n", "empty input"),
    ("Segmentation fault (core dumped)\n", "no 'D\\\\D'/'GPU'/'CPU' matrix found"),
    ("\x00\x01garbage \x7f\n" * 3, "no 'D\\\\D'/'GPU'/'CPU' matrix found"),
    ("   D\\D     0      1\n     0 1.00 2.00\n     1 2.00 1.00\n", "a matrix without a title"),
])
def test_garbage_raises(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as exc:
        parse_p2p_bandwidth(text)
    assert exc.value.tool == "p2p-bandwidth"


def test_a_matrix_cut_after_some_rows_raises_with_the_rows() -> None:
    text = _cut(full_output(4), "Unidirectional P2P=Enabled", 3)  # the header and two of four rows
    with pytest.raises(ParseError, match=r"has rows \[0, 1\] for columns \[0, 1, 2, 3\]: output cut short") as exc:
        parse_p2p_bandwidth(text)
    assert "P2P Writes" in str(exc.value) and "376.00" in exc.value.excerpt


def test_a_row_cut_in_the_middle_raises() -> None:
    text = full_output(2).replace("     1 377.00 2500.00 \n", "     1 377.00\n", 1)
    with pytest.raises(ParseError, match=r"rows \[0\] for columns \[0, 1\]"):
        parse_p2p_bandwidth(text)


def test_a_title_without_rows_raises() -> None:
    with pytest.raises(ParseError, match="has no rows: output cut short") as exc:
        parse_p2p_bandwidth(_cut(full_output(2), "Bidirectional P2P=Enabled", 0))
    assert "Bidirectional P2P=Enabled" in exc.value.excerpt
    with pytest.raises(ParseError, match="has no rows before the next title"):
        parse_p2p_bandwidth("P2P Connectivity Matrix\nUnidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
                            "   D\\D     0\n     0 1.0\n")
    with pytest.raises(ParseError, match="has no row for columns"):
        parse_p2p_bandwidth("P2P Connectivity Matrix\n     D\\D     0     1\n")


def test_rows_that_are_not_the_columns_raise() -> None:
    text = "P2P Connectivity Matrix\n     D\\D     0     1\n     1\t     1     1\n     0\t     1     1\n"
    with pytest.raises(ParseError, match=r"rows \[1, 0\] for columns \[0, 1\]"):
        parse_p2p_bandwidth(text)


def test_a_cuda_failure_raises_with_its_line() -> None:
    text = _cut(full_output(2), "Bidirectional P2P=Disabled", 0).replace(
        "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n",
        "Cuda failure p2pBandwidthLatencyTest.cu:315: 'peer access is not supported between these two devices'\n")
    with pytest.raises(ParseError, match="stopped on a CUDA error") as exc:
        parse_p2p_bandwidth(text)
    assert "peer access is not supported" in exc.value.excerpt


def test_a_header_that_is_not_numbers_is_text() -> None:
    text = "GPU utilisation is fine\nP2P Connectivity Matrix\n     D\\D     0\n     0\t     1\n"
    (m,) = parse_p2p_bandwidth(text).matrices
    assert m.kind == "connectivity" and m.matrix == ((1.0,),)


def test_quote_marks_without_a_blank_are_dropped_whole() -> None:
    (m,) = parse_p2p_bandwidth(">P2P Connectivity Matrix\n>>     D\\D     0\n>     0\t     1\n").matrices
    assert m.title == "P2P Connectivity Matrix" and m.matrix == ((1.0,),)


def test_a_cut_matrix_quotes_its_title_header_rows_and_the_line_that_stopped_it() -> None:
    text = ("junk before\nP2P Connectivity Matrix\n     D\\D     0     1\n     0\t     1     1\nstopped here\n"
            "after that\n")
    with pytest.raises(ParseError) as exc:
        parse_p2p_bandwidth(text)
    assert exc.value.excerpt == "P2P Connectivity Matrix\nD\\D     0     1\n0\t     1     1\nstopped here"
    with pytest.raises(ParseError) as first:
        parse_p2p_bandwidth("P2P Connectivity Matrix\n     D\\D     0     1\n     0\t     1     1\n")
    assert first.value.excerpt == "P2P Connectivity Matrix\nD\\D     0     1\n0\t     1     1\n"  # and the end
