"""hypothesis: random and mutated input ends in a record or ParseError, never in
another exception, and never hangs (long pathological lines finish quickly)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from field_samples import field_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pending_reference import pending_files, pending_tool
from storage_samples import NO_REAL_SAMPLE

from burnin.errors import ParseError
from burnin.parsers import PARSERS, parse, to_jsonable

pytestmark = pytest.mark.fuzz

TOOLS = sorted(PARSERS)
# BURNIN_FUZZ_EXAMPLES raises the count for a long local run.
FUZZ = settings(
    max_examples=int(os.environ.get("BURNIN_FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Reference files are cut to this size before mutation, to keep runs short.
MAX_SEED = 12_000

# Tokens that steer random text into the parsers' deeper branches.
TOKENS = [
    "GPU0", "GPU1", "NIC0", "mlx5_0", "NV18", " X ", "PIX", "SYS", "CPU Affinity",
    "NUMA Affinity", "GPU NUMA ID", "NIC Legend:", "  NIC0: mlx5_0", "0-55,112-167", "N/A",
    "GPU 00000000:19:00.0", "    ECC Errors", "        Volatile", "            SRAM Correctable",
    " : ", "Remapped Rows", "Pending", "Yes", "Clocks Event Reasons", "Active", "Not Active",
    "Temperature", "GPU Current Temp", "29 C", "Fabric", "State", "Link 0:", "26.562 GB/s",
    "<inactive>", "Replay Errors: 0", "GPU 0: NVIDIA H100 (UUID: GPU-x)", "name, memory.total [MiB]",
    "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:19:00] H100", "#       size  count  type  "
    "redop root time algbw busbw #wrong time algbw busbw #wrong", "# Avg bus bandwidth : 1.5",
    "# Out of bounds values : 0 OK", "float", "sum", "-1", "8", "1024", "0.00", "CA 'mlx5_0'",
    "CA type: MT4129", "Port 1:", "State: Active", "Rate: 400", "Infiniband device 'mlx5_0' port 1 "
    "status:", "state: 4: ACTIVE", "rate: 200 Gb/sec (4X HDR)", "memcpy CE GPU(row) -> GPU(column) "
    "bandwidth (GB/s)", "SUM x 1.0", "Running x.", "Unidirectional P2P=Enabled Bandwidth Matrix "
    "(GB/s)", "D\\D", " iteration 1/ 10 |", "lm loss: 1.0E+00", "NVRM: Xid (PCI:0000:9b:00): 79,",
    "pid=1, name=p,", "SXid (PCI:0000:05:00.0): 12028, Fatal,", "[ 12.5]", "CPU(s):", "Socket(s):",
    "NUMA node0 CPU(s):", "node 0 cpus: 0 1", "node distances:", "available: 2 nodes (0-1)",
    "19:00.0 3D controller: NVIDIA", "\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)", "\tACSCtl:\t"
    "SrcValid+ TransBlk-", "+----+----+", "|-----  Deployment  ----+----|", "| Denylist | Pass |",
    "|  | Fail - GPU: 0 |", "| Warning | text |", '{"DCGM GPU Diagnostic": {"test_categories": [',
    "[...]", "{", "}", "|", "\t", "\n",
]  # fmt: skip
SEPARATORS = st.sampled_from(["", " ", "  ", "\t", "\n", "\n", ": ", "|", ",", "\r\n"])

NUMACTL_SEED = (
    "available: 2 nodes (0-1)\nnode 0 cpus: 0 1 2 3\nnode 0 size: 1031710 MB\n"
    "node 0 free: 1012345 MB\nnode 1 cpus: 4 5 6 7\nnode 1 size: 1032146 MB\n"
    "node 1 free: 1020000 MB\nnode distances:\nnode   0   1\n  0:  10  21\n  1:  21  10\n"
)
DCGM_JSON_SEED = (
    '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": ['
    '{"name": "GPU Memory", "results": [{"gpu_ids": "0", "status": "Fail", "warnings": '
    '[{"warning": "bad"}]}]}]}], "version": "3.3.5"}}'
)


def _accepts(tool: str, text: str) -> None:
    """The contract: a record that converts to strict JSON, or a ParseError."""
    try:
        record = parse(tool, text)
    except ParseError as exc:
        assert exc.tool and str(exc)
        return
    json.dumps(to_jsonable(record), allow_nan=False)


@pytest.mark.parametrize("tool", TOOLS)
@FUZZ
@given(text=st.text(max_size=2000))
def test_random_text(tool: str, text: str) -> None:
    _accepts(tool, text)


@pytest.mark.parametrize("tool", TOOLS)
@FUZZ
@given(
    parts=st.lists(
        st.tuples(st.one_of(st.sampled_from(TOKENS), st.text(max_size=6)), SEPARATORS),
        max_size=120,
    )
)
def test_token_soup(tool: str, parts: list[tuple[str, str]]) -> None:
    _accepts(tool, "".join(token + sep for token, sep in parts))


def _seeds(tool: str, ref_dir: Path, tool_of: Callable[[Path], str | None]) -> list[str]:
    seeds = [
        p.read_text(encoding="utf-8", errors="replace")[:MAX_SEED]
        for p in sorted(ref_dir.rglob("*.txt"))
        if tool_of(p) == tool
    ]
    seeds += [p.read_text(encoding="utf-8", errors="replace")[:MAX_SEED] for p in pending_files()
              if pending_tool(p) == tool]
    if tool == "numactl":
        seeds.append(NUMACTL_SEED)
    if tool == "dcgmi-diag":
        seeds.append(DCGM_JSON_SEED)
    if tool == "sacctmgr-events":  # no capture in ../shared: the lab's own (tests/field/SOURCES.md)
        seeds.append(field_text("sacctmgr-events-P-slurmdbd-22.05.8-burnin-lab-drain-down-pipe-in-reason.txt"))
    if tool in NO_REAL_SAMPLE:  # no real output yet: the simulator's rendering
        seeds.append(NO_REAL_SAMPLE[tool]())
    return seeds


MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["truncate", "delete", "duplicate", "insert", "replace", "swap", "noise"]),
        st.floats(0, 1),
        st.floats(0, 1),
        st.text(max_size=40),
    ),
    min_size=1,
    max_size=4,
)
NOISE_LINES = [
    "[...]",
    "WARNING: unrelated",
    "node1:1:1 [0] NCCL INFO x",
    "\t\t",
    "#",
    "|",
    "GPU0",
    "    : ",
    "N/A",
]


def _mutate(text: str, ops: list[tuple[str, float, float, str]]) -> str:
    for op, a, b, payload in ops:
        n = len(text)
        i, j = sorted((int(a * n), int(b * n)))
        if op == "truncate":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "insert":
            text = text[:i] + payload + text[i:]
        elif op == "replace":
            text = text[:i] + payload + text[i + len(payload) :]
        elif op == "swap":
            lines = text.split("\n")
            x, y = int(a * (len(lines) - 1)), int(b * (len(lines) - 1))
            lines[x], lines[y] = lines[y], lines[x]
            text = "\n".join(lines)
        else:
            lines = text.split("\n")
            lines.insert(int(a * len(lines)), NOISE_LINES[int(b * (len(NOISE_LINES) - 1))])
            text = "\n".join(lines)
    return text


@pytest.mark.parametrize("tool", TOOLS)
@FUZZ
@given(pick=st.integers(min_value=0), ops=MUTATIONS)
def test_mutated_real_outputs(
    tool: str,
    pick: int,
    ops: list[tuple[str, float, float, str]],
    ref_dir: Path,
    tool_of: Callable[[Path], str | None],
) -> None:
    seeds = _seeds(tool, ref_dir, tool_of)
    assert seeds, f"no seed text for {tool}"
    _accepts(tool, _mutate(seeds[pick % len(seeds)], ops))


# Inputs that make a careless regular expression take quadratic or exponential time.
N = 100_000
PATHOLOGICAL = [
    " " * N + "x",
    "a" * N,
    "1" * N,
    ":" * N,
    " :" * (N // 2),
    "GPU0 " * (N // 5),
    "GPU0\t" * (N // 5),
    "| " * (N // 2),
    "|" + "-" * N + " x",
    "#" + " " * N + "Rank",
    "# " + "size time busbw " * (N // 20),
    "Xid (PCI:" * (N // 10),
    "NVRM: Xid (PCI:0000:9b:00): 79, " + "pid=1, " * (N // 10),
    "\t" * N + "x",
    "iteration " * (N // 10),
    " iteration 1/ 2 |" + " a: b |" * (N // 8),
    "Speed " * (N // 6),
    "ACSCtl:\t" + "a" * N,
    "CA '" * (N // 4),
    "Link 0: " * (N // 8),
    "0 " * (N // 2),
    "N/A " * (N // 4),
    "Express (v2) " + "a " * (N // 2),
    "GPU 0: " + " " * N + "(UUID:",
    "\n" * N,
    "GPU0\n" * (N // 5),
    "\n".join(" " * i + "k : v" for i in range(1500)),
    "19:00.0 x: y\n" + "\tLnkSta: " + "Speed " * (N // 6),
]


@pytest.mark.parametrize("tool", TOOLS)
def test_pathological_input_finishes_fast(tool: str) -> None:
    for text in PATHOLOGICAL:
        _accepts(tool, text)  # finishes (quadratic blow-ups would hang CI); speed: bench/config-scale


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("bad", ["", "   \n\t\n", "\x00\x00", "\ufeff"])
def test_empty_input(tool: str, bad: str) -> None:
    _accepts(tool, bad)
    if tool not in ("dmesg-xid", "sacctmgr-events"):  # an empty kernel log, sacctmgr -n's empty answer: no events
        with pytest.raises(ParseError):
            parse(tool, bad)
