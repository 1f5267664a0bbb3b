"""Long outputs: parsers read line by line and hold a few times their input, not ten.

Memory is measured with tracemalloc (allocations, not time), on real reference
outputs repeated to a few MB: the peak while parsing, over the size of the text.
"""

from __future__ import annotations

import io
import json
import math
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from burnin.cli import parse_cmd
from burnin.parsers import _common, get_parser, iter_json, to_jsonable
from burnin.parsers._common import iter_lines, split_lines

pytestmark = pytest.mark.fuzz

# tool -> (reference file, most the parser may allocate at its peak, in times the text)
# Before streaming: dmesg-xid 3.4, lspci 2.6, nvidia-smi-q 8.1, ibstat 7.4, megatron-log 3.1, nccl-tests 5.2.
BOUNDS: dict[str, tuple[str, float]] = {
    "dmesg-xid": ("dmesg/dmesg-decode-time-format-iso-xid13-and-misc.txt", 3.0),
    "lspci": ("lspci/lspci-vvv-full-hgx-h100-8gpu-cx7-pex890xx.txt", 2.0),
    "nvidia-smi-q": ("nvidia-smi/q-full-h100-8gpu-driver535.183.01.txt", 2.0),
    "ibstat": ("infiniband/ibstat-h100-cx7-ndr400-ib-8port-all-active.txt", 3.0),
    "megatron-log": ("megatron/mixtral-8x7b-16xh100-iterations-43-45-issue756.txt", 3.0),
    "nccl-tests": ("nccl-tests/all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt", 4.0),
}
TARGET_CHARS = 1_500_000


@pytest.mark.parametrize("tool", sorted(BOUNDS))
def test_parser_peak_memory_is_a_few_times_its_input(tool: str, ref: Callable[[str], str]) -> None:
    relative, bound = BOUNDS[tool]
    sample = ref(relative)
    if not sample.endswith("\n"):
        sample += "\n"
    text = sample * (TARGET_CHARS // len(sample) + 1)
    parse = get_parser(tool)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        record = parse(text)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert record is not None
    assert peak / len(text) <= bound, f"{tool}: peak {peak / len(text):.1f}x the text (bound {bound}x)"


def test_long_outputs_parse_to_the_same_records_as_short_ones(ref: Callable[[str], str]) -> None:
    one = ref(BOUNDS["nvidia-smi-q"][0])
    many = get_parser("nvidia-smi-q")(one * 50)
    single = get_parser("nvidia-smi-q")(one)
    assert many.gpus == single.gpus * 50  # type: ignore[attr-defined]
    sample = ref(BOUNDS["ibstat"][0])
    assert get_parser("ibstat")(sample * 20).cas == get_parser("ibstat")(sample).cas * 20  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["", "a", "a\n", "\ufeffa\r\nb\rc\n\n", "a\r\r\nb", "\x00\ufeffx",
                                  "a\x00\r\x00\nb", "\r", "\n\n", "\ufeff"])
def test_iter_lines_gives_the_lines_split_lines_gives(text: str) -> None:
    assert list(iter_lines(text)) == split_lines(text)


@given(st.text(alphabet=st.sampled_from(["a", "b", " ", "\r", "\n", "\x00", "\ufeff", "é"]), max_size=60))
def test_iter_lines_matches_split_lines_on_any_text(text: str) -> None:
    assert list(iter_lines(text)) == split_lines(text)


@given(st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "\x00", "\ufeff"]), max_size=60),
       st.integers(min_value=1, max_value=8))
def test_iter_lines_in_chunks_matches_split_lines(text: str, chunk: int) -> None:
    """Text without a carriage return is split a chunk at a time: any chunk size, any place of the newlines."""
    original = _common._CHUNK_CHARS
    _common._CHUNK_CHARS = chunk  # a few characters: every line end falls on or near a chunk's
    try:
        assert list(iter_lines(text)) == split_lines(text)
    finally:
        _common._CHUNK_CHARS = original


