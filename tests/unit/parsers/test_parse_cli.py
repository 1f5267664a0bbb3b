"""``burnin parse TOOL [FILE|-]`` through ``parse_cmd.add_arguments`` and ``run``."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pending_reference import PENDING_TOOLS, pending_files, pending_tool
from storage_samples import NO_REAL_SAMPLE

from burnin.cli import parse_cmd
from burnin.parsers import PARSERS

# Keys every tool's JSON must carry (a subset check: records may grow).
KEYS: dict[str, set[str]] = {
    "nvidia-smi-topo": {"gpus", "nics", "links", "cpu_affinity", "numa_affinity", "nic_names"},
    "nvidia-smi-q": {"driver_version", "cuda_version", "attached_gpus", "gpus", "errors"},
    "nvidia-smi-nvlink": {"gpus"},
    "nvidia-smi-query": {"columns", "units", "rows", "truncated"},
    "nccl-tests": {
        "collective",
        "nranks",
        "ranks",
        "rows",
        "avg_busbw_gbps",
        "out_of_bounds",
        "warnings",
        "truncated",
    },
    "ibstat": {"cas"},
    "ibstatus": {"ports"},
    "ibv-devinfo": {"devices", "errors"},
    "nvbandwidth": {"testcases"},
    "p2p-bandwidth": {"matrices", "devices"},
    "megatron-log": {"iterations"},
    "dmesg-xid": {"events", "sxid_events"},
    "lscpu": {"sockets", "cores_per_socket", "threads_per_core", "cpus", "numa_nodes"},
    "numactl": {"nodes", "distances"},
    "lspci": {"devices"},
    "dcgmi-diag": {"tests", "results"},
    "dcgmi-health": {"overall", "incidents"},
    "perftest": {"reports"},
    "nvidia-smi-dmon": {"columns", "units", "samples"},
    "ibdev2netdev": {"entries"},
    "ip-route": {"routes"},
    "ip-addr": {"interfaces"},
    "ip-link": {"links"},
    "nccl-info": {"version", "hosts", "settings", "info_lines"},
    "mlxconfig": {"devices", "errors"},
    "mlnx-qos": {"trust", "pfc_enabled", "tcs"},
    "sysctl": {"values"},
    "cpu-bind": {"tasks", "affinities"},
    "sacctmgr-events": {"events"},
}
# Tools whose real outputs are this repository's own captures (tests/field/SOURCES.md), none in ../shared.
FIELD = Path(__file__).resolve().parents[2] / "field"
FIELD_SAMPLES = {"sacctmgr-events": "sacctmgr-events-P-slurmdbd-22.05.8-burnin-lab-drain-down-pipe-in-reason.txt"}
NUMACTL = "available: 1 nodes (0)\nnode 0 cpus: 0 1\nnode 0 size: 100 MB\nnode 0 free: 50 MB\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="burnin parse")
    parse_cmd.add_arguments(parser)
    return parser


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = parse_cmd.run(_parser().parse_args(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _sample(tool: str, ref_dir: Path, tool_of: Callable[[Path], str | None], tmp: Path) -> Path:
    if tool == "numactl":
        path = tmp / "numactl.txt"
        path.write_text(NUMACTL)
        return path
    if tool in FIELD_SAMPLES:
        return FIELD / FIELD_SAMPLES[tool]
    if tool in NO_REAL_SAMPLE:  # no real output of the tool yet (reference-pending/SOURCES.md)
        path = tmp / f"{tool}.txt"
        path.write_text(NO_REAL_SAMPLE[tool]())
        return path
    if tool in PENDING_TOOLS:  # real samples not yet moved into ../shared/reference
        return next(p for p in sorted(pending_files()) if pending_tool(p) == tool)
    return next(p for p in sorted(ref_dir.rglob("*.txt")) if tool_of(p) == tool)


def test_every_tool_has_expected_keys() -> None:
    assert set(KEYS) == set(PARSERS)


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_run_prints_json(
    tool: str,
    ref_dir: Path,
    tool_of: Callable[[Path], str | None],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _sample(tool, ref_dir, tool_of, tmp_path)
    code, out, err = _run([tool, str(path)], capsys)
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert KEYS[tool] <= set(data)


def test_contract_nested_keys(ref: Callable[[str], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "out.txt"
    path.write_text(ref("nccl-tests/all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt"))
    code, out, _ = _run(["nccl-tests", str(path)], capsys)
    nccl = json.loads(out)
    assert code == 0 and nccl["collective"] == "all_reduce"
    assert {"rank", "host", "device", "bus_id"} <= set(nccl["ranks"][0])
    row = nccl["rows"][-1]
    assert {"size_bytes", "count", "dtype", "redop", "out_of_place", "in_place"} <= set(row)
    assert set(row["out_of_place"]) == {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
    assert row["out_of_place"]["busbw_gbps"] == 469.21

    path.write_text(ref("infiniband/ibstat-h100-cx7-ndr400-ib-8port-all-active.txt"))
    ca = json.loads(_run(["ibstat", str(path)], capsys)[1])["cas"][0]
    assert {"name", "type", "firmware", "ports"} <= set(ca)
    assert {"port", "state", "physical_state", "rate_gbps", "link_layer"} <= set(ca["ports"][0])

    path.write_text(ref("megatron/mixtral-8x7b-16xh100-iterations-43-45-issue756.txt"))
    it = json.loads(_run(["megatron-log", str(path)], capsys)[1])["iterations"][0]
    keys = {"iteration", "total", "elapsed_ms", "tflops_per_gpu", "lm_loss", "lr"}
    assert keys | {"loss_scale", "grad_norm", "skipped", "nan"} <= set(it)

    path.write_text(ref("dmesg/xid63-row-remapper-a100.txt"))
    ev = json.loads(_run(["dmesg-xid", str(path)], capsys)[1])["events"][0]
    assert {"pci", "xid", "pid", "text", "timestamp"} <= set(ev) and ev["timestamp"] is None


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_garbage_exits_2_with_one_line(tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "garbage.txt"
    path.write_text("this is not\ntool output at all\n")
    code, out, err = _run([tool, str(path)], capsys)
    if tool == "dmesg-xid":  # a log without Xid lines is a valid, empty result
        assert code == 0 and json.loads(out)["events"] == []
        return
    assert code == 2 and out == ""
    assert err.endswith("\n") and err.count("\n") == 1
    assert err.startswith(f"burnin parse: {tool}: ")


def test_stdin_dash_and_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["numactl", "-"], ["numactl"]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NUMACTL.encode())))
        code, out, _ = _run(argv, capsys)
        assert code == 0 and json.loads(out)["nodes"][0]["cpus"] == [0, 1]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"\xff\xfe NVRM: Xid (PCI:0000:3b:00): 79, pid=0, fell off the bus.\n")
    code, out, _ = _run(["dmesg-xid", str(path)], capsys)
    assert code == 0 and json.loads(out)["events"][0]["xid"] == 79


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for target in (tmp_path / "missing.txt", tmp_path):
        code, out, err = _run(["lspci", str(target)], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("burnin parse: lspci: cannot read ")


def test_unknown_tool_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["not-a-tool", "x"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_nccl_collective_from_flag_and_file_name(
    ref: Callable[[str], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = ref("nccl-tests/all_reduce_perf-h100-dell-xe9680-2node-16gpu-ndr400.txt")
    plain = tmp_path / "run.log"
    plain.write_text(text)
    _, out, _ = _run(["nccl-tests", str(plain), "--collective", "reduce_scatter"], capsys)
    assert json.loads(out)["collective"] == "reduce_scatter"
    named = tmp_path / "sendrecv_perf-n01.log"
    named.write_text(text)
    _, out, _ = _run(["nccl-tests", str(named)], capsys)
    assert json.loads(out)["collective"] == "sendrecv"  # the file name beats inference


def test_query_columns_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.csv"
    path.write_text("NVIDIA H100 80GB HBM3, 00000000:19:00.0\n")
    code, out, _ = _run(["nvidia-smi-query", str(path), "--columns", "name,pci.bus_id"], capsys)
    assert code == 0 and json.loads(out)["rows"] == [
        {"name": "NVIDIA H100 80GB HBM3", "pci.bus_id": "00000000:19:00.0"}
    ]
