"""srun --cpu-bind=verbose reports: the real Aion samples in ../shared/reference-pending/slurm, and their variants."""

from __future__ import annotations

import pytest
from pending_reference import pending_files, pending_tool

from burnin.errors import ParseError
from burnin.parsers import parse
from burnin.parsers.cpubind import mask_cpus, parse_cpu_bind

CORES_SOCKETS = "srun-cpu-bind-verbose-cores-sockets-2node-aion-ulhpc-docs.txt"
ARBITRARY = "srun-cpu-bind-verbose-mask_cpu-arbitrary-distribution-aion.txt"


def _sample(name: str) -> str:
    files = [p for p in pending_files() if p.name == name]
    assert files, f"{name} not in ../shared/reference-pending/slurm"
    return files[0].read_text(encoding="utf-8")


def test_both_samples_are_routed_to_this_parser() -> None:
    names = {p.name for p in pending_files() if pending_tool(p) == "cpu-bind"}
    assert {CORES_SOCKETS, ARBITRARY} <= names


def test_cores_and_sockets_sample() -> None:
    report = parse_cpu_bind(_sample(CORES_SOCKETS))
    assert len(report.tasks) == 16 and len(report.affinities) == 16
    first = report.tasks[0]
    assert (first.node, first.task, first.local_task, first.pid, first.bind_type, first.mask) == (
        "aion-0014", 0, 0, 3431378, "MASK", "1")
    # one process per socket: task 1 on core 16, then bound to the second socket 16-31
    assert [t.cpu_list for t in report.tasks if t.pid in (3431622, 3431909)] == ["16", "16-31"]
    assert sorted(report.by_node()) == ["aion-0014", "aion-0220"]


def test_every_mask_agrees_with_taskset() -> None:
    for name in (CORES_SOCKETS, ARBITRARY):
        report = parse_cpu_bind(_sample(name))
        masks = {t.pid: t.cpus for t in report.tasks}
        for affinity in report.affinities:
            assert masks[affinity.pid] == affinity.cpus, (name, affinity)


def test_arbitrary_distribution_sample_ends_at_task_6() -> None:
    report = parse_cpu_bind(_sample(ARBITRARY))
    assert [(t.task, t.local_task, t.cpu_list) for t in report.tasks] == [
        (0, 0, "0-3"), (2, 1, "4-7"), (1, 0, "0-3"), (3, 1, "4-7"), (4, 2, "8-11"), (5, 3, "12-15"),
        (6, 4, "16-19"), (7, 5, "20-23")]
    assert len(report.affinities) == 7  # task 7's taskset line is missing in the published block


def test_through_the_registry() -> None:
    record = parse("cpu-bind", "cpu-bind=MASK - n1, task  0  0 [1]: mask 0x3 set\n")
    assert record.tasks[0].cpus == (0, 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("line", "cpus", "kind"), [
    ("  3: cpu-bind=MASK - gpu01, task  3  3 [991]: mask 0xff00000000000000ffffffffffffff set", "0-55,112-119", "MASK"),
    ("cpu_bind=MASK - gpu01, task 0 0 [42]: mask 0x0f set", "0-3", "MASK"),
    ("cpu-bind=LDMASK - gpu01, task  1  1 [43]: mask 0xffffffff,00000000 set", "32-63", "LDMASK"),
    ("[default0]:cpu-bind=NONE - gpu01, task  0  0 [44]: mask 0xffff set", "0-15", "NONE"),
    ("cpu-bind-cores=MASK - gpu01, task  0  0 [45]: mask 0x1 get", "0", "MASK"),
])
def test_variants(line: str, cpus: str, kind: str) -> None:
    task = parse_cpu_bind(line + "\n").tasks[0]
    assert task.cpu_list == cpus and task.bind_type == kind


def test_a_mask_for_224_cpus() -> None:
    mask = format((1 << 224) - 1, "x")
    assert mask_cpus(mask) == tuple(range(224))


@pytest.mark.parametrize("text", ["", "srun: error: no cpu binding\n", "cpu-bind=MASK - n1, task x x [1]: mask 0xz\n"])
def test_no_binding_report_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="cpu-bind"):
        parse_cpu_bind(text)


def test_a_mask_wider_than_the_limit() -> None:
    with pytest.raises(ParseError, match="wider than 16384"):
        parse_cpu_bind(f"cpu-bind=MASK - n, task 0 0 [1]: mask 0x1{'0' * 4096} set\n")


def test_an_overlong_mask_is_not_a_binding_line() -> None:
    text = ("cpu-bind=MASK - n1, task  0  0 [1]: mask 0x" + "f" * 9000 + " set\n") * 2
    with pytest.raises(ParseError):
        parse_cpu_bind(text)  # the mask is longer than the pattern allows: not a binding line
