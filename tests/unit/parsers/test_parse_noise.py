"""Real-world noise on real files: line endings, tabs vs spaces, interleaved
MPI and log lines, truncated last lines, ``[...]`` elisions."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from burnin.parsers import parse, to_jsonable
from burnin.parsers.ibstat import parse_ibstat
from burnin.parsers.lspci import parse_lspci
from burnin.parsers.megatron import parse_megatron_log
from burnin.parsers.nccl_tests import parse_nccl_tests
from burnin.parsers.nvidia_smi import parse_smi_query, parse_topo_matrix

Ref = Callable[[str], str]
DELL = "nccl-tests/all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt"
MPI_NOISE = (
    "[bm-h100-01:29250] 15 more processes have sent help message help-btl-vader.txt",
    "bm-h100-01:29262:29262 [0] NCCL INFO Bootstrap : Using ibp26s0:10.0.0.1<0>",
    "--------------------------------------------------------------------------",
    "WARNING: There was an error initializing an OpenFabrics device.",
)


def _same(tool: str, a: str, b: str) -> None:
    assert to_jsonable(parse(tool, a)) == to_jsonable(parse(tool, b))


def test_crlf_bom_and_trailing_blanks_change_nothing(
    reference_file: Path, tool_of: Callable[[Path], str | None]
) -> None:
    tool = tool_of(reference_file)
    assert tool is not None
    text = reference_file.read_text(encoding="utf-8", errors="replace")
    _same(tool, text, text.replace("\n", "\r\n"))
    _same(tool, text, "\ufeff" + text + "\n\n   \n")


def test_tabs_expanded_to_spaces_change_nothing(ref_dir: Path, tool_of: Callable[[Path], str | None]) -> None:
    tabbed = 0
    for path in sorted(p for p in ref_dir.rglob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        tool = tool_of(path)
        if "\t" in text and tool is not None:
            tabbed += 1
            _same(tool, text, text.expandtabs(8))
    assert tabbed >= 3  # topo (2), ibstat, lspci, nvlink files use tabs


def test_topo_spaces_to_tabs(ref: Ref) -> None:
    text = ref("nvidia-smi/topo-m-h100-8gpu-8nic-sglang-issue30401.txt")
    tabbed = "\n".join(re.sub(r" {2,}", "\t", ln) for ln in text.splitlines())
    a, b = parse_topo_matrix(text), parse_topo_matrix(tabbed)
    assert a.links == b.links and a.cpu_affinity == b.cpu_affinity
    assert a.numa_affinity == b.numa_affinity and a.nic_names == b.nic_names


def test_topo_truncated_rows(ref: Ref) -> None:
    lines = ref("nvidia-smi/topo-m-dgx-h200-8gpu-12nic-tabs.txt").splitlines()
    cut = "\n".join(lines[:10]) + "\n" + lines[10][:20]  # GPU rows, NIC0, half of NIC1
    topo = parse_topo_matrix(cut)
    assert topo.truncated is True and len(topo.nics) == 12
    assert topo.links["GPU7"]["NIC11"] == "PXB" and "NIC5" not in topo.links


def test_nccl_interleaved_mpi_noise(ref: Ref) -> None:
    text = ref(DELL)
    noisy: list[str] = []
    for i, line in enumerate(text.splitlines()):
        noisy.append(line)
        if line.startswith(("#  Rank", "#       size")) or (i % 5 == 0 and not line.startswith("#")):
            noisy.extend(MPI_NOISE)
    a, b = parse_nccl_tests(text), parse_nccl_tests("\n".join(noisy))
    assert b.rows == a.rows and b.ranks == a.ranks and b.avg_busbw_gbps == a.avg_busbw_gbps
    inserted = (len(noisy) - len(text.splitlines())) // len(MPI_NOISE)
    assert inserted > 20
    # Only the OpenFabrics line reads as a warning; help chatter and INFO lines do not.
    assert b.warnings == (MPI_NOISE[3],) * inserted


def test_nccl_truncated_last_row(ref: Ref) -> None:
    text = ref(DELL)
    lines = text.splitlines()
    last_row = max(i for i, ln in enumerate(lines) if ln.strip().startswith("17179869184"))
    cut = "\n".join(lines[:last_row]) + "\n" + lines[last_row][:60]
    run = parse_nccl_tests(cut)
    assert run.truncated is True and run.avg_busbw_gbps is None
    assert len(run.rows) == 31 and run.rows[-1].size_bytes == 8589934592
    assert run.max_busbw_gbps == 468.67


def test_nccl_tabs_between_columns(ref: Ref) -> None:
    text = ref(DELL)
    tabbed = "\n".join(re.sub(r" +", "\t", ln) if not ln.startswith("#") else ln for ln in text.splitlines())
    assert parse_nccl_tests(tabbed).rows == parse_nccl_tests(text).rows


def test_nccl_elisions_between_rows(ref: Ref) -> None:
    text = ref(DELL)
    elided = text.replace("\n     8388608", "\n[...]\n     8388608")
    assert parse_nccl_tests(elided).rows == parse_nccl_tests(text).rows


def test_smi_q_elisions_and_tab_indentation(ref: Ref) -> None:
    text = ref("nvidia-smi/q-full-h100-8gpu-driver535.161.08.txt")
    base = to_jsonable(parse_smi_query(text))
    elided = text.replace("    FB Memory Usage\n", "    [...]\n    FB Memory Usage\n")
    assert to_jsonable(parse_smi_query(elided)) == base
    tabbed = "\n".join("\t" * ((len(ln) - len(ln.lstrip(" "))) // 4) + ln.lstrip(" ") for ln in text.splitlines())
    assert to_jsonable(parse_smi_query(tabbed)) == base


def test_smi_q_truncated_mid_gpu(ref: Ref) -> None:
    text = ref("nvidia-smi/q-full-h100-8gpu-driver535.161.08.txt")
    cut = text[: text.index("GPU 00000000:3B:00.0") + 1500]
    q = parse_smi_query(cut)
    assert len(q.gpus) == 2 and q.attached_gpus == 8
    assert q.gpus[1].serial == "1650124008135" and q.gpus[1].temperature is None


def test_ibstat_spaces_to_tabs(ref: Ref) -> None:
    text = ref("infiniband/ibstat-h100-cx7-ndr400-ib-8port-all-active.txt")
    tabbed = text.replace("        ", "\t")
    assert parse_ibstat(tabbed) == parse_ibstat(text)


def test_lspci_truncated_stanza(ref: Ref) -> None:
    text = ref("lspci/lspci-vvv-h100-sxm5-gpu-19_00.0.txt")
    cut = text[: text.index("LnkSta:") + 12]
    (dev,) = parse_lspci(cut).devices
    assert dev.lnkcap_speed_gts == 32.0 and dev.lnksta_speed_gts is None


def test_megatron_truncated_and_interleaved(ref: Ref) -> None:
    text = ref("megatron/mixtral-8x7b-16xh100-iterations-43-45-issue756.txt")
    lines = text.splitlines()
    noisy = [lines[0], "WARNING: torch.distributed noise", lines[1], "[...]", lines[2][:150]]
    log = parse_megatron_log("\n".join(noisy))
    assert [i.iteration for i in log.iterations] == [43, 44, 45]
    assert log.truncated is True and log.iterations[-1].lm_loss is None
    assert log.iterations[-1].elapsed_ms == 5718.6