@dataclass(frozen=True)
class _Inner:
    value: float
    names: frozenset[str]


@dataclass(frozen=True)
class _Outer:
    items: tuple[_Inner, ...]
    table: dict[int, str]
    empty_list: tuple[int, ...]
    empty_map: dict[str, int]
    text: str
    flag: bool | None


def test_iter_json_writes_what_json_dumps_of_to_jsonable_writes() -> None:
    record = _Outer(
        items=(_Inner(1.5, frozenset({"b", "a"})), _Inner(math.nan, frozenset()), _Inner(math.inf, frozenset({"x"}))),
        table={3: "three", 1: "one\u00e9"},
        empty_list=(),
        empty_map={},
        text="tab\there \"quoted\" \\ back",
        flag=None,
    )
    assert "".join(iter_json(record)) == json.dumps(to_jsonable(record), indent=2)
    for value in (None, 0, -3, 2.25, "s", [], {}, [[]], {"a": {}}):
        assert "".join(iter_json(value)) == json.dumps(to_jsonable(value), indent=2)


def test_iter_json_matches_for_every_reference_output(
    ref_dir: Path, tool_of: Callable[[Path], str | None]
) -> None:
    checked = 0
    for path in sorted(ref_dir.rglob("*.txt")):
        tool = tool_of(path)
        if tool is None:
            continue
        try:
            record = get_parser(tool)(path.read_text(encoding="utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - outputs a parser refuses are another test's business
            continue
        assert "".join(iter_json(record)) == json.dumps(to_jsonable(record), indent=2), path
        checked += 1
    assert checked >= 20


def test_iter_json_escapes_del_like_other_control_characters() -> None:
    out = "".join(iter_json({"name\x7f": "H100\x1b[31m\x7f\x00"}))
    assert "\x7f" not in out and "\x1b" not in out and "\x00" not in out
    assert json.loads(out) == {"name\x7f": "H100\x1b[31m\x7f\x00"}


def _parse_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    import argparse

    parser = argparse.ArgumentParser(prog="burnin parse")
    parse_cmd.add_arguments(parser)
    code = parse_cmd.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_output_is_exactly_the_indented_json(ref_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = ref_dir / BOUNDS["nccl-tests"][0]
    code, out, _ = _parse_cli(["nccl-tests", str(path)], capsys)
    record = get_parser("nccl-tests")(path.read_text(encoding="utf-8", errors="replace"))
    assert code == 0
    assert out == json.dumps(to_jsonable(record), indent=2) + "\n"


def test_parse_never_echoes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = tmp_path / "ibstat.txt"
    hostile.write_bytes(b"ibpanic: \x1b]0;owned\x07\x1b[2J \x9b31m failed\n")
    code, out, err = _parse_cli(["ibstat", str(hostile)], capsys)
    assert code == 2 and out == ""
    assert "\x1b" not in err and "\x07" not in err and "\\x1b" in err
    assert len(err.strip().splitlines()) == 1

    smi = tmp_path / "smi.txt"
    smi.write_text("Driver Version : 535\x7f\nAttached GPUs : 1\nGPU 00000000:19:00.0\n"
                   "    Product Name : NVIDIA \x1b[31mH100\x00\n")
    code, out, err = _parse_cli(["nvidia-smi-q", str(smi)], capsys)
    assert code == 0, err
    assert not any(ch in out for ch in "\x1b\x7f\x00")
    data = json.loads(out)
    assert data["gpus"][0]["product_name"] == "NVIDIA \x1b[31mH100"  # NULs are dropped by the parser
    assert data["driver_version"] == "535\x7f"


def test_parse_reads_stdin_in_pieces_the_same(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    text = "Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus.\n" * 5000
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, _ = _parse_cli(["dmesg-xid"], capsys)
    assert code == 0 and len(json.loads(out)["events"]) == 5000
