"""burnin's portable GPU stress prints what the gpu_burn parser reads, counts wrong results, reports dead workers.

torch is not installed where the tests run: a small stand-in gives the calls the stress makes (the real
thing runs on a GPU machine through bench/soak-gpu).
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from burnin.parsers.gpu_burn import parse_gpu_burn
from burnin.soak import gpustress


class Matrix:
    def __init__(self, value: float) -> None:
        self.value = value

    def __matmul__(self, other: Matrix) -> Matrix:
        return Matrix(self.value * other.value)


def fake_torch(devices: int, *, wrong_on: int | None = None, dead_on: int | None = None) -> Any:
    calls = {"n": 0}

    def matmul(a: Matrix, b: Matrix, out: Matrix) -> None:
        calls["n"] += 1
        out.value = a.value * b.value + (1.0 if wrong_on is not None and a.value == 10.0 + wrong_on else 0.0)

    def set_device(device: int) -> None:
        if device == dead_on:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    cuda = types.SimpleNamespace(
        device_count=lambda: devices, set_device=set_device, synchronize=lambda device=None: None,
        get_device_properties=lambda d: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", uuid=f"uuid-{d}"),
        temperature=lambda d: 61 + d)
    torch = types.SimpleNamespace(
        cuda=cuda, bfloat16="bf16", matmul=matmul, empty_like=lambda m: Matrix(0.0),
        equal=lambda x, y: x.value == y.value,
        Generator=lambda device: types.SimpleNamespace(manual_seed=lambda seed: device),
        randn=lambda *shape, device, dtype, generator: Matrix(10.0 + int(str(generator).split(":")[1])))
    return torch


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], torch: Any) -> str:
    monkeypatch.setattr(gpustress, "_torch", lambda: torch)
    assert gpustress.main(["1", "--size", "4"]) == 0
    return capsys.readouterr().out


def test_healthy_gpus_read_back_as_gpu_burn_output(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    report = parse_gpu_burn(run(monkeypatch, capsys, fake_torch(2)))
    assert [d.index for d in report.devices] == [0, 1] and report.seconds == 1
    assert len(report.progress) == 10 and report.progress[-1].percent == 100.0
    assert report.progress[-1].errors == (0, 0) and report.progress[-1].temps == (61, 62)
    assert report.verdicts == {0: "OK", 1: "OK"} and report.finished


def test_wrong_results_and_dead_workers_are_reported(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    report = parse_gpu_burn(run(monkeypatch, capsys, fake_torch(3, wrong_on=1, dead_on=2)))
    last = report.progress[-1]
    assert last.errors[0] == 0 and last.errors[1] > 0 and last.faults[1] == "WARNING"
    assert last.faults[2] == "DIED" and last.processed[2] == -1
    assert report.verdicts == {0: "OK", 1: "FAULTY", 2: "FAULTY"}


def test_the_script_sent_to_nodes_is_this_file() -> None:
    source = gpustress.script_bytes().decode()
    assert source.startswith('"""burnin\'s portable GPU stress') and 'if __name__ == "__main__":' in source
    assert "from burnin" not in source and "import burnin" not in source  # nothing of burnin on the node
