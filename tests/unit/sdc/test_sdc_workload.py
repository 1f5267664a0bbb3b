"""The SDC workload (GPU-14) on CPU torch: bitwise deterministic, and one flipped bit changes its digests.

torch is imported in this process (the CPU build .ci/run installs: torch==2.13.0); the workload's own
functions run as they run on a node, the simulated node's file read through its real environment variables.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from burnin.collector import sdc_workload as workload

torch: Any = None  # imported when this module's first test runs, not while the suite is collected (1.7 s a worker)


@pytest.fixture(autouse=True, scope="module")
def _import_torch() -> None:
    global torch
    import torch as imported

    torch = imported


SIZE = 32


def _digests(data: dict[str, Any] | None = None, wrong: frozenset[str] = frozenset()) -> dict[str, str]:
    workload.deterministic(torch)
    return workload.compute(torch, "cpu", data or workload.inputs(torch, SIZE), wrong)


def test_every_kernel_is_digested_and_equal_across_runs() -> None:
    first, second = _digests(), _digests()
    assert set(first) == set(workload.KERNELS)
    assert first == second
    assert len(set(first.values())) == len(first)  # every kernel its own result


def test_inputs_are_the_same_bits_from_the_seed_and_differ_for_another_seed() -> None:
    a, b = workload.inputs(torch, SIZE), workload.inputs(torch, SIZE)
    assert torch.equal(a["a"], b["a"]) and torch.equal(a["b"], b["b"])
    assert _digests(workload.inputs(torch, SIZE, seed=1)) != _digests()


def test_one_flipped_input_bit_changes_the_digests() -> None:
    """The lowest bit of one FP32 input: the FP32 kernels that carry it exactly see it."""
    data = workload.inputs(torch, SIZE)
    flipped = {"a": workload.flip_bit(torch, data["a"]), "b": data["b"]}
    assert not torch.equal(flipped["a"], data["a"])
    before, after = _digests(data), _digests(flipped)
    assert {k for k in workload.KERNELS if before[k] != after[k]} >= {"matmul/fp32", "elementwise/fp32"}


def test_one_flipped_sign_bit_changes_every_kernels_digest() -> None:
    data = workload.inputs(torch, SIZE)
    flipped = {"a": data["a"].clone(), "b": data["b"]}
    flipped["a"].view(torch.int32)[0, 0] ^= -(2 ** 31)  # the sign bit of one element
    before, after = _digests(data), _digests(flipped)
    assert {k for k in workload.KERNELS if before[k] != after[k]} == set(workload.KERNELS)


def test_a_wrong_kernel_changes_that_kernels_digest_only() -> None:
    good, bad = _digests(), _digests(wrong=frozenset({"matmul/bf16"}))
    assert {k for k in workload.KERNELS if good[k] != bad[k]} == {"matmul/bf16"}


def test_digest_reads_every_byte_of_every_dtype() -> None:
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.int64):
        t = torch.zeros(3, 5, dtype=dtype)
        changed = t.clone()
        changed.view(-1)[-1] = 1
        assert workload.tensor_digest(torch, t) != workload.tensor_digest(torch, changed), dtype


def _simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: list[dict[str, Any]]) -> None:
    (tmp_path / "out" / "sdc").mkdir(parents=True)
    (tmp_path / "out" / "sdc" / "node.json").write_text(json.dumps({"max_size": 16, "gpus": gpus}))
    monkeypatch.setenv(workload.SIM_NODE_ENV, "sim01")
    monkeypatch.setenv(workload.SIM_NVML_ENV, str(tmp_path / "nvml.state"))


def test_a_simulated_node_tests_each_listed_gpu_and_its_fault_flips_one_kernel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _simulated(tmp_path, monkeypatch, [{"index": 0, "bus_id": "0000:1b:00.0", "name": "H100"},
                                       {"index": 3, "bus_id": "0000:9a:00.0", "name": "H100",
                                        "wrong": ["matmul/bf16"]}])
    assert workload.main(["--size", "64", "--repeat", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["size"] == 16 and doc["repeat"] == 2  # the simulator's cap
    good, bad = doc["gpus"]
    assert (good["index"], bad["index"], bad["bus_id"]) == (0, 3, "0000:9a:00.0")
    assert {k for k in good["digests"] if good["digests"][k] != bad["digests"][k]} == {"matmul/bf16"}
    assert good["unstable"] == bad["unstable"] == []


def test_a_real_node_without_cuda_is_an_error_document(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(workload.SIM_NODE_ENV, raising=False)
    assert workload.main(["--size", "8"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert "sees no CUDA device" in doc["error"] and "gpus" not in doc


@pytest.mark.parametrize("argv", [["--size", "0"], ["--size", "x"], ["--repeat"]])
def test_bad_arguments_are_an_error_document(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert workload.main(argv) == 2
    assert "positive whole number" in json.loads(capsys.readouterr().out)["error"]


def _rack_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: str, wrong: list[str]) -> None:
    folder = tmp_path / "nodes" / node
    (folder / "out" / "sdc").mkdir(parents=True)
    gpus = [{"index": i, "bus_id": f"0000:{i:02x}:00.0", "name": "H100", "wrong": wrong if i == 1 else []}
            for i in range(2)]
    (folder / "out" / "sdc" / "node.json").write_text(json.dumps({"max_size": 16, "cache": "../sdc-cache.json",
                                                                  "gpus": gpus}))
    monkeypatch.setenv(workload.SIM_NODE_ENV, node)
    monkeypatch.setenv(workload.SIM_NVML_ENV, str(folder / "nvml.state"))


def _node_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], node: str,
              wrong: list[str]) -> dict[str, Any]:
    _rack_node(tmp_path, monkeypatch, node, wrong)
    assert workload.main(["--size", "16"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_a_simulated_rack_computes_each_answer_once_and_every_node_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    first = _node_run(tmp_path, monkeypatch, capsys, "sim01", [])
    second = _node_run(tmp_path, monkeypatch, capsys, "sim02", [])
    faulted = _node_run(tmp_path, monkeypatch, capsys, "sim03", ["matmul/bf16"])
    assert first["computed"] and not second["computed"] and faulted["computed"]  # a new answer: computed once
    assert [g["digests"] for g in first["gpus"]] == [g["digests"] for g in second["gpus"]]
    assert second["torch"] == torch.__version__
    good, bad = faulted["gpus"]
    assert good["digests"] == first["gpus"][0]["digests"]
    assert {k for k in good["digests"] if good["digests"][k] != bad["digests"][k]} == {"matmul/bf16"}
    data = workload.inputs(torch, 16)
    workload.deterministic(torch)
    assert workload.compute(torch, "cpu", data) == good["digests"]  # the cache holds what torch computes
    cache = json.loads((tmp_path / "nodes" / "sdc-cache.json").read_text())
    assert sorted(next(iter(cache.values()))["results"]) == ["", "matmul/bf16"]


def test_the_cache_key_names_the_torch_that_would_be_imported_without_importing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    assert workload._torch_version() == importlib.metadata.version("torch") == torch.__version__
    _node_run(tmp_path, monkeypatch, capsys, "sim01", [])
    cache = json.loads((tmp_path / "nodes" / "sdc-cache.json").read_text())
    assert list(cache) == [f"{workload.FORMAT}/16/2/{torch.__version__}"]
    fake = tmp_path / "site" / "torch"  # another torch first on the path: its own version is the key
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "version.py").write_text("__all__ = ['__version__']\n__version__ = '9.9.9+elsewhere'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch")  # find_spec of an imported module answers from sys.modules
    assert workload._torch_version() == "9.9.9+elsewhere"
    (fake / "version.py").write_text("git_version = 'abc'\n")
    with pytest.raises(ImportError, match="names no __version__"):
        workload._torch_version()


def test_a_simulated_node_whose_python_has_no_torch_is_an_error_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _rack_node(tmp_path, monkeypatch, "sim01", [])
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "torch").is_dir()])
    monkeypatch.delitem(sys.modules, "torch")  # find_spec of an imported module answers from sys.modules
    assert workload.main(["--size", "16"]) == 2
    assert "torch not importable" in json.loads(capsys.readouterr().out)["error"]
